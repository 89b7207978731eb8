"""The build's stages, one module each; the pipeline is the ordered list of their objects.

Every stage module holds one subclass of `tasks.stages.base.Stage` and its instance,
`STAGE` (after graphrag's `index/workflows/`). The flow (flows/) never names a stage: it
walks `PIPELINE` and reads what each stage declares.

    NAME, VERSION        the stage's name and the version of what it writes
    SCOPE                "shard": mapped over the shards of the pack (fetch, split,
                         extract, embed, keywords); "pack": once over all shards (links,
                         resolve, topics, publish: the reduce steps and the single writer)
    INPUTS               the stages whose records it reads (READS_ALL: every stage
                         before it, publish); flows/scheduler.py wires them
    OUTPUTS              its Parquet files: the Record's path name → the file's prefix
    TABLES               its Parquet files that hold pack tables, each named as its table
    RETRIES, RETRY_DELAY_S, TERMINAL_ERRORS
                         how often and how soon the flow retries a failed run, and the
                         exceptions never worth a retry
    settings(ctx)        what in the build settings changes its output
    compute(...)         read the inputs' Parquet, call the pure core in tasks/, write
                         the outputs; only called when they are not complete on disk

and may declare (flows/ reads each where it says):

    enabled(ctx)         whether this build runs it at all (keywords: an opt-in)
    window(ctx, n)       at most this many of its n shards in flight, and the context
                         each runs with (fetch: the pack's host limits hold build-wide)
    shard_inputs(ctx, records_of)
                         extra inputs per shard, from the records of earlier stages it
                         asks for (extract: each shard's share of the cost cap)
    LINEAGE, variant(ctx)
                         its outputs serve the next build's shards section by section,
                         under the same variant (flows/plan.py, state.json)
    ENDS_EARLY, stop_reason(records)
                         after it the flow may end the build: "no changes" when its
                         records equal the published build's, or an error (fetch)
    PUBLISHES, FLOW_INPUTS, unchanged(ctx, fingerprint)
                         the single writer (publish): the flow's own inputs it wants, and
                         the published build made from the same inputs
    ISOLATE              a reduce step run in a child process for large packs
    facts(records), STATS, stats(records, facts, count)
                         the build summary's counts and stats (flows/summary.py)
    SHARD_ARTIFACT, shard_row(record, count)
                         a table on each of its task runs in the Prefect UI (extract's
                         calls and cost)
    PRICED, estimate(ctx, runs)
                         what `kpack build --estimate` prices without running it
    summary_line(shard, inputs, record)
                         the log line of a finished run

`Stage.run` is the one reuse-or-compute skeleton: the content key (`key`: the settings and
the inputs' refs) names the outputs (`paths`); when they are `complete` they are read
back, else `compute` writes them; `record` makes the Record from the files either way.
Stages import nothing from `flows/` and nothing of Prefect: the flow
(flows/scheduler.py) wraps them in tasks and owns their retries.

Adding a stage (e.g. `topics`, after extract) is one module and one list entry:

1. `tasks/stages/topics.py`::

       class Topics(Stage):
           NAME = "topics"
           VERSION = "topics-v1"
           INPUTS = ("split", "extract")         # the same shard's records
           OUTPUTS = {"topics": "topics"}        # → <work>/<pack>/topics/topics-<key>.parquet

           def compute(self, ctx, shard, inputs, files, progress):
               sections = inputs["split"].table("sections")
               write_parquet(topics_core.topics(sections), files["topics"])

       STAGE = Topics()

2. `PIPELINE` below: import the module and put `topics.STAGE` where it runs (before
   publish, which reads every stage before it: `inputs["topics"]` there is every shard's
   Record; publish decides what of it goes into the pack).

The scheduler, the Prefect task names (`topics-<pack>-<i>/<n>`), its cache key, the
task-run bound (`max_task_runs`, the README's figure, checked by tests/test_stages.py) and
the build summary follow from the declarations; flows/ needs no edit.
"""

from __future__ import annotations

from tasks.shards import MAX_SHARDS
from tasks.stages import (
    embed,
    extract,
    fetch,
    keywords,
    links,
    publish,
    resolve,
    split,
    topics,
    unit_vectors,
)
from tasks.stages.base import SHARD, Stage
from tasks.stages.common import BuildContext, stage_key

PIPELINE: tuple[Stage, ...] = (
    fetch.STAGE, split.STAGE, links.STAGE, extract.STAGE, embed.STAGE, unit_vectors.STAGE,
    keywords.STAGE, resolve.STAGE, topics.STAGE, publish.STAGE,
)


def names() -> tuple[str, ...]:
    """The stage names in pipeline order."""
    return tuple(s.NAME for s in PIPELINE)


def get(name: str) -> Stage:
    """The stage called `name` (KeyError for an unknown stage)."""
    for stage in PIPELINE:
        if stage.NAME == name:
            return stage
    raise KeyError(f"no stage {name!r} in the pipeline ({', '.join(names())})")


def inputs_of(name: str) -> tuple[str, ...]:
    """The stages whose records stage `name` reads: its INPUTS, or with READS_ALL every
    stage before it."""
    stage = get(name)
    if stage.READS_ALL:
        return names()[:names().index(name)]
    return stage.INPUTS


def enabled(name: str, ctx: BuildContext) -> bool:
    """Whether this build runs stage `name` (every stage does unless it says otherwise)."""
    return bool(get(name).enabled(ctx))


def publisher() -> Stage:
    """The stage that writes the pack (PUBLISHES)."""
    return next(s for s in PIPELINE if s.PUBLISHES)


def phases() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The pipeline cut where the flow acts between stages: up to the last stage that may
    end the build early (ENDS_EARLY), then up to the publisher, then from it on."""
    all_names = names()
    early = max((i + 1 for i, s in enumerate(PIPELINE) if s.ENDS_EARLY), default=0)
    last = all_names.index(publisher().NAME)
    return all_names[:early], all_names[early:last], all_names[last:]


def cache_key(name: str, ctx: BuildContext, shard, inputs: dict) -> str | None:
    """The cache key of a run of stage `name`: its content key, within this work directory
    (records name their files by absolute path); None when the key is known only after
    running (fetch, publish)."""
    content_key = get(name).key(ctx, shard, inputs)
    return None if content_key is None else f"{name}-{stage_key(content_key, ctx.work.root)}"


def reusable(name: str, ctx: BuildContext, shard, inputs: dict) -> bool:
    """The one decision whether a run of stage `name` is reused instead of run: its content
    key is known and the output for that key is complete on disk (its `complete`: its
    files are there and, for extract, no section in them is to be asked again)."""
    return get(name).reusable(ctx, shard, inputs)


def is_terminal(exc: BaseException | None) -> bool:
    """A stage error that says what to fix in one line (a rejected key, an open circuit
    breaker): not worth a retry, nor a traceback."""
    terminal = tuple(t for s in PIPELINE for t in s.TERMINAL_ERRORS)
    return isinstance(exc, terminal)


def max_task_runs(ctx: BuildContext | None = None, shards: int = MAX_SHARDS) -> int:
    """The most task runs a build has: one per shard of each shard stage, one per pack
    stage (only the stages `ctx` enables; every stage without a context)."""
    on = [s for s in PIPELINE if ctx is None or s.enabled(ctx)]
    return sum(shards if s.SCOPE == SHARD else 1 for s in on)
