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
import time
from pathlib import Path

import polars as pl

from packs import format as fmt
from packs.markdown import fence_spans
from tasks.extract import core as extract_core
from tasks.extract.assemble import assemble
from tasks.extract.offline_names import bound_names
from tasks.shards import Shard
from tasks.stages.common import (
    BuildContext,
    ProgressFn,
    Record,
    log,
    parquet_rows,
    stage_key,
    write_parquet,
)

NAME = "resolve"
VERSION = "resolve-v2"  # v2: names rendered (no link syntax), offline examples' names out
SCOPE = "pack"
INPUTS = ("extract", "split")
RETRIES = 1
TABLES = (fmt.ENTITIES, fmt.MENTIONS, fmt.RELATIONSHIPS, fmt.FACTS)


def settings(ctx: BuildContext) -> tuple:
    return (VERSION,)


def key(ctx: BuildContext, shard: Shard | None, inputs: dict) -> str:
    split = sorted(r.ref for r in inputs["split"]) if ctx.extract_kind == "offline" else []
    return stage_key(NAME, settings(ctx), sorted(r.ref for r in inputs["extract"]), split)


def example_names(inputs: dict) -> set[str]:
    """The names every section's fenced code binds or uses as values (offline builds)."""
    names: set[str] = set()
    for r in inputs["split"]:
        for (content,) in r.table("sections", ["content"]).iter_rows():
            text = content or ""
            for start, end in fence_spans(text):
                names |= bound_names(text[start:end])
    return names


def paths(ctx: BuildContext, content_key: str) -> dict[str, str]:
    folder = ctx.work.stage(NAME)
    return {t: str(folder / f"{t}-{content_key}.parquet") for t in TABLES}


def complete(ctx: BuildContext, content_key: str) -> bool:
    return all(Path(p).is_file() for p in paths(ctx, content_key).values())


def run(ctx: BuildContext, shard: Shard | None, inputs: dict,
        progress: ProgressFn | None = None) -> Record:
    start = time.perf_counter()
    content_key = key(ctx, shard, inputs)
    files = paths(ctx, content_key)
    if not complete(ctx, content_key):
        df = (pl.scan_parquet([r.paths["extractions"] for r in inputs["extract"]])
              .filter(pl.col("status") == "ok").select("section_id", "data")
              .sort("section_id").collect())
        extractions = [(sid, extract_core.parse_extraction(json.loads(data)))
                       for sid, data in df.iter_rows()]
        del df
        stop = example_names(inputs) if ctx.extract_kind == "offline" else set()
        tables = assemble(extractions, stop)
        for name, table in tables.items():
            write_parquet(table, Path(files[name]))
    rows = {t: parquet_rows(p) for t, p in files.items()}
    log.info("resolve: %d entities, %d relationships, %d facts", rows[fmt.ENTITIES],
             rows[fmt.RELATIONSHIPS], rows[fmt.FACTS])
    return Record(NAME, content_key, None, files, rows, time.perf_counter() - start)
