"""The build report and the artifacts the Prefect UI shows for a build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.artifacts import ProgressArtifact, artifact_key, chain, publish_report
from flows.report import (
    ERROR_CHARS,
    MAX_TABLE_ROWS,
    PAGE_CHARS,
    capped_rows,
    page_name,
    report_markdown,
    sources_rows,
    with_manifest,
)

SUMMARY = {
    "pack": "/data/out/garden", "build_dir": "/data/out/garden/builds/20260101T030000000Z",
    "build_id": "20260101T030000000Z", "status": "published", "partial": True,
    "partial_reasons": ["1 sections failed extraction"], "seconds": 42.5,
    "counts": {"articles": 3, "sections": 12, "entities": 30, "facts": 9, "links": 4},
    "changes": {
        "pages": {"added": 1, "changed": 1, "removed": 1, "unchanged": 1},
        "sections": {"added": 4, "removed": 2, "unchanged": 8},
        "entities": {"added": 5, "removed": 0},
        "pages_added": ["https://a.example/new"], "pages_changed": ["https://a.example/edited"],
        "pages_removed": ["https://a.example/gone"],
    },
    "sources": [
        {"url": "https://a.example/new", "status": "ok", "http_status": 200,
         "content_hash": "abcdef0123456789"},
        {"url": "https://a.example/edited", "status": "ok", "http_status": 200},
        {"url": "https://a.example/same", "status": "not_modified", "http_status": 304},
        {"url": "https://a.example/404", "status": "failed", "http_status": 404,
         "error": "HTTP 404 | Not Found"},
    ],
    "extractor": {"kind": "claude", "model": "claude-haiku-4-5"},
    "extract_stats": {"sections": 12, "calls": 5, "cache_hits": 6, "cache_misses": 6,
                      "failed": 1, "input_tokens": 12345, "output_tokens": 2345,
                      "cost_usd": 0.01234, "estimated": False},
    "extract_failures": [{"section_id": "s-9", "reason": "invalid JSON after 2 repairs"}],
    "embedding_model": "BAAI/bge-base-en-v1.5",
    "embed_stats": {"computed": 4, "cached": 8},
    "durations": {"fetch": 1.234, "split": 0.1, "extract": 20.0, "embed": 3.5},
}


def test_report_has_every_part_of_a_full_summary() -> None:
    md = report_markdown(SUMMARY)
    assert md.startswith("# Build report: garden\n")
    assert "`20260101T030000000Z`" in md and "published (PARTIAL)" in md and "42.5 s" in md
    assert "- partial: 1 sections failed extraction" in md
    assert "| articles | sections | entities | facts | links |" in md
    assert "| 3 | 12 | 30 | 9 | 4 |" in md
    assert "| pages | 1 | 1 | 1 | 1 |" in md and "| sections | 4 |  | 2 | 8 |" in md
    assert "- https://a.example/gone" in md
    assert "4 URLs: 2 ok, 1 not_modified, 1 failed" in md
    # a failure's reason, with the table-breaking '|' escaped
    assert "| https://a.example/404 | failed | 404 | HTTP 404 \\| Not Found |" in md
    assert "| cache hits | 6 |" in md and "| input tokens | 12,345 |" in md
    assert "cache-read input tokens" not in md  # absent keys (and zeros) are left out
    assert "| cost | $0.0123 |" in md
    assert "| s-9 | failed | invalid JSON after 2 repairs |" in md
    assert "4 sections encoded, 8 from cache" in md
    assert "| extract | 20.00 |" in md


def test_report_shows_cost_per_100_pages_drops_and_failure_kinds() -> None:
    md = report_markdown({"extract_stats": {
        "sections": 40, "calls": 6, "cache_hits": 0, "batched_calls": 5,
        "batched_sections": 39, "failed": 2, "failed_deterministic": 1,
        "failed_transient": 1, "dropped_items": 3,
        "dropped": {"entities.name: empty": 2, "facts.entity: missing": 1},
        "cost_usd": 0.05, "estimate_usd": 0.06, "pages": 10, "usd_per_100_pages": 0.5,
        "usd_per_100_pages_estimate": 0.6},
        "extract_failures": [{"section_id": "s1", "reason": "HTTP 529", "status": "transient"}]})
    assert "| calls carrying several sections | 5 |" in md
    assert "| failed: API errors (asked again next build) | 1 |" in md
    assert "| cost | $0.0500 (estimated before the calls: $0.0600) |" in md
    assert "| $ per 100 pages | $0.5000 actual, $0.6000 estimated (10 pages) |" in md
    assert "| entities.name: empty | 2 |" in md and "| facts.entity: missing | 1 |" in md
    assert "| s1 | transient | HTTP 529 |" in md


def test_report_of_a_sparse_summary_leaves_sections_out() -> None:
    md = report_markdown({"pack": "/x/tea", "build_id": "b1", "status": "no changes",
                          "counts": {"articles": 2}, "failed_sources": []})
    assert "**No changes**: the published build `b1` stays current" in md
    assert "Every URL was fetched." in md
    for absent in ("## What changed", "## Extraction", "## Embedding", "## Durations"):
        assert absent not in md
    assert report_markdown({}).startswith("# Build report: pack")


def test_long_failure_lists_are_cut() -> None:
    failures = [{"section_id": f"s{i}", "reason": "timeout"} for i in range(120)]
    md = report_markdown({"extract_failures": failures, "extract_stats": {"failed": 120}})
    assert "**120 sections failed extraction:**" in md and "... and 70 more" in md
    assert "| s49 |" in md and "| s50 |" not in md


def test_sources_rows_mark_changes_and_removed_urls() -> None:
    rows = sources_rows(SUMMARY["sources"], SUMMARY["changes"])
    change = {r["url"].rsplit("/", 1)[-1]: (r["status"], r["change"]) for r in rows}
    assert change == {"new": ("ok", "added"), "edited": ("ok", "changed"),
                      "same": ("not_modified", "unchanged"), "404": ("failed", ""),
                      "gone": ("removed", "removed")}
    assert rows[0]["hash"] == "abcdef0123"
    assert [r["change"] for r in sources_rows(SUMMARY["sources"])] == ["", "", "", ""]


def test_sources_rows_put_short_columns_first_and_cut_long_cells() -> None:
    """The Prefect UI never wraps a table cell: with the full URL first, the columns
    past http_status were off screen at 1400 px."""
    url = ("https://kubernetes.io/docs/tasks/configure-pod-container/"
           "configure-persistent-volume-storage/")
    [row] = sources_rows([{"url": url, "status": "failed", "http_status": 404,
                           "error": "HTTP 404 Not Found: " + "x" * 200}])
    assert list(row) == ["page", "status", "http", "change", "outcome", "error", "hash", "url"]
    assert len(row["page"]) <= PAGE_CHARS and row["page"].startswith("…")
    assert row["page"].endswith("persistent-volume-storage/")
    assert len(row["error"]) <= ERROR_CHARS and row["error"].startswith("HTTP 404 Not Found")
    assert row["url"] == url and row["http"] == 404
    assert page_name("https://a.example/docs/intro/") == "docs/intro/"
    assert page_name("file:///srv/docs/guide.md") == "srv/docs/guide.md"
    assert page_name("https://a.example/") == "a.example"
    assert page_name("https://a.example/docs/concepts/workloads/pods/init-containers/") == \
        "…/pods/init-containers/"


def test_artifacts_of_a_large_pack_stay_under_prefects_event_limit() -> None:
    """Prefect refuses events over 1.5 MB, and an artifact travels in one event."""
    sources = [{"url": f"https://docs.example.org/page/{i}", "status": "ok",
                "http_status": 200, "content_hash": "ab" * 32, "error": None}
               for i in range(20_000)]
    for i in range(0, 20_000, 20):
        sources[i] = {**sources[i], "status": "failed", "http_status": 404,
                      "error": "HTTP 404 " + "x" * 200}
    changes = {"pages": {"added": 20_000, "changed": 0, "removed": 0, "unchanged": 0},
               "pages_added": [s["url"] for s in sources[:50]]}
    rows = capped_rows(sources_rows(sources, changes))
    assert len(json.dumps(rows)) < 500_000 and len(rows) <= MAX_TABLE_ROWS
    assert all(r["status"] == "failed" for r in rows[:-1])  # failures first
    assert rows[-1]["url"].startswith(f"... and {20_000 - len(rows) + 1} more URLs")
    summary = {"pack": "big", "sources": sources, "changes": changes,
               "failed_sources": [s for s in sources if s["status"] == "failed"][:50],
               "failed_sources_total": 1000,
               "extract_failures": [{"section_id": f"s{i}", "reason": "r" * 300}
                                    for i in range(50)], "extract_failures_total": 4000}
    md = report_markdown(summary)
    assert len(md.encode()) < 200_000
    assert "**1000 URLs not included:**" in md and "... and 950 more" in md
    assert "**4000 sections failed extraction:**" in md and "... and 3950 more" in md
    # a capped list of added pages does not mark the other pages "unchanged"
    assert {r["change"] for r in sources_rows(sources, changes)} == {"added", ""}


def test_artifact_keys_follow_prefects_rule() -> None:
    assert artifact_key("build-report", "My_Pack.v2") == "build-report-my-pack-v2"
    assert artifact_key("progress", "docs", "fetch") == "progress-docs-fetch"
    assert artifact_key("", "--") == "kpack"


class _FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_outside_a_run_is_a_silent_no_op() -> None:
    bar = ProgressArtifact("progress-x-fetch")
    for i in range(10):
        bar(i, 10, object())
    assert not bar.enabled and bar.updates == 0 and bar.artifact_id is None


class _RecordingClient:
    def __init__(self, fail_after: int | None = None) -> None:
        self.calls: list[tuple[str, float]] = []
        self.fail_after = fail_after

    def _record(self, what: str, value: float) -> None:
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            import httpx

            raise httpx.ConnectError("API down")
        self.calls.append((what, value))

    def create_artifact(self, artifact):
        from uuid import uuid4

        self._record("create", artifact.data)
        return type("Created", (), {"id": uuid4()})()

    def update_artifact(self, artifact_id, artifact) -> None:
        self._record("update", artifact.data)


def test_progress_is_throttled_by_step_and_time(prefect_harness) -> None:
    from prefect import flow

    clock, client = _FakeClock(), _RecordingClient()

    @flow
    def loop() -> ProgressArtifact:
        bar = ProgressArtifact("progress-t-embed", clock=clock, client=client)
        for done in range(1, 1001):
            clock.now += 0.01  # 1000 items in 10 s
            bar(done, 1000)
        return bar

    bar = loop()
    values = [v for _, v in client.calls]
    assert client.calls[0] == ("create", 0.1) and values[-1] == 100.0
    assert [w for w, _ in client.calls[1:]] == ["update"] * (len(values) - 1)
    # at most one update a second (plus the first and the last), each ≥ 2 points apart
    assert len(values) <= 10 + 2
    assert all(b - a >= 2.0 for a, b in zip(values[:-1], values[1:]))
    assert bar.updates == len(values)


def test_progress_switches_itself_off_when_the_api_fails(prefect_harness) -> None:
    from prefect import flow

    client = _RecordingClient(fail_after=1)

    @flow
    def loop() -> ProgressArtifact:
        bar = ProgressArtifact("progress-t-fetch", min_interval_s=0, client=client)
        for done in range(1, 11):
            bar(done, 10)
        return bar

    bar = loop()  # no exception reaches the flow
    assert not bar.enabled and client.calls == [("create", 10.0)]


def test_chain_calls_every_callback() -> None:
    seen: list[tuple] = []
    progress = chain(lambda *a: seen.append(("a", *a)), None, lambda *a: seen.append(("b", *a)))
    progress(1, 2, "page")
    assert seen == [("a", 1, 2, "page"), ("b", 1, 2, "page")]


def _write_manifest(tmp_path: Path) -> Path:
    from packs.manifest import EmbeddingInfo, ExtractorInfo, Manifest, SourceRecord

    build_dir = tmp_path / "out" / "tea" / "builds" / "b1"
    build_dir.mkdir(parents=True)
    Manifest(
        name="tea", build_id="b1", built_at="2026-01-01T03:00:00+00:00",
        sources=[SourceRecord(**{k: v for k, v in s.items() if k != "content_hash"})
                 for s in SUMMARY["sources"]],
        embedding=EmbeddingInfo(model="m", dim=3), extractor=ExtractorInfo(kind="offline"),
        kuzu_version="0", query_module_version="0", durations={"fetch": 1.0},
        extra={"extract_stats": {"sections": 3, "cache_hits": 3, "cost_usd": 0.0}},
    ).write(build_dir)
    return build_dir


def test_the_manifest_fills_in_what_the_summary_lacks(tmp_path) -> None:
    build_dir = _write_manifest(tmp_path)
    full = with_manifest({"build_dir": str(build_dir), "durations": {"fetch": 2.0}})
    assert len(full["sources"]) == 4 and full["extract_stats"]["cache_hits"] == 3
    assert full["durations"] == {"fetch": 2.0}  # the summary wins
    # a no-change run made nothing: the manifest (the previous build's) gives only sources
    same = with_manifest({"build_dir": str(build_dir), "status": "no changes"})
    assert len(same["sources"]) == 4 and "extract_stats" not in same
    assert with_manifest({"build_dir": str(tmp_path / "none")}) == {
        "build_dir": str(tmp_path / "none")}


def test_publish_report_outside_a_run_does_nothing() -> None:
    assert publish_report(SUMMARY) is None


def test_artifacts_of_a_run_read_back_through_the_api(prefect_harness, tmp_path) -> None:
    """Progress from a task (and from a thread the task started), then the report, the
    per-URL table and the link from the flow, all read back with the Prefect client."""
    import threading

    from prefect import flow, task
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
    from prefect.context import get_run_context

    build_dir = _write_manifest(tmp_path)
    summary = {"pack": str(tmp_path / "out" / "tea"), "build_dir": str(build_dir),
               "build_id": "b1", "counts": {"articles": 3}, "status": "published"}

    @task
    def embed() -> None:
        bar = ProgressArtifact("progress-tea-embed", "embed: tea", min_interval_s=0)
        worker = threading.Thread(target=lambda: [bar(i, 4) for i in range(1, 5)])
        worker.start()
        worker.join()

    @flow(name="artifact-test")
    def build() -> str:
        embed()
        publish_report(summary)
        return str(get_run_context().flow_run.id)

    flow_run_id = build()
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))
    by_key = {a.key: a for a in artifacts if a.key}  # keyless ones are task results
    assert set(by_key) == {"progress-tea-embed", "build-report-tea", "sources-tea", "pack-tea"}
    progress = by_key["progress-tea-embed"]
    assert progress.type == "progress" and progress.data == 100.0
    assert progress.task_run_id is not None
    report = by_key["build-report-tea"]
    assert report.type == "markdown" and "# Build report: tea" in report.data
    assert "| cache hits | 3 |" in report.data  # stats came from the manifest
    table = by_key["sources-tea"]
    rows = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert table.type == "table" and [r["status"] for r in rows] == [
        "failed", "ok", "ok", "not_modified"]  # failures first, then urls.txt order
    link = by_key["pack-tea"]
    # Prefect stores a link artifact as markdown: [text](url)
    assert link.data == f"[tea (build b1)]({(tmp_path / 'out' / 'tea').resolve().as_uri()})"


@pytest.mark.parametrize("summary", [{}, {"pack": "/x/y"}, {"build_dir": "/nowhere"}])
def test_publish_report_copes_with_sparse_summaries(prefect_harness, summary) -> None:
    from prefect import flow

    @flow
    def build() -> dict | None:
        return publish_report(summary)

    ids = build()
    assert "report" in ids and ("link" in ids) == ("pack" in summary)


def _extract_record(shard: int, **work):
    from tasks.stages.common import Record

    return Record("extract", f"k{shard}", shard, {}, {"sections": 7}, 0.1, work=work)


def test_the_report_lists_calls_and_cost_per_shard_costliest_first() -> None:
    from tasks.stages.extract import extract_by_shard

    records = [_extract_record(0, calls=1, cache_hits=6, input_tokens=300, output_tokens=40,
                               cost_usd=0.001),
               _extract_record(1, calls=3, cache_hits=4, input_tokens=900, output_tokens=120,
                               cost_usd=0.0031),
               _extract_record(2)]  # an unchanged shard: no call, nothing paid
    by_shard = extract_by_shard(records, 3)
    assert [r["shard"] for r in by_shard] == ["1/3", "2/3", "3/3"]
    md = report_markdown({"extract_stats": {"sections": 21, "calls": 4, "cache_hits": 10,
                                            "cost_usd": 0.0041, "by_shard": by_shard}})
    table = md[md.index("Calls and cost per shard"):]
    assert table.index("| 2/3 | 7 | 3 | 4 | 900 | 120 | $0.0031 |") < \
        table.index("| 1/3 | 7 | 1 | 6 | 300 | 40 | $0.0010 |") < table.index("| 3/3 |")
    assert extract_by_shard([_extract_record(0)], 1) == []  # offline: no table at all


def test_an_extract_shard_leaves_its_calls_and_cost_on_its_task_run(prefect_harness) -> None:
    from prefect import flow, task
    from prefect.client.orchestration import get_client
    from prefect.context import TaskRunContext

    from flows.artifacts import shard_cost_artifact
    from tasks.shards import Shard

    shard = Shard(index=1, count=4, plan="unused")
    paid = _extract_record(1, calls=2, cache_hits=5, input_tokens=900, output_tokens=120,
                           cost_usd=0.0031)

    @task
    def extract_shard(record):
        return shard_cost_artifact("tea", shard, record), TaskRunContext.get().task_run.id

    @flow
    def build():
        return extract_shard(paid), extract_shard(_extract_record(1))

    (artifact_id, task_run_id), (nothing, _) = build()
    assert nothing is None and shard_cost_artifact("tea", shard, paid) is None  # no run
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterId

    with get_client(sync_client=True) as client:
        [artifact] = client.read_artifacts(artifact_filter=ArtifactFilter(
            id=ArtifactFilterId(any_=[artifact_id])))
    assert artifact.task_run_id == task_run_id and artifact.type == "markdown"
    assert "| 2/4 | 7 | 2 | 5 | 900 | 120 | $0.0031 |" in artifact.data
