"""Sharded builds: the shard layout (pure), a 12-page loopback site built in 4 shards on
threads and on a 2-process Dask cluster, a shard retried alone, a changed page that
reruns only its shard, and a build killed with SIGKILL during embedding.

The site's page names are picked once its port is known, so that each of the 4 shards
holds 3 pages (a shard is chosen by a hash of the page's URL, port included).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from flows.build import run_build
from packs import format as fmt
from packs.layout import read_history
from tasks import shards
from tests.anthropic_fake import FakeAnthropic
from tests.conftest import OFFLINE_MODEL

REPO = Path(__file__).resolve().parents[1]
SHARDS, PER_SHARD = 4, 3


# --- the layout (pure) -----------------------------------------------------------------


def test_shard_count_is_a_capped_power_of_two() -> None:
    assert [shards.shard_count(n, 200) for n in (0, 1, 200, 201, 405, 800, 801)] == \
        [1, 1, 1, 2, 4, 4, 8]
    assert shards.shard_count(100_000, 200) == 512
    assert shards.shard_count(5_000_000, 200) == shards.MAX_SHARDS  # bigger shards, not more
    with pytest.raises(ValueError, match="shard_pages"):
        shards.shard_count(10, 0)


def test_task_slots_raise_the_shard_count_while_shards_keep_enough_pages() -> None:
    """Kubernetes' 405 pages on a 2-worker Dask cluster: 16 shards, not 4, so that two
    slots stay busy to the end; a small pack is not cut below MIN_SHARD_PAGES a shard,
    and a large one keeps its shard_pages layout."""
    assert shards.shard_count(405, 200, slots=2) == 16
    assert shards.shard_count(405, 200, slots=0) == 4
    assert shards.shard_count(12, 3, slots=2) == 4  # 12 pages: shard_pages decides
    assert shards.shard_count(40, 200, slots=8) == 2  # 40 // 16 pages
    assert shards.shard_count(100_000, 200, slots=4) == 512
    assert shards.shard_count(10_000, 200, slots=64) == 512  # capped at 8 x 64 → 512


def test_a_stage_ends_when_its_last_task_finished_not_when_the_flow_looked() -> None:
    """links finishes in a second but is waited for after embed: its duration in the
    manifest must be its own (it read as long as the embedding before)."""
    from flows.scheduler import Scheduler

    now = [0.0]
    pipe = Scheduler(None, [], clock=lambda: now[0])

    class Future:  # the part of a Prefect future the pipeline uses here: identity
        pass

    links, resolve = Future(), Future()
    pipe.started.update(links=0.0, resolve=500.0)
    now[0] = 1.5
    pipe._stamp(links)  # its done-callback
    now[0] = 500.0
    pipe._done("links", None, None, links)  # the flow gets round to it
    now[0] = 503.0
    pipe._done("resolve", None, None, resolve)  # seen done before its callback ran
    assert pipe.durations() == {"links": 1.5, "resolve": 3.0}


def test_a_page_keeps_its_shard_and_a_doubling_splits_each_shard_in_two() -> None:
    urls = [f"https://docs.example.org/p/{i}" for i in range(300)]
    for url in urls:
        s4, s8 = shards.shard_of(url, 4), shards.shard_of(url, 8)
        assert s8 // 2 == s4 and shards.shard_of(url, 1) == 0
        assert shards.lineage(s8, 8, 4) == [s4]  # the parent of a split shard
        assert s8 in shards.lineage(s4, 4, 8)  # the children of a merged one
    # the canonical URL decides: a trailing slash or a fragment does not move a page
    assert shards.shard_of("https://docs.example.org/a/", 64) == \
        shards.shard_of("https://docs.example.org/a#x", 64)
    groups = shards.assign(urls, 8)
    assert sorted(u for g in groups for u in g) == sorted(urls)
    assert all(g == sorted(g, key=urls.index) for g in groups)  # urls.txt order kept
    many = shards.assign([f"https://x.org/doc/{i}.html" for i in range(4000)], 8)
    assert all(400 < len(g) < 600 for g in many)  # the hash spreads pages evenly
    assert shards.lineage(3, 4, 0) == []


# --- a 12-page site in 4 shards ----------------------------------------------------------


class _Site(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".md": "text/markdown"}

    def log_message(self, *args: object) -> None:
        pass


def page_text(k: int, names: list[str], edit: str = "") -> str:
    nxt = names[(names.index(f"topic-{k}.md") + 1) % len(names)]
    return (f"# Topic {k}\n\nTopic {k} is about the `Widget{k}` component.\n\n"
            f"## Setup of widget {k}\n\nInstall `widget{k}` with the `--fast` flag. {edit}\n\n"
            f"## Troubleshooting widget {k}\n\nRestart the `Widget{k}Service` when it "
            f"hangs. See [the next topic]({nxt}).\n")


@contextmanager
def shard_site(root: Path):
    """Serve 12 generated pages, 3 in each of 4 shards; yields (base, names, write)."""
    root.mkdir(parents=True, exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Site, directory=str(root)))
    base = f"http://127.0.0.1:{server.server_address[1]}"
    per: dict[int, list[str]] = {i: [] for i in range(SHARDS)}
    k = 0
    while any(len(v) < PER_SHARD for v in per.values()):
        name = f"topic-{k}.md"
        bucket = per[shards.shard_of(f"{base}/{name}", SHARDS)]
        if len(bucket) < PER_SHARD:
            bucket.append(name)
        k += 1
    names = sorted((n for v in per.values() for n in v), key=lambda n: int(n[6:-3]))

    def write(name: str, edit: str = "") -> None:
        (root / name).write_text(page_text(int(name[6:-3]), names, edit), encoding="utf-8")

    for name in names:
        write(name)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield base, names, write
    finally:
        server.shutdown()
        server.server_close()


def write_source(folder: Path, base: str, names: list[str], extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "urls.txt").write_text("".join(f"{base}/{n}\n" for n in names))
    (folder / "pack.toml").write_text(
        f'allow_private_hosts = true\nembedding_model = "{OFFLINE_MODEL}"\n'
        f"shard_pages = {PER_SHARD}\n{extra}")
    return folder


def read_tables(build_dir: Path) -> dict[str, pl.DataFrame]:
    return {name: pl.read_parquet(build_dir / fmt.TABLES_DIR / f"{name}.parquet")
            for name in fmt.TABLE_COLUMNS}


def assert_same_tables(a: dict[str, pl.DataFrame], b: dict[str, pl.DataFrame]) -> None:
    for name in fmt.TABLE_COLUMNS:
        x, y = a[name], b[name]
        assert x.columns == y.columns and x.height == y.height, name
        vectors = [c for c in x.columns if "embedding" in c]
        keys = [c for c in x.columns if c not in vectors and x[c].dtype != pl.List(pl.Utf8)]
        x, y = x.sort(keys), y.sort(keys)
        assert x.drop(vectors).equals(y.drop(vectors)), name
        for col in vectors:
            diff = np.abs(x[col].to_numpy() - y[col].to_numpy()).max()
            assert diff <= 1e-6, (name, col, diff)


def flow_task_runs(pack: str, build_id: str) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, FlowRunFilterName

    with get_client(sync_client=True) as client:
        [run] = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            name=FlowRunFilterName(any_=[f"{pack}-{build_id}"])))
        return client.read_task_runs(flow_run_filter=FlowRunFilter(
            id=FlowRunFilterId(any_=[run.id])))


def _tell_where_it_waits(client) -> None:
    """Print (captured, shown with the failure) what each Dask worker is running and
    where, and every thread of this process."""
    import traceback

    threads = {t.ident: t.name for t in threading.enumerate()}
    here = ["".join([f"--- thread {threads.get(ident, ident)}\n",
                     *traceback.format_stack(frame)])
            for ident, frame in sys._current_frames().items()]
    print("dask build still running after 360 s; processing:", client.processing(),
          "call stacks:", json.dumps(client.call_stack(), indent=1, default=str),
          *here, sep="\n", file=sys.stderr, flush=True)


def test_threads_and_a_two_process_dask_cluster_build_the_same_pack(prefect_harness,
                                                                    tmp_path) -> None:
    from distributed import Client, LocalCluster

    from flows.runners import local_cluster_kwargs

    with shard_site(tmp_path / "site") as (base, names, _):
        source = write_source(tmp_path / "topics", base, names, 'extractor = "offline"\n')
        threads = run_build(source, tmp_path / "out-threads", work_dir=tmp_path / "work-threads")
        with LocalCluster(host="127.0.0.1", **local_cluster_kwargs(2)) as cluster, \
                Client(cluster) as client:
            # once in ~20 CI runs this build waited > 10 min on one fetch shard (the other
            # worker did the other three); if it stalls again, say where before the timeout
            watchdog = threading.Timer(360, _tell_where_it_waits, args=(client,))
            watchdog.daemon = True
            watchdog.start()
            try:
                dask = run_build(source, tmp_path / "out-dask", work_dir=tmp_path / "work-dask",
                                 task_runner_setting=cluster.scheduler_address)
            finally:
                watchdog.cancel()
            executed = client.run(lambda dask_worker: dask_worker.state.executed_count)
            worker_pids = set(client.run(os.getpid).values())

    assert threads["counts"]["articles"] == dask["counts"]["articles"] == len(names)
    assert_same_tables(read_tables(Path(threads["build_dir"])), read_tables(Path(dask["build_dir"])))
    manifest = json.loads((Path(dask["build_dir"]) / fmt.MANIFEST_FILE).read_text())
    assert manifest["extra"]["shards"]["count"] == SHARDS
    assert manifest["extra"]["shards"]["non_empty"] == SHARDS
    assert manifest["extra"]["shards"]["slots"] == 2  # 12 pages: too few to cut finer
    threads_manifest = json.loads((Path(threads["build_dir"]) / fmt.MANIFEST_FILE).read_text())
    assert threads_manifest["extra"]["shards"]["slots"] == 0
    # 4 shards x 5 stages (fetch, split, extract, embed, unit_vectors) + links, resolve,
    # topics and publish, all through the scheduler
    assert dask["task_runs"] == threads["task_runs"] == 5 * SHARDS + 4
    # every task ran in one of the two worker processes, and both took a share
    assert sum(executed.values()) == dask["task_runs"] and min(executed.values()) > 0
    assert len(worker_pids) == 2 and os.getpid() not in worker_pids


def test_resolve_and_publish_in_a_child_process_build_the_same_pack(
        prefect_harness, tmp_path, monkeypatch) -> None:
    import flows.build

    with shard_site(tmp_path / "site") as (base, names, _):
        source = write_source(tmp_path / "topics", base, names, 'extractor = "offline"\n')
        inline = run_build(source, tmp_path / "out-a", work_dir=tmp_path / "work-a")
        monkeypatch.setattr(flows.build, "ISOLATE_MIN_PAGES", 1)  # this small pack too
        child = run_build(source, tmp_path / "out-b", work_dir=tmp_path / "work-b")
    assert (inline["reduce_in_child_process"], child["reduce_in_child_process"]) == (False, True)
    assert child["counts"] == inline["counts"]
    assert_same_tables(read_tables(Path(inline["build_dir"])), read_tables(Path(child["build_dir"])))


def test_a_failing_shard_is_retried_alone(prefect_harness, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KPACK_FAULTS", "embed@2:fail")
    with shard_site(tmp_path / "site") as (base, names, _):
        source = write_source(tmp_path / "topics", base, names, 'extractor = "offline"\n')
        summary = run_build(source, tmp_path / "out", work_dir=tmp_path / "work")
    runs = {r.name: r for r in flow_task_runs("topics", summary["build_id"])}
    stages = ("fetch", "split", "extract", "embed", "unit_vectors")
    expected = {f"{s}-topics-{i}/{SHARDS}" for s in stages for i in range(1, SHARDS + 1)}
    assert set(runs) == expected | {"links-topics", "resolve-topics", "topics-topics",
                                    "publish-topics"}
    assert runs[f"embed-topics-2/{SHARDS}"].run_count == 2  # failed once, retried
    assert all(r.run_count == 1 for name, r in runs.items() if name != f"embed-topics-2/{SHARDS}")
    assert all(r.state_type.value == "COMPLETED" for r in runs.values())
    # stage and pack are in the names; task runs carry no tags (see flows.build.tag_flow_run)
    assert all(r.tags == [] for r in runs.values())
    manifest = json.loads((Path(summary["build_dir"]) / fmt.MANIFEST_FILE).read_text())
    assert manifest["extra"]["embed_stats"]["computed"] == summary["counts"]["sections"]


def test_a_changed_page_reruns_only_its_shard(prefect_harness, tmp_path, monkeypatch) -> None:
    with shard_site(tmp_path / "site") as (base, names, write), FakeAnthropic(api_key="k") as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        source = write_source(tmp_path / "topics", base, names)
        first = run_build(source, tmp_path / "out", work_dir=tmp_path / "work")
        sections = first["counts"]["sections"]
        assert sections == 3 * len(names)
        assert 0 < fake.stats.requests < sections  # small sections share a request

        changed = names[5]
        write(changed, edit="Use version 2 or later.")
        calls = fake.stats.requests
        second = run_build(source, tmp_path / "out", work_dir=tmp_path / "work")
        manifest = json.loads((Path(second["build_dir"]) / fmt.MANIFEST_FILE).read_text())
        assert fake.stats.requests - calls == 1  # the one edited section
        assert manifest["extra"]["embed_stats"]["computed"] == 1
        assert manifest["extra"]["changes"]["pages"]["changed"] == 1
        runs = flow_task_runs("topics", second["build_id"])
        state = {r.name: r.state_name for r in runs}
        own = shards.shard_of(f"{base}/{changed}", SHARDS) + 1
        for stage in ("split", "extract", "embed"):
            for i in range(1, SHARDS + 1):
                expect = "Completed" if i == own else "Cached"
                assert state[f"{stage}-topics-{i}/{SHARDS}"] == expect, (stage, i)

        # A new layout (2 shards of 6 pages, as a build on a cluster with task slots to fill
        # may cut more): each shard finds its pages' earlier outputs through its lineage,
        # so again only the edited section is extracted and embedded.
        toml = source / "pack.toml"
        toml.write_text(toml.read_text().replace(f"shard_pages = {PER_SHARD}",
                                                 f"shard_pages = {2 * PER_SHARD}"))
        write(names[0], edit="Since version 3 it starts by itself.")
        calls = fake.stats.requests
        third = run_build(source, tmp_path / "out", work_dir=tmp_path / "work")
        manifest = json.loads((Path(third["build_dir"]) / fmt.MANIFEST_FILE).read_text())
    assert manifest["extra"]["shards"]["count"] == SHARDS // 2
    assert fake.stats.requests - calls == 1
    assert manifest["extra"]["embed_stats"]["computed"] == 1
    assert third["counts"]["sections"] == sections


def test_a_build_killed_during_embedding_recomputes_only_unfinished_shards(
        prefect_harness, tmp_path) -> None:
    from prefect.settings import PREFECT_API_URL

    with shard_site(tmp_path / "site") as (base, names, _):
        source = write_source(tmp_path / "topics", base, names, 'extractor = "offline"\n')
        out, work = tmp_path / "out", tmp_path / "work"
        env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(),
               "KPACK_FAULTS": "embed@3:sleep=60"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "packs.cli", "build", str(source), "--out", str(out),
             "--work-dir", str(work), "--task-runner", "threads:1"],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        try:
            embed_dir = work / "topics" / "embed"
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and proc.poll() is None:
                if embed_dir.is_dir() and len(list(embed_dir.glob("vectors-*.parquet"))) >= 2:
                    break
                time.sleep(0.2)
            finished = sorted(embed_dir.glob("vectors-*.parquet"))
            assert proc.poll() is None and len(finished) == 2, "the build should be embedding"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        assert not (out / "topics" / fmt.CURRENT_FILE).exists()
        done = sum(pl.scan_parquet(p).select(pl.len()).collect().item() for p in finished)

        summary = run_build(source, out, work_dir=work)
    manifest = json.loads((Path(summary["build_dir"]) / fmt.MANIFEST_FILE).read_text())
    computed = manifest["extra"]["embed_stats"]["computed"]
    assert 0 < computed <= summary["counts"]["sections"] - done
    # The killed build's run no longer shows as Running: the next build marked it Crashed.
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        states = {r.name: r.state.type.value for r in client.read_flow_runs()
                  if (r.parameters or {}).get("out_dir") == str(out.resolve())}
    assert sorted(states.values()) == ["COMPLETED", "CRASHED"], states
    # ... and the pack's history says so (kpack explore's /builds shows it).
    history = read_history(out / "topics")
    assert [h["status"] for h in history] == ["crashed", "published"], history
    assert history[0]["build_id"] != summary["build_id"] == history[1]["build_id"]
    assert {p.name for p in finished} <= {p.name for p in (work / "topics" / "embed").iterdir()}


WORDS_STAGE = """
import polars as pl

