"""keywords (per shard, opt-in with `keyword_vectors = true`): a second vector per
section from the entity names extracted from it and its key phrases, same model →
keywords-<key>.parquet (id, keyword_key, keyword_embedding).

Runs after the shard's extract and embed. Keyword texts are keyed by a hash of the text,
so vectors of unchanged texts are reused from the shard's last build.
"""

from __future__ import annotations

import json
import time

import polars as pl

from packs.embedding import Embedder
from tasks import vectors as embed_core
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
from tasks.stages.embed import known_vectors

NAME = "keywords"
VERSION = f"keywords-stage-v1+{embed_core.KEYWORD_VERSION}"
SCOPE = "shard"
INPUTS = ("split", "extract")
RETRIES = 1


def settings(ctx: BuildContext) -> tuple:
    return (VERSION, ctx.embedding.model, ctx.embedding.dim)


def key(ctx: BuildContext, shard: Shard | None, inputs: dict) -> str:
    return stage_key(NAME, settings(ctx), inputs["split"].ref, inputs["extract"].ref)


def output(ctx: BuildContext, content_key: str):
    return ctx.work.stage(NAME) / f"keywords-{content_key}.parquet"


def complete(ctx: BuildContext, content_key: str) -> bool:
    return output(ctx, content_key).is_file()


def names_by_section(extractions_path: str) -> dict[str, list[str]]:
    df = pl.read_parquet(extractions_path, columns=["section_id", "status", "data"]).filter(
        pl.col("status") == "ok")
    return {sid: [e["name"] for e in json.loads(data).get("entities", [])]
            for sid, _, data in df.iter_rows()}


def run(ctx: BuildContext, shard: Shard | None, inputs: dict,
        progress: ProgressFn | None = None) -> Record:
    start = time.perf_counter()
    content_key = key(ctx, shard, inputs)
    out = output(ctx, content_key)
    work: dict = {}
    if not out.is_file():
        sections = inputs["split"].table("sections", ["id", "heading_path", "content"])
        names = names_by_section(inputs["extract"].paths["extractions"])
        texts = embed_core.keyword_texts(sections, names)
        known = known_vectors(shard.previous_outputs(NAME), "keyword_key", "keyword_embedding",
                              {embed_core.keyword_key(t) for t in texts})
        vectors, stats = embed_core.embed_keywords(sections, names, Embedder(ctx.model), known)
        write_parquet(vectors, out)
        work = {"computed": stats.computed, "cached": stats.cached}
        log.info("keywords %s: %d keyword vectors encoded, %d reused, %.1f s",
                      shard.label, stats.computed, stats.cached, stats.seconds)
    return Record(NAME, content_key, shard.index, {"keywords": str(out)},
                  {"keywords": parquet_rows(out)}, time.perf_counter() - start, work=work)
