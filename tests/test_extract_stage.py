"""The extract stage (per shard) remembers failures in its Parquet output and reports the
counts the flow and the publish guard read; terminal errors stop a build at once, with
one line, and are not retried by Prefect."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import polars as pl
import pytest

from tasks import stages
from tasks.llm import failures as llm_failures
from tasks.shards import Shard
from tasks.stages.common import Record
from tasks.stages.extract import STAGE as stage
from tests.anthropic_fake import FakeAnthropic, default_responder
from tests.conftest import OFFLINE_MODEL
from tests.test_extract import corpus

BROKEN = "BROKEN-SECTION"


def _respond(request):
    import json
    return {"entities": "unusable"} if BROKEN in json.dumps(request["messages"]) \
        else default_responder(request)


def _context(tmp_path: Path, toml: str = "", retry_failed: bool = False,
             kind: str = "claude"):
    from flows.plan import build_context
    from tasks.sources import load_source

    source = tmp_path / "src"
    source.mkdir(exist_ok=True)
    (source / "urls.txt").write_text("https://example.org/a\n")
    (source / "pack.toml").write_text(f'embedding_model = "{OFFLINE_MODEL}"\n{toml}')
    return build_context(load_source(source), "b1", tmp_path / "out", tmp_path / "work",
                         None, kind, False, None, retry_failed=retry_failed)


@pytest.fixture
def split(tmp_path) -> Record:
    df = corpus(6, seed=2).with_columns(
        pl.when(pl.col("id") == "sec0003").then(pl.lit(f"{BROKEN} here"))
        .otherwise(pl.col("content")).alias("content"))
    path = tmp_path / "sections.parquet"
    df.write_parquet(path)
    return Record("split", "k-split", 0, {"sections": str(path)}, {"sections": 6}, 0.0)


def test_the_stage_remembers_a_failure_and_stops_asking(tmp_path, split, monkeypatch):
    with FakeAnthropic(api_key="k", responder=_respond) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        ctx = _context(tmp_path, "batch_token_budget = 0\n")
        shard = Shard(0, 1, "")
        first = stage.run(ctx, shard, {"split": split})
        assert first.rows == {"sections": 6, "ok": 5}
        assert first.info == {"failed": 1, "failed_deterministic": 1, "failed_transient": 0,
                              "failed_remembered": 0, "not_extracted": 0, "retryable": 1,
                              "dropped_items": 0, "dropped": {}}
        assert first.work["calls"] == 7 and first.work["estimate_usd"] > 0
        assert not stage.complete(ctx, first.key)
        assert not stages.reusable("extract", ctx, shard, {"split": split})  # runs again
        row = pl.read_parquet(first.paths["extractions"]).filter(
            pl.col("section_id") == "sec0003").to_dicts()[0]
        assert row["status"] == "failed" and row["attempts"] == 1 and row["data"] is None
        assert "invalid output after one repair" in row["reason"]

        second = stage.run(ctx, shard, {"split": split})  # the one retry it gets
        assert second.work["calls"] == 2 and second.work["cache_hits"] == 5
        assert second.info["failed_remembered"] == 1 and second.info["retryable"] == 0
        assert stage.complete(ctx, second.key)
        assert stages.reusable("extract", ctx, shard, {"split": split})
        assert second.ref == first.ref  # same content: downstream stays cached

        third = stage.run(ctx, shard, {"split": split})
        assert third.work == {} and fake.stats.requests == 9

        forced = _context(tmp_path, "batch_token_budget = 0\n", retry_failed=True)
        assert not stage.complete(forced, second.key)
        assert not stages.reusable("extract", forced, shard, {"split": split})
        stage.run(forced, shard, {"split": split})
        assert fake.stats.requests == 11


def test_retry_condition_refuses_terminal_errors():
    from prefect.states import Failed

    from flows.build import retry_condition

    assert not retry_condition(None, None, Failed(data=llm_failures.FatalError("401")))
    assert not retry_condition(None, None, Failed(data=llm_failures.CircuitOpen("dead")))
    assert retry_condition(None, None, Failed(data=OSError("disk")))


def _flow_runs(pack: str) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, FlowRunFilterName

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            name=FlowRunFilterName(like_=f"{pack}-")))
        return client.read_task_runs(flow_run_filter=FlowRunFilter(
            id=FlowRunFilterId(any_=[r.id for r in runs])))


def _pages(folder: Path, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"p{i}.md").write_text(
            f"# Page {i}\n\n" + "".join(f"## Part {j}\n\nThe Widget Controller {i}.{j} "
                                        f"manages `spec.widgets` for clusters.\n\n"
                                        for j in range(10)))
    (folder / "urls.txt").write_text("".join(f"p{i}.md\n" for i in range(n)))
    (folder / "pack.toml").write_text(f'embedding_model = "{OFFLINE_MODEL}"\n'
                                      'extractor = "claude"\n')


@pytest.mark.parametrize("fault", ["dead", "401"])
def test_a_dead_api_or_a_bad_key_fails_the_build_fast_with_one_line(
        fault, prefect_harness, tmp_path, monkeypatch):
    from flows.build import BuildError, run_build

    pack = f"dead{fault}"
    source = tmp_path / pack
    _pages(source, 7)  # 70 sections
    with socket.socket() as s, FakeAnthropic(api_key="right") as fake:
        s.bind(("127.0.0.1", 0))  # a port nobody listens on
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
        monkeypatch.setenv("ANTHROPIC_API_KEY", "wrong")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", dead if fault == "dead" else fake.base_url)
        started = time.perf_counter()
        with pytest.raises(BuildError) as info:
            run_build(source, tmp_path / "out", work_dir=tmp_path / "work")
        took = time.perf_counter() - started
    message = str(info.value)
    assert "\n" not in message and "extract shard 1/1 failed" in message
    assert ("stopped calling Claude" if fault == "dead" else "rejected (401)") in message
    assert fake.stats.requests <= 8
    runs = {r.name: r for r in _flow_runs(pack)}
    extract = runs[f"extract-{pack}-1/1"]
    assert extract.run_count == 1 and extract.state_name == "Failed"  # no Prefect retry
    assert took < 60, took  # was 414 s for 69 sections

