"""Store stage: write a pack's tables as Parquet and load them into a Kuzu database.

Input is the dict of the seven pack tables (see packs.format.TABLE_COLUMNS); output is
`tables/*.parquet` and `pack.db` in a build directory, with the HNSW vector index on
Section.embedding (cosine), a second one on Section.keyword_embedding when the sections
carry keyword vectors, and a full-text index over section heading path and content.
Section.languages (the languages of the section's code fences, for the query filter) is
derived here from the content when the sections table lacks it.
Relationship rows whose endpoints are missing are dropped (and counted), because Kuzu
refuses dangling edges and one bad extraction must not sink a build.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import kuzu
import polars as pl

from packs import format as fmt
from packs.filters import fence_languages

log = logging.getLogger("kpack.store")


@dataclass
class StoreResult:
    counts: dict[str, int]
    dropped_edges: dict[str, int] = field(default_factory=dict)
    keyword_vectors: bool = False  # Section.keyword_embedding and its index were stored


def has_keyword_vectors(sections: pl.DataFrame) -> bool:
    """True when every section carries a keyword vector (a partial column is refused)."""
    if fmt.KEYWORD_EMBEDDING not in sections.columns:
        return False
    nulls = sections[fmt.KEYWORD_EMBEDDING].null_count()
    if nulls:
        raise ValueError(f"{nulls} of {sections.height} sections have no keyword vector; "
                         "rerun the build (the keyword stage writes one for every section)")
    return True


def conform(name: str, df: pl.DataFrame, dim: int | None = None) -> pl.DataFrame:
    """Select a table's columns in format order, with the embeddings as Array[Float32, dim].

    Sections: `languages` is derived from the content when missing; `keyword_embedding` is
    kept (after `embedding`) when present.
    """
    columns = list(fmt.TABLE_COLUMNS[name])
    if name == fmt.SECTIONS:
        if "languages" not in df.columns and "content" in df.columns:
            df = df.with_columns(pl.col("content").map_elements(
                fence_languages, return_dtype=pl.List(pl.Utf8)).alias("languages"))
        if has_keyword_vectors(df):
            columns.append(fmt.KEYWORD_EMBEDDING)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"table {name!r} lacks columns {missing}")
    out = df.select(columns)
    if name == fmt.SECTIONS:
        out = out.with_columns(pl.col("languages").cast(pl.List(pl.Utf8)))
        if dim is not None:
            out = out.with_columns(pl.col(c).cast(pl.Array(pl.Float32, dim))
                                   for c in ("embedding", fmt.KEYWORD_EMBEDDING) if c in out.columns)
    return out


def write_tables(tables: dict[str, pl.DataFrame], tables_dir: Path, dim: int) -> dict[str, Path]:
    """Write every pack table as tables/<name>.parquet; returns the paths."""
    tables_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in fmt.TABLE_COLUMNS:
        df = conform(name, tables[name], dim)
        path = tables_dir / f"{name}.parquet"
        df.write_parquet(path)
        paths[name] = path
    return paths


def _keep_edges(df: pl.DataFrame, src: str, dst: str, src_ids: pl.Series, dst_ids: pl.Series):
    kept = df.filter(pl.col(src).is_in(src_ids.implode()) & pl.col(dst).is_in(dst_ids.implode()))
    return kept, df.height - kept.height


def load_kuzu(db_path: Path, tables: dict[str, pl.DataFrame], dim: int) -> StoreResult:
    """Create `db_path` (must not exist) and bulk-load the tables with COPY FROM Parquet."""
    if db_path.exists():
        raise FileExistsError(f"{db_path} already exists; the store stage writes a fresh database")
    t = {name: conform(name, tables[name], dim) for name in fmt.TABLE_COLUMNS}
    articles, sections, entities, facts = (
        t[fmt.ARTICLES], t[fmt.SECTIONS], t[fmt.ENTITIES], t[fmt.FACTS]
    )
    section_ids, entity_ids, article_ids = sections["id"], entities["id"], articles["id"]

    dropped: dict[str, int] = {}
    has_section, dropped["HAS_SECTION"] = _keep_edges(
        sections.select(src="article_id", dst="id"), "src", "dst", article_ids, section_ids
    )
    mentions, dropped["MENTIONS"] = _keep_edges(
        t[fmt.MENTIONS].unique(), "section_id", "entity_id", section_ids, entity_ids
    )
    related, dropped["RELATED_TO"] = _keep_edges(
        t[fmt.RELATIONSHIPS], "source_id", "target_id", entity_ids, entity_ids
    )
    has_fact, dropped["HAS_FACT"] = _keep_edges(
        facts.filter(pl.col("entity_id").is_not_null()).select(src="entity_id", dst="id"),
        "src", "dst", entity_ids, facts["id"],
    )
    links, dropped["LINKS_TO"] = _keep_edges(
        t[fmt.LINKS].unique(), "source_id", "target_id", article_ids, article_ids
    )
    for rel, n in dropped.items():
        if n:
            log.warning("dropped %d %s edges whose endpoints are not in the pack", n, rel)

    keyword = fmt.KEYWORD_EMBEDDING in sections.columns
    db = kuzu.Database(str(db_path))
    conn = kuzu.Connection(db)
    try:
        for ddl in fmt.kuzu_schema(dim, keyword_vectors=keyword):
            conn.execute(ddl)
        with tempfile.TemporaryDirectory(prefix="kpack-store-") as tmp:
            loads = [
                ("Article", articles), ("Section", sections), ("Entity", entities),
                ("Fact", facts), ("HAS_SECTION", has_section), ("MENTIONS", mentions),
                ("RELATED_TO", related), ("HAS_FACT", has_fact), ("LINKS_TO", links),
            ]
            for table, df in loads:
                if df.height == 0:
                    continue
                path = Path(tmp) / f"{table}.parquet"
                df.write_parquet(path)
                conn.execute(f"COPY {table} FROM '{path.as_posix()}'")
        if sections.height:
            conn.execute(
                f"CALL CREATE_VECTOR_INDEX('Section', '{fmt.VECTOR_INDEX}', 'embedding', "
                "metric := 'cosine')"
            )
            if keyword:
                conn.execute(
                    f"CALL CREATE_VECTOR_INDEX('Section', '{fmt.KEYWORD_VECTOR_INDEX}', "
                    f"'{fmt.KEYWORD_EMBEDDING}', metric := 'cosine')"
                )
            conn.execute(
                f"CALL CREATE_FTS_INDEX('Section', '{fmt.FTS_INDEX}', "
                "['heading_path', 'content'], stemmer := 'porter')"
            )
        counts = count_rows(conn)
    finally:
        conn.close()
        db.close()
    return StoreResult(counts=counts, dropped_edges={k: v for k, v in dropped.items() if v},
                       keyword_vectors=keyword)


COUNT_QUERIES = {
    "articles": "MATCH (a:Article) RETURN count(*)",
    "sections": "MATCH (s:Section) RETURN count(*)",
    "entities": "MATCH (e:Entity) RETURN count(*)",
    "facts": "MATCH (f:Fact) RETURN count(*)",
    "links": "MATCH ()-[r:LINKS_TO]->() RETURN count(*)",
    "relationships": "MATCH ()-[r:RELATED_TO]->() RETURN count(*)",
    "mentions": "MATCH ()-[r:MENTIONS]->() RETURN count(*)",
}


def count_rows(conn: kuzu.Connection) -> dict[str, int]:
    """Row counts of a pack database, keyed like the manifest's counts."""
    counts = {}
    for key, query in COUNT_QUERIES.items():
        result = conn.execute(query)
        counts[key] = int(result.get_next()[0])
    return counts
