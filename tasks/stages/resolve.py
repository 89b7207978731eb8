"""resolve (once per pack): every shard's extractions → the entities, mentions,
relationships and facts tables (`tasks.extract.core.assemble`: entity resolution across the
whole pack, deterministic ids).

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
from tasks.extract import core as extract_core
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
VERSION = "resolve-v1"
SCOPE = "pack"
INPUTS = ("extract",)
RETRIES = 1
TABLES = (fmt.ENTITIES, fmt.MENTIONS, fmt.RELATIONSHIPS, fmt.FACTS)


def settings(ctx: BuildContext) -> tuple:
    return (VERSION,)


def key(ctx: BuildContext, shard: Shard | None, inputs: dict) -> str:
    return stage_key(NAME, settings(ctx), sorted(r.ref for r in inputs["extract"]))


def outputs(ctx: BuildContext, content_key: str) -> dict[str, str]:
    folder = ctx.work.stage(NAME)
    return {t: str(folder / f"{t}-{content_key}.parquet") for t in TABLES}


def complete(ctx: BuildContext, content_key: str) -> bool:
    return all(Path(p).is_file() for p in outputs(ctx, content_key).values())


def run(ctx: BuildContext, shard: Shard | None, inputs: dict,
        progress: ProgressFn | None = None) -> Record:
    start = time.perf_counter()
    content_key = key(ctx, shard, inputs)
    paths = outputs(ctx, content_key)
    if not complete(ctx, content_key):
        df = (pl.scan_parquet([r.paths["extractions"] for r in inputs["extract"]])
              .filter(pl.col("status") == "ok").select("section_id", "data")
              .sort("section_id").collect())
        extractions = [(sid, extract_core.parse_extraction(json.loads(data)))
                       for sid, data in df.iter_rows()]
        del df
        tables = extract_core.assemble(extractions)
        for name, table in tables.items():
            write_parquet(table, Path(paths[name]))
    rows = {t: parquet_rows(p) for t, p in paths.items()}
    log.info("resolve: %d entities, %d relationships, %d facts", rows[fmt.ENTITIES],
                  rows[fmt.RELATIONSHIPS], rows[fmt.FACTS])
    return Record(NAME, content_key, None, paths, rows, time.perf_counter() - start)
