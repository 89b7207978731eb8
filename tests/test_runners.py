"""The task runner setting (pure), and one real build on a Dask cluster."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from flows.runners import (
    DEFAULT_THREADS,
    TASK_RUNNER_ENV,
    RunnerSpec,
    TaskRunnerSettingError,
    parse_task_runner,
    task_runner,
)


@pytest.mark.parametrize(("setting", "spec"), [
    (None, RunnerSpec("threads", DEFAULT_THREADS)),
    ("", RunnerSpec("threads", DEFAULT_THREADS)),
    ("threads", RunnerSpec("threads", DEFAULT_THREADS)),
    (" Threads ", RunnerSpec("threads", DEFAULT_THREADS)),
    ("threads:16", RunnerSpec("threads", 16)),
    ("dask", RunnerSpec("dask")),
    ("dask:3", RunnerSpec("dask", 3)),
    ("dask://10.0.0.5:8786", RunnerSpec("dask", address="tcp://10.0.0.5:8786")),
    ("tcp://scheduler.internal:8786", RunnerSpec("dask", address="tcp://scheduler.internal:8786")),
    ("tls://scheduler:8786", RunnerSpec("dask", address="tls://scheduler:8786")),
])
def test_settings_parse(setting, spec, monkeypatch) -> None:
    monkeypatch.delenv(TASK_RUNNER_ENV, raising=False)
    assert parse_task_runner(setting) == spec


@pytest.mark.parametrize("setting", [
    "processes", "threads:0", "threads:many", "threads:-2", "dask:0", "tcp://nohostport",
    "dask://", "threads:9999",
])
def test_bad_settings_say_what_works(setting) -> None:
    with pytest.raises(TaskRunnerSettingError, match="task runner"):
        parse_task_runner(setting)


def test_the_environment_is_the_fallback_and_an_argument_wins(monkeypatch) -> None:
    monkeypatch.setenv(TASK_RUNNER_ENV, "threads:7")
    assert parse_task_runner(None) == RunnerSpec("threads", 7)
    assert parse_task_runner("dask") == RunnerSpec("dask")
    monkeypatch.setenv(TASK_RUNNER_ENV, "gpu")
    with pytest.raises(TaskRunnerSettingError, match=f"from \\${TASK_RUNNER_ENV}"):
        parse_task_runner(None)


def test_runner_objects(monkeypatch) -> None:
    from prefect.task_runners import ThreadPoolTaskRunner
    from prefect_dask import DaskTaskRunner

    monkeypatch.delenv(TASK_RUNNER_ENV, raising=False)
    default = task_runner()
    assert isinstance(default, ThreadPoolTaskRunner) and default._max_workers == DEFAULT_THREADS
    assert task_runner("threads:2")._max_workers == 2
    local = task_runner("dask:2")
    assert isinstance(local, DaskTaskRunner)
    assert local.cluster_kwargs["n_workers"] == 2 and local.address is None
    remote = task_runner("dask://127.0.0.1:8786")
    assert remote.address == "tcp://127.0.0.1:8786"


def test_a_build_runs_on_a_dask_cluster(prefect_harness, tmp_path) -> None:
    """The build flow with its tasks on a Dask cluster of one worker *process*: task
    arguments and results are pickled across, the tasks report to Prefect from there.

    The cluster is started here and given to the build by address, which is also how
    `KPACK_TASK_RUNNER=tcp://host:port` scales out onto an existing cluster."""
    from distributed import Client, LocalCluster
    from prefect.settings import (
        PREFECT_LOCAL_STORAGE_PATH,
        PREFECT_RESULTS_PERSIST_BY_DEFAULT,
        temporary_settings,
    )

    from flows.build import build_pack
    from packs import format as fmt
    from tasks.publish import new_build_id
    from tests.small_site import PAGES, serve_site, write_source

    work, out = tmp_path / "work", tmp_path / "out"
    with serve_site(tmp_path / "site") as base, \
            LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                         dashboard_address=None, host="127.0.0.1") as cluster, \
            Client(cluster) as client:
        source = write_source(tmp_path / "sources" / "tea", base)
        runner = task_runner(cluster.scheduler_address)
        # what run_build sets around the flow (flows/build.py: _prefect_settings)
        with temporary_settings(updates={
            PREFECT_LOCAL_STORAGE_PATH: str(work / "prefect-results"),
            PREFECT_RESULTS_PERSIST_BY_DEFAULT: True,
        }):
            summary = build_pack.with_options(task_runner=runner)(
                name="tea", build_id=new_build_id(), source_dir=str(source),
                out_dir=str(out), work_dir=str(work), extractor="offline",
            )
        ran_on_worker = client.run_on_scheduler(
            lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
        worker_pids = set(client.run(os.getpid).values())

    assert summary["counts"]["articles"] == len(PAGES)
    assert summary["counts"]["sections"] > len(PAGES)
    manifest = json.loads((Path(summary["build_dir"]) / fmt.MANIFEST_FILE).read_text())
    assert manifest["extra"]["embed_stats"]["computed"] == summary["counts"]["sections"]
    # the submitted stages went through the scheduler to a worker process
    assert {"split_stage", "links_stage", "extract_stage", "embed_stage"} <= set(ran_on_worker)
    assert os.getpid() not in worker_pids
