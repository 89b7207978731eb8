"""resolve (once per pack): every shard's extractions → the entities, mentions,
relationships and facts tables (`tasks.extract.core.assemble`: entity resolution across the
whole pack, deterministic ids). For the offline extractor, the names the pages' code binds
or uses as values (`offline_names.bound_names`: an example's `name: pod-e`, `let guess`)
are left out wherever they occur, so it reads the split outputs' code too; and the entity
model (tasks/extract/judge.py, weights in tasks/extract/graph_model.json) judges every
resolved entity in the pack's text and leaves out those it rejects (`assemble_judged`).

A reduce step: the same entity is named in many shards. Its key is the digests of the
extract outputs, so an extraction that gained sections (a retried failure) resolves again
even when its key did not change.
"""

from __future__ import annotations

import json

import polars as pl

from packs import format as fmt
from packs.markdown import fence_spans
from tasks.extract import core as extract_core
from tasks.extract.assemble import assemble, assemble_judged
from tasks.extract.judge import MODEL_DIGEST, PackText
from tasks.extract.offline_names import bound_names
from tasks.stages.base import PACK, Stage
from tasks.stages.common import write_parquet


class Resolve(Stage):
    NAME = "resolve"
    # v2: names rendered (no link syntax), offline examples' names out; v3 (issue 48b): the
    # offline entity model judges the resolved entities (its weights file is part of the
    # version); v4: packs under 20 pages not judged; v3 (issue 51): names rendered by
    # packs.markdown.inline_text, as the splitter renders headings (code spans' backticks
    # dropped, escapes resolved, code kept as written); v5: all of these; v6: the fact
    # model judges the offline facts in their sections (tasks/extract/judge_facts.py); v7:
    # a fact quoting a name the entity model rejects is judged like any other
    VERSION = f"resolve-v7+{MODEL_DIGEST}"
    SCOPE = PACK
    INPUTS = ("extract", "split")
    TABLES = (fmt.ENTITIES, fmt.MENTIONS, fmt.RELATIONSHIPS, fmt.FACTS)
    ISOLATE = True

    def compute(self, ctx, shard, inputs, files, progress) -> dict:
        df = (pl.scan_parquet([r.paths["extractions"] for r in inputs["extract"]])
              .filter(pl.col("status") == "ok").select("section_id", "data")
              .sort("section_id").collect())
        extractions = [(sid, extract_core.parse_extraction(json.loads(data)))
                       for sid, data in df.iter_rows()]
        del df
        if ctx.extract_kind == "offline":
            rows = pack_sections(inputs)
            sections = [(url, heading, content) for _, url, heading, content in rows]
            tables, rejected = assemble_judged(
                extractions, example_names(sections), PackText(sections),
                sections={sid: (heading or "", content or "") for sid, _, heading, content in rows})
        else:
            tables, rejected = assemble(extractions, set()), []
        for name, table in tables.items():
            write_parquet(table, files[name])
        return {"entities_rejected": len(rejected)}

    def summary_line(self, shard, inputs, record) -> str:
        return (f"resolve: {record.rows[fmt.ENTITIES]} entities, "
                f"{record.rows[fmt.RELATIONSHIPS]} relationships, {record.rows[fmt.FACTS]} facts")


def pack_sections(inputs: dict) -> list[tuple[str, str, str, str]]:
    """(id, url, heading path, content) of every section the split stage wrote."""
    out = []
    for r in inputs["split"]:
        out += r.table("sections", ["id", "url", "heading_path", "content"]).rows()
    return out


def example_names(sections: list[tuple[str, str, str]]) -> set[str]:
    """The names every section's fenced code binds or uses as values (offline builds)."""
    names: set[str] = set()
    for _, _, content in sections:
        text = content or ""
        for start, end in fence_spans(text):
            names |= bound_names(text[start:end])
    return names


STAGE = Resolve()
