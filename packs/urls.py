"""URL identity shared by the build (link matching) and the query side (evaluation gold).

Lives in packs/ because packs never imports the build; the build imports it from here.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from urllib.parse import unquote_plus, urlsplit, urlunsplit

# scheme://userinfo@ : the userinfo runs to the last "@" before the path, query or fragment.
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")
# Query parameters whose values are secrets (case-insensitive), and name endings that mark
# one (`private_token`, `client_secret`, `x-api-key`); pack.toml `secret_params` adds names.
SECRET_PARAMS = frozenset({
    "token", "key", "api_key", "apikey", "api-key", "access_token", "refresh_token",
    "id_token", "auth", "auth_token", "authorization", "password", "passwd", "pwd",
    "secret", "client_secret", "sig", "signature", "sessionid",
    "x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-goog-signature",
    "x-goog-credential", "x-goog-security-token",
})
_SECRET_ENDINGS = ("token", "secret", "password", "passwd", "signature", "credential",
                   "_key", "-key", "apikey")
REDACTED = "REDACTED"
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


def is_secret_param(name: str, extra: Iterable[str] = ()) -> bool:
    """Whether a query parameter named `name` holds a secret (SECRET_PARAMS, a secret
    ending, or one of `extra`; case-insensitive)."""
    low = unquote_plus(name).strip().lower()
    return low in SECRET_PARAMS or low.endswith(_SECRET_ENDINGS) \
        or low in {e.lower() for e in extra}


def redact_secrets(url: str, extra: Iterable[str] = ()) -> tuple[str, list[str]]:
    """(`url` with the value of every secret-looking query parameter replaced by REDACTED,
    the names replaced). Everything else stays byte for byte; never raises."""
    head, sep, query = url.partition("?")
    if not sep:
        return url, []
    query, hash_, fragment = query.partition("#")
    extra = tuple(extra)
    names, parts = [], []
    for part in query.split("&"):
        name, eq, value = part.partition("=")
        if eq and value != REDACTED and is_secret_param(name, extra):
            names.append(unquote_plus(name))
            part = f"{name}={REDACTED}"
        parts.append(part)
    return (f"{head}?{'&'.join(parts)}{hash_}{fragment}", names) if names else (url, [])


def clean_url(url: str, extra: Iterable[str] = ()) -> str:
    """`url` as a pack may store it: no `user:password@`, no secret query values."""
    return redact_secrets(strip_userinfo(url), extra)[0]


def secret_values(url: str, extra: Iterable[str] = ()) -> list[str]:
    """The values of `url`'s secret-looking query parameters (to scrub them from what a
    page sends back: a site may echo its token into its links)."""
    query = url.partition("?")[2].partition("#")[0]
    out = []
    for part in query.split("&"):
        name, eq, value = part.partition("=")
        if eq and value and value != REDACTED and is_secret_param(name, extra):
            out.extend({value, unquote_plus(value)})
    return out
