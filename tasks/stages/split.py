"""split (per shard): the shard's pages → sections-<key>.parquet.

Sections by heading, chunked to the model's window (`tasks.sections`); the code-fence
languages of each section (`Section.languages`, for the query filter) are read here too,
so the publish step only concatenates.
"""

from __future__ import annotations

import polars as pl

from packs.filters import fence_languages
from tasks import sections as split_core
from tasks.stages.base import Stage
from tasks.stages.common import BuildContext, Record, write_parquet


class Split(Stage):
    NAME = "split"
    VERSION = f"{split_core.SPLITTER_VERSION}+languages"
    INPUTS = ("fetch",)
    OUTPUTS = {"sections": "sections"}

    def settings(self, ctx: BuildContext) -> tuple:
        return (self.VERSION, ctx.max_words, ctx.overlap_words)

    def facts(self, records: list[Record]) -> dict[str, int]:
        return {"sections": sum(r.rows["sections"] for r in records)}

    def compute(self, ctx, shard, inputs, files, progress) -> None:
        pages = inputs["fetch"].table("pages").filter(pl.col("text").is_not_null())
        sections = split_core.split_pages(pages, ctx.max_words, ctx.overlap_words)
        sections = sections.with_columns(pl.col("content").map_elements(
            fence_languages, return_dtype=pl.List(pl.Utf8)).alias("languages"))
        write_parquet(sections, files["sections"])

    def summary_line(self, shard, inputs, record) -> str:
        return (f"split {shard.label}: {record.rows['sections']} sections from "
                f"{inputs['fetch'].rows['usable']} pages")


STAGE = Split()
