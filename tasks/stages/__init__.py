"""The build's stages, one module each; the pipeline is the ordered list of their names.

Every stage module has the same shape (after graphrag's `index/workflows/`):

    NAME, VERSION        the stage's name and the version of what it writes
    SCOPE                "shard": mapped over the shards of the pack (fetch, split,
                         extract, embed, keywords); "pack": once over all shards (links,
                         resolve, publish: the reduce steps and the single writer)
    INPUTS               the stages whose records it reads
    RETRIES              how often the flow retries a failed run of it
    settings(ctx)        what in the build settings changes its output
    key(ctx, shard, inputs) -> str | None
                         its content key: its settings and its inputs' keys (None when it
                         is known only after running: fetch hashes what it fetched)
    complete(ctx, key)   whether a finished output for that key exists
    needs_rerun(record, ctx)
                         (optional) a cached record of it that must run again
    TERMINAL_ERRORS      (optional) exception types never worth a retry
    run(ctx, shard, inputs, progress=None) -> Record
                         read the inputs' Parquet, call the pure core in tasks/, write its
                         Parquet named by the key, return a small Record

`inputs` maps a stage name to its Record (shard scope: the same shard's) or to the list of
every shard's records (pack scope). Progress is reported through the `progress(done,
total)` callback and lines through the `kpack.build` logger (tasks.stages.common.log);
stages import nothing from `flows/` and nothing of Prefect: the flow (flows/build.py)
wraps them in tasks and owns their retries.
"""

from __future__ import annotations

from types import ModuleType

from tasks.stages import embed, extract, fetch, keywords, links, publish, resolve, split

PIPELINE: tuple[str, ...] = (
    "fetch", "split", "links", "extract", "embed", "keywords", "resolve", "publish",
)
SHARD_STAGES = tuple(name for name in PIPELINE if name in ("fetch", "split", "extract",
                                                            "embed", "keywords"))
_MODULES: dict[str, ModuleType] = {
    m.NAME: m for m in (fetch, split, links, extract, embed, keywords, resolve, publish)
}
assert set(_MODULES) == set(PIPELINE), "every pipeline stage has a module"


def get(name: str) -> ModuleType:
    """The module of stage `name` (KeyError for an unknown stage)."""
    return _MODULES[name]


def needs_rerun(name: str, record, ctx=None) -> bool:
    """Whether a record found in Prefect's cache cannot serve this build (with context
    `ctx`): its files are gone (a cleaned work directory), or the stage says so (an
    extraction with sections to retry)."""
    from pathlib import Path

    if not all(Path(p).is_file() for p in record.paths.values()):
        return True
    check = getattr(_MODULES[name], "needs_rerun", None)
    return bool(check and check(record, ctx))


def is_terminal(exc: BaseException | None) -> bool:
    """A stage error that says what to fix in one line (a rejected key, an open circuit
    breaker): not worth a retry, nor a traceback."""
    terminal = tuple(t for m in _MODULES.values() for t in getattr(m, "TERMINAL_ERRORS", ()))
    return isinstance(exc, terminal)
