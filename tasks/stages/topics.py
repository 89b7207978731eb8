"""topics (once per pack): the resolved entity tables and every shard's sections → the
topic tables (`tasks.topics.topics`: communities of the entity graph, each with a title,
its top entities and sections and a digest of representative sentences).

A reduce step after resolve. Its key is resolve's and the split outputs' refs (the Stage
base class), so a rebuild with no change reuses its output and recomputes nothing.
"""

from __future__ import annotations

import polars as pl

from packs import format as fmt
from tasks import topics as topics_core
from tasks.stages.base import PACK, Stage
from tasks.stages.common import write_parquet

TABLES = (fmt.TOPICS, fmt.TOPIC_ENTITIES, fmt.TOPIC_SECTIONS)


class Topics(Stage):
    NAME = "topics"
    VERSION = f"topics-stage-v1+{topics_core.TOPICS_VERSION}"
    SCOPE = PACK
    INPUTS = ("resolve", "split")
    OUTPUTS = {t: t for t in TABLES}

    def compute(self, ctx, shard, inputs, files, progress) -> dict:
        resolved = inputs["resolve"]
        sections = pl.concat([r.table("sections", ["id", "page_title", "content"])
                              for r in inputs["split"]], how="vertical_relaxed")
        tables = topics_core.topics(resolved.table(fmt.ENTITIES, ["id", "name"]),
                                    resolved.table(fmt.MENTIONS),
                                    resolved.table(fmt.RELATIONSHIPS), sections)
        for name, table in tables.items():
            write_parquet(table, files[name])
        return {"computed": 1}

    def summary_line(self, shard, inputs, record) -> str:
        reused = "" if record.work else " (reused)"
        return (f"topics: {record.rows[fmt.TOPICS]} topics over "
                f"{record.rows[fmt.TOPIC_ENTITIES]} entities, {record.seconds:.1f} s{reused}")


STAGE = Topics()
