"""The build flow: urls.txt → shards → the stage list (tasks.stages.PIPELINE) → a pack.

Composition only, and it names no stage: it reads what each stage of the list declares
(tasks/stages/__init__.py). The flow plans the shards, runs the stages up to the last one
that may end the build early (`ENDS_EARLY`: fetch), stops there when nothing changed since
the published build (or with an error when a stage says the build cannot go on), runs the
rest of the list through the scheduler (flows/scheduler.py: each stage per shard or once
for the pack, as it declares), records the lineage (`LINEAGE` stages), and hands the
records and its own inputs to the stage that publishes (`PUBLISHES`), whose record is the
build's summary. Every task run is named `<stage>-<pack>-<i>/<n>`, and the flow run is
tagged with the pack, so the Prefect UI shows a build's shards.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

from prefect import flow, get_run_logger, tags
from prefect.context import TagsContext
from prefect.states import Completed, Failed

from flows import alert_events, build_api
from flows.artifacts import publish_report
from flows.freshness import after_fetch, prepare
from flows.plan import build_context, inputs_fingerprint, plan_shards, variant
from flows.preflight import BuildInputs, check_build_inputs
from flows.runners import task_runner, worker_slots
from flows.scheduler import BuildError, Scheduler, retry_condition, stage_logging
from flows.settings import build_updates, quiet_libraries
from flows.summary import build_stats, shortfalls
from packs.layout import append_history, read_history
from tasks import stages
from tasks.publish import lock as pack_lock
from tasks.publish.atomic import new_build_id
from tasks.publish.guard import GuardError
from tasks.publish.lock import PackLockedError
from tasks.sources import SourceConfig, load_source
from tasks.stages.common import BuildContext, Record, write_state

__all__ = ["BuildError", "build_pack", "retry_condition", "run_build", "shortfalls",
           "stage_logging"]

# On an in-process task runner, packs of this many pages or more run the reduce steps in a
# child process (tasks/stages/isolated.py), whose memory is returned when they end.
ISOLATE_MIN_PAGES = 2000


def _run_name() -> str:
    """`<pack>-<build id>`: the build id is generated here when the caller gave none
    (scheduled runs), and the flow reads it back from its own run name."""
    from prefect.runtime import flow_run

    params = flow_run.parameters
    return f"{params['name']}-{params.get('build_id') or new_build_id()}"


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
    pack_root = Path(out_dir) / name
    try:
        source = load_source(source_dir)
        tag_flow_run(flow_run.get_id(), f"pack:{source.name}")
        # The pack's tag is the flow run's (run_build, deployments), not its task runs'.
        with TagsContext(current_tags=set()), \
                pack_lock.held(pack_root, build_id, warn=log.warning) as held:
            if held.replaced is not None:  # a build died holding the lock (kill -9, OOM)
                append_history(pack_root, str(held.replaced.get("build_id") or "unknown"),
                               "crashed",
                               f"taken over by build {build_id}: {held.replaced_reason}")
            if held.replaced and held.replaced.get("build_id"):
                mark_crashed(source.name, str(held.replaced["build_id"]), log)
            ctx = build_context(source, build_id, out_dir, work_dir, embedding_model,
                                extractor, allow_private_hosts, max_cost_usd, force,
                                retry_failed)
            summary = _build(ctx, source, t_start)
    except (GuardError, PackLockedError) as exc:
        # Failed, named Refused: a refusal is no broken build (the guard's has its own
        # event and alert; a held lock means another build is doing the work).
        record_failure(pack_root, build_id, "refused", exc)
        if isinstance(exc, GuardError):
            alert_events.emit(*alert_events.refused_event(name, build_id, exc))
        return Failed(name="Refused", message=str(exc), data=exc)
    except Exception as exc:  # recorded and told (scheduled runs too), then the run fails
        record_failure(pack_root, build_id, "failed", exc)
        alert_events.emit(*alert_events.failed_event(name, build_id, exc))
        raise
    alert_events.emit(*alert_events.outcome_event(
        name, build_id, summary, source.config.notify_failed_sources))
    problems = shortfalls(summary)
    if problems:  # a different state in the Prefect UI than a clean build's Completed
        return Completed(name="Partial", message="; ".join(problems), data=summary)
    return summary


def _build(ctx: BuildContext, source: SourceConfig, t_start: float) -> dict:
    """The body of build_pack, with the pack's lock held."""
    log = get_run_logger()
    out_dir, build_id = ctx.out_dir, ctx.build_id
    ctx, expanded = prepare(ctx, source)  # sitemaps → the URL list; lastmod trust
    if len(expanded.urls) >= ISOLATE_MIN_PAGES and _in_process_runner():
        ctx = dataclasses.replace(ctx, isolate_reduce=True)
    slots = worker_slots(_flow_task_runner())
    layout = plan_shards(ctx, expanded.urls, source.config.shard_pages, slots, expanded.lastmod)
    sched = Scheduler(ctx, layout)
    log.info("%s: %d URLs in %d shards (shard_pages %d%s)", source.name, len(expanded.urls),
             len(layout), source.config.shard_pages,
             f", {slots} cluster task slots" if slots else "")

    head, middle, tail = stages.phases()  # fetch | split ... resolve | publish
    sched.run(head)
    made_from = [r for name in head if stages.get(name).ENDS_EARLY
                 for r in sched.all_records(name)]
    freshness = after_fetch(ctx, source, expanded, made_from)  # outcomes, lastmod evidence
    for name in head:
        reason = stages.get(name).stop_reason(sched.all_records(name))
        if reason:
            raise BuildError(f"{source.name}: {reason}; nothing was published")
    fingerprint = inputs_fingerprint(ctx, made_from)
    writer = stages.publisher()
    unchanged = writer.unchanged(ctx, fingerprint) if made_from else None
    if unchanged is not None:
        log.info("no changes since build %s: nothing to publish", unchanged["build_id"])
        append_history(Path(out_dir) / source.name, build_id, "no changes",
                       f"inputs equal build {unchanged['build_id']}", pages=freshness["pages"])
        summary = {**unchanged, "freshness": freshness,
                   "seconds": round(time.perf_counter() - t_start, 1),
                   "durations": sched.durations()}
        publish_report(summary)
        return summary

    sched.run(middle)
    lineage = [s.NAME for s in stages.PIPELINE if s.LINEAGE and s.enabled(ctx)]
    write_state(ctx.work, sched.count, {n: sched.records[n] for n in lineage},
                {n: variant(ctx, n) for n in lineage})
    durations = sched.durations()
    sched.run(tail, flow_inputs=lambda: {
        "fingerprint": fingerprint, "durations": durations, "freshness": freshness,
        "stats": build_stats(sched.records, sched.count, len(sched.layout),
                             source.config.shard_pages, slots, sched.task_runs)})
    published = sched.outputs(writer.NAME)
    assert isinstance(published, Record), f"{writer.NAME} returned {published!r}"
    summary = dict(published.info)
    summary["seconds"] = round(time.perf_counter() - t_start, 1)
    summary["durations"] = durations
    summary["task_runs"] = sched.task_runs
    summary["reduce_in_child_process"] = ctx.isolate_reduce
    summary["driver_peak_rss_mb"] = sched.peak_rss_mb
    publish_report(summary)
    return summary


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
    inputs: BuildInputs | None = None,
    log=None,
) -> dict:
    """Validate the source, then run the build flow with results stored in the work dir.

    The work directory defaults to `<out_dir>/.work`; it holds the intermediates that
    make rebuilds cheap. It may be a shared filesystem that Dask workers on other machines
    reach at the same path (see deployments/README.md). The flow reports to the Prefect
    server `flows.build_api.api_for_build` finds or starts; `log` gets a line when one has
    to be started. `inputs`: the inputs as `flows.preflight.check_build_inputs` checked
    them (the CLI checks them before it imports this module); None checks them here.
    """
    inputs = inputs or check_build_inputs(  # fail fast, before a server starts
        source_dir, out_dir, work_dir, embedding_model=embedding_model, extractor=extractor,
        allow_private_hosts=allow_private_hosts)
    source, out, work = inputs.source, inputs.out, inputs.work
    quiet_libraries()
    build_id = new_build_id()
    try:  # the flow run is created with the pack's tag: Prefect's events about it carry it
        with build_api.api_for_build(log=log, updates=build_updates(work)), \
                tags(f"pack:{source.name}"):
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
        # Recorded, then re-raised: the pack's history shows failed runs next to good ones
        # (the flow records what failed inside it; this, what failed before it ran).
        status = "refused" if isinstance(exc, (GuardError, PackLockedError)) else "failed"
        record_failure(out / source.name, build_id, status, exc)
        raise


def record_failure(pack_root: Path, build_id: str, status: str, exc: BaseException) -> None:
    """The pack's history line for a build run that ended in `exc` (once per build id: the
    flow writes it for what failed inside it, run_build for what failed before it ran). A
    history that cannot be written (the disk is still full) is logged, never raised over
    the cause."""
    try:
        if not any(h.get("build_id") == build_id for h in read_history(pack_root)):
            append_history(pack_root, build_id, status, f"{type(exc).__name__}: {exc}")
    except OSError as hist_exc:
        logging.getLogger("kpack.build").warning("could not write the pack's history: %s",
                                                 hist_exc)
