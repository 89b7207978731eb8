"""Cheap rebuilds and their counts: the lastmod trust rule, which pages a build skips, the
per-page outcomes, a shard layout that holds still, and one site of 24 pages behind a
sitemap index (one child gzip) rebuilt four times through the real build flow: a first
build, a change that earns the host's trust, a change built by skipping, and a lying
lastmod caught by the re-check sample that drops the trust."""

from __future__ import annotations

import gzip
import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.report import report_markdown
from packs import format as fmt
from packs.cli import make_app
from tasks import shards
from tasks.fetch import lastmod_trust as trust
from tasks.fetch.freshness import Evidence, SkipPolicy, in_sample, outcome, should_skip
from tests.conftest import OFFLINE_MODEL
from tests.loopback_site import LoopbackSite

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)

# --- the trust rule ------------------------------------------------------------------------


def _tally(build: str, **kinds: int) -> dict:
    return {"build_id": build, **{k: kinds.get(k, 0) for k in trust.KINDS},
            "examples": kinds.get("examples", [])}


def test_trust_needs_enough_agreeing_observations_with_changes() -> None:
    assert not trust.verdict([]).trusted
    few = trust.verdict([_tally("b1", same_same=10, changed_changed=3)])
    assert not few.trusted and few.reason == "13 of the 20 observations needed"
    static = trust.verdict([_tally("b1", same_same=40)])
    assert not static.trusted and "0 of the 3 changed pages needed" in static.reason
    eager = trust.verdict([_tally("b1", same_same=10, changed_changed=3, eager=20)])
    assert not eager.trusted and "does not follow the content" in eager.reason
    good = trust.verdict([_tally("b1", same_same=17, changed_changed=3)])
    assert good.trusted and good.observations["changed_changed"] == 3


def test_one_lie_drops_trust_until_it_leaves_the_window() -> None:
    builds = [_tally("b1", same_same=30, changed_changed=5),
              _tally("b2", same_same=1, lie=1, examples=["https://a.org/x"])]
    lied = trust.verdict(builds)
    assert not lied.trusted
    assert lied.reason == ("1 pages changed while their lastmod stayed (last in build b2: "
                           "https://a.org/x)")
    later = builds + [_tally(f"c{i}", same_same=1) for i in range(trust.WINDOW_BUILDS - 1)]
    assert not trust.verdict(later).trusted
    assert trust.verdict(later + [_tally("d", same_same=20, changed_changed=3)]).trusted


def test_record_keeps_a_window_per_host_and_trusted_hosts_reads_it(tmp_path: Path) -> None:
    state = trust.load(tmp_path)
    assert state == {"hosts": {}}
    state = trust.record(state, "b1", {"a.org": {"same_same": 20, "changed_changed": 3},
                                       "b.org": {"same_same": 0}})
    assert set(state["hosts"]) == {"a.org"}  # nothing observed on b.org
    trust.save(tmp_path, state)
    assert trust.trusted_hosts(trust.load(tmp_path)) == ("a.org",)
    for i in range(trust.WINDOW_BUILDS + 5):
        state = trust.record(state, f"x{i}", {"a.org": {"same_same": 1}})
    assert len(state["hosts"]["a.org"]) == trust.WINDOW_BUILDS
    (tmp_path / trust.STATE_FILE).write_text("{not json")
    assert trust.load(tmp_path) == {"hosts": {}}  # unreadable: nothing trusted, all asked


# --- which pages are skipped, and what came of the others --------------------------------


def _prev(lastmod: str | None = "2026-01-01T00:00:00+00:00", days_ago: float = 1,
          text: str | None = "old") -> dict:
    return {"lastmod": lastmod, "text": text,
            "fetched_at": (NOW - timedelta(days=days_ago)).isoformat()}


