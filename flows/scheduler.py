"""The scheduler: walks the stage list (`tasks.stages.PIPELINE`) as each stage declares.

A stage runs once per shard (`SCOPE = "shard"`) or once for the pack (`"pack"`), and reads
the records of the stages named in its `INPUTS`:

    shard stage ← shard stage     the same shard's record (it starts when that one is done)
    shard stage ← pack stage      the pack stage's one record
    pack stage  ← shard stage     every shard's record, in shard order (waits for all)
    pack stage  ← pack stage      the one record

What else the scheduler reads of a stage (tasks/stages/__init__.py lists every
declaration): `enabled(ctx)` (off: it is not run and its dependents read nothing from it),
`window(ctx, shard_count)` (at most that many of its shards in flight, with the context
each runs with), `shard_inputs(ctx, records_of)` (extra inputs per shard, from records it
asks for), `FLOW_INPUTS` (inputs the flow itself provides), `ISOLATE` (a child process for
large packs), `SHARD_ARTIFACT` (a table on each task run), and its retries. So adding a
stage is one module and one entry in PIPELINE.

Whether a run is reused is decided once, when it is submitted (its inputs are records by
then): `tasks.stages.reusable`, its content key with a complete output on disk. The task's
Prefect cache key is that content key (`StageOutputs`): a reusable run whose record Prefect
holds shows as Cached in the UI; any other run is submitted with `refresh_cache`, so it runs
and its record replaces whatever Prefect held for that key. Nothing is reconciled after the
fact.
"""

from __future__ import annotations

import queue
import resource
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import CachePolicy
from prefect.futures import PrefectFuture, as_completed

from flows.artifacts import shard_cost_artifact, stage_progress
from flows.settings import stage_logging
from tasks import faults, shards, stages
from tasks.publish.guard import GuardError
from tasks.stages import isolated
from tasks.stages.base import SHARD
from tasks.stages.common import BuildContext, Record

WAKE_S = 0.5  # how often a waiting driver looks for Ctrl-C (see Scheduler._next_finished)


class BuildError(RuntimeError):
    """The build cannot produce a pack (a stage failed, or no page could be fetched)."""


# --- the stage task: one generic wrapper for every stage -------------------------------


def run_stage(name: str, ctx: BuildContext, shard: shards.Shard | None, inputs: dict):
    """Run stage `name` (tasks.stages) on one shard, or once for the pack."""
    stage_logging()  # here, so it holds in whichever process runs the task
    faults.check(ctx.faults, name, shard.index if shard else None,
                 ctx.work.pack_dir / "faults" / ctx.build_id)
    stage = stages.get(name)
    if shard is None and ctx.isolate_reduce and stage.ISOLATE:
        return isolated.run(name, ctx, inputs)
    record = stage.run(ctx, shard, inputs)
    if shard is not None and stage.SHARD_ARTIFACT:  # e.g. its calls and cost, in the UI
        shard_cost_artifact(ctx.pack, shard, record)
    return record


@dataclass
class StageOutputs(CachePolicy):
    """Prefect's cache key for a stage task: its content key (`tasks.stages.cache_key`).
    Whether a cached record may serve is the scheduler's decision at submission."""

    def compute_key(self, task_ctx, inputs: dict[str, Any], flow_parameters: dict[str, Any],
                    **kwargs: Any) -> str | None:
        return stages.cache_key(inputs["name"], inputs["ctx"], inputs["shard"],
                                inputs["inputs"])


stage_task = task(run_stage, name="stage", cache_policy=StageOutputs(), persist_result=True)


def retry_condition(task, task_run, state) -> bool:
    """Prefect's `retry_condition_fn`: a stage error is retried unless it is terminal
    (tasks.stages.is_terminal: a rejected API key, an open circuit breaker, a bad config):
    retrying those only repeats the error, after a delay, with another page of tracebacks."""
    exc = state.data if isinstance(state.data, BaseException) else None
    if exc is None:
        try:
            state.result(raise_on_failure=True)
        except BaseException as raised:  # the task's own exception, re-raised by Prefect
            exc = raised
    return not stages.is_terminal(exc)


# --- the scheduler ---------------------------------------------------------------------