from tasks.stages.base import Stage
from tasks.stages.common import write_parquet

CALLS = []


class Words(Stage):
    NAME = "words"
    VERSION = "words-v1"
    INPUTS = ("split",)
    OUTPUTS = {"words": "words"}

    def compute(self, ctx, shard, inputs, files, progress):
        CALLS.append(shard.index)
        sections = inputs["split"].table("sections")
        write_parquet(sections.select(pl.col("content").str.split(" ").list.len()
                                      .alias("words")), files["words"])


STAGE = Words()
"""


def test_a_new_stage_is_one_module_and_one_list_entry(prefect_harness, tmp_path,
                                                      monkeypatch) -> None:
    """The scheduler walks tasks.stages.PIPELINE as each stage declares: a stage added to
    the list (one module, one entry before publish) runs per shard on its inputs' records,
    is cached by its content key, reruns where its input changed, and publish still
    publishes, with the new stage's time in the manifest."""
    import importlib

    from tasks import stages

    (tmp_path / "words_stage.py").write_text(WORDS_STAGE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    words = importlib.import_module("words_stage")
    calls = words.CALLS
    monkeypatch.setattr(stages, "PIPELINE", (*stages.PIPELINE[:-1], words.STAGE,
                                             stages.PIPELINE[-1]))
    with shard_site(tmp_path / "site") as (base, names, write):
        source = write_source(tmp_path / "topics", base, names, 'extractor = "offline"\n')
        run_build(source, tmp_path / "out", work_dir=tmp_path / "work")
        assert sorted(calls) == list(range(SHARDS))
        changed = names[7]
        write(changed, edit="A new sentence changes this page.")
        second = run_build(source, tmp_path / "out", work_dir=tmp_path / "work")
    own = shards.shard_of(f"{base}/{changed}", SHARDS)
    assert sorted(calls) == sorted([*range(SHARDS), own])
    state = {r.name: r.state_name for r in flow_task_runs("topics", second["build_id"])}
    assert {i: state[f"words-topics-{i + 1}/{SHARDS}"] for i in range(SHARDS)} == {
        i: "Completed" if i == own else "Cached" for i in range(SHARDS)}
    assert second["status"] == "published" and "words" in second["durations"]
    manifest = json.loads((Path(second["build_dir"]) / fmt.MANIFEST_FILE).read_text())
    assert "words" in manifest["durations"]