def test_a_page_is_skipped_only_with_everything_in_place() -> None:
    url, lastmod = "https://a.org/p", "2026-01-01T00:00:00+00:00"
    policy = SkipPolicy(("a.org",), recheck_share=0.0, max_skip_days=30)
    skip = lambda prev, pol=policy, lm=lastmod, u=url: should_skip(  # noqa: E731
        u, lm, prev, pol, build_id="b", now=NOW)
    assert skip(_prev())
    assert not skip(_prev(), lm=None)  # no lastmod this build
    assert not skip(None)  # not in the last build
    assert not skip(_prev(text=None))  # the last build had no text of it
    assert not skip(_prev(lastmod="2025-12-31T00:00:00+00:00"))  # lastmod moved
    assert not skip(_prev(), u="https://b.org/p")  # host not trusted
    assert not skip(_prev(days_ago=31))  # not asked for max_skip_days
    assert not skip(_prev(), pol=SkipPolicy(("a.org",), recheck_share=1.0))  # sampled


def test_the_recheck_sample_is_a_share_and_changes_with_the_build() -> None:
    urls = [f"https://a.org/p{i}" for i in range(5000)]
    first = {u for u in urls if in_sample(u, "build-1", 0.02)}
    second = {u for u in urls if in_sample(u, "build-2", 0.02)}
    assert 60 < len(first) < 140 and 60 < len(second) < 140
    assert len(first & second) < 15  # another sample each build
    assert first == {u for u in urls if in_sample(u, "build-1", 0.02)}  # a rerun: the same


def test_outcomes_and_evidence() -> None:
    old = {"text": "same", "lastmod": "2026-01-01T00:00:00+00:00"}
    assert outcome("not_modified", None, old) == "not_modified"
    assert outcome("ok", "same", old) == "unchanged"
    assert outcome("ok", "other", old) == "changed"
    assert outcome("ok", "x", None) == "new"
    assert outcome("failed", None, old) == "failed"
    evidence = Evidence()
    evidence.add("https://a.org/1", "2026-01-01T00:00:00+00:00", old, "not_modified")
    evidence.add("https://a.org/2", "2026-02-01T00:00:00+00:00", old, "changed")
    evidence.add("https://a.org/3", "2026-01-01T00:00:00+00:00", old, "changed")
    evidence.add("https://a.org/4", None, old, "changed")  # no lastmod: no observation
    evidence.add("https://a.org/5", "2026-01-01T00:00:00+00:00", old, "failed")
    assert evidence.hosts == {"a.org": {"same_same": 1, "changed_changed": 1, "eager": 0,
                                        "lie": 1, "examples": ["https://a.org/3"]}}


# --- a stable layout -----------------------------------------------------------------------


def test_a_few_pages_more_or_less_keep_the_shard_count() -> None:
    """The new user's 40-URL pack (shard_pages 10: 4 shards): one URL more made 8."""
    assert shards.shard_count(41, 10) == 8  # afresh
    assert shards.stable_count(41, 10, previous=4) == 4
    assert [shards.stable_count(n, 10, previous=4) for n in (17, 16, 51, 52)] == [4, 2, 4, 8]
    assert [shards.stable_count(n, 10, previous=8) for n in (40, 33, 32)] == [8, 8, 4]
    assert shards.stable_count(41, 10) == 8  # no earlier layout
    assert shards.stable_count(41, 10, previous=3) == 8  # not a layout this code makes
    assert shards.stable_count(10_050, 200, previous=64) == 64
    # a cluster's slots still decide: 405 pages on 2 slots want 16 shards, not the 4 of
    # the last build on threads
    assert shards.stable_count(405, 200, slots=2, previous=4) == 16


# --- end to end ------------------------------------------------------------------------------


