"""robots.txt files shared by every fetch of one build: the sitemap walk and each fetch
shard read an origin's robots.txt from here before asking the origin, so a build of 64
shards asks a host for it about once, not 64 times (shards run in other processes, so an
in-memory cache is not enough; two shards that start at the same moment may both ask).

One folder per build (`folder`), one JSON file per origin: the robots.txt text, or null
for "allow all" (missing, refused, unreachable: the first fetch logged why). A build never
reads another build's folder, and folders over a day old are removed, since RFC 9309 asks
crawlers not to use a robots.txt for more than 24 hours.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from pathlib import Path

from tasks.fetch.policy import redact
from tasks.workdir import WorkDir, write_text

MAX_AGE_S = 24 * 3600
log = logging.getLogger("kpack.fetch")


def folder(work: WorkDir, build_id: str) -> str:
    """The robots.txt folder of build `build_id` (created), after removing those of builds
    over MAX_AGE_S old."""
    root = work.stage("robots")
    now = time.time()
    for old in root.iterdir():
        if old.name != build_id and old.is_dir() and now - old.stat().st_mtime > MAX_AGE_S:
            shutil.rmtree(old, ignore_errors=True)
    path = root / build_id
    path.mkdir(exist_ok=True)
    return str(path)


def _file(folder: str, origin: str) -> Path:
    return Path(folder) / (hashlib.sha256(origin.encode()).hexdigest()[:32] + ".json")


def get(folder: str, origin: str) -> tuple[bool, str | None]:
    """(found, text): the robots.txt another fetch of this build stored for `origin`;
    text None means "allow all". (False, None) when none is stored or it cannot be read."""
    try:
        entry = json.loads(_file(folder, origin).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False, None
    except (OSError, ValueError) as exc:  # torn or unreadable: ask the origin again
        log.debug("robots.txt cache entry for %s unreadable (%s)", redact(origin), exc)
        return False, None
    if not isinstance(entry, dict) or entry.get("origin") != redact(origin):
        return False, None
    text = entry.get("text")
    return True, text if isinstance(text, str) else None


def put(folder: str, origin: str, text: str | None) -> None:
    """Store `origin`'s robots.txt (None: allow all) for the other fetches of this build.
    A folder that cannot be written only costs them a request each (logged)."""
    try:
        write_text(_file(folder, origin), json.dumps({"origin": redact(origin), "text": text}))
    except OSError as exc:
        log.warning("could not keep robots.txt of %s for the other fetch shards: %s",
                    redact(origin), exc)
