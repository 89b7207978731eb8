"""A real HTTP server on 127.0.0.1 for tests: register handlers per path, read back hits.

    site = LoopbackSite()
    site.route("/page", lambda req: req.send(200, b"<html>...", "text/html"))
    with site:
        fetch(site.url("/page"))
    assert site.hits["/page"] == 1

Handlers run in server threads. `site.stopping` is set when the site shuts down, so a
handler that must "never answer" can wait on it instead of sleeping.
"""

from __future__ import annotations

import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


def free_port() -> int:
    """A loopback port nobody listens on: bound, read and released (for a server started
    on it next, or for a client that must find no server there)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve_handler(handler, port: int = 0) -> Iterator[str]:
    """Serve requests with `handler` (a BaseHTTPRequestHandler factory) on 127.0.0.1 (on
    `port` when it is free, else a free one) from a daemon thread; yields the base URL,
    shuts the server down after."""
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError:  # taken: any free port (the pack's URLs then change)
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class Request:
    """What a handler sees: the path, the request headers, and ways to answer."""

    def __init__(self, handler: BaseHTTPRequestHandler, site: LoopbackSite) -> None:
        self._handler = handler
        self.site = site
        self.path = urlsplit(handler.path).path
        self.query = urlsplit(handler.path).query
        self.headers = {k.lower(): v for k, v in handler.headers.items()}

    def send(
        self,
        status: int,
        body: bytes | Iterable[bytes] = b"",
        content_type: str | None = "text/html; charset=utf-8",
        headers: dict[str, str] | None = None,
        *,
        length: int | None = None,
    ) -> None:
        """Answer. A bytes body gets a Content-Length; an iterable body is streamed
        close-delimited (HTTP/1.0) unless `length` declares one."""
        h = self._handler
        h.send_response(status)
        if content_type:
            h.send_header("Content-Type", content_type)
        for key, value in (headers or {}).items():
            h.send_header(key, value)
        if isinstance(body, bytes):
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
            return
        if length is not None:
            h.send_header("Content-Length", str(length))
        h.end_headers()
        try:
            for chunk in body:
                h.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up, which is what the size-cap tests expect


Handler = Callable[[Request], None]


class LoopbackSite:
    """A threaded HTTP/1.0 server on a free port of 127.0.0.1."""

    def __init__(self) -> None:
        self.routes: dict[str, Handler] = {}
        self.hits: Counter[str] = Counter()
        self.requests: list[Request] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        site = self

        class _Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                request = Request(self, site)
                with site._lock:
                    site.hits[request.path] += 1
                    site.requests.append(request)
                handler = site.routes.get(request.path)
                if handler is None:
                    request.send(404, b"not found", "text/plain")
                else:
                    handler(request)

            def log_message(self, format: str, *args: object) -> None:
                pass  # keep test output clean

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def route(self, path: str, handler: Handler) -> None:
        self.routes[path] = handler

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def headers_for(self, path: str) -> list[dict[str, str]]:
        """Request headers of every hit on `path`, in order."""
        with self._lock:
            return [r.headers for r in self.requests if r.path == path]

    def __enter__(self) -> LoopbackSite:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