class DocSite:
    """24 Markdown pages with ETags behind a sitemap index naming a plain and a gzip
    sitemap, each page with a lastmod the test sets."""

    def __init__(self, site: LoopbackSite, pages: int = 24) -> None:
        self.site = site
        self.pages = {f"/docs/p{i}.md": [f"# Page {i}\n\n## Part\n\nThe widget {i} turns "
                                         f"the gear {i}.\n", "2026-01-01"] for i in range(pages)}
        for path in self.pages:
            site.route(path, self._page)
        site.route("/sitemap.xml", self._index)
        site.route("/a.xml", lambda r: r.send(200, self._urlset(0), "application/xml"))
        site.route("/b.xml.gz", lambda r: r.send(200, gzip.compress(self._urlset(1)),
                                                 "application/gzip"))

    def edit(self, i: int, text: str, lastmod: str | None) -> None:
        page = self.pages[f"/docs/p{i}.md"]
        page[0] += text
        page[1] = lastmod or page[1]

    def _page(self, req) -> None:
        if req.path not in self.pages:
            req.send(404, b"gone", "text/plain")
            return
        body = self.pages[req.path][0].encode()
        etag = '"' + hashlib.sha1(body).hexdigest() + '"'
        if req.headers.get("if-none-match") == etag:
            req.send(304, b"", None, {"ETag": etag})
        else:
            req.send(200, body, "text/markdown", {"ETag": etag})

    def _urlset(self, half: int) -> bytes:
        rows = "".join(f"<url><loc>{self.site.url(p)}</loc><lastmod>{m}</lastmod></url>"
                       for p, (_, m) in sorted(self.pages.items())[half::2])
        return f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{rows}</urlset>'.encode()

    def _index(self, req) -> None:
        locs = "".join(f"<sitemap><loc>{self.site.url(p)}</loc></sitemap>"
                       for p in ("/a.xml", "/b.xml.gz"))
        req.send(200, f"<sitemapindex>{locs}</sitemapindex>".encode(), "application/xml")

    def page_hits(self) -> dict[str, int]:
        return {p: n for p, n in self.site.hits.items() if p.startswith("/docs/")}


def _manifest(summary: dict) -> dict:
    return json.loads((Path(summary["build_dir"]) / fmt.MANIFEST_FILE).read_text())


def test_a_sitemap_site_rebuilt_for_the_cost_of_its_changes(prefect_harness, tmp_path) -> None:
    from flows.build import run_build

    with LoopbackSite() as loop:
        site = DocSite(loop)
        source = tmp_path / "docs"
        source.mkdir()
        (source / "urls.txt").write_text(f"sitemap: {loop.url('/sitemap.xml')}\n")
        toml = (f'allow_private_hosts = true\nembedding_model = "{OFFLINE_MODEL}"\n'
                'extractor = "offline"\nshard_pages = 6\n[sitemap]\nrecheck_share = 0.0\n'
                'recheck_confidence = 0.0\n')  # no re-check sample until the fourth build
        (source / "pack.toml").write_text(toml)
        out, work = tmp_path / "out", tmp_path / "work"

        first = run_build(source, out, work_dir=work)
        assert first["freshness"]["pages"]["new"] == 24
        assert first["freshness"]["sitemaps"]["files"] == 3
        assert _manifest(first)["extra"]["shards"]["count"] == 4
        # One robots.txt request for the sitemap walk and the 4 fetch shards together.
        assert loop.hits["/robots.txt"] == 1

        # 3 pages change with their lastmod, one is added: every known page is asked
        # conditionally (no trust yet), and the layout keeps its 4 shards (25 pages
        # would make 8 afresh).
        for i in range(3):
            site.edit(i, "More.\n", "2026-02-01")
        site.pages["/docs/p24.md"] = ["# Page 24\n\n## Part\n\nNew page.\n", "2026-02-01"]
        loop.route("/docs/p24.md", site._page)
        loop.hits.clear()
        second = run_build(source, out, work_dir=work)
        fresh = second["freshness"]
        assert fresh["pages"] == {"skipped_lastmod": 0, "not_modified": 21, "unchanged": 0,
                                  "changed": 3, "new": 1, "removed": 0, "failed": 0}
        assert sum(site.page_hits().values()) == 25
        assert loop.hits["/robots.txt"] == 1  # asked again by the next build, once
        assert _manifest(second)["extra"]["shards"]["count"] == 4
        host = fresh["lastmod_hosts"]["127.0.0.1"]
        assert not host["trusted"] and host["verdict"], host  # earned: the next build skips

        # 3 more change with their lastmod, one page leaves the sitemap: only the changed
        # pages are requested.
        for i in range(3, 6):
            site.edit(i, "More.\n", "2026-03-01")
        del site.pages["/docs/p23.md"]
        loop.hits.clear()
        third = run_build(source, out, work_dir=work)
        assert third["freshness"]["pages"] == {
            "skipped_lastmod": 21, "not_modified": 0, "unchanged": 0, "changed": 3, "new": 0,
            "removed": 1, "failed": 0}
        assert sorted(site.page_hits()) == [f"/docs/p{i}.md" for i in range(3, 6)]
        m3 = _manifest(third)
        assert m3["freshness"]["lastmod_hosts"]["127.0.0.1"]["trusted"] is True
        outcome_of = {s["url"].rsplit("/", 1)[-1]: s["outcome"] for s in m3["sources"]}
        assert outcome_of["p3.md"] == "changed" and outcome_of["p9.md"] == "skipped_lastmod"
        assert {s["sitemap_lastmod"] for s in m3["sources"]} == {
            "2026-01-01T00:00:00+00:00", "2026-02-01T00:00:00+00:00",
            "2026-03-01T00:00:00+00:00"}

        # A lie: page 10 changes, its lastmod stays. Asked anyway by the re-check sample
        # (every skippable page here), it drops the host's trust.
        site.edit(10, "Changed quietly.\n", None)
        (source / "pack.toml").write_text(toml.replace("recheck_share = 0.0",
                                                       "recheck_share = 1.0"))
        fourth = run_build(source, out, work_dir=work)
        host = fourth["freshness"]["lastmod_hosts"]["127.0.0.1"]
        assert fourth["freshness"]["pages"]["changed"] == 1
        assert host["trusted"] and not host["verdict"]
        assert "1 pages changed while their lastmod stayed" in host["reason"]
        assert loop.url("/docs/p10.md") in host["reason"]

        # The counts are in the history, the report, `kpack inspect` and `kpack build`.
        history = [json.loads(line) for line in
                   (out / "docs" / "history.jsonl").read_text().splitlines()]
        assert [h["pages"]["skipped_lastmod"] for h in history] == [0, 0, 21, 0]
        report = report_markdown(fourth)
        assert "## Freshness" in report and "| not trusted |" in report
        assert "Sitemaps: 3 files read" in report
        inspect = CliRunner().invoke(make_app(), ["inspect", str(out / "docs")])
        assert inspect.exit_code == 0, inspect.output
        assert "pages: 23 not modified (304), 1 changed" in inspect.output
        assert "lastmod 127.0.0.1: skipped by lastmod; next build: not trusted" in inspect.output


