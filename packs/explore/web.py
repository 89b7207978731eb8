"""What every page of the explorer shares: the packs served, the template environment and
the small helpers views use to read parameters and answer.

Templates are Jinja2 with autoescape on for every file: pack text reaches the page either
escaped or through packs/explore/render.py's sanitiser (`markdown` filter), never raw.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import jinja2
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse

from packs.explore import render
from packs.layout import pack_root_of
from packs.pack import KnowledgePack
from packs.packset import PackSet

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
# Bumped with the static files, so a browser never keeps an old copy (they are cached).
ASSETS_VERSION = "1"
MAX_PARAM_CHARS = 2000


@dataclass
class Served:
    """One pack the explorer serves: its label (the manifest name, "#2" for a second pack
    of that name), the open build, and its pack folder (None for a lone build folder:
    no history, no scorecards)."""

    label: str
    pack: KnowledgePack
    root: Path | None


class Explorer:
    """The packs served, in the order given; the first is the default."""

    def __init__(self, packset: PackSet) -> None:
        self.packset = packset
        self.served = {label: Served(label, pack, pack_root_of(pack.path))
                       for label, pack in zip(packset.labels, packset.packs)}

    @property
    def labels(self) -> list[str]:
        return list(self.served)

    def get(self, label: str | None) -> Served:
        """The pack labelled `label` (the first pack when None or empty); 404 otherwise."""
        if not label:
            return next(iter(self.served.values()))
        served = self.served.get(label)
        if served is None:
            raise HTTPException(404, f"no pack labelled {label[:100]!r} is served here; "
                                     f"the packs are: {', '.join(self.served)}")
        return served


def href(path: str, **params: object) -> str:
    """`path` with the non-empty `params` as its query string."""
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{path}?{query}" if query else path


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,  # every template, whatever its name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True,
    )
    env.globals.update(href=href, safe_href=render.safe_href,
                       static=lambda name: f"/static/{name}?v={ASSETS_VERSION}")
    env.filters["markdown"] = render.markdown
    return env


def explorer(request: Request) -> Explorer:
    return request.app.state.explorer


def param(request: Request, name: str, default: str = "") -> str:
    """A query parameter, stripped; 400 past MAX_PARAM_CHARS."""
    value = request.query_params.get(name, default).strip()
    if len(value) > MAX_PARAM_CHARS:
        raise HTTPException(400, f"the parameter {name!r} is longer than "
                                 f"{MAX_PARAM_CHARS:,} characters")
    return value


def int_param(request: Request, name: str, default: int = 0) -> int:
    raw = param(request, name)
    if not raw:
        return default
    try:
        return max(int(raw), 0)
    except ValueError:
        raise HTTPException(400, f"the parameter {name!r} must be a whole number, "
                                 f"not {raw[:40]!r}") from None


def page(request: Request, template: str, context: dict, *, status: int = 200,
         switch: str = "/", switch_params: dict | None = None) -> HTMLResponse:
    """Render `template` with the shared context: the packs served, the current one
    (`context["served"]`, if any), and the pack switcher's links (`switch` with
    `switch_params` and each pack's label)."""
    ex = explorer(request)
    current = context.get("served")
    links = [(label, href(switch, **(switch_params or {}), pack=label)) for label in ex.labels]
    html = request.app.state.templates.get_template(template).render(
        request=request, labels=ex.labels, current=current.label if current else None,
        switch_links=links, **context)
    return HTMLResponse(html, status_code=status)
