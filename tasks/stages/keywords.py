"""keywords (per shard, opt-in with `keyword_vectors = true`): a second vector per
section from the entity names extracted from it and its key phrases, same model →
keywords-<key>.parquet (id, keyword_key, keyword_embedding).

Runs after the shard's extract and embed. Keyword texts are keyed by a hash of the text,
so vectors of unchanged texts are reused from the shard's last build.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import polars as pl

from packs.embedding import Embedder
from tasks import vectors as embed_core
from tasks.stages.base import Stage
from tasks.stages.common import BuildContext, Record, log, write_parquet
from tasks.stages.embed import known_vectors


def names_by_section(extractions_path: str) -> dict[str, list[str]]:
    df = pl.read_parquet(extractions_path, columns=["section_id", "status", "data"]).filter(
        pl.col("status") == "ok")
    return {sid: [e["name"] for e in json.loads(data).get("entities", [])]
            for sid, _, data in df.iter_rows()}


class Keywords(Stage):
    NAME = "keywords"
    VERSION = f"keywords-stage-v1+{embed_core.KEYWORD_VERSION}"
    INPUTS = ("split", "extract")
    OUTPUTS = {"keywords": "keywords"}
    LINEAGE = True
    STATS = "embed"

    def enabled(self, ctx: BuildContext) -> bool:
        """Only with `keyword_vectors = true` in pack.toml."""
        return ctx.keyword_vectors

    def settings(self, ctx: BuildContext) -> tuple:
        return (self.VERSION, ctx.embedding.model, ctx.embedding.dim)

    def compute(self, ctx, shard, inputs, files, progress) -> dict:
        sections = inputs["split"].table("sections", ["id", "heading_path", "content"])
        names = names_by_section(inputs["extract"].paths["extractions"])
        texts = embed_core.keyword_texts(sections, names)
        known = known_vectors(shard.previous_outputs(self.NAME), "keyword_key",
                              "keyword_embedding", {embed_core.keyword_key(t) for t in texts})
        vectors, stats = embed_core.embed_keywords(sections, names, Embedder(ctx.model), known)
        write_parquet(vectors, files["keywords"])
        log.info("keywords %s: %d keyword vectors encoded, %d reused, %.1f s",
                 shard.label, stats.computed, stats.cached, stats.seconds)
        return {"computed": stats.computed, "cached": stats.cached}

    def stats(self, records: list[Record], facts: Mapping[str, int], count: int) -> dict:
        """Keyword vectors computed in this build and reused (the embed stats' part)."""
        if not records:
            return {}
        computed = sum(r.work.get("computed", 0) for r in records)
        return {"keyword_vectors": {"computed": computed,
                                    "cached": facts.get("sections", 0) - computed}}


STAGE = Keywords()