class Scheduler:
    """Runs stages for one build: their task runs (named `<stage>-<pack>-<i>/<n>`), inputs,
    retries, per-stage progress artifacts and timings, and the first failure as one error."""

    def __init__(self, ctx: BuildContext, layout: list[shards.Shard],
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.ctx = ctx
        self.clock = clock
        self.layout = layout
        self.count = layout[0].count if layout else 1
        self.futures: dict[str, dict[int | None, PrefectFuture]] = {}
        self.expected: dict[str, int] = {}  # the runs each stage has in this build
        self.shard_extras: dict[str, dict[int, dict]] = {}
        self.meta: dict[PrefectFuture, tuple[str, shards.Shard | None]] = {}
        self.results: dict[PrefectFuture, Any] = {}
        self.records: dict[str, list[Record]] = defaultdict(list)
        self.progress: dict[str, Callable[..., None]] = {}
        self.started: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        # when each future finished, stamped by its done-callback: a stage's duration ends
        # when its last task did, not when the flow got round to looking at it
        self.done_at: dict[PrefectFuture, float] = {}
        self.peak_rss_mb: dict[str, float] = {}  # the driver's peak when a stage last finished
        # every submitted run, once, as it finishes (its done-callback): `run` waits on this
        # one queue, not on a fresh set of callbacks per run that finishes
        self.finished_runs: queue.Queue[PrefectFuture] = queue.Queue()
        self.task_runs = 0

    # --- walking the list ----------------------------------------------------------------

    def run(self, names: Iterable[str],
            flow_inputs: Callable[[], Mapping[str, Any]] | None = None) -> None:
        """Run the stages `names`, each as it declares: a run starts as soon as its inputs
        are done; a stage with FLOW_INPUTS gets those of `flow_inputs()` (called just
        before it is submitted). Returns when every one of their runs has finished;
        BuildError at the first that failed."""
        names = list(names)
        jobs: list[tuple[str, shards.Shard | None]] = []
        for name in names:
            self.futures[name] = {}
            if stages.enabled(name, self.ctx):
                scope = stages.get(name).SCOPE
                jobs += [(name, s) for s in self.layout] if scope == SHARD else [(name, None)]
            self.expected[name] = sum(j[0] == name for j in jobs)
        while True:
            for job in [j for j in jobs if self._ready(*j)]:
                jobs.remove(job)
                self._start(*job, flow_inputs)
            running = [f for n in names for f in self.futures[n].values()
                       if f not in self.results]
            if not running:
                if jobs:  # its inputs come from no stage before it: the list is wrong
                    raise BuildError(f"{self.ctx.pack}: stage {jobs[0][0]!r} waits on "
                                     "inputs that no stage before it produces")
                return
            self.wait([self._next_finished()])  # the next run to finish, of any stage

    def outputs(self, name: str) -> list[Record] | Record | None:
        """What stage `name` gave (waiting for it): every shard's record in shard order,
        the one record of a pack stage, or [] / None for a stage that is off."""
        futures = self.futures.get(name)
        if futures is None:
            raise KeyError(f"stage {name!r} has not been run in this build")
        results = self.wait(futures[i] for i in sorted(futures, key=lambda i: i or 0))
        if stages.get(name).SCOPE != SHARD:
            return results[0] if results else None
        return results

    def all_records(self, name: str) -> list[Record]:
        """Every record of stage `name` in shard order, waiting for them ([] when off)."""
        out = self.outputs(name)
        return out if isinstance(out, list) else [] if out is None else [out]

    def _finished(self, name: str) -> bool:
        """Every run of stage `name` has been submitted and has finished."""
        futures = self.futures.get(name)
        return (futures is not None and len(futures) == self.expected.get(name, 0)
                and all(f in self.results for f in futures.values()))

    def _ready(self, name: str, shard: shards.Shard | None) -> bool:
        """Whether a run of `name` (on `shard`, or for the pack) may start: its inputs are
        done, and its stage's window (if any) has room."""
        window = stages.get(name).window(self.ctx, len(self.layout))
        if window is not None:
            if sum(f not in self.results for f in self.futures[name].values()) >= window[0]:
                return False
        for dep in stages.inputs_of(name):
            if shard is not None and stages.get(dep).SCOPE == SHARD and self.expected.get(dep):
                future = self.futures[dep].get(shard.index)
                if future is None or future not in self.results:
                    return False
            elif not self._finished(dep):
                return False
        return True

    def inputs(self, name: str, shard: shards.Shard | None) -> dict[str, Any]:
        """The records a run of `name` reads (its inputs' runs are done by now): the same
        shard's record of a shard stage, else every shard's records (or the one record)."""
        inputs: dict[str, Any] = {}
        for dep in stages.inputs_of(name):
            if shard is not None and stages.get(dep).SCOPE == SHARD:
                future = self.futures[dep].get(shard.index)
                inputs[dep] = self.results[future] if future is not None else None
            else:
                inputs[dep] = self.outputs(dep)
        return inputs

    def _start(self, name: str, shard: shards.Shard | None,
               flow_inputs: Callable[[], Mapping[str, Any]] | None) -> None:
        """Submit one run of `name` with its inputs' records (all done by now)."""
        stage = stages.get(name)
        inputs = self.inputs(name, shard)
        if stage.FLOW_INPUTS:
            given = flow_inputs() if flow_inputs else {}
            inputs.update({k: given[k] for k in stage.FLOW_INPUTS})
        ctx = self.ctx
        if shard is not None:
            if name not in self.shard_extras:
                self.shard_extras[name] = stage.shard_inputs(self.ctx, self.outputs)
            inputs.update(self.shard_extras[name].get(shard.index, {}))
            window = stage.window(self.ctx, len(self.layout))
            if window is not None:
                ctx = window[1]
        index = shard.index if shard is not None else None
        self.futures[name][index] = self.submit(name, shard, inputs, ctx)

    # --- tasks ---------------------------------------------------------------------------

    def submit(self, name: str, shard: shards.Shard | None, inputs: dict,
               ctx: BuildContext | None = None) -> PrefectFuture:
        """One task run of stage `name`; a run that is not reusable (tasks.stages.reusable)
        refreshes Prefect's cache entry for its key instead of reading it."""
        stage = stages.get(name)
        ctx = ctx or self.ctx
        run_name = f"{name}-{self.ctx.pack}" + (f"-{shard.label}" if shard else "")
        future = stage_task.with_options(
            name=name, task_run_name=run_name, retries=stage.RETRIES,
            retry_delay_seconds=stage.RETRY_DELAY_S,
            retry_condition_fn=retry_condition,
            refresh_cache=not stages.reusable(name, ctx, shard, inputs),
        ).submit(name, ctx, shard, inputs)
        self.meta[future] = (name, shard)
        self.started.setdefault(name, self.clock())
        future.add_done_callback(self._stamp)
        self.task_runs += 1
        return future

    def wait(self, futures: Iterable[PrefectFuture]) -> list:
        """Wait for `futures`, advancing each stage's progress as they finish; their
        results in the order given. Raises BuildError at the first failed task."""
        futures = list(futures)
        for future in as_completed([f for f in futures if f not in self.results]):
            name, shard = self.meta[future]
            result = self._result(future)
            if isinstance(result, Record) and future.state.name == "Cached":
                result = result.reused()
            self.results[future] = result
            self._done(name, shard, result, future)
        return [self.results[f] for f in futures]

    def _result(self, future: PrefectFuture):
        name, shard = self.meta[future]
        try:
            return future.result()
        except GuardError:
            raise  # already one line that names the pack and what stays current
        except Exception as exc:
            where = f"{name} shard {shard.label}" if shard else name
            # a terminal error already says what to fix: no chained traceback in the log
            raise BuildError(f"{self.ctx.pack}: {where} failed: {exc}") from (
                None if stages.is_terminal(exc) else exc)

    def _next_finished(self) -> PrefectFuture:
        """The next task run to finish. Waits in short steps: Linux may hand Ctrl-C's
        SIGINT to any thread, and a main thread blocked on a lock without a timeout would
        notice it only when a task ends (a 60 s fetch holds the terminal that long)."""
        while True:
            try:
                return self.finished_runs.get(timeout=WAKE_S)
            except queue.Empty:
                continue

    def _stamp(self, future: PrefectFuture) -> None:
        self.done_at[future] = self.clock()
        self.finished_runs.put(future)

    def _done(self, name: str, shard: shards.Shard | None, result: object,
              future: PrefectFuture) -> None:
        # a waiter can see the future done a moment before its callbacks have run
        at = self.done_at.get(future, self.clock())
        self.finished[name] = max(self.finished.get(name, at), at)
        self.peak_rss_mb[name] = round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        if isinstance(result, Record):
            self.records[name].append(result)
        if shard is None:
            return
        if name not in self.progress:
            self.progress[name] = stage_progress(name, self.ctx.pack)
        done = len(self.records[name])
        self.progress[name](done, len(self.layout))
        get_run_logger().info("%s: %d/%d shards done", name, done, len(self.layout))

    def durations(self) -> dict[str, float]:
        return {name: round(self.finished.get(name, start) - start, 3)
                for name, start in self.started.items()}
