"""Incremental rebuilds: only what changed is fetched, extracted and embedded again.

A loopback site with conditional-GET support (Last-Modified / If-Modified-Since), Claude
extraction through the real SDK against the loopback Messages API (so LLM calls are
counted by the server), and the real build flow.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from flows.build import run_build
from packs import KnowledgePack
from packs import format as fmt
from packs.cli import make_app
from tests.anthropic_fake import FakeAnthropic
from tests.conftest import OFFLINE_MODEL

app = make_app()

PAGES = {
    "kettles.md": "# Kettles\n\nA kettle boils water.\n\n## Descaling\n\nUse citric acid "
                  "monthly to remove limescale from the `HeatingElement`.\n\n## Safety\n\n"
                  "Never fill the kettle above the MAX line.\n",
    "toasters.md": "# Toasters\n\nA toaster browns bread.\n\n## Crumb tray\n\nEmpty the "
                   "`CrumbTray` weekly.\n\n## Settings\n\nSetting 3 suits most bread.\n",
    "blenders.md": "# Blenders\n\nA blender purees food.\n\n## Blades\n\nThe `BladeAssembly` "
                   "unscrews for cleaning.\n",
}


class CountingHandler(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".md": "text/markdown"}
    hits: Counter = Counter()

    def log_request(self, code="-", size="-") -> None:
        type(self).hits[(self.path, int(code) if str(code).isdigit() else code)] += 1

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def site(tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    for name, text in PAGES.items():
        (root / name).write_text(text)
    handler = type("Handler", (CountingHandler,), {"hits": Counter()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()


def _source(folder: Path, base: str, names: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "urls.txt").write_text("".join(f"{base}/{n}\n" for n in names))
    (folder / "pack.toml").write_text(
        f'allow_private_hosts = true\nembedding_model = "{OFFLINE_MODEL}"\n'
    )
    return folder


def _manifest(summary: dict) -> dict:
    return json.loads((Path(summary["build_dir"]) / fmt.MANIFEST_FILE).read_text())


def test_changed_page_reextracts_and_reembeds_only_its_changed_sections(
        site, prefect_harness, tmp_path, monkeypatch) -> None:
    root, base, handler = site
    source = _source(tmp_path / "appliances", base, list(PAGES))
    out, work = tmp_path / "out", tmp_path / "work"
    with FakeAnthropic(api_key="k") as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        first = run_build(source, out, work_dir=work)
        m1 = _manifest(first)
        assert m1["counts"]["sections"] == 8  # 3 + 3 + 2, in fewer requests (batched)
        assert fake.stats.requests == m1["extra"]["extract_stats"]["calls"] < 8

        # Edit one section of toasters.md, drop blenders.md from urls.txt.
        page = root / "toasters.md"
        page.write_text(PAGES["toasters.md"].replace("Setting 3 suits", "Setting 4 suits"))
        later = time.time() + 5  # Last-Modified has one-second resolution
        os.utime(page, (later, later))
        _source(source, base, ["kettles.md", "toasters.md"])
        handler.hits.clear()
        calls_before = fake.stats.requests
        second = run_build(source, out, work_dir=work)
        m2 = _manifest(second)

        # One changed section: one Claude call, one embedding.
        assert fake.stats.requests - calls_before == 1
        assert m2["extra"]["embed_stats"]["computed"] == 1
        assert m2["extra"]["extract_stats"]["cache_hits"] == 5
        # The unchanged page cost one conditional request answered 304.
        assert handler.hits[("/kettles.md", 304)] == 1
        assert handler.hits[("/toasters.md", 200)] == 1
        assert {s["url"].rsplit("/", 1)[-1]: s["status"] for s in m2["sources"]} == {
            "kettles.md": "not_modified", "toasters.md": "ok"}
        changes = m2["extra"]["changes"]
        assert changes["pages"] == {"added": 0, "changed": 1, "removed": 1, "unchanged": 1}
        # The edited section is a change (same page and heading path, new content).
        assert changes["sections"] == {"added": 0, "changed": 1, "removed": 2, "unchanged": 5}
        # Entities only the removed page mentioned are gone.
        entities = pl.read_parquet(Path(second["build_dir"]) / "tables" / "entities.parquet")
        names = " ".join(entities["name"]).lower()
        assert "blade" not in names and "crumb" in names and "heatingelement" in names
        with KnowledgePack.open(out / "appliances") as pack:
            assert pack.manifest.counts.articles == 2

        # kpack diff prints the same summary.
        res = CliRunner().invoke(app, ["diff", first["build_dir"], second["build_dir"]])
        assert res.exit_code == 0, res.output
        assert "pages +0 ~1 -1" in res.output and "- " + f"{base}/blenders.md" in res.output

        # Nothing changed: no LLM call, no embedding, no new build.
        calls_before = fake.stats.requests
        third = run_build(source, out, work_dir=work)
        assert third["status"] == "no changes" and third["build_id"] == second["build_id"]
        assert fake.stats.requests == calls_before


def test_killed_run_leaves_no_torn_intermediates(tmp_path) -> None:
    from tasks.stages.common import write_parquet

    target = tmp_path / "x.parquet"
    write_parquet(pl.DataFrame({"a": [1, 2]}), target)
    assert pl.read_parquet(target)["a"].to_list() == [1, 2]
    assert [p.name for p in tmp_path.iterdir()] == ["x.parquet"]


def test_keyword_vectors_are_off_unless_the_source_asks(site, prefect_harness, tmp_path) -> None:
    _, base, _ = site
    summary = run_build(_source(tmp_path / "appliances", base, list(PAGES)), tmp_path / "out",
                        work_dir=tmp_path / "work", extractor="offline")
    manifest = _manifest(summary)
    assert manifest["keyword_vectors"]["present"] is False
    assert "keywords" not in summary["durations"]
