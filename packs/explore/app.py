"""The explorer's web app (Starlette): routes, security headers, error pages.

    app = create_app(PackSet.open(["out/example"]))     # then serve it with uvicorn

Read-only: every route answers GET (and HEAD) only, and the packs are opened read-only.
Every response carries a Content-Security-Policy that allows this origin alone (no remote
script, style, image, font or connection; no inline script or style), and the app answers
only to the Host names it serves (a web page cannot reach it by DNS rebinding); off
loopback, only to requests with its token (packs/explore/access.py). With an `opener`,
each pack folder's `current` is followed: a new build is served at the next request
(web.Explorer).
"""

from __future__ import annotations

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from packs.explore import access, views_ask, views_graph, views_pack, views_topics
from packs.explore.web import STATIC, Explorer, environment
from packs.format import PackFormatError
from packs.packset import PackSet

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; "
       "frame-ancestors 'none'")
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
class SecurityHeaders:
    """ASGI middleware: the HEADERS above on every HTTP response."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []),
                                      *(h for h in HEADERS if h[0] not in names)]
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _error(request: Request, exc: Exception) -> HTMLResponse:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
    if isinstance(exc, PackFormatError):
        status, detail = 500, str(exc)
    template = request.app.state.templates.get_template("error.html")
    labels = request.app.state.explorer.labels
    html = template.render(request=request, status=status, detail=detail, labels=labels,
                           current=None, switch_links=[(label, f"/?pack={label}")
                                                       for label in labels])
    return HTMLResponse(html, status_code=status)


ROUTES = [
    Route("/", views_pack.index),
    Route("/ask", views_ask.ask),
    Route("/section/{section_id}", views_graph.section),
    Route("/entity", views_graph.entity),
    Route("/entity/graph", views_graph.entity_graph),
    Route("/entity/mentions", views_graph.entity_mentions),
    Route("/topics", views_topics.topics),
    Route("/builds", views_pack.builds),
    Route("/diff", views_pack.diff),
    Route("/eval", views_pack.eval_page),
    Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
]


class FollowCurrent:
    """ASGI middleware: before a request, open the builds the packs' `current` now name
    (Explorer.refresh, in a worker thread); count the requests in flight, so a replaced
    build is closed only when none uses it."""

    def __init__(self, app, explorer: Explorer) -> None:
        self.app, self.explorer = app, explorer

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.explorer.stale():
            await anyio.to_thread.run_sync(self.explorer.refresh)
        self.explorer.enter()
        try:
            await self.app(scope, receive, send)
        finally:
            self.explorer.leave()


def create_app(packs: PackSet, *, host: str = "127.0.0.1", token: str | None = None,
               allow_hosts: tuple[str, ...] = (), opener=None) -> Starlette:
    """The explorer over open packs (the caller keeps them open, and closes them after
    the app, with `app.state.explorer.close()` for the builds it opened since). `host`
    is the address it will be served on (for the Host check; `allow_hosts` adds names);
    `token`: the token every request must bring (packs/explore/access.py), required off
    loopback; `opener` (a pack folder → its current build) makes each pack follow its
    `current`. ValueError for a non-loopback `host` without a token."""
    if token is None and not access.is_loopback(host):
        raise ValueError(f"serving on {host} (not loopback) needs a token")
    explorer = Explorer(packs, opener)
    names, wildcard = access.host_names(host, allow_hosts)
    middleware = [Middleware(SecurityHeaders),
                  Middleware(access.HostCheck, names=names, wildcard=wildcard)]
    if token is not None:
        middleware.append(Middleware(access.TokenGate, token=token))
    middleware.append(Middleware(FollowCurrent, explorer=explorer))
    app = Starlette(routes=ROUTES, middleware=middleware,
                    exception_handlers={HTTPException: _error, PackFormatError: _error})
    app.state.explorer = explorer
    app.state.templates = environment()
    return app
