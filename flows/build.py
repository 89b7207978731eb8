"""The build flow: urls.txt → shards → fetch → split → extract + embed (→ keywords) per
shard; links and entity resolution over all shards; publish.

Composition only. The pipeline is the ordered list of stages in `tasks.stages`; this
module plans the shards, submits each stage's tasks (one per shard, or one per pack for
the reduce steps), chains them by their records, checks whether anything changed, keeps
the per-stage progress artifacts moving as shards finish, and hands the records to the
publish step. Every task run is named `<stage>-<pack>-<i>/<n>` and tagged with the pack
and the stage, so the Prefect UI shows a build's shards.
"""

from __future__ import annotations

import dataclasses
import logging
import resource
import time
from collections import defaultdict
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.futures import PrefectFuture, as_completed
from prefect.states import Completed

from flows import server
from flows.artifacts import publish_report, stage_progress
from flows.plan import (
    build_context,
    fetch_window,
    inputs_fingerprint,
    plan_shards,
    shard_budgets,
    variant,
)
from flows.preflight import preflight
from flows.runners import task_runner, worker_slots
from flows.settings import quiet_libraries, result_settings, stage_logging
from flows.summary import build_stats, fetch_reasons, shortfalls
from packs.layout import append_history
from tasks import faults, shards, stages
from tasks.publish import lock as pack_lock
from tasks.publish.atomic import new_build_id
from tasks.publish.guard import GuardError
from tasks.publish.lock import PackLockedError
from tasks.sources import SourceConfig, load_source, resolve_embedding_model
from tasks.stages import isolated
from tasks.stages.common import BuildContext, Record, write_state
from tasks.stages.publish import unchanged_build

# The reduce steps whose memory grows with the pack; on an in-process task runner they run
# in a child process for packs of this many pages or more (tasks/stages/isolated.py).
ISOLATED_STAGES = ("resolve", "publish")
ISOLATE_MIN_PAGES = 2000


class BuildError(RuntimeError):
    """The build cannot produce a pack (e.g. no page could be fetched)."""


def _run_name() -> str:
    """`<pack>-<build id>`: the build id is generated here when the caller gave none
    (scheduled runs), and the flow reads it back from its own run name."""
    from prefect.runtime import flow_run

    params = flow_run.parameters
    return f"{params['name']}-{params.get('build_id') or new_build_id()}"


# --- the stage task: one generic wrapper for every stage -------------------------------


def run_stage(name: str, ctx: BuildContext, shard: shards.Shard | None, inputs: dict):
    """Run stage `name` (tasks.stages) on one shard, or once for the pack."""
    stage_logging()  # here, so it holds in whichever process runs the task
    faults.check(ctx.faults, name, shard.index if shard else None,
                 ctx.work.pack_dir / "faults" / ctx.build_id)
    if shard is None and ctx.isolate_reduce and name in ISOLATED_STAGES:
        return isolated.run(name, ctx, inputs)
    return stages.get(name).run(ctx, shard, inputs)


def _cache_key(task_ctx, params: dict) -> str | None:
    """Prefect's cache key: the stage's content key (never a path string or a run id).
    A cached record that cannot serve (its files are gone, or an extraction still has
    sections to retry) is run again by the flow with refresh_cache (Pipeline.wait)."""
    key = stages.get(params["name"]).key(params["ctx"], params["shard"], params["inputs"])
    return f"{params['name']}-{key}" if key else None


stage_task = task(run_stage, name="stage", cache_key_fn=_cache_key, persist_result=True)


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


