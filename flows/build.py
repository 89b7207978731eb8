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
import os
import resource
import time
from collections import Counter, defaultdict
from pathlib import Path

from prefect import flow, get_run_logger, tags, task
from prefect.futures import PrefectFuture, as_completed
from prefect.settings import (
    PREFECT_LOCAL_STORAGE_PATH,
    PREFECT_RESULTS_PERSIST_BY_DEFAULT,
    temporary_settings,
)
from prefect.states import Completed

from flows import server
from flows.artifacts import publish_report, stage_progress
from flows.preflight import preflight
from flows.runners import task_runner
from flows.settings import results_dir
from packs.embedding import ModelInfo
from packs.embedding import describe as describe_model
from packs.format import FORMAT_VERSION, QUERY_MODULE_VERSION
from packs.layout import append_history
from packs.manifest import EmbeddingInfo
from tasks import extract as extract_core
from tasks import faults, shards, stages
from tasks import fetch as fetch_core
from tasks import lock as pack_lock
from tasks import split as split_core
from tasks.guard import GuardError
from tasks.lock import PackLockedError
from tasks.publish import new_build_id
from tasks.sources import (
    CONFIG_FILE,
    SourceConfig,
    SourceError,
    load_source,
    resolve_embedding_model,
)
from tasks.stages import isolated
from tasks.stages.common import (
    BuildContext,
    Record,
    WorkDir,
    previous_outputs,
    read_state,
    stage_key,
    write_state,
)
from tasks.stages.publish import unchanged_build


# The reduce steps whose memory grows with the pack; on an in-process task runner they run
# in a child process for packs of this many pages or more (tasks/stages/isolated.py).
ISOLATED_STAGES = ("resolve", "publish")
ISOLATE_MIN_PAGES = 2000


class BuildError(RuntimeError):
    """The build cannot produce a pack (e.g. no page could be fetched)."""


def chunking(source: SourceConfig, embedder: ModelInfo) -> tuple[int, int]:
    """(words per chunk, overlap words) from pack.toml, or fitted to the model's window.
    A chunk_words the model cannot read whole is refused: its tail would never be embedded."""
    fits = split_core.words_for_window(embedder.max_seq_length)
    words = source.config.chunk_words or fits
    if words > fits:
        raise SourceError(
            f"{source.folder / CONFIG_FILE}: chunk_words = {words} is more than "
            f"{embedder.model_id} reads ({embedder.max_seq_length} tokens ≈ {fits} words); "
            f"use at most {fits} or leave it unset")
    return words, int(words * source.config.chunk_overlap)


def fetch_config(source: SourceConfig, allow_private_hosts: bool) -> fetch_core.FetchConfig:
    cfg = source.config
    return fetch_core.FetchConfig(
        timeout_s=cfg.fetch_timeout_s,
        max_bytes=cfg.max_page_bytes,
        concurrency=cfg.fetch_concurrency,
        per_host_concurrency=cfg.per_host_concurrency,
        allowed_hosts=tuple(cfg.allowed_hosts),
        allow_private_hosts=allow_private_hosts or cfg.allow_private_hosts,
    )


def extract_config(source: SourceConfig, kind: str | None, max_cost_usd: float | None,
                   retry_failed: bool = False) -> extract_core.ExtractConfig:
    cfg = source.config
    return extract_core.ExtractConfig(
        kind=kind or cfg.extractor, model=cfg.extractor_model,
        concurrency=cfg.extract_concurrency, max_cost_usd=max_cost_usd,
        batch_token_budget=cfg.batch_token_budget, mode=cfg.extract_mode,
        failure_retries=cfg.extract_failure_retries, retry_failed=retry_failed,
        batch_timeout_s=cfg.batch_timeout_s,
    )


