"""topics (once per pack): the resolved entity tables and every shard's sections → the
topic tables (`tasks.topics.topics`: communities of the entity graph, each with a title,
its top entities and sections and a digest of representative sentences).

A reduce step after resolve. Its key is resolve's key and the split outputs' keys, so a
rebuild with no change reuses its output and recomputes nothing.
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl

from packs import format as fmt
from tasks import topics as topics_core
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

NAME = "topics"
VERSION = f"topics-stage-v1+{topics_core.TOPICS_VERSION}"
SCOPE = "pack"
INPUTS = ("resolve", "split")
RETRIES = 1
TABLES = (fmt.TOPICS, fmt.TOPIC_ENTITIES, fmt.TOPIC_SECTIONS)


def settings(ctx: BuildContext) -> tuple:
    return (VERSION,)


def key(ctx: BuildContext, shard: Shard | None, inputs: dict) -> str:
    return stage_key(NAME, settings(ctx), inputs["resolve"].ref,
                     sorted(r.ref for r in inputs["split"]))


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
    work: dict = {}
    if not complete(ctx, content_key):
        resolved = inputs["resolve"]
        sections = pl.concat([r.table("sections", ["id", "page_title", "content"])
                              for r in inputs["split"]], how="vertical_relaxed")
        tables = topics_core.topics(resolved.table(fmt.ENTITIES, ["id", "name"]),
                                    resolved.table(fmt.MENTIONS),
                                    resolved.table(fmt.RELATIONSHIPS),
                                    sections)
        for name, table in tables.items():
            write_parquet(table, Path(files[name]))
        work = {"computed": 1}
    rows = {t: parquet_rows(p) for t, p in files.items()}
    seconds = time.perf_counter() - start
    log.info("topics: %d topics over %d entities (%.1f s%s)", rows[fmt.TOPICS],
             rows[fmt.TOPIC_ENTITIES], seconds, "" if work else ", reused")
    return Record(NAME, content_key, None, files, rows, seconds, work=work)
