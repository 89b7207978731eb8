"""embed (per shard): the shard's sections → vectors-<key>.parquet (id, content_hash,
embedding).

Vectors of sections whose content hash the shard already had in the last build (its
lineage outputs) are reused; only new or changed sections are encoded. The model is
loaded once per process (worker), not once per task (`packs.embedding` keeps it).
"""

from __future__ import annotations

import time

import numpy as np
import polars as pl

from packs.embedding import Embedder
from tasks import vectors as embed_core
from tasks.shards import Shard
from tasks.stages.common import (
    BuildContext,
    LogProgress,
    ProgressFn,
    Record,
    log,
    parquet_rows,
    stage_key,
    write_parquet,
)

NAME = "embed"
VERSION = "embed-v2"
SCOPE = "shard"
INPUTS = ("split",)
RETRIES = 1
SECTION_COLUMNS = ["id", "heading_path", "content", "content_hash"]


def settings(ctx: BuildContext) -> tuple:
    return (VERSION, ctx.embedding.model, ctx.embedding.dim)


def key(ctx: BuildContext, shard: Shard | None, inputs: dict) -> str:
    return stage_key(NAME, settings(ctx), inputs["split"].ref)


def output(ctx: BuildContext, content_key: str):
    return ctx.work.stage(NAME) / f"vectors-{content_key}.parquet"


def complete(ctx: BuildContext, content_key: str) -> bool:
    return output(ctx, content_key).is_file()


def known_vectors(paths: tuple[str, ...], hash_column: str, vector_column: str,
                  wanted: set[str]) -> dict[str, np.ndarray]:
    """Vectors by hash from earlier outputs of this shard's pages, for the hashes wanted."""
    known: dict[str, np.ndarray] = {}
    for path in paths:
        df = pl.read_parquet(path, columns=[hash_column, vector_column]).filter(
            pl.col(hash_column).is_in(list(wanted)))
        if df.height:
            matrix = df[vector_column].to_numpy()
            known.update(zip(df[hash_column].to_list(), matrix))
    return known


def run(ctx: BuildContext, shard: Shard | None, inputs: dict,
        progress: ProgressFn | None = None) -> Record:
    start = time.perf_counter()
    content_key = key(ctx, shard, inputs)
    out = output(ctx, content_key)
    work: dict = {}
    if not out.is_file():
        sections = inputs["split"].table("sections", SECTION_COLUMNS)
        known = known_vectors(shard.previous_outputs(NAME), "content_hash", "embedding",
                              set(sections["content_hash"].to_list()))
        embedder = Embedder(ctx.model)
        vectors, stats = embed_core.embed_sections(
            sections, embedder, known,
            progress=progress or LogProgress(f"embed {shard.label}"))
        write_parquet(vectors, out)
        work = {"computed": stats.computed, "cached": stats.cached,
                "encode_seconds": round(stats.seconds, 3)}
        log.info("embed %s: %d sections encoded, %d reused, %.1f s", shard.label,
                 stats.computed, stats.cached, stats.seconds)
    rows = parquet_rows(out)
    return Record(NAME, content_key, shard.index, {"embeddings": str(out)}, {"embeddings": rows},
                  time.perf_counter() - start, work=work)
