"""embed (per shard): the shard's sections → vectors-<key>.parquet (id, content_hash,
embedding).

Vectors of sections whose content hash the shard already had in the last build (its
lineage outputs) are reused; only new or changed sections are encoded. The model is
loaded once per process (worker), not once per task (`packs.embedding` keeps it).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from packs.embedding import Embedder
from tasks import vectors as embed_core
from tasks.stages.base import Stage
from tasks.stages.common import BuildContext, LogProgress, Record, log, write_parquet

SECTION_COLUMNS = ["id", "heading_path", "content", "content_hash"]


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


class Embed(Stage):
    NAME = "embed"
    VERSION = "embed-v2"
    INPUTS = ("split",)
    OUTPUTS = {"embeddings": "vectors"}
    LINEAGE = True
    STATS = "embed"

    def settings(self, ctx: BuildContext) -> tuple:
        return (self.VERSION, ctx.embedding.model, ctx.embedding.dim)

    def compute(self, ctx, shard, inputs, files, progress) -> dict:
        sections = inputs["split"].table("sections", SECTION_COLUMNS)
        known = known_vectors(shard.previous_outputs(self.NAME), "content_hash", "embedding",
                              set(sections["content_hash"].to_list()))
        vectors, stats = embed_core.embed_sections(
            sections, Embedder(ctx.model), known,
            progress=progress or LogProgress(f"embed {shard.label}"))
        write_parquet(vectors, files["embeddings"])
        log.info("embed %s: %d sections encoded, %d reused, %.1f s", shard.label,
                 stats.computed, stats.cached, stats.seconds)
        return {"computed": stats.computed, "cached": stats.cached,
                "encode_seconds": round(stats.seconds, 3)}

    def stats(self, records: list[Record], facts: Mapping[str, int], count: int) -> dict:
        """Vectors computed in this build and reused (by content hash or whole shard)."""
        computed = sum(r.work.get("computed", 0) for r in records)
        return {"computed": computed, "cached": facts.get("sections", 0) - computed,
                "seconds": round(sum(r.work.get("encode_seconds", 0.0) for r in records), 3)}


STAGE = Embed()
