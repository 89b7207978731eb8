"""Who may read the explorer: the Host names it answers to, and its token off loopback.

On 127.0.0.1 (the default) only this machine can connect; the Host check keeps web pages
out (a page on evil.example whose name is rebound to 127.0.0.1 sends Host: evil.example).
Served on another address (`kpack explore --host`), it is reachable from the network, so
it also wants a token: given (`--token`, `$KPACK_EXPLORE_TOKEN`) or made at start, printed
once in the URL (`/?token=...`); the first visit with it sets an HttpOnly, SameSite=Strict
cookie and redirects to the same page without it, so the token leaves the address bar and
history. A request with neither is refused (401) before any pack is read.

The Host names: the loopback names on a loopback address; the address itself and the
loopback names on any other address; on a wildcard address (0.0.0.0, ::), the address the
connection reached (an IP literal: what a browser sends for http://192.0.2.7:8765/), this
machine's host names and the loopback names. `--allow-host NAME` adds names (a DNS alias).
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import socket
from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, urlencode

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARDS = ("0.0.0.0", "::", "")
TOKEN_PARAM = "token"
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9._~-]{12,256}")  # safe in a URL and a cookie
COOKIE_PREFIX = "kpack_explore_"  # + the port: explorers on two ports keep their own


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or name to listen on) is this machine only."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is loopback too
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def new_token() -> str:
    return secrets.token_urlsafe(24)


def announce(host: str, url: str, token: str | None) -> tuple[str | None, str]:
    """(the warning to print first, or None on loopback; the URL line: with the token
    when there is one)."""
    line = f"{url}?{TOKEN_PARAM}={quote(token, safe='')}" if token else url
    if is_loopback(host):
        return None, line
    return (f"warning: the explorer listens on {host}, reachable from the network: anyone "
            "with the URL below can read these packs (plain http, not encrypted); share it "
            "only with those who may, or serve on 127.0.0.1"), line


def host_names(host: str, extra: Iterable[str] = ()) -> tuple[frozenset[str], bool]:
    """(the Host names the app answers to when listening on `host`, whether the address
    a connection reached is accepted too: a wildcard listen)."""
    names = {n.lower() for n in (*LOOPBACK_NAMES, *extra) if n}
    wildcard = host in WILDCARDS
    if wildcard:
        names |= {n.lower() for n in (socket.gethostname(), socket.getfqdn()) if n}
    elif not is_loopback(host):
        names.add(host.strip("[]").lower())
    return frozenset(names), wildcard


def _header(scope, name: bytes) -> str:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


def _hostname(header: str) -> str:
    """The name of a Host header: without its port, an IPv6 literal without brackets."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else ""
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


async def _plain(send, status: int, text: str, headers: list | None = None) -> None:
    body = text.encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class HostCheck:
    """ASGI middleware: 400 for a request whose Host is not one of `names` (or, on a
    wildcard listen, the address the connection reached)."""

    def __init__(self, app, names: frozenset[str], wildcard: bool) -> None:
        self.app, self.names, self.wildcard = app, names, wildcard

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] in ("http", "websocket"):
            name = _hostname(_header(scope, b"host"))
            reached = (scope.get("server") or ("",))[0] or ""
            if not (name in self.names or (self.wildcard and name and name == reached.lower())):
                await _plain(send, 400, "Invalid host header")
                return
        await self.app(scope, receive, send)


class TokenGate:
    """ASGI middleware: the token in the query (then a cookie and a redirect without it)
    or the cookie, else 401 (see the module doc)."""

    def __init__(self, app, token: str) -> None:
        self.app, self.token = app, token

    def _cookie_name(self, scope) -> str:
        return f"{COOKIE_PREFIX}{(scope.get('server') or ('', 0))[1] or 0}"

    def _has_cookie(self, scope) -> bool:
        wanted = self._cookie_name(scope)
        for part in _header(scope, b"cookie").split(";"):
            name, _, value = part.strip().partition("=")
            if name == wanted and hmac.compare_digest(value.encode(), self.token.encode()):
                return True
        return False

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"),
                          keep_blank_values=True)
        given = [v for k, v in query if k == TOKEN_PARAM]
        if given and hmac.compare_digest(given[-1].encode(), self.token.encode()):
            rest = urlencode([(k, v) for k, v in query if k != TOKEN_PARAM])
            path = "/" + (scope.get("root_path", "") + scope["path"]).lstrip("/")  # never //host
            location = path + (f"?{rest}" if rest else "")
            cookie = (f"{self._cookie_name(scope)}={self.token}; Path=/; HttpOnly; "
                      "SameSite=Strict")
            await _plain(send, 303, "", [(b"location", location.encode("latin-1")),
                                          (b"set-cookie", cookie.encode("latin-1")),
                                          (b"cache-control", b"no-store")])
            return
        if self._has_cookie(scope):
            await self.app(scope, receive, send)
            return
        await _plain(send, 401, "This explorer wants its token: open the address `kpack "
                                "explore` printed (it ends in ?token=...).")
