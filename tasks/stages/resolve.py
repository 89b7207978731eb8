"""resolve (once per pack): every shard's extractions → the entities, mentions,
relationships and facts tables (`tasks.extract.core.assemble`: entity resolution across the
whole pack, deterministic ids). For the offline extractor, the names the pages' code binds
or uses as values (`offline_names.bound_names`: an example's `name: pod-e`, `let guess`)
are left out wherever they occur, so it reads the split outputs' code too.

A reduce step: the same entity is named in many shards. Its key is the digests of the
extract outputs, so an extraction that gained sections (a retried failure) resolves again
even when its key did not change.
"""

from __future__ import annotations

import json

import polars as pl

from packs import format as fmt
from packs.markdown import fence_spans
from tasks.extract import core as extract_core
from tasks.extract.assemble import assemble
from tasks.extract.offline_names import bound_names
from tasks.stages.base import PACK, Stage
from tasks.stages.common import write_parquet

TABLES = (fmt.ENTITIES, fmt.MENTIONS, fmt.RELATIONSHIPS, fmt.FACTS)


class Resolve(Stage):
    NAME = "resolve"
    VERSION = "resolve-v2"  # v2: names rendered (no link syntax), offline examples' names out
    SCOPE = PACK
    INPUTS = ("extract", "split")
    OUTPUTS = {t: t for t in TABLES}
    ISOLATE = True

    def compute(self, ctx, shard, inputs, files, progress) -> None:
        df = (pl.scan_parquet([r.paths["extractions"] for r in inputs["extract"]])
              .filter(pl.col("status") == "ok").select("section_id", "data")
              .sort("section_id").collect())
        extractions = [(sid, extract_core.parse_extraction(json.loads(data)))
                       for sid, data in df.iter_rows()]
        del df
        stop = example_names(inputs) if ctx.extract_kind == "offline" else set()
        for name, table in assemble(extractions, stop).items():
            write_parquet(table, files[name])

    def summary_line(self, shard, inputs, record) -> str:
        return (f"resolve: {record.rows[fmt.ENTITIES]} entities, "
                f"{record.rows[fmt.RELATIONSHIPS]} relationships, {record.rows[fmt.FACTS]} facts")


def example_names(inputs: dict) -> set[str]:
    """The names every section's fenced code binds or uses as values (offline builds)."""
    names: set[str] = set()
    for r in inputs["split"]:
        for (content,) in r.table("sections", ["content"]).iter_rows():
            text = content or ""
            for start, end in fence_spans(text):
                names |= bound_names(text[start:end])
    return names


STAGE = Resolve()