def fetch_window(config: fetch_core.FetchConfig, shard_count: int) -> tuple[int, fetch_core.FetchConfig]:
    """(fetch shards run at once, the fetch config of each): the pack's global and
    per-host limits hold for the whole build, divided among the shards in flight."""
    window = 1 if config.per_host_delay_s > 0 else max(1, min(shard_count,
                                                              config.per_host_concurrency))
    return window, dataclasses.replace(
        config, concurrency=max(1, config.concurrency // window),
        per_host_concurrency=max(1, config.per_host_concurrency // window))


def _run_name() -> str:
    """`<pack>-<build id>`: the build id is generated here when the caller gave none
    (scheduled runs), and the flow reads it back from its own run name."""
    from prefect.runtime import flow_run

    params = flow_run.parameters
    return f"{params['name']}-{params.get('build_id') or new_build_id()}"


# --- the stage task: one generic wrapper for every stage -------------------------------


def run_stage(name: str, ctx: BuildContext, shard: shards.Shard | None, inputs: dict):
    """Run stage `name` (tasks.stages) on one shard, or once for the pack."""
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


class Pipeline:
    """Submits stage tasks for one build and follows them: names, tags, retries, the
    per-stage progress artifacts, and the first failure as one clear error."""

    def __init__(self, ctx: BuildContext, layout: list[shards.Shard]) -> None:
        self.ctx = ctx
        self.layout = layout
        self.count = layout[0].count if layout else 1
        self.meta: dict[PrefectFuture, tuple] = {}  # future → (name, shard, inputs, ctx)
        self.results: dict[PrefectFuture, object] = {}
        self.records: dict[str, list[Record]] = defaultdict(list)
        self.progress: dict = {}
        self.started: dict[str, float] = {}
        self.finished: dict[str, float] = {}
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
            retry_condition_fn=stages.retry_condition,
            tags=[f"pack:{self.ctx.pack}", f"stage:{name}"], refresh_cache=refresh or None,
        ).submit(name, ctx or self.ctx, shard, inputs, wait_for=wait_for)
        self.meta[future] = (name, shard, inputs, ctx)
        self.started.setdefault(name, time.perf_counter())
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
            if isinstance(result, Record) and future.state.name == "Cached":
                if stages.needs_rerun(name, result, ctx or self.ctx):
                    fresh = self.submit(name, shard, inputs, ctx, refresh=True)
                    result = self._result(fresh)
                else:
                    result = result.reused()
            self.results[future] = result
            self._done(name, shard, result)
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

    def _done(self, name: str, shard: shards.Shard | None, result: object) -> None:
        self.finished[name] = time.perf_counter()
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


def plan_shards(ctx: BuildContext, urls: list[str], shard_pages: int) -> list[shards.Shard]:
    """Assign URLs to shards, write each non-empty shard's URL list into the work dir,
    and attach each shard's lineage (the last build's outputs for its pages)."""
    count = shards.shard_count(len(urls), shard_pages)
    groups = shards.assign(urls, count)
    plan_dir = ctx.work.stage("plan") / stage_key("plan", count, urls)
    plan_dir.mkdir(parents=True, exist_ok=True)
    state = read_state(ctx.work)
    before = int(state.get("count") or 0)
    layout = []
    for index, group in enumerate(groups):
        if not group:
            continue
        path = plan_dir / f"{index}.txt"
        if not path.is_file():
            path.write_text("".join(u + "\n" for u in group), encoding="utf-8")
        parents = shards.lineage(index, count, before)
        previous = tuple(
            (name, previous_outputs(state, name, variant(ctx, name), parents))
            for name in ("fetch", "extract", "embed", "keywords"))
        layout.append(shards.Shard(index, count, str(path), previous))
    return layout


def variant(ctx: BuildContext, name: str) -> str:
    """What a stage's per-section outputs depend on besides the pages: reused only under
    the same variant. Extraction responses are keyed by their request (model and prompt
    included), so any earlier extraction may serve."""
    return "any" if name == "extract" else stage_key(stages.get(name).settings(ctx))


def inputs_fingerprint(ctx: BuildContext, fetched: list[Record]) -> str:
    """Everything a published build is made from: the pages and every stage's settings."""
    settings = [(name, stages.get(name).settings(ctx)) for name in stages.PIPELINE
                if name != "keywords" or ctx.keyword_vectors]
    return stage_key("inputs", sorted(r.ref for r in fetched), settings, ctx.description,
                     FORMAT_VERSION, QUERY_MODULE_VERSION)


def _budgets(cap: float | None, split: list[Record]) -> dict[int, float | None]:
    """The cost cap shared among the extract shards in proportion to their sections
    (each shard stops starting calls at its share, so the build never passes the cap)."""
    if cap is None:
        return {r.shard: None for r in split}
    total = sum(r.rows["sections"] for r in split) or 1
    return {r.shard: cap * r.rows["sections"] / total for r in split}


def _extract_stats(records: list[Record], pages: int) -> dict:
    """The extract shards' work and counts summed; drops merged by reason; $ per 100 pages
    of the pack, estimated (before the calls) and actual."""
    work: dict = defaultdict(float)
    dropped: Counter = Counter()
    for r in records:
        for k, v in r.work.items():
            if isinstance(v, dict):
                dropped.update(v)
            elif isinstance(v, (int, float)):
                work[k] += v
    out = {k: (round(v, 6) if k.endswith("_usd") else int(v)) for k, v in work.items()}
    for k in ("failed", "failed_deterministic", "failed_transient", "failed_remembered",
              "not_extracted", "dropped_items"):
        out[f"held_{k}" if k == "dropped_items" else k] = sum(
            int(r.info.get(k, 0)) for r in records)
    if dropped:
        out["dropped"] = dict(dropped.most_common())
    if pages and "cost_usd" in out:
        out["pages"] = pages
        out["usd_per_100_pages"] = round(100 * out["cost_usd"] / pages, 4)
        out["usd_per_100_pages_estimate"] = round(100 * out.get("estimate_usd", 0.0) / pages, 4)
    return out


def _stats(pipe: Pipeline, shard_pages: int) -> dict:
    pages = sum(r.rows.get("usable", 0) for r in pipe.records["fetch"])
    extract = _extract_stats(pipe.records["extract"], pages)
    sections = sum(r.rows["sections"] for r in pipe.records["split"])
    computed = sum(r.work.get("computed", 0) for r in pipe.records["embed"])
    embed = {"computed": computed, "cached": sections - computed,
             "seconds": round(sum(r.work.get("encode_seconds", 0.0)
                                  for r in pipe.records["embed"]), 3)}
    if pipe.records["keywords"]:
        kw = sum(r.work.get("computed", 0) for r in pipe.records["keywords"])
        embed["keyword_vectors"] = {"computed": kw, "cached": sections - kw}
    extract_stats = {**extract, "sections": sections, "reused_shards": sum(
        bool(r.info.get("reused")) for r in pipe.records["extract"])}
    return {"extract": extract_stats, "embed": embed,
            "shards": {"count": pipe.count, "non_empty": len(pipe.layout),
                       "shard_pages": shard_pages, "task_runs": pipe.task_runs}}


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
    The build holds the pack's lock (tasks.lock) from start to end: a second build of
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
    with pack_lock.held(Path(out_dir) / source.name, build_id, warn=log.warning) as held:
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


def shortfalls(summary: dict) -> list[str]:
    """What a published build lacks: failed sources, a partial pack (empty when clean)."""
    out = []
    if summary.get("failed_sources_total"):
        out.append(f"{summary['failed_sources_total']} sources not included")
    if summary.get("partial"):
        out.append("the pack is partial (see manifest partial_reasons)")
    return out


def _build(ctx: BuildContext, source: SourceConfig, t_start: float) -> dict:
    """The body of build_pack, with the pack's lock held."""
    log = get_run_logger()
    out_dir, build_id = ctx.out_dir, ctx.build_id
    if len(source.urls) >= ISOLATE_MIN_PAGES and _in_process_runner():
        ctx = dataclasses.replace(ctx, isolate_reduce=True)
    layout = plan_shards(ctx, [u.url for u in source.urls], source.config.shard_pages)
    pipe = Pipeline(ctx, layout)
    log.info("%s: %d URLs in %d shards of up to %d pages", source.name, len(source.urls),
             len(layout), source.config.shard_pages)

    fetched = fetch_all(pipe)
    usable = sum(r.rows["usable"] for r in fetched)
    if usable == 0:
        raise BuildError(f"{source.name}: none of the {len(source.urls)} URLs could be "
                         f"fetched ({_reasons(fetched)}); nothing was published")
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
        budgets = _budgets(ctx.extract.max_cost_usd, pipe.wait(split_f.values()))
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
        "durations": durations, "stats": _stats(pipe, source.config.shard_pages)},
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


def _reasons(fetched: list[Record]) -> str:
    reasons: dict[str, int] = defaultdict(int)
    for r in fetched:
        for reason, n in r.info.get("reasons", {}).items():
            reasons[reason] += n
    top = sorted(reasons.items(), key=lambda kv: -kv[1])[:3]
    return "; ".join(f"{n} × {reason}" for reason, n in top) or "no reason recorded"


def _in_process_runner() -> bool:
    """Whether this flow's tasks run in the build's own process (the thread pool)."""
    from prefect.context import FlowRunContext
    from prefect.task_runners import ThreadPoolTaskRunner

    ctx = FlowRunContext.get()
    return ctx is not None and isinstance(ctx.task_runner, ThreadPoolTaskRunner)


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


def build_context(source: SourceConfig, build_id: str, out_dir: str | Path, work_dir: str | Path,
                  embedding_model: str | None, extractor: str | None,
                  allow_private_hosts: bool, max_cost_usd: float | None,
                  force: bool = False, retry_failed: bool = False) -> BuildContext:
    """The settings every stage of this build runs with (models resolved, kinds checked)."""
    model_name = resolve_embedding_model(source.config, embedding_model)
    embedder = describe_model(model_name)
    embedding = EmbeddingInfo(
        model=embedder.model_id, dim=embedder.dim, normalized=True,
        query_prefix=embedder.spec.query_prefix, document_prefix=embedder.spec.document_prefix,
        max_seq_length=embedder.max_seq_length, gate_threshold=embedder.spec.gate_threshold,
    )
    max_words, overlap_words = chunking(source, embedder)
    xcfg = extract_config(source, extractor, max_cost_usd, retry_failed)
    return BuildContext(
        pack=source.name, work=WorkDir(Path(work_dir).resolve(), source.name),
        build_id=build_id, fetch=fetch_config(source, allow_private_hosts),
        max_words=max_words, overlap_words=overlap_words, extract=xcfg,
        extract_kind=extract_core.resolve_kind(xcfg), model=model_name, embedding=embedding,
        keyword_vectors=source.config.keyword_vectors, out_dir=str(Path(out_dir).resolve()),
        source_folder=str(source.folder), description=source.config.description,
        keep_builds=source.config.keep_builds, faults=os.environ.get(faults.ENV, ""),
        force=force, guard_max_failed_share=source.config.guard_max_failed_share,
        guard_max_loss_share=source.config.guard_max_loss_share,
        query_encoder=source.config.query_encoder,
    )


@flow(name="estimate-pack", flow_run_name="{name}-estimate", log_prints=False)
def estimate_pack(
    name: str, source_dir: str, work_dir: str, embedding_model: str | None = None,
    extractor: str | None = None, allow_private_hosts: bool = False,
) -> dict:
    """Fetch and split like a build, then price the extraction without calling Claude."""
    source = load_source(source_dir)
    ctx = build_context(source, new_build_id(), Path(work_dir) / "estimate-out", work_dir,
                        embedding_model, extractor or "offline", allow_private_hosts, None)
    layout = plan_shards(ctx, [u.url for u in source.urls], source.config.shard_pages)
    pipe = Pipeline(ctx, layout)
    fetched = fetch_all(pipe)
    by_shard = {r.shard: r for r in fetched}
    split = pipe.wait(pipe.map("split", lambda s: {"fetch": by_shard[s.index]}).values())
    xcfg = extract_config(source, "claude", None)
    total: dict = defaultdict(int)
    from tasks.extract_claude import remembered
    from tasks.stages.extract import _settings, known_outputs

    settings = _settings(dataclasses.replace(ctx, extract=xcfg))
    for shard, record in zip(layout, split):
        known, memory = known_outputs(list(shard.previous_outputs("extract")))
        est = extract_core.estimate_cost(
            record.table("sections"), xcfg, set(known),
            {k for k, f in memory.failures.items() if remembered(f, settings)})
        for k in ("sections", "cached", "remembered", "to_call", "calls", "input_tokens",
                  "output_tokens"):
            total[k] += est[k]
        total["cost_usd"] += est["cost_usd"]
        meta = {k: est[k] for k in ("model", "mode", "price_known", "prices_as_of")}
    pages = sum(r.rows["usable"] for r in fetched)
    return {"pack": source.name, "pages": pages, **dict(total),
            "cost_usd": round(total["cost_usd"], 6),
            "usd_per_100_pages": round(100 * total["cost_usd"] / pages, 4) if pages else 0.0,
            **meta}


def _prefect_settings(work: Path):
    return temporary_settings(updates={
        PREFECT_LOCAL_STORAGE_PATH: str(results_dir(work)),
        PREFECT_RESULTS_PERSIST_BY_DEFAULT: True,
    })


def quiet_libraries() -> None:
    for name in ("httpx", "httpcore", "trafilatura", "htmldate", "courlan", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)


def run_estimate(source_dir: str | Path, out_dir: str | Path, *, work_dir=None,
                 embedding_model: str | None = None, extractor: str | None = None,
                 allow_private_hosts: bool = False) -> dict:
    """`kpack build --estimate`: tokens and USD of extracting the source's sections.

    Sections the last build already extracted count zero. Nothing is published.
    """
    source = load_source(source_dir)
    work = Path(work_dir) if work_dir else Path(out_dir) / ".work"
    work.mkdir(parents=True, exist_ok=True)
    quiet_libraries()
    with _prefect_settings(work):
        return estimate_pack(
            name=source.name, source_dir=str(source.folder), work_dir=str(work.resolve()),
            embedding_model=embedding_model, extractor=extractor,
            allow_private_hosts=allow_private_hosts,
        )


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
        with _prefect_settings(work), server.api_for_build(log=log), \
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
        # Recorded, then re-raised: the pack's history shows failed runs next to good ones.
        status = "refused" if isinstance(exc, (GuardError, PackLockedError)) else "failed"
        try:
            append_history(out / source.name, build_id, status, f"{type(exc).__name__}: {exc}")
        except OSError as hist_exc:  # e.g. the disk is still full: say so, keep the cause
            logging.getLogger("kpack.build").warning(
                "could not write the pack's history: %s", hist_exc)
        raise
