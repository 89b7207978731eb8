"""split (per shard): the shard's pages → sections-<key>.parquet.

Sections by heading, chunked to the model's window (`tasks.sections`); the code-fence
languages of each section (`Section.languages`, for the query filter) are read here too,
so the publish step only concatenates.
"""

from __future__ import annotations

import time

import polars as pl

from packs.filters import fence_languages
from tasks import sections as split_core
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

NAME = "split"
VERSION = f"{split_core.SPLITTER_VERSION}+languages"
SCOPE = "shard"
INPUTS = ("fetch",)
RETRIES = 1


def settings(ctx: BuildContext) -> tuple:
    return (VERSION, ctx.max_words, ctx.overlap_words)


def key(ctx: BuildContext, shard: Shard | None, inputs: dict) -> str:
    return stage_key(NAME, settings(ctx), inputs["fetch"].ref)


def output(ctx: BuildContext, content_key: str):
    return ctx.work.stage(NAME) / f"sections-{content_key}.parquet"


def complete(ctx: BuildContext, content_key: str) -> bool:
    return output(ctx, content_key).is_file()


def run(ctx: BuildContext, shard: Shard | None, inputs: dict,
        progress: ProgressFn | None = None) -> Record:
    start = time.perf_counter()
    fetched = inputs["fetch"]
    content_key = key(ctx, shard, inputs)
    out = output(ctx, content_key)
    if not out.is_file():
        pages = fetched.table("pages").filter(pl.col("text").is_not_null())
        sections = split_core.split_pages(pages, ctx.max_words, ctx.overlap_words)
        sections = sections.with_columns(pl.col("content").map_elements(
            fence_languages, return_dtype=pl.List(pl.Utf8)).alias("languages"))
        write_parquet(sections, out)
    rows = parquet_rows(out)
    log.info("split %s: %d sections from %d pages", shard.label, rows,
                  fetched.rows["usable"])
    return Record(NAME, content_key, shard.index, {"sections": str(out)}, {"sections": rows},
                  time.perf_counter() - start)
