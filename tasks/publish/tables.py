"""The pack's tables as Parquet: `tables/*.parquet` of a build directory (`write_tables`) and
the vocabulary the confidence gate reads (`write_terms`).

Input is the dict of the seven pack tables (see packs.format.TABLE_COLUMNS; data frames
or lazy frames). Section.languages (the languages of the section's code fences, for the
query filter) is derived here from the content when the sections table lacks it, and
Section.graph (the section's entities, facts and triples as JSON, see packs.format) from
the entity tables, so that a query reads a section's graph facts with one lookup instead of
walking the graph. An article takes the title the splitter gave its sections (`page_title`:
the page's title as a reader sees it, "`kubectl` Quick Reference" as "kubectl Quick
Reference"; the page's leading heading when it had no title). The Kuzu
database is loaded from these files (tasks/publish/kuzu_store.py).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import polars as pl

from packs import format as fmt
from packs import text as text_rules
from packs.filters import fence_languages
from packs.retrieval import unit_store, unit_vectors
from packs.retrieval.gate import encode_pairs, has_code, text_pairs

Frame = pl.DataFrame | pl.LazyFrame
log = logging.getLogger("kpack.publish")


def _lazy(df: Frame) -> pl.LazyFrame:
    return df.lazy() if isinstance(df, pl.DataFrame) else df


def has_keyword_vectors(sections: Frame) -> bool:
    """True when every section carries a keyword vector (a partial column is refused)."""
    lf = _lazy(sections)
    if fmt.KEYWORD_EMBEDDING not in lf.collect_schema().names():
        return False
    nulls, total = lf.select(pl.col(fmt.KEYWORD_EMBEDDING).null_count(), pl.len()).collect().row(0)
    if nulls:
        raise ValueError(f"{nulls} of {total} sections have no keyword vector; "
                         "rerun the build (the keyword stage writes one for every section)")
    return True


def conform(name: str, df: Frame, dim: int | None = None) -> pl.LazyFrame:
    """A table's columns in format order, with the embeddings as Array[Float32, dim]
    (lazily: the build streams its tables from the shards' Parquet files to the pack's).

    Sections: `languages` is derived from the content when missing; `keyword_embedding` is
    kept (after `embedding`) when present.
    """
    lf = _lazy(df)
    names = lf.collect_schema().names()
    columns = list(fmt.TABLE_COLUMNS[name])
    if name == fmt.SECTIONS:
        if "languages" not in names and "content" in names:
            lf = lf.with_columns(pl.col("content").map_elements(
                fence_languages, return_dtype=pl.List(pl.Utf8)).alias("languages"))
            names.append("languages")
        if has_keyword_vectors(lf):
            columns.append(fmt.KEYWORD_EMBEDDING)
    missing = [c for c in columns if c not in names]
    if missing:
        raise ValueError(f"table {name!r} lacks columns {missing}")
    out = lf.select(columns)
    if name == fmt.SECTIONS:
        out = out.with_columns(pl.col("languages").cast(pl.List(pl.Utf8)))
        if dim is not None:
            out = out.with_columns(pl.col(c).cast(pl.Array(pl.Float32, dim))
                                   for c in ("embedding", fmt.KEYWORD_EMBEDDING) if c in columns)
    return out


def section_graphs(tables: dict[str, Frame], cap: int = fmt.GRAPH_CAP) -> pl.DataFrame:
    """(id, graph) for every section that mentions an entity or holds a fact or triple:
    graph is the JSON of packs.format's Section.graph (lists sorted, each capped at `cap`)."""
    ents = _lazy(tables[fmt.ENTITIES]).select("id", "name", "type")
    mentions = (_lazy(tables[fmt.MENTIONS]).unique()
                .join(ents, left_on="entity_id", right_on="id")
                .select("section_id", "name", "type").collect())
    facts = (_lazy(tables[fmt.FACTS]).filter(pl.col("section_id").is_not_null())
             .select("section_id", "text").collect())
    names = ents.select("id", "name")
    triples = (_lazy(tables[fmt.RELATIONSHIPS]).filter(pl.col("section_id").is_not_null())
               .join(names.rename({"name": "subject"}), left_on="source_id", right_on="id")
               .join(names.rename({"name": "object"}), left_on="target_id", right_on="id")
               .select("section_id", "subject", "relation", "object").collect())
    graph: dict[str, dict[str, set]] = {}

    def add(kind: str, rows) -> None:
        for sid, *item in rows:
            graph.setdefault(sid, {"entities": set(), "facts": set(), "triples": set()})[
                kind].add(tuple(x or "" for x in item) if len(item) > 1 else item[0] or "")

    add("entities", mentions.iter_rows())
    add("facts", facts.iter_rows())
    add("triples", triples.iter_rows())
    ids = sorted(graph)
    return pl.DataFrame({
        "id": pl.Series(ids, dtype=pl.Utf8),
        "graph": pl.Series([json.dumps({k: [list(x) if isinstance(x, tuple) else x
                                            for x in sorted(v)[:cap]]
                                        for k, v in graph[i].items()},
                                       ensure_ascii=False, separators=(",", ":"))
                            for i in ids], dtype=pl.Utf8),
    })


