"""URL identity shared by the build (link matching) and the query side (evaluation gold).

Lives in packs/ because packs never imports the build; the build imports it from here.
"""

from __future__ import annotations

import posixpath
import re
from urllib.parse import urlsplit, urlunsplit

# scheme://userinfo@ : the userinfo runs to the last "@" before the path, query or fragment.
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")
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


def strip_userinfo(url: str) -> str:
    """`url` without its `user:password@` part, otherwise unchanged (never raises). A pack
    records no credentials: the build strips them from every URL it reads or follows."""
    return _USERINFO.sub(r"\1", url, count=1)


def has_userinfo(url: str) -> bool:
    return _USERINFO.match(url) is not None