def test_a_source_whose_sitemaps_give_no_pages_fails_with_their_reasons(
        prefect_harness, tmp_path) -> None:
    from flows.build import run_build
    from flows.freshness import NoPagesError

    with LoopbackSite() as loop:
        source = tmp_path / "docs"
        source.mkdir()
        (source / "urls.txt").write_text(f"sitemap: {loop.url('/sitemap.xml')}\n")
        (source / "pack.toml").write_text(
            f'allow_private_hosts = true\nembedding_model = "{OFFLINE_MODEL}"\n')
        with pytest.raises(NoPagesError, match=r"its sitemaps gave no pages \(http://127.0.0.1"
                                                r":\d+/sitemap.xml: HTTP 404 Not Found\)"):
            run_build(source, tmp_path / "out", work_dir=tmp_path / "work")
        history = (tmp_path / "out" / "docs" / "history.jsonl").read_text()
        assert '"status": "failed"' in history and "HTTP 404" in history


def test_kpack_build_prints_the_page_outcomes(capsys) -> None:
    from flows.cli.build import _print_build

    counts = {"articles": 3, "sections": 9, "entities": 4, "facts": 2, "links": 1}
    fresh = {"pages": {"skipped_lastmod": 9702, "not_modified": 198, "changed": 100}}
    _print_build({"status": "no changes", "pack": "out/docs", "build_id": "b1",
                  "seconds": 2.5, "counts": counts, "freshness": fresh}, as_json=False)
    assert capsys.readouterr().out.splitlines() == [
        "no changes: out/docs stays at build b1 (2.5 s)",
        "pages: 9,702 skipped by lastmod, 198 not modified (304), 100 changed"]
    _print_build({"status": "published", "pack": "out/docs", "build_id": "b2",
                  "seconds": 9.0, "counts": counts, "freshness": fresh, "partial": False,
                  "extractor": {"kind": "offline"}, "failed_sources": []}, as_json=False)
    assert "pages: 9,702 skipped by lastmod" in capsys.readouterr().out