def _complete(tables: dict[str, Frame]) -> dict[str, Frame]:
    """The tables with the derived parts filled in: Section.graph, and the articles'
    titles as the splitter rendered them."""
    out = dict(tables)
    sections = _lazy(tables[fmt.SECTIONS])
    names = sections.collect_schema().names()
    if "graph" not in names:
        sections = sections.join(section_graphs(tables).lazy(), on="id", how="left",
                                  maintain_order="left").with_columns(
            pl.col("graph").fill_null(""))
    out[fmt.SECTIONS] = sections
    if "page_title" in names:
        titles = sections.group_by("article_id").agg(pl.col("page_title").first())
        out[fmt.ARTICLES] = (_lazy(tables[fmt.ARTICLES])
                             .join(titles, left_on="id", right_on="article_id", how="left",
                                   maintain_order="left")
                             .with_columns(pl.coalesce("page_title", "title").alias("title"))
                             .drop("page_title"))
    return out


def write_tables(tables: dict[str, Frame], tables_dir: Path, dim: int,
                 previous: Path | None = None) -> dict[str, Path]:
    """Write every pack table as tables/<name>.parquet (lazy frames are streamed, so a
    large pack never sits in memory whole); returns the paths. Section.graph and URL-only
    article titles are derived first (see `_complete`); tables/terms.json and
    tables/units.jsonl last (`previous`: the tables folder of the build before, whose
    units of unchanged sections are copied)."""
    tables_dir.mkdir(parents=True, exist_ok=True)
    tables = _complete(tables)
    paths = {}
    for name in fmt.TABLE_COLUMNS:
        if name not in tables and name in fmt.OPTIONAL_TABLES:  # no topic map: empty tables
            from tasks.topics import SCHEMAS

            tables[name] = pl.DataFrame(schema=SCHEMAS[name])
        path = tables_dir / f"{name}.parquet"
        conform(name, tables[name], dim).sink_parquet(path)
        paths[name] = path
    paths["terms"] = write_terms(paths[fmt.SECTIONS], tables_dir / fmt.TERMS_FILE)
    paths["units"] = write_units(paths[fmt.SECTIONS], tables_dir / fmt.UNITS_FILE,
                                 None if previous is None else previous / fmt.UNITS_FILE)
    return paths


def write_units(sections_path: Path, path: Path, reuse: Path | None = None) -> Path:
    """tables/units.jsonl (packs.format.UNITS_FILE): each distinct section text's answer
    units and their question-independent facts, worked out by the query side's own code
    (packs/retrieval/unit_store.py), so that a fresh process reads them instead; those of
    texts `reuse` (the build before's file) holds under the same rules are copied."""
    contents = (pl.scan_parquet(sections_path).select(pl.col("content").fill_null(""))
                .unique(maintain_order=True).collect()["content"])
    unit_store.write(path, contents, reuse)
    return path


def write_unit_vectors(tables_dir: Path, parts: list[str], model: str) -> Path:
    """tables/unit_vectors.npy and .json (packs/retrieval/unit_vectors.py): the vectors of
    every distinct section text's answer units, from the unit_vectors stage's shard files
    (a text in several shards once)."""
    df = (pl.scan_parquet(parts).unique(subset=["key", "position"], keep="first")
          .sort("key", "position").collect())
    matrix = (df["embedding"].to_numpy() if df.height
              else np.zeros((0, 0), dtype=np.float32))
    count = unit_vectors.write(tables_dir, df["key"].to_list(), df["position"].to_list(),
                               matrix, model)
    log.info("unit vectors: %d units of %d section texts", df.height, count)
    return tables_dir / unit_vectors.INDEX_FILE


def write_terms(sections_path: Path, path: Path) -> Path:
    """tables/terms.json: the sections' vocabulary (packs.format.TERMS_FILE), counted with
    polars from the sections just written, with the same tokens and stems as
    packs.retrieval.gate.terms (packs/text.py, whose TEXT_RULES_VERSION it records), the
    hashes of their adjacent content-word pairs, and how many hold fenced code
    (gate.has_code)."""
    texts = pl.scan_parquet(sections_path).select(pl.concat_str(
        [pl.col("heading_path").fill_null(""), pl.col("content").fill_null("")],
        separator="\n").alias("text")).collect()
    tokens = (texts.with_row_index("i")
              .select("i", pl.col("text").str.to_lowercase()
                      .str.extract_all(text_rules.TOKEN_PATTERN).alias("t"))
              .explode("t").drop_nulls("t").unique(["i", "t"]))
    # Each distinct token is stemmed once, in Python: the stemmer is packs/text.py's.
    distinct = tokens["t"].unique().to_list()
    stems = pl.DataFrame({"t": distinct, "s": [text_rules.stem(t) for t in distinct]},
                         schema={"t": pl.String, "s": pl.String})
    counts = (tokens.join(stems, on="t").unique(["i", "s"]).group_by("s").len()
              .sort("s").rename({"s": "t"}))
    # Adjacent content-word pairs, hashed (gate.text_pairs), and the sections with code:
    # pure Python, so they are the query side's by construction (about 1 s per 5,000
    # sections).
    hashes: set[int] = set()
    code = 0
    for text in texts["text"]:
        hashes |= text_pairs(text)
        code += has_code(text)
    path.write_text(json.dumps({"sections": texts.height,
                                "text_rules": text_rules.TEXT_RULES_VERSION,
                                "terms": dict(zip(counts["t"].to_list(),
                                                  counts["len"].to_list())),
                                "pairs": encode_pairs(hashes),
                                "code_sections": code},
                               separators=(",", ":")), encoding="utf-8")
    return path
