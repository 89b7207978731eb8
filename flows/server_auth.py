"""Who may talk to the Prefect server kpack runs for a PREFECT_HOME (flows/server.py), and
how builds prove they may.

A kept server listens on 127.0.0.1, which every local user (and, through DNS rebinding, a
web page in a browser on the machine) can reach. So it is started with Prefect's own
authentication and CSRF protection, and behind a gate of ours:

- **The secret.** `$PREFECT_HOME/kpack-server.auth`: 32 random bytes (URL-safe base64),
  made once per home, mode 0600, owned by the user. The server gets it as
  PREFECT_SERVER_API_AUTH_STRING (read from the file by the server process itself, so it is
  never on a command line), builds, `kpack serve` and their flow-run and Dask worker
  processes as PREFECT_API_AUTH_STRING in their environment (`client_settings`). Another
  user cannot read the file, so cannot call the API. The UI asks for it once (paste the
  file's contents; the browser keeps it).
- **The gate** (`Gate`, in front of Prefect's app): a request whose Host header is not a
  loopback name is refused (400: a page on evil.example that rebinds its name to
  127.0.0.1 is a foreign Host), and an HTTP request under /api/ without the secret is
  refused (401) before Prefect reads it, whatever its method, so a caller without the
  secret learns nothing and cannot obtain a CSRF token. /api/health and /api/ready answer
  anyone (liveness, as Prefect allows). WebSockets are authenticated by Prefect's own
  handshake (its "prefect" subprotocol; the auth message carries the secret).
- **CSRF** (PREFECT_SERVER_API_CSRF_PROTECTION_ENABLED): changes need a token the Prefect
  client fetches with the secret, so a form posted by a web page cannot change anything.

A PREFECT_API_URL the user set is left alone unless it names this home's own server (then
its secret is added, so `kpack serve` and builds pointed at `kpack server start`'s URL
work).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
import secrets
import stat
from pathlib import Path
from urllib.parse import urlsplit

AUTH_FILE = "kpack-server.auth"
SERVER_ENV = "PREFECT_SERVER_API_AUTH_STRING"
CLIENT_ENV = "PREFECT_API_AUTH_STRING"
CSRF_ENV = "PREFECT_SERVER_API_CSRF_PROTECTION_ENABLED"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
OPEN_PATHS = frozenset({"/api/health", "/api/ready"})  # GET, for anyone (liveness)


class AuthFileError(RuntimeError):
    """The secret file is unusable (readable by others, someone else's); says what to do."""


def auth_path(folder: Path) -> Path:
    return folder / AUTH_FILE


def read_secret(folder: Path) -> str | None:
    """The home's secret, None when there is none yet. AuthFileError when the file is
    not the user's own or others may read it (then it may be known: a new one is made
    after `kpack server stop` and removing the file)."""
    path = auth_path(folder)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AuthFileError(f"{path}: cannot read the Prefect server's secret "
                            f"({exc.strerror or exc})") from exc
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if info.st_uid != os.getuid() or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise AuthFileError(f"{path}: the Prefect server's secret must be yours with mode "
                                "0600 (others may have read it); run `kpack server stop`, "
                                "remove the file, and the next start makes a new one")
        value = f.read(256).decode("ascii", "replace").strip()
    return value or None


def ensure_secret(folder: Path) -> str:
    """The home's secret, made now (0600, written through a temp file and a hard link, so
    two starters never both write one) when there is none."""
    found = read_secret(folder)
    if found:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(32)
    tmp = folder / f".{AUTH_FILE}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(value + "\n")
        try:
            os.link(tmp, auth_path(folder))  # fails when another starter made one first
        except FileExistsError:
            pass
    finally:
        tmp.unlink(missing_ok=True)
    return read_secret(folder) or value


def _is_loopback(url: str) -> tuple[bool, int | None]:
    try:
        parts = urlsplit(url)
        return (parts.hostname or "") in LOOPBACK_HOSTS, parts.port
    except ValueError:
        return False, None


def secret_for(url: str, folder: Path, server_port: int | None) -> str | None:
    """The secret to send to the API at `url`: this home's when `url` is its server (a
    loopback URL on `server_port`, the port its record names), else None (a server the
    user runs is theirs to configure)."""
    loopback, port = _is_loopback(url)
    return read_secret(folder) if loopback and server_port and port == server_port else None


def client_settings(secret: str | None) -> dict:
    """Prefect setting → value that make a client send `secret` (none when None)."""
    if not secret:
        return {}
    from prefect.settings import PREFECT_API_AUTH_STRING

    return {PREFECT_API_AUTH_STRING: secret}


def basic(secret: str) -> str:
    """The Authorization header value Prefect's clients send for `secret`."""
    return "Basic " + base64.b64encode(secret.encode("utf-8")).decode("ascii")


def _authorized(headers: list[tuple[bytes, bytes]], secret: str) -> bool:
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, creds = value.decode("latin-1").partition(" ")
            if scheme != "Basic":
                return False
            try:
                given = base64.b64decode(creds.strip(), validate=True)
            except (binascii.Error, ValueError):
                return False
            return hmac.compare_digest(given, secret.encode("utf-8"))
    return False


class Gate:
    """ASGI middleware in front of Prefect's app: the Host check, then the secret for every
    HTTP request under /api/ but the liveness probes (see the module doc)."""

    def __init__(self, app, secret: str, hosts: tuple[str, ...] = LOOPBACK_HOSTS) -> None:
        from starlette.middleware.trustedhost import TrustedHostMiddleware

        self.secret = secret
        self.inner = app
        self.app = TrustedHostMiddleware(self._authenticated, allowed_hosts=list(hosts))

    async def __call__(self, scope, receive, send) -> None:
        await self.app(scope, receive, send)

    async def _authenticated(self, scope, receive, send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == "/api" or path.startswith("/api/")) \
                and not (path in OPEN_PATHS and scope["method"] in ("GET", "HEAD")) \
                and not _authorized(scope.get("headers", []), self.secret):
            body = b'{"exception_message": "Unauthorized"}'
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.inner(scope, receive, send)
