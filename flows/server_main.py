"""The process behind `kpack server start`, the server builds keep (flows/server.py) and a
build's temporary server (flows/temporary_server.py).

    python -m flows.server_main --fd N --port P --home DIR --idle SECONDS
    python -m flows.server_main --fd N --port P --home DIR --temporary

Serves Prefect's API and UI (the app `prefect server start` serves, with its services) on
the listening socket its starter bound and passed as fd N (flows/ports.py), with Prefect's
authentication (the home's secret, read here from DIR/kpack-server.auth: never on a
command line) and CSRF protection on, behind the gate of flows/server_auth.py (loopback
Host names only; the secret for every /api/ request), plus `/kpack-identity`: {kpack,
pid, home, token, port}, which is how a starter, `kpack server status` and builds tell
this server from a stale record or another home's server on the same port (the token, a
random name for this start, comes in $KPACK_SERVER_TOKEN; it proves nothing and grants
nothing).

A kept or started server stops by itself (a graceful uvicorn shutdown) when its record in
DIR/kpack-server.json is gone or names another server (`kpack server stop`, a removed
PREFECT_HOME), and, for a kept server (idle > 0, re-read from the record, so `kpack server
start` can keep it for good), after `idle` seconds with no request in flight or made and
no build holding the lease lock (DIR/kpack-server.lease). A temporary server has no record
and no identity: its starter stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import logging
import os
import socket
import time
from pathlib import Path

log = logging.getLogger("kpack.server")


class Watched:
    """ASGI middleware: answers /kpack-identity, and counts requests in flight and the
    time of the last one (a build's event websocket stays open while it runs)."""

    def __init__(self, app, identity: dict) -> None:
        self.app = app
        self.identity = identity
        self.active = 0
        self.last = time.monotonic()

    async def __call__(self, scope, receive, send) -> None:
        from flows.server import IDENTITY_PATH

        if scope["type"] == "http" and scope["path"] == IDENTITY_PATH:
            body = json.dumps(self.identity).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)  # lifespan
            return
        self.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1
            self.last = time.monotonic()


def lease_free(folder: Path) -> bool:
    """Whether no build holds the lease (a shared flock) on this home's server."""
    from flows.server import LEASE_FILE

    try:
        fd = os.open(folder / LEASE_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def should_stop(folder: Path, token: str, watched: Watched, now: float) -> str | None:
    """Why the server should stop now, or None (see the module doc)."""
    from flows.server import STATE_FILE, read_state

    info = read_state(folder)
    if info is None or info.token != token:
        return f"its record {folder / STATE_FILE} is gone or names another server"
    idle_for = now - watched.last
    if info.idle_s <= 0 or watched.active or idle_for < info.idle_s:
        return None
    if not lease_free(folder):
        return None
    # gone from the record first, so no build picks this server while it stops
    with contextlib.suppress(OSError):
        if (current := read_state(folder)) is not None and current.token == token:
            (folder / STATE_FILE).unlink()
    return f"unused for {idle_for:.0f} s (idle limit {info.idle_s:g} s)"


async def _watch(server, folder: Path, token: str, watched: Watched, poll_s: float) -> None:
    while not server.started:
        await asyncio.sleep(0.2)
    while not server.should_exit:
        await asyncio.sleep(poll_s)
        why = should_stop(folder, token, watched, time.monotonic())
        if why:
            log.warning("stopping the Prefect server (pid %d): %s", os.getpid(), why)
            server.should_exit = True


async def _serve(server, sock: socket.socket, watcher) -> None:
    watch = asyncio.create_task(watcher)
    try:
        await server.serve(sockets=[sock])
    finally:
        watch.cancel()


TOKEN_ENV = "KPACK_SERVER_TOKEN"


def _secured(folder: Path) -> str:
    """Read the home's secret and switch on Prefect's authentication and CSRF protection
    for this process (before Prefect is imported: it reads its settings then)."""
    from flows import server_auth

    secret = server_auth.read_secret(folder)
    if not secret:
        raise SystemExit(f"no secret in {server_auth.auth_path(folder)}; start the server "
                         "with kpack server start")
    os.environ[server_auth.SERVER_ENV] = secret
    os.environ[server_auth.CSRF_ENV] = "true"
    # The database holds every run, log and parameter: readable by this user alone, or
    # the authentication would guard a door next to an open window.
    os.umask(0o077)
    for path in folder.glob("prefect.db*"):
        with contextlib.suppress(OSError):
            if path.stat().st_uid == os.getuid():
                path.chmod(0o600)
    return secret


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--home", required=True)
    ap.add_argument("--idle", type=float, default=0.0)
    ap.add_argument("--temporary", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    log.setLevel(logging.INFO)
    sock = socket.socket(fileno=args.fd)
    folder = Path(args.home)
    token = os.environ.pop(TOKEN_ENV, "")
    secret = _secured(folder)

    import uvicorn
    from prefect.server.api.server import create_app

    from flows.log_redaction import redact_handlers
    from flows.server_auth import Gate

    if args.temporary:
        server = uvicorn.Server(uvicorn.Config(Gate(create_app(), secret), lifespan="on",
                                               log_level="error", timeout_keep_alive=5))
        redact_handlers()
        asyncio.run(server.serve(sockets=[sock]))
        return 0
    identity = {"kpack": 1, "pid": os.getpid(), "home": str(folder), "token": token,
                "port": args.port}
    watched = Watched(create_app(), identity)
    server = uvicorn.Server(uvicorn.Config(Gate(watched, secret), lifespan="on",
                                           log_level="warning", timeout_keep_alive=5))
    redact_handlers()  # an alert's webhook URL (its secret) stays out of the log
    poll_s = min(5.0, max(0.5, args.idle / 20)) if args.idle > 0 else 5.0
    log.info("Prefect server (pid %d) on 127.0.0.1:%d for %s", os.getpid(), args.port, folder)
    asyncio.run(_serve(server, sock, _watch(server, folder, token, watched, poll_s)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
