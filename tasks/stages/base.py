"""The stage contract: what a build stage declares for the flow, and the one skeleton that
decides whether its output is reused or computed.

A stage is a subclass of `Stage` with one instance in `tasks.stages.PIPELINE`. The flow
(flows/) reads only these declarations; it never names a stage. A stage module fills in
the class attributes it needs and `compute`; the defaults below are what a plain per-shard
stage with one Parquet output wants.

The reuse-or-compute skeleton (`Stage.run`) is the only place that looks at the disk:
the content key (`key`: the stage's settings and its inputs' refs) names the outputs
(`paths`); when they are `complete`, the run reads them back; otherwise `compute` writes
them. Either way the record is made by `record` from the files, so a stage never checks
a file itself. A stage whose key is known only after running (fetch hashes what it
fetched) or that always runs (publish) overrides `run`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from tasks.shards import Shard
from tasks.stages.common import BuildContext, ProgressFn, Record, log, parquet_rows, stage_key

SHARD = "shard"  # mapped over the shards of the pack
PACK = "pack"  # once over all shards: the reduce steps and the single writer

RecordsOf = Callable[[str], Any]  # a stage's records by name, waiting for them


class Stage:
    """One build stage. Class attributes are its declarations (see tasks/stages/__init__.py
    for the list and who reads each); methods with a default may be overridden."""

    NAME: ClassVar[str]
    VERSION: ClassVar[str]
    SCOPE: ClassVar[str] = SHARD
    # the stages whose records it reads: inputs[name] is the same shard's record (a shard
    # stage reading a shard stage) or the list of every shard's records (else the one)
    INPUTS: ClassVar[tuple[str, ...]] = ()
    # it reads the records of every stage before it in the pipeline instead (publish)
    READS_ALL: ClassVar[bool] = False
    # its Parquet outputs: the Record's path name → the file's prefix in its folder
    OUTPUTS: ClassVar[Mapping[str, str]] = {}
    # Parquet outputs that hold pack tables, each file named as its table (a reduce step's)
    TABLES: ClassVar[tuple[str, ...]] = ()
    RETRIES: ClassVar[int] = 1
    RETRY_DELAY_S: ClassVar[float] = 1
    TERMINAL_ERRORS: ClassVar[tuple[type[BaseException], ...]] = ()  # never retried
    # its per-shard outputs serve the next build's shards section by section (state.json)
    LINEAGE: ClassVar[bool] = False
    # a reduce step whose memory grows with the pack: run in a child process on in-process
    # runners for large packs (tasks/stages/isolated.py)
    ISOLATE: ClassVar[bool] = False
    # its records are what the build is made from: after it, the flow may end the build
    # early ("no changes") when they equal the published build's, or stop it (`stop_reason`)
    ENDS_EARLY: ClassVar[bool] = False
    # the stage that writes the pack: the flow hands it FLOW_INPUTS, its Record's info is
    # the build's summary, and `unchanged` finds a published build made from these inputs
    PUBLISHES: ClassVar[bool] = False
    FLOW_INPUTS: ClassVar[tuple[str, ...]] = ()
    # the key of the build summary's "stats" that `stats` adds to (None: it adds nothing)
    STATS: ClassVar[str | None] = None
    # what `estimate` prices (`kpack build --estimate`); "" when it costs nothing
    PRICED: ClassVar[str] = ""
    # the description of the artifact `shard_row` fills on each of its task runs
    SHARD_ARTIFACT: ClassVar[str] = ""

    # --- what the flow asks ---------------------------------------------------------------

    def enabled(self, ctx: BuildContext) -> bool:
        """Whether this build runs it at all (off: its dependents read nothing from it)."""
        return True

    def settings(self, ctx: BuildContext) -> tuple:
        """What in the build settings changes its output."""
        return (self.VERSION,)

    def variant(self, ctx: BuildContext) -> str:
        """What its per-section outputs depend on besides the pages (LINEAGE stages): the
        next build reuses them only under the same variant."""
        return stage_key(self.settings(ctx))

    def window(self, ctx: BuildContext, shard_count: int) -> tuple[int, BuildContext] | None:
        """(at most this many of its shards in flight, the context each runs with), or None
        for no limit."""
        return None

    def shard_inputs(self, ctx: BuildContext, records_of: RecordsOf) -> dict[int, dict]:
        """Extra inputs per shard index, from the records of earlier stages it asks for."""
        return {}

    def facts(self, records: list[Record]) -> dict[str, int]:
        """Counts of the whole build that other stages' stats read ("pages", "sections")."""
        return {}

    def stats(self, records: list[Record], facts: Mapping[str, int], count: int) -> dict:
        """What it adds to the build summary's stats[STATS] (its records, the facts of every
        stage, the shard count)."""
        return {}

    def shard_row(self, record: Record, count: int) -> dict | None:
        """One shard run's calls and cost for its task run's artifact (flows.report's
        SHARD_HEADER columns), or None when there is nothing to show."""
        return None

    def stop_reason(self, records: list[Record]) -> str | None:
        """Why the build cannot go on after this stage (ENDS_EARLY stages), or None."""
        return None

    def estimate(self, ctx: BuildContext, runs: list[tuple[Shard, dict]],
                 facts: Mapping[str, int]) -> dict:
        """The price of running it on these (shard, inputs), without running it (PRICED),
        given the build's facts (the pages fetched)."""
        return {}

    def unchanged(self, ctx: BuildContext, fingerprint: str) -> dict | None:
        """The summary of the published build made from exactly these inputs, or None
        (PUBLISHES stages)."""
        return None

    # --- key, outputs, completeness --------------------------------------------------------

    def key(self, ctx: BuildContext, shard: Shard | None, inputs: dict) -> str | None:
        """Its content key: its settings and the refs of its inputs (every shard's, sorted,
        for a stage reading all shards). None when it is known only after running."""
        refs = [sorted(r.ref for r in inputs[name]) if isinstance(inputs[name], list)
                else inputs[name].ref for name in self.INPUTS]
        return stage_key(self.NAME, self.settings(ctx), *refs)

    def paths(self, ctx: BuildContext, content_key: str) -> dict[str, str]:
        """Its output files for a content key, by the Record's path name."""
        folder = ctx.work.stage(self.NAME)
        named = {**self.OUTPUTS, **{table: table for table in self.TABLES}}
        return {name: str(folder / f"{prefix}-{content_key}.parquet")
                for name, prefix in named.items()}

    def complete(self, ctx: BuildContext, content_key: str) -> bool:
        """Whether the output for that key is on disk, finished, and needs no more work."""
        return all(Path(p).is_file() for p in self.paths(ctx, content_key).values())

    def reusable(self, ctx: BuildContext, shard: Shard | None, inputs: dict) -> bool:
        """The one decision whether a run is reused instead of computed: its content key is
        known and the output for that key is complete."""
        content_key = self.key(ctx, shard, inputs)
        return content_key is not None and self.complete(ctx, content_key)

    # --- running ----------------------------------------------------------------------------

    def run(self, ctx: BuildContext, shard: Shard | None, inputs: dict,
            progress: ProgressFn | None = None) -> Record:
        """Reuse the output for its key when complete, else `compute` it; the Record either
        way (`work` is empty when reused)."""
        start = time.perf_counter()
        content_key = self.key(ctx, shard, inputs)
        assert content_key is not None, f"{self.NAME} has no key before running: override run"
        files = self.paths(ctx, content_key)
        work: dict = {}
        if not self.complete(ctx, content_key):
            work = self.compute(ctx, shard, inputs, files, progress) or {}
        record = self.record(ctx, shard, content_key, files, work, time.perf_counter() - start)
        line = self.summary_line(shard, inputs, record)
        if line:
            log.info("%s", line)
        return record

    def compute(self, ctx: BuildContext, shard: Shard | None, inputs: dict,
                files: dict[str, str], progress: ProgressFn | None) -> dict | None:
        """Write its outputs to `files`; returns the counters of the work done."""
        raise NotImplementedError(f"stage {self.NAME} computes nothing")

    def record(self, ctx: BuildContext, shard: Shard | None, content_key: str,
               files: dict[str, str], work: dict, seconds: float) -> Record:
        """The Record of its outputs: the row count of each file."""
        return Record(self.NAME, content_key, shard.index if shard is not None else None,
                      files, {name: parquet_rows(p) for name, p in files.items()}, seconds,
                      work=work)

    def summary_line(self, shard: Shard | None, inputs: dict, record: Record) -> str | None:
        """The log line of a finished run (reused or not), or None."""
        return None
