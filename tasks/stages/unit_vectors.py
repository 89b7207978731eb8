"""unit_vectors (per shard): the answer units of the shard's sections, each embedded with
the pack's model → unitvectors-<key>.parquet (key, position, text_hash, embedding), which
publish writes into the pack for the reader (packs/retrieval/unit_vectors.py).

Units are the query side's own (packs/retrieval/units.py, `unit_vectors.embedded_text`), so the
stage's settings name the unit rules' version: other rules embed again. Vectors are keyed
on a hash of the unit's text and reused from the shard's last build: a rebuild encodes only
the units of new or changed sections.
"""

from __future__ import annotations

from collections.abc import Mapping

from packs.embedding import Embedder
from packs.retrieval import unit_store, unit_vectors
from tasks import vectors as embed_core
from tasks.stages.base import Stage
from tasks.stages.common import BuildContext, LogProgress, Record, log, write_parquet
from tasks.stages.embed import known_vectors


class UnitVectors(Stage):
    NAME = "unit_vectors"
    VERSION = "unit-vectors-v1"
    INPUTS = ("split",)
    OUTPUTS = {"unit_vectors": "unitvectors"}
    LINEAGE = True
    STATS = "unit_vectors"

    def enabled(self, ctx: BuildContext) -> bool:
        """Unless pack.toml says `unit_vectors = false`."""
        return ctx.unit_vectors

    def settings(self, ctx: BuildContext) -> tuple:
        return (self.settings_key(), ctx.embedding.model, ctx.embedding.dim)

    def settings_key(self) -> str:
        """What of its settings the model does not decide: its version and the unit rules'."""
        return f"{self.VERSION}/{unit_store.VERSION}/{unit_vectors.EMBED_WORDS}"

    def compute(self, ctx, shard, inputs, files, progress) -> dict:
        contents = inputs["split"].table("sections", ["content"])["content"].fill_null("")
        rows = embed_core.unit_rows(contents.to_list())
        known = known_vectors(shard.previous_outputs(self.NAME), "text_hash", "embedding",
                              set(rows.hashes))
        vectors, stats = embed_core.embed_units(
            rows, Embedder(ctx.model), known,
            progress=progress or LogProgress(f"unit vectors {shard.label}"))
        write_parquet(vectors, files["unit_vectors"])
        log.info("unit vectors %s: %d units of %d texts, %d encoded, %d reused, %.1f s",
                 shard.label, len(rows.hashes), len(set(rows.keys)), stats.computed,
                 stats.cached, stats.seconds)
        return {"units": len(rows.hashes), "computed": stats.computed,
                "encode_seconds": round(stats.seconds, 3)}

    def stats(self, records: list[Record], facts: Mapping[str, int], count: int) -> dict:
        """Units embedded in this build and reused."""
        units = sum(r.work.get("units", 0) for r in records)
        computed = sum(r.work.get("computed", 0) for r in records)
        return {"units": units, "computed": computed,
                "seconds": round(sum(r.work.get("encode_seconds", 0.0) for r in records), 3)}


STAGE = UnitVectors()
