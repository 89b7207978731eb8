"""`kpack explore PACK [PACK ...]`: serve the explorer on a local address until Ctrl-C.

    serve(["out/example"], host="127.0.0.1", port=8765)

Opens every pack (and loads its question encoder, so a missing model fails the start, not
the first question), binds the address, prints exactly one line, the explorer's URL, and
runs uvicorn quietly (warnings and errors only, no access log). `port=0` picks a free port;
the printed URL names it. The socket is listening before the line is printed, so a client
that reads the line can connect at once.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence

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
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def server(app, sock: socket.socket):
    """A quiet uvicorn server for `app` on the bound `sock` (run it with
    `server.run(sockets=[sock])`)."""
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            server_header=False, timeout_graceful_shutdown=5)
    return uvicorn.Server(config)


def open_app(paths: Sequence[str | os.PathLike[str]], host: str = DEFAULT_HOST, *,
             verify: bool = True, trust=None):
    """(app, packset): the packs opened (encoders loaded; `verify` and `trust` go to
    KnowledgePack.open) and the explorer over them. The caller closes the packset.
    PackFormatError / EmbeddingModelError for a bad pack."""
    check_extras()
    from packs.explore.app import create_app
    from packs.format import PackFormatError
    from packs.packset import PackSet

    if not paths:
        raise PackFormatError("no pack given: pass at least one pack folder")
    packs = PackSet.open(list(paths), verify=verify, trust=trust)
    try:
        for pack in packs.packs:
            pack.embedder  # noqa: B018 (loads the encoder: a missing model fails the start)
        return create_app(packs, host=host), packs
    except BaseException:
        packs.close()
        raise


def serve(paths: Sequence[str | os.PathLike[str]], *, host: str = DEFAULT_HOST,
          port: int = DEFAULT_PORT, out: Callable[[str], object] = print,
          verify: bool = True, trust=None) -> None:
    """Open the packs (`verify`, `trust`: see open_app), bind, print the URL with `out`,
    serve until Ctrl-C. Raises what open_app and bind raise."""
    app, packs = open_app(paths, host, verify=verify, trust=trust)
    try:
        sock = bind(host, port)
        try:
            out(url_of(sock))
            server(app, sock).run(sockets=[sock])
        finally:
            sock.close()
    finally:
        packs.close()