class Pipeline:
    """Submits stage tasks for one build and follows them: names, tags, retries, the
    per-stage progress artifacts, and the first failure as one clear error."""

    def __init__(self, ctx: BuildContext, layout: list[shards.Shard],
                 clock=time.perf_counter) -> None:
        self.ctx = ctx
        self.clock = clock
        self.layout = layout
        self.count = layout[0].count if layout else 1
        self.meta: dict[PrefectFuture, tuple] = {}  # future → (name, shard, inputs, ctx)
        self.results: dict[PrefectFuture, object] = {}
        self.records: dict[str, list[Record]] = defaultdict(list)
        self.progress: dict = {}
        self.started: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        # when each future finished, stamped by its done-callback: the flow may look at a
        # future long after it finished (links is waited for after embed), and a stage's
        # duration must end when its last task did, not when the flow got round to it
        self.done_at: dict[PrefectFuture, float] = {}
        self.peak_rss_mb: dict[str, float] = {}  # the driver's peak when a stage last finished
        self.task_runs = 0

    def submit(self, name: str, shard: shards.Shard | None, inputs: dict,
               ctx: BuildContext | None = None, *, wait_for=None,
               refresh: bool = False) -> PrefectFuture:
        module = stages.get(name)
        run_name = f"{name}-{self.ctx.pack}" + (f"-{shard.label}" if shard else "")
        future = stage_task.with_options(
            name=name, task_run_name=run_name, retries=module.RETRIES,
            retry_delay_seconds=getattr(module, "RETRY_DELAY_S", 1),
            retry_condition_fn=retry_condition,
            refresh_cache=refresh or None,
        ).submit(name, ctx or self.ctx, shard, inputs, wait_for=wait_for)
        self.meta[future] = (name, shard, inputs, ctx)
        self.started.setdefault(name, self.clock())
        future.add_done_callback(self._stamp)
        self.task_runs += 1
        return future

    def map(self, name: str, inputs_of) -> dict[int, PrefectFuture]:
        """One task per shard; `inputs_of(shard)` gives its inputs (futures welcome)."""
        return {s.index: self.submit(name, s, inputs_of(s)) for s in self.layout}

    def wait(self, futures) -> list:
        """Wait for `futures`, advancing each stage's progress as they finish; their
        results in the order given. Raises BuildError at the first failed task."""
        futures = list(futures)
        for future in as_completed([f for f in futures if f not in self.results]):
            name, shard, inputs, ctx = self.meta[future]
            result = self._result(future)
            ran = future
            if isinstance(result, Record) and future.state.name == "Cached":
                if stages.needs_rerun(name, result, ctx or self.ctx):
                    ran = self.submit(name, shard, inputs, ctx, refresh=True)
                    result = self._result(ran)
                else:
                    result = result.reused()
            self.results[future] = result
            self._done(name, shard, result, ran)
        return [self.results[f] for f in futures]

    def _result(self, future: PrefectFuture):
        name, shard = self.meta[future][:2]
        try:
            return future.result()
        except GuardError:
            raise  # already one line that names the pack and what stays current
        except Exception as exc:
            where = f"{name} shard {shard.label}" if shard else name
            # a terminal error already says what to fix: no chained traceback in the log
            raise BuildError(f"{self.ctx.pack}: {where} failed: {exc}") from (
                None if stages.is_terminal(exc) else exc)

    def _stamp(self, future: PrefectFuture) -> None:
        self.done_at[future] = self.clock()

    def _done(self, name: str, shard: shards.Shard | None, result: object,
              future: PrefectFuture | None = None) -> None:
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

    def run_windowed(self, name: str, inputs_of, window: int,
                     ctx: BuildContext | None = None) -> list[Record]:
        """One task per shard with at most `window` in flight (fetch: politeness)."""
        queue = list(self.layout)
        running: list[PrefectFuture] = []
        order: list[PrefectFuture] = []
        while queue or running:
            while queue and len(running) < window:
                shard = queue.pop(0)
                future = self.submit(name, shard, inputs_of(shard), ctx)
                running.append(future)
                order.append(future)
            finished = next(as_completed(running))
            self.wait([finished])
            running.remove(finished)
        return [self.results[f] for f in order]

    def durations(self) -> dict[str, float]:
        return {name: round(self.finished.get(name, start) - start, 3)
                for name, start in self.started.items()}


def tag_flow_run(run_id: str | None, tag: str) -> None:
    """Add `tag` to the flow run's tags, through the API.

    The build's task runs carry no tags: their names say stage, pack and shard. Prefect
    3.8.8 acquires a tag concurrency slot for every task run that has a tag, through one
    in-process service per set of tags, and in full test runs (2026-11-25) task runs of
    later builds waited on it (9 minutes and more) with the service idle and the server
    answering.
    Tags set with Prefect's tags() context would reach the task runs too, so the pack's
    tag is written onto the flow run itself."""
    if not run_id:
        return
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        current = client.read_flow_run(run_id).tags or []
        if tag not in current:
            client.update_flow_run(run_id, tags=[*current, tag])


@flow(name="build-pack", flow_run_name=_run_name, log_prints=False,
      task_runner=task_runner())  # $KPACK_TASK_RUNNER or threads; run_build can override
