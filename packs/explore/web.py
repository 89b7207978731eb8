"""What every page of the explorer shares: the packs served, the template environment and
the small helpers views use to read parameters and answer.

Templates are Jinja2 with autoescape on for every file: pack text reaches the page either
escaped or through packs/explore/render.py's sanitiser (`markdown` filter), never raw.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import jinja2
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse

from packs import layout
from packs.explore import render
from packs.format import PackFormatError
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
    """The packs served, in the order given; the first is the default.

    With `opener` (a pack folder → its current build, opened as the explorer opened it),
    each pack opened from a pack folder follows its `current` pointer: `refresh`, called
    before a request when `stale` (packs/explore/app.py), opens a new build as soon as
    `current` names it, so a rebuild is served without a restart, and the build it
    replaced is never served again (it may be pruned); that build is closed once no
    request is using it. A current build that cannot be opened (damaged, untrusted)
    makes its pack's pages an error naming why, never the old build's pages."""

    def __init__(self, packset: PackSet,
                 opener: Callable[[Path], KnowledgePack] | None = None) -> None:
        self.opener = opener
        self._packset = packset
        self._all = {label: Served(label, pack, pack_root_of(pack.path))
                     for label, pack in zip(packset.labels, packset.packs)}
        self.served = dict(self._all)
        self.broken: dict[str, str] = {}  # label -> why its current build does not open
        self._tried: dict[Path, str] = {}  # pack folder -> the current id last tried
        self._lock = threading.Lock()
        self._in_flight = 0
        self._retired: list[KnowledgePack] = []

    @property
    def labels(self) -> list[str]:
        return list(self.served)

    @property
    def packset(self) -> PackSet:
        """The packs served, together; PackFormatError when none can be (every current
        build fails to open)."""
        if not self.served and self.broken:
            raise PackFormatError(next(iter(self.broken.values())))
        return self._packset

    def get(self, label: str | None) -> Served:
        """The pack labelled `label` (the first pack when None or empty); 404 otherwise,
        PackFormatError when its current build cannot be opened."""
        if label in self.broken:
            raise PackFormatError(self.broken[label])
        if not label:
            if not self.served:
                raise PackFormatError(next(iter(self.broken.values())))
            label = next(iter(self.served))
        served = self.served.get(label)
        if served is None:
            raise HTTPException(404, f"no pack labelled {label[:100]!r} is served here; "
                                     f"the packs are: {', '.join(self.served)}")
        return served

    def _moved(self, served: Served) -> str | None:
        """The id `current` names when it is not the build served (nor one tried already)."""
        if served.root is None:
            return None
        current = layout.current_id(served.root) or ""
        if current == self._tried.get(served.root) or (
                current == served.pack.path.name and served.label not in self.broken):
            return None
        return current

    def stale(self) -> bool:
        """Whether a pack folder's `current` names another build (a small read per pack)."""
        return self.opener is not None and any(self._moved(s) is not None
                                               for s in self._all.values())

    def refresh(self) -> None:
        """Open the build each pack folder's `current` names now, where it moved (see the
        class doc). Blocking: call it from a worker thread."""
        if self.opener is None:
            return
        with self._lock:
            changed = False
            for label, served in list(self._all.items()):
                current = self._moved(served)
                if current is None:
                    continue
                self._tried[served.root] = current
                changed = True
                try:
                    fresh = self.opener(served.root)
                except (PackFormatError, OSError, ValueError) as exc:
                    self.broken[label] = (f"{served.root}: its current build {current!r} "
                                          f"cannot be opened: {exc}")
                    continue
                self.broken.pop(label, None)
                self._retired.append(served.pack)
                self._all[label] = Served(label, fresh, served.root)
            if changed:
                live = [s for label, s in self._all.items() if label not in self.broken]
                self.served = {s.label: s for s in live}
                if live:
                    packset = PackSet([s.pack for s in live])
                    packset.labels = [s.label for s in live]  # the labels pages link with
                    self._packset = packset

    def enter(self) -> None:
        with self._lock:
            self._in_flight += 1

    def leave(self) -> None:
        """A request is done; the builds replaced meanwhile are closed when none is left."""
        done: list[KnowledgePack] = []
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                done, self._retired = self._retired, []
        for pack in done:
            pack.close()

    def close(self) -> None:
        """Close every pack held, served or replaced (closing a pack twice is safe, so
        the caller may close the PackSet it passed in too)."""
        with self._lock:
            packs, self._retired = [*self._retired, *(s.pack for s in self._all.values())], []
            packs += self._packset.packs
        for pack in packs:
            pack.close()


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
