"""links (once per pack): the links of every shard's pages → links-<key>.parquet.

A reduce step: a link can point from any shard to any other. It reads only the url,
final_url and links columns of each shard's pages.
"""

from __future__ import annotations

import time

import polars as pl

from tasks import link_graph as links_core
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

NAME = "links"
VERSION = "links-v1"
SCOPE = "pack"
INPUTS = ("fetch",)
RETRIES = 1


def settings(ctx: BuildContext) -> tuple:
    return (VERSION,)


def key(ctx: BuildContext, shard: Shard | None, inputs: dict) -> str:
    return stage_key(NAME, settings(ctx), sorted(r.ref for r in inputs["fetch"]))


def output(ctx: BuildContext, content_key: str):
    return ctx.work.stage(NAME) / f"links-{content_key}.parquet"


def complete(ctx: BuildContext, content_key: str) -> bool:
    return output(ctx, content_key).is_file()


def run(ctx: BuildContext, shard: Shard | None, inputs: dict,
        progress: ProgressFn | None = None) -> Record:
    start = time.perf_counter()
    content_key = key(ctx, shard, inputs)
    out = output(ctx, content_key)
    if not out.is_file():
        paths = [r.paths["pages"] for r in inputs["fetch"]]
        pages = (pl.scan_parquet(paths).filter(pl.col("text").is_not_null())
                 .select("url", "final_url", "links").collect())
        write_parquet(links_core.links_table(pages), out)
    rows = parquet_rows(out)
    log.info("links: %d links between pages of the pack", rows)
    return Record(NAME, content_key, None, {"links": str(out)}, {"links": rows},
                  time.perf_counter() - start)