def build_pack(
    name: str,
    source_dir: str,
    out_dir: str,
    work_dir: str,
    build_id: str | None = None,
    embedding_model: str | None = None,
    extractor: str | None = None,
    allow_private_hosts: bool = False,
    max_cost_usd: float | None = None,
    force: bool = False,
    retry_failed: bool = False,
) -> dict:
    """Build the pack of `source_dir` into `out_dir/<name>/`; returns a summary dict.

    When the pages and every stage's settings equal those the published build was made
    from, nothing is split, extracted, embedded or republished: the summary says "no
    changes" and names the current build (readers keep the build they have).
    The build holds the pack's lock (tasks.publish.lock) from start to end: a second build of
    the same pack is refused, and runs of builds that died are marked Crashed.
    A build the publish guard finds clearly worse than the current one fails and
    publishes nothing, unless `force`.
    """
    from prefect.runtime import flow_run

    t_start = time.perf_counter()
    quiet_libraries()  # here too, for scheduled runs that do not come through run_build
    log = get_run_logger()
    build_id = build_id or flow_run.name.rsplit("-", 1)[-1]
    source = load_source(source_dir)
    tag_flow_run(flow_run.get_id(), f"pack:{source.name}")
    with pack_lock.held(Path(out_dir) / source.name, build_id, warn=log.warning) as held:
        if held.replaced is not None:  # a build died holding the lock (kill -9, OOM)
            append_history(Path(out_dir) / source.name,
                           str(held.replaced.get("build_id") or "unknown"), "crashed",
                           f"taken over by build {build_id}: {held.replaced_reason}")
        if held.replaced and held.replaced.get("build_id"):
            mark_crashed(source.name, str(held.replaced["build_id"]), log)
        ctx = build_context(source, build_id, out_dir, work_dir, embedding_model, extractor,
                            allow_private_hosts, max_cost_usd, force,
                            retry_failed)
        summary = _build(ctx, source, t_start)
    problems = shortfalls(summary)
    if problems:  # a different state in the Prefect UI than a clean build's Completed
        return Completed(name="Partial", message="; ".join(problems), data=summary)
    return summary


def _build(ctx: BuildContext, source: SourceConfig, t_start: float) -> dict:
    """The body of build_pack, with the pack's lock held."""
    log = get_run_logger()
    out_dir, build_id = ctx.out_dir, ctx.build_id
    if len(source.urls) >= ISOLATE_MIN_PAGES and _in_process_runner():
        ctx = dataclasses.replace(ctx, isolate_reduce=True)
    slots = worker_slots(_flow_task_runner())
    layout = plan_shards(ctx, [u.url for u in source.urls], source.config.shard_pages, slots)
    pipe = Pipeline(ctx, layout)
    log.info("%s: %d URLs in %d shards (shard_pages %d%s)", source.name, len(source.urls),
             len(layout), source.config.shard_pages,
             f", {slots} cluster task slots" if slots else "")

    fetched = fetch_all(pipe)
    usable = sum(r.rows["usable"] for r in fetched)
    if usable == 0:
        raise BuildError(f"{source.name}: none of the {len(source.urls)} URLs could be "
                         f"fetched ({fetch_reasons(fetched)}); nothing was published")
    fingerprint = inputs_fingerprint(ctx, fetched)
    out = Path(out_dir)
    unchanged = unchanged_build(out, source.name, fingerprint)
    if unchanged is not None:
        log.info("no changes since build %s: nothing to publish", unchanged["build_id"])
        append_history(out / source.name, build_id, "no changes",
                       f"inputs equal build {unchanged['build_id']}")
        unchanged["seconds"] = round(time.perf_counter() - t_start, 1)
        unchanged["durations"] = pipe.durations()
        publish_report(unchanged)
        return unchanged

    by_shard = {r.shard: r for r in fetched}
    split_f = pipe.map("split", lambda s: {"fetch": by_shard[s.index]})
    links_f = pipe.submit("links", None, {"fetch": fetched})
    budgets: dict[int, float | None] = {s.index: None for s in layout}
    if ctx.extract.max_cost_usd is not None:
        budgets = shard_budgets(ctx.extract.max_cost_usd, pipe.wait(split_f.values()))
    extract_f = pipe.map("extract", lambda s: {"split": split_f[s.index],
                                                "budget_usd": budgets[s.index]})
    embed_f = pipe.map("embed", lambda s: {"split": split_f[s.index]})
    split = pipe.wait(split_f.values())
    extracted = pipe.wait(extract_f.values())
    keywords: list[Record] = []
    if ctx.keyword_vectors:  # after extraction is final: keyword texts read it
        split_of = {r.shard: r for r in split}
        extract_of = {r.shard: r for r in extracted}
        keywords = pipe.wait(pipe.map("keywords", lambda s: {
            "split": split_of[s.index], "extract": extract_of[s.index]}).values())
    embedded = pipe.wait(embed_f.values())
    [links] = pipe.wait([links_f])
    [resolved] = pipe.wait([pipe.submit("resolve", None, {"extract": extracted},
                                        wait_for=list(extract_f.values()))])
    write_state(ctx.work, pipe.count, {n: pipe.records[n] for n in
                                       ("fetch", "extract", "embed", "keywords")},
                {n: variant(ctx, n) for n in ("fetch", "extract", "embed", "keywords")})
    durations = pipe.durations()
    publish_f = pipe.submit("publish", None, {
        "fetch": fetched, "split": split, "embed": embedded, "keywords": keywords,
        "extract": extracted, "links": links, "resolve": resolved, "fingerprint": fingerprint,
        "durations": durations, "stats": build_stats(pipe, source.config.shard_pages, slots)},
        wait_for=[links_f, *embed_f.values()])
    [summary] = pipe.wait([publish_f])
    summary["seconds"] = round(time.perf_counter() - t_start, 1)
    summary["durations"] = durations
    summary["task_runs"] = pipe.task_runs
    summary["reduce_in_child_process"] = ctx.isolate_reduce
    summary["driver_peak_rss_mb"] = pipe.peak_rss_mb
    publish_report(summary)
    return summary


