"""`kpack explore PACK [PACK ...]`: serve the explorer on a local address until Ctrl-C.

    serve(["out/example"], host="127.0.0.1", port=8765)

Opens every pack (and loads its question encoder, so a missing model fails the start, not
the first question), binds the address, prints exactly one line, the explorer's URL, and
runs uvicorn quietly (warnings and errors only, no access log). `port=0` picks a free port;
the printed URL names it. The socket is listening before the line is printed, so a client
that reads the line can connect at once. Each pack folder's `current` is followed: a
rebuild is served at the next request (packs/explore/web.py: Explorer).

On an address other than loopback the explorer is reachable from the network: it then
needs a token (given, or made here), prints a warning first (`warn`, stderr at the CLI)
and the URL with the token (`/?token=...`, once); see packs/explore/access.py.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Sequence

from packs.explore import access
from packs.extras import EXPLORE_INSTALL, EXPLORE_MODULES, MissingExtraError, missing

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


class ExploreError(RuntimeError):
    """The explorer cannot start (its address is taken or invalid); the message says what
    to change."""


def check_extras() -> None:
    """MissingExtraError (one line: what to install) without the [explore] extra."""
    absent = missing(EXPLORE_MODULES)
    if absent:
        raise MissingExtraError(f"kpack explore needs {', '.join(absent)}, which this install "
                                f"lacks: {EXPLORE_INSTALL}")


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: a free one). ExploreError says why
    not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that name it. Without
    # it a response written as headers then body waited ~40 ms on the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ExploreError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; pick "
                           "another --port (0 picks a free one) or --host") from exc
    return sock


def url_of(sock: socket.socket) -> str:
    """The explorer's address: the bound one, or this machine's host name for a wildcard
    bind (0.0.0.0 names no machine to a browser elsewhere)."""
    host, port = sock.getsockname()[:2]
    if host in access.WILDCARDS:
        host = socket.gethostname() or "localhost"
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def _warn(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def server(app, sock: socket.socket):
    """A quiet uvicorn server for `app` on the bound `sock` (run it with
    `server.run(sockets=[sock])`)."""
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            server_header=False, timeout_graceful_shutdown=5)
    return uvicorn.Server(config)


def open_app(paths: Sequence[str | os.PathLike[str]], host: str = DEFAULT_HOST, *,
             verify: bool = True, trust=None, token: str | None = None,
             allow_hosts: Sequence[str] = ()):
    """(app, packset): the packs opened (encoders loaded; `verify` and `trust` go to
    KnowledgePack.open, for the builds `current` names later too) and the explorer over
    them (`token`, `allow_hosts`: see packs/explore/app.create_app). The caller closes
    `app.state.explorer` and the packset. PackFormatError / EmbeddingModelError for a
    bad pack."""
    check_extras()
    from packs.explore.app import create_app
    from packs.format import PackFormatError
    from packs.pack import KnowledgePack
    from packs.packset import PackSet

    if not paths:
        raise PackFormatError("no pack given: pass at least one pack folder")

    def opener(root):
        pack = KnowledgePack.open(root, verify=verify, trust=trust)
        try:
            pack.embedder  # noqa: B018 (as at the start: a missing model fails here)
        except BaseException:
            pack.close()
            raise
        return pack

    packs = PackSet.open(list(paths), verify=verify, trust=trust)
    try:
        for pack in packs.packs:
            pack.embedder  # noqa: B018 (loads the encoder: a missing model fails the start)
        return create_app(packs, host=host, token=token, allow_hosts=tuple(allow_hosts),
                          opener=opener), packs
    except BaseException:
        packs.close()
        raise


def serve(paths: Sequence[str | os.PathLike[str]], *, host: str = DEFAULT_HOST,
          port: int = DEFAULT_PORT, out: Callable[[str], object] = print,
          verify: bool = True, trust=None, token: str | None = None,
          allow_hosts: Sequence[str] = (), warn: Callable[[str], object] = _warn) -> None:
    """Open the packs (`verify`, `trust`: see open_app), bind, print the URL with `out`,
    serve until Ctrl-C. Off loopback: a token (`token`, else a new one), a warning with
    `warn` first, and the URL with the token. Raises what open_app and bind raise."""
    if token is not None and not access.TOKEN_SHAPE.fullmatch(token):
        raise ExploreError("--token must be at least 12 letters, digits, '.', '_', '~' or "
                           "'-'; or leave it out to get one")
    if not access.is_loopback(host):
        token = token or access.new_token()
    app, packs = open_app(paths, host, verify=verify, trust=trust, token=token,
                          allow_hosts=allow_hosts)
    try:
        sock = bind(host, port)
        try:
            warning, line = access.announce(host, url_of(sock), token)
            if warning:
                warn(warning)
            out(line)
            server(app, sock).run(sockets=[sock])
        finally:
            sock.close()
    finally:
        app.state.explorer.close()
        packs.close()
