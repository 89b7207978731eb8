"""Which Prefect task runner a build uses, chosen by one setting.

The setting comes from `kpack build --task-runner` or `$KPACK_TASK_RUNNER`:

    threads            a bounded thread pool of 4 (the default)
    threads:N          a thread pool of N
    dask               a local Dask cluster (prefect-dask's default LocalCluster)
    dask:N             a local Dask cluster of N worker processes (one task each; the
                       cores divided among them)
    dask://host:port   an existing Dask scheduler (same as tcp://host:port)
    tcp://host:port    an existing Dask scheduler; tls:// and ucx:// are passed as given

With Dask, task arguments and results cross process boundaries, so they must pickle:
the build passes small records (StageRecord, WorkDir, SourceConfig, ...) for that reason.
Parsing is pure (`parse_task_runner`); `task_runner` builds the runner object, which
starts nothing until Prefect enters it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from prefect.task_runners import TaskRunner

TASK_RUNNER_ENV = "KPACK_TASK_RUNNER"
DEFAULT_THREADS = 4
MAX_THREADS = 256

_SCHEMES = ("tcp://", "tls://", "ucx://", "inproc://")
_HOST_PORT = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:\d{1,5}$")
_USAGE = "use threads, threads:N, dask, dask:N, dask://host:port or tcp://host:port"


class TaskRunnerSettingError(ValueError):
    """The task runner setting cannot be understood; the message says what would work."""


@dataclass(frozen=True)
class RunnerSpec:
    kind: Literal["threads", "dask"]
    workers: int | None = None  # threads: pool size; dask: local worker processes
    address: str | None = None  # dask: scheduler of an existing cluster


def _count(text: str, setting: str, limit: int) -> int:
    if not text.isdigit() or not 1 <= int(text) <= limit:
        raise TaskRunnerSettingError(
            f"task runner {setting!r}: {text!r} is not a worker count from 1 to {limit}"
        )
    return int(text)


def parse_task_runner(setting: str | None = None) -> RunnerSpec:
    """Parse a setting (None or empty: `$KPACK_TASK_RUNNER`, then "threads").

    Returns a RunnerSpec. Raises TaskRunnerSettingError naming the setting and the forms
    that are accepted.
    """
    raw = setting if setting else os.environ.get(TASK_RUNNER_ENV, "")
    text = raw.strip()
    low = text.lower()
    if low in ("", "threads"):
        return RunnerSpec("threads", DEFAULT_THREADS)
    if low.startswith("threads:"):
        return RunnerSpec("threads", _count(text.split(":", 1)[1], text, MAX_THREADS))
    if low == "dask":
        return RunnerSpec("dask")
    if low.startswith("dask://"):
        text = "tcp://" + text[len("dask://"):]
        low = text.lower()
    if low.startswith("dask:"):
        return RunnerSpec("dask", _count(text.split(":", 1)[1], text, MAX_THREADS))
    if low.startswith(_SCHEMES):
        scheme, _, rest = text.partition("://")
        if scheme.lower() != "inproc" and not _HOST_PORT.match(rest):
            raise TaskRunnerSettingError(
                f"task runner {raw!r}: expected {scheme}://host:port of a Dask scheduler"
            )
        return RunnerSpec("dask", address=text)
    where = "" if setting else f" (from ${TASK_RUNNER_ENV})"
    raise TaskRunnerSettingError(f"unknown task runner {raw!r}{where}: {_USAGE}")


def task_runner(setting: str | None = None) -> TaskRunner:
    """The Prefect task runner for `setting` (see the module docstring and
    `parse_task_runner`). Imports prefect-dask only when Dask is asked for; raises
    TaskRunnerSettingError for a bad setting, ImportError when prefect-dask is missing."""
    spec = parse_task_runner(setting)
    if spec.kind == "threads":
        return _interruptible_threads()(max_workers=spec.workers)
    from prefect_dask import DaskTaskRunner

    if spec.address:
        return DaskTaskRunner(address=spec.address)
    if spec.workers:
        return DaskTaskRunner(cluster_kwargs=local_cluster_kwargs(spec.workers))
    from flows.dask_nanny import GracefulNanny

    # Dask's default layout, with workers that get time to exit (flows/dask_nanny.py)
    return DaskTaskRunner(cluster_kwargs={"worker_class": GracefulNanny,
                                          "dashboard_address": ":0"})


def _interruptible_threads() -> type:
    """Prefect's thread pool runner, except that a flow ended by Ctrl-C (or SystemExit)
    does not wait for the tasks still running: Prefect's own shuts its pool down with
    wait=True, which held an interrupted build until its slowest task ended (a fetch: up
    to a minute), with the build's lock held. The abandoned threads end with the process
    (flows/cli/build.py gives them a few seconds)."""
    from prefect.task_runners import ThreadPoolTaskRunner

    class InterruptibleThreadPoolTaskRunner(ThreadPoolTaskRunner):
        def __exit__(self, exc_type, exc_value, traceback) -> None:
            if exc_type is not None and not issubclass(exc_type, Exception):
                for event in self._cancel_events.values():
                    event.set()
                if self._executor is not None:
                    self._executor.shutdown(wait=False, cancel_futures=True)
                    self._executor = None
            super().__exit__(exc_type, exc_value, traceback)

    return InterruptibleThreadPoolTaskRunner


def local_cluster_kwargs(workers: int, cores: int | None = None) -> dict:
    """A local Dask cluster of `workers` processes with one task slot each; the cores
    are divided among them (ONNX Runtime threads of the embedding model, BLAS). Workers
    get time to exit when the cluster closes (flows/dask_nanny.py); the dashboard takes
    any free port (":0"; None meant 8787, and a second cluster warned that it was taken).
    Imports distributed."""
    from flows.dask_nanny import GracefulNanny

    share = str(max(1, (cores or os.cpu_count() or 1) // workers))
    return {"n_workers": workers, "processes": True, "threads_per_worker": 1,
            "dashboard_address": ":0", "worker_class": GracefulNanny,
            "env": {"KPACK_EMBED_THREADS": share, "OMP_NUM_THREADS": share}}


def worker_slots(runner: TaskRunner | None) -> int:
    """How many tasks a Dask runner's cluster runs at once (its workers' threads); 0 for
    the thread pool, whose shards share one process and its model. Connects the runner's
    client, which its first task would do anyway. The build cuts more shards when there
    are slots to fill (shards.shard_count)."""
    if runner is None or type(runner).__name__ != "DaskTaskRunner":
        return 0
    try:
        return sum(runner.client.nthreads().values())
    except OSError as exc:  # distributed's connect timeout: no scheduler at that address
        raise TaskRunnerSettingError(
            f"cannot reach the Dask scheduler ({exc}): start it (`dask scheduler`) and its "
            "workers, or choose another --task-runner") from None
