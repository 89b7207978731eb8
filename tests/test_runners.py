"""The task runner setting (pure) and the task slots of a real (in-process) Dask cluster.
Builds on a real Dask cluster: tests/test_shards.py."""

from __future__ import annotations

import os

import pytest

from flows.runners import (
    DEFAULT_THREADS,
    TASK_RUNNER_ENV,
    RunnerSpec,
    TaskRunnerSettingError,
    parse_task_runner,
    task_runner,
    worker_slots,
)
from tests.loopback_site import free_port


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
    assert local.cluster_kwargs["processes"] is True
    from flows.dask_nanny import GracefulNanny

    assert task_runner("dask").cluster_kwargs["worker_class"] is GracefulNanny
    assert local.cluster_kwargs["worker_class"] is GracefulNanny
    remote = task_runner("dask://127.0.0.1:8786")
    assert remote.address == "tcp://127.0.0.1:8786"


def test_worker_slots_count_a_clusters_threads_and_say_when_there_is_no_scheduler() -> None:
    import dask
    from distributed import LocalCluster

    assert worker_slots(None) == 0
    assert worker_slots(task_runner("threads:3")) == 0  # one process: no slots to fill
    with LocalCluster(n_workers=2, threads_per_worker=2, processes=False,
                      dashboard_address=None) as cluster:
        with task_runner(cluster.scheduler_address) as runner:
            assert worker_slots(runner) == 4
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}), \
            task_runner(f"tcp://127.0.0.1:{free_port()}") as runner, \
            pytest.raises(TaskRunnerSettingError, match="cannot reach the Dask scheduler"):
        worker_slots(runner)


def _slow_exit() -> None:
    """In a worker process: make its interpreter take 5 s to exit, as a worker that has
    run the build's stages does on a loaded machine."""
    import atexit
    import time

    atexit.register(time.sleep, 5)


def test_local_cluster_workers_get_time_to_exit_without_the_nannys_kill(caplog) -> None:
    """distributed's Nanny waited 4 s, then logged "Worker process still alive after 4.0
    seconds, killing" for each worker of a Dask build."""
    import logging

    from distributed import Client, LocalCluster

    from flows.runners import local_cluster_kwargs

    caplog.set_level(logging.WARNING, logger="distributed.nanny")
    with LocalCluster(host="127.0.0.1", **local_cluster_kwargs(1)) as cluster, \
            Client(cluster) as client:
        [pid] = client.run(os.getpid).values()
        client.run(_slow_exit)
    assert not [r for r in caplog.records if "still alive" in r.getMessage()]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # exited, not left behind
