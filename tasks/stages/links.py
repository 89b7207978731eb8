"""links (once per pack): the links of every shard's pages → links-<key>.parquet.

A reduce step: a link can point from any shard to any other. It reads only the url,
final_url and links columns of each shard's pages.
"""

from __future__ import annotations

import polars as pl

from tasks import link_graph as links_core
from tasks.stages.base import PACK, Stage
from tasks.stages.common import write_parquet


class Links(Stage):
    NAME = "links"
    VERSION = "links-v1"
    SCOPE = PACK
    INPUTS = ("fetch",)
    OUTPUTS = {"links": "links"}

    def compute(self, ctx, shard, inputs, files, progress) -> None:
        paths = [r.paths["pages"] for r in inputs["fetch"]]
        pages = (pl.scan_parquet(paths).filter(pl.col("text").is_not_null())
                 .select("url", "final_url", "links").collect())
        write_parquet(links_core.links_table(pages), files["links"])

    def summary_line(self, shard, inputs, record) -> str:
        return f"links: {record.rows['links']} links between pages of the pack"


STAGE = Links()