def fetch_all(pipe: Pipeline) -> list[Record]:
    """Fetch every shard, a few at a time (see fetch_window)."""
    window, per_shard = fetch_window(pipe.ctx.fetch, len(pipe.layout))
    return pipe.run_windowed("fetch", lambda s: {}, window,
                             dataclasses.replace(pipe.ctx, fetch=per_shard))


def _flow_task_runner():
    """The task runner of the flow run in progress (None outside one)."""
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    return ctx.task_runner if ctx is not None else None


def _in_process_runner() -> bool:
    """Whether this flow's tasks run in the build's own process (the thread pool)."""
    from prefect.task_runners import ThreadPoolTaskRunner

    return isinstance(_flow_task_runner(), ThreadPoolTaskRunner)


def mark_crashed(pack: str, dead_build_id: str, log) -> int:
    """Mark the run of a build that died holding the pack's lock (killed, out of memory,
    power loss) as Crashed; Prefect would show it Running for ever. Found through the
    stale lock it left, which names its build id (its run is `<pack>-<build id>`)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterName,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.states import Crashed

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            name=FlowRunFilterName(any_=[f"{pack}-{dead_build_id}"]),
            state=FlowRunFilterState(type=FlowRunFilterStateType(
                any_=[StateType.RUNNING, StateType.PENDING]))))
        for run in runs:
            client.set_flow_run_state(run.id, Crashed(
                message="the build's process died holding the pack's lock; found by a "
                        "later build"), force=True)
    if runs:
        log.warning("%s: marked the run of build %s, which died, as Crashed", pack,
                    dead_build_id)
    return len(runs)


def run_build(
    source_dir: str | Path,
    out_dir: str | Path,
    *,
    work_dir: str | Path | None = None,
    embedding_model: str | None = None,
    extractor: str | None = None,
    allow_private_hosts: bool = False,
    max_cost_usd: float | None = None,
    task_runner_setting: str | None = None,
    force: bool = False,
    retry_failed: bool = False,
    log=None,
) -> dict:
    """Validate the source, then run the build flow with results stored in the work dir.

    The work directory defaults to `<out_dir>/.work`; it holds the intermediates that
    make rebuilds cheap. It may be a shared filesystem that Dask workers on other machines
    reach at the same path (see deployments/README.md). The flow reports to the Prefect
    server `flows.server.api_for_build` finds or starts; `log` gets a line when a
    temporary one has to be started.
    """
    source = load_source(source_dir)  # fail fast, before Prefect starts
    out = Path(out_dir)
    work = Path(work_dir) if work_dir else out / ".work"
    preflight(source, out, work, model=resolve_embedding_model(source.config, embedding_model),
              extractor=extractor, allow_private_hosts=allow_private_hosts)
    quiet_libraries()
    build_id = new_build_id()
    try:
        with result_settings(work), server.api_for_build(log=log):
            flow_fn = (build_pack.with_options(task_runner=task_runner(task_runner_setting))
                       if task_runner_setting else build_pack)
            return flow_fn(
                name=source.name, build_id=build_id, source_dir=str(source.folder),
                out_dir=str(out.resolve()), work_dir=str(work.resolve()),
                embedding_model=embedding_model, extractor=extractor,
                allow_private_hosts=allow_private_hosts, max_cost_usd=max_cost_usd,
                force=force, retry_failed=retry_failed,
            )
    except Exception as exc:
        # Recorded, then re-raised: the pack's history shows failed runs next to good ones.
        status = "refused" if isinstance(exc, (GuardError, PackLockedError)) else "failed"
        try:
            append_history(out / source.name, build_id, status, f"{type(exc).__name__}: {exc}")
        except OSError as hist_exc:  # e.g. the disk is still full: say so, keep the cause
            logging.getLogger("kpack.build").warning(
                "could not write the pack's history: %s", hist_exc)
        raise
