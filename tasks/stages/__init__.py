"""The build's stages, one module each; the pipeline is the ordered list of their names.

Every stage module has the same shape (after graphrag's `index/workflows/`):

    NAME, VERSION        the stage's name and the version of what it writes
    SCOPE                "shard": mapped over the shards of the pack (fetch, split,
                         extract, embed, keywords); "pack": once over all shards (links,
                         resolve, topics, publish: the reduce steps and the single writer)
    INPUTS               the stages whose records it reads (flows/scheduler.py wires them)
    RETRIES              how often the flow retries a failed run of it
    settings(ctx)        what in the build settings changes its output
    key(ctx, shard, inputs) -> str | None
                         its content key: its settings and its inputs' keys (None when it
                         is known only after running: fetch hashes what it fetched; and
                         publish, which always runs)
    complete(ctx, key)   whether the output for that key is on disk, finished, and needs
                         no more work (stages with a key)
    run(ctx, shard, inputs, progress=None) -> Record
                         read the inputs' Parquet, call the pure core in tasks/, write its
                         Parquet named by the key, return a small Record; when the output
                         is already complete it only reads it back

and may declare:

    enabled(ctx)         whether this build runs it at all (keywords: an opt-in)
    window(ctx, n)       at most this many of its n shards in flight, and the context
                         each runs with (fetch: the pack's host limits hold build-wide)
    shard_inputs(ctx, records_of)
                         extra inputs per shard, from the records of earlier stages it
                         asks for (extract: each shard's share of the cost cap)
    TERMINAL_ERRORS      exception types never worth a retry

`inputs` maps a stage name to its Record (shard scope: the same shard's) or to the list of
every shard's records (pack scope). Progress is reported through the `progress(done,
total)` callback and lines through the `kpack.build` logger (tasks.stages.common.log);
stages import nothing from `flows/` and nothing of Prefect: the flow (flows/scheduler.py)
wraps them in tasks and owns their retries.
"""

from __future__ import annotations

from types import ModuleType

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
)
from tasks.stages.common import BuildContext, stage_key

PIPELINE: tuple[str, ...] = (
    "fetch", "split", "links", "extract", "embed", "keywords", "resolve", "topics", "publish",
)
_MODULES: dict[str, ModuleType] = {
    m.NAME: m for m in (fetch, split, links, extract, embed, keywords, resolve, topics, publish)
}
assert set(_MODULES) == set(PIPELINE), "every pipeline stage has a module"


def get(name: str) -> ModuleType:
    """The module of stage `name` (KeyError for an unknown stage)."""
    return _MODULES[name]


def enabled(name: str, ctx: BuildContext) -> bool:
    """Whether this build runs stage `name` (every stage does unless it says otherwise)."""
    check = getattr(_MODULES[name], "enabled", None)
    return check is None or bool(check(ctx))


def cache_key(name: str, ctx: BuildContext, shard, inputs: dict) -> str | None:
    """The cache key of a run of stage `name`: its content key, within this work directory
    (records name their files by absolute path); None when the key is known only after
    running (fetch, publish)."""
    content_key = _MODULES[name].key(ctx, shard, inputs)
    return None if content_key is None else f"{name}-{stage_key(content_key, ctx.work.root)}"


def reusable(name: str, ctx: BuildContext, shard, inputs: dict) -> bool:
    """The one decision whether a run of stage `name` is reused instead of run: its content
    key is known and the output for that key is complete on disk (tasks/stages' `complete`:
    its files are there and, for extract, no section in them is to be asked again)."""
    module = _MODULES[name]
    content_key = module.key(ctx, shard, inputs)
    return content_key is not None and bool(module.complete(ctx, content_key))


def is_terminal(exc: BaseException | None) -> bool:
    """A stage error that says what to fix in one line (a rejected key, an open circuit
    breaker): not worth a retry, nor a traceback."""
    terminal = tuple(t for m in _MODULES.values() for t in getattr(m, "TERMINAL_ERRORS", ()))
    return isinstance(exc, terminal)
