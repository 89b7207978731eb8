"""The URL to request for one recorded with its secrets REDACTED (packs.urls): a line of
the source's urls.txt, read again when the fetch runs, so that a secret in a query string
passes through no Prefect parameter, work file or log on its way to the request. The two
rules of a urls.txt line that this needs (comments, `sitemap:` lines) live here, and
tasks/sources.py reads the file with them too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from packs.urls import redact_secrets, strip_userinfo

SITEMAP_LINE = re.compile(r"^sitemap:\s*(.*)$", re.IGNORECASE)
_COMMENT = re.compile(r"(?:^|\s)#")


def strip_comment(raw: str) -> str:
    """A urls.txt line without its `#` comment (at line start or after whitespace)."""
    return _COMMENT.split(raw, maxsplit=1)[0].strip()


def request_urls(urls_file: str | os.PathLike[str], secret_params: tuple[str, ...] = ()
                 ) -> dict[str, str]:
    """{URL as recorded (secrets REDACTED): URL as written} for the lines of `urls_file`
    that carry a secret-looking query parameter: what the fetch requests in their place.
    {} when the file cannot be read (the fetch then asks for the recorded URL)."""
    try:
        text = Path(urls_file).read_text(encoding="utf-8").removeprefix("\ufeff")
    except (OSError, UnicodeDecodeError):
        return {}
    found = {}
    for raw in text.splitlines():
        line = strip_comment(raw)
        sitemap = SITEMAP_LINE.match(line)
        target = strip_userinfo(sitemap.group(1).strip() if sitemap else line)
        if target.lower().startswith(("http://", "https://")):
            recorded, secret = redact_secrets(target, secret_params)
            if secret:
                found.setdefault(recorded, target)
    return found
