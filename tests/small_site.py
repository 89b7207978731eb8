"""A three-page loopback site and a source folder pointing at it, for the Prefect tests.

Smaller than test_build_e2e's garden site on purpose: these tests are about where a build
runs (Dask, a real Prefect server, a schedule), not what it extracts.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

from tests.conftest import OFFLINE_MODEL
from tests.loopback_site import serve_handler

PAGES = {
    "kettles.md": """# Kettles

A kettle boils water for tea. Descale it monthly in hard-water areas.

## Descaling

Fill it with equal parts water and white vinegar, leave it an hour, then rinse twice.
""",
    "teapots.md": """# Teapots

Warm the teapot with hot water before brewing, so the tea stays hot longer.

## Brewing times

Black tea steeps four minutes, green tea two to three minutes at eighty degrees.
See [kettles](kettles.md).
""",
    "cups.html": """<html><head><title>Cups</title></head><body><main><article>
<h1>Cups</h1><p>Porcelain cups keep tea warm and do not change its taste.</p>
<h2>Handles</h2><p>A wide handle fits three fingers and keeps them off the hot wall.</p>
</article></main></body></html>""",
}


class _Quiet(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".md": "text/markdown"}

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serve_site(root: Path) -> Iterator[str]:
    """Write PAGES into `root` and serve it on 127.0.0.1; yields the base URL."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in PAGES.items():
        (root / name).write_text(text, encoding="utf-8")
    with serve_handler(partial(_Quiet, directory=str(root))) as base:
        yield base


def write_source(folder: Path, base: str, *, schedule: str | None = None) -> Path:
    """A source folder listing every page plus one missing URL (a reported failure)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"{base}/{name}" for name in PAGES] + [f"{base}/missing.md"]
    (folder / "urls.txt").write_text("\n".join(lines) + "\n")
    toml = (f'description = "tea test pack"\nallow_private_hosts = true\n'
            f'embedding_model = "{OFFLINE_MODEL}"\nfetch_timeout_s = 5\nextractor = "offline"\n')
    if schedule:
        toml += f'schedule = "{schedule}"\n'
    (folder / "pack.toml").write_text(toml)
    return folder
