"""URL identity shared by the build (link matching) and the query side (evaluation gold).

Lives in packs/ because packs never imports the build; the build imports it from here.
"""

from __future__ import annotations

import posixpath
import re
from urllib.parse import urlsplit, urlunsplit

_INDEX_SUFFIXES = ("/index.html", "/index.htm", "/_index.md", "/index.md", "/readme.md")
_EXTENSIONS = (".html", ".htm", ".md", ".markdown")


def canonical_url(url: str) -> str:
    """The form two URLs share when they name the same page: scheme and host lower-cased,
    default port, fragment, repeated and trailing slashes, `.`/`..` segments and
    index/extension suffixes dropped."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port
    if port and not ((scheme == "http" and port == 80) or (scheme == "https" and port == 443)):
        host = f"{host}:{port}"
    # Repeated slashes first: normpath keeps a leading "//" (POSIX allows it).
    path = posixpath.normpath(re.sub(r"/{2,}", "/", parts.path)) if parts.path else "/"
    if path == ".":
        path = "/"
    lower = path.lower()
    for suffix in _INDEX_SUFFIXES:
        if lower.endswith(suffix):
            path, lower = path[: -len(suffix)] or "/", lower[: -len(suffix)] or "/"
            break
    for ext in _EXTENSIONS:
        if lower.endswith(ext):
            path = path[: -len(ext)]
            break
    path = path.rstrip("/") or "/"
    return urlunsplit((scheme, host, path, parts.query, ""))
