"""Store stage: write a pack's tables as Parquet and load them into a Kuzu database.

Input is the dict of the seven pack tables (see packs.format.TABLE_COLUMNS; data frames
or lazy frames); output is `tables/*.parquet` (`write_tables`) and then `pack.db`
(`load_kuzu`, read from those files) in a build directory, with the HNSW vector index on
Section.embedding (cosine), a second one on Section.keyword_embedding when the sections
carry keyword vectors, and a full-text index over section heading path and content.
Section.languages (the languages of the section's code fences, for the query filter) is
derived here from the content when the sections table lacks it, and Section.graph (the
section's entities, facts and triples as JSON, see packs.format) from the entity tables, so
that a query reads a section's graph facts with one lookup instead of walking the graph.
An article still titled by its URL (its page had no title) takes the title the splitter
gave its sections (`page_title`: the page's leading heading).
Relationship rows whose endpoints are missing are dropped (and counted), because Kuzu
refuses dangling edges and one bad extraction must not sink a build.
"""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import kuzu
import polars as pl

from packs import format as fmt
from packs.filters import fence_languages
from packs.retrieval.gate import encode_pairs, has_code, text_pairs

log = logging.getLogger("kpack.store")


@dataclass
class StoreResult:
    counts: dict[str, int]
    dropped_edges: dict[str, int] = field(default_factory=dict)
    keyword_vectors: bool = False  # Section.keyword_embedding and its index were stored


Frame = pl.DataFrame | pl.LazyFrame


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
    """The tables with the derived parts filled in: Section.graph, and the titles of
    articles named by their URL."""
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
                             .with_columns(pl.when(pl.col("title").is_null()
                                                   | (pl.col("title") == pl.col("url")))
                                           .then(pl.coalesce("page_title", "title"))
                                           .otherwise(pl.col("title")).alias("title"))
                             .drop("page_title"))
    return out


def write_tables(tables: dict[str, Frame], tables_dir: Path, dim: int) -> dict[str, Path]:
    """Write every pack table as tables/<name>.parquet (lazy frames are streamed, so a
    large pack never sits in memory whole); returns the paths. Section.graph and URL-only
    article titles are derived first (see `_complete`); tables/terms.json last."""
    tables_dir.mkdir(parents=True, exist_ok=True)
    tables = _complete(tables)
    paths = {}
    for name in fmt.TABLE_COLUMNS:
        path = tables_dir / f"{name}.parquet"
        conform(name, tables[name], dim).sink_parquet(path)
        paths[name] = path
    paths["terms"] = write_terms(paths[fmt.SECTIONS], tables_dir / fmt.TERMS_FILE)
    return paths


def write_terms(sections_path: Path, path: Path) -> Path:
    """tables/terms.json: the sections' vocabulary (packs.format.TERMS_FILE), counted with
    polars from the sections just written, with the same tokens and plural fold as
    packs.retrieval.gate.terms, the hashes of their adjacent content-word pairs, and how
    many hold fenced code (gate.has_code)."""
    t = pl.col("t")
    fold = (t.str.len_chars() > 3) & t.str.ends_with("s") & ~(
        t.str.ends_with("ss") | t.str.ends_with("us") | t.str.ends_with("is"))
    texts = pl.scan_parquet(sections_path).select(pl.concat_str(
        [pl.col("heading_path").fill_null(""), pl.col("content").fill_null("")],
        separator="\n").alias("text")).collect()
    counts = (texts.with_row_index("i")
              .select("i", pl.col("text").str.to_lowercase().str.extract_all(r"[a-z0-9_]+")
                      .alias("t"))
              .explode("t").drop_nulls("t")
              .with_columns(pl.when(fold).then(t.str.slice(0, t.str.len_chars() - 1))
                            .otherwise(t).alias("t"))
              .unique(["i", "t"]).group_by("t").len().sort("t"))
    # Adjacent content-word pairs, hashed (gate.text_pairs), and the sections with code:
    # pure Python, so they are the query side's by construction (about 1 s per 5,000
    # sections).
    hashes: set[int] = set()
    code = 0
    for text in texts["text"]:
        hashes |= text_pairs(text)
        code += has_code(text)
    path.write_text(json.dumps({"sections": texts.height,
                                "terms": dict(zip(counts["t"].to_list(),
                                                  counts["len"].to_list())),
                                "pairs": encode_pairs(hashes),
                                "code_sections": code},
                               separators=(",", ":")), encoding="utf-8")
    return path

def _edges(name: str, lf: pl.LazyFrame, src: str, dst: str, src_ids: pl.LazyFrame,
           dst_ids: pl.LazyFrame, folder: Path) -> tuple[Path, int, int]:
    """Edges whose two endpoints exist, written to folder/<name>.parquet as (src, dst,
    properties...); returns (path, kept, dropped)."""
    kept = (lf.join(src_ids.select(pl.col("id").alias(src)), on=src, how="semi")
            .join(dst_ids.select(pl.col("id").alias(dst)), on=dst, how="semi"))
    path = folder / f"{name}.parquet"
    kept.sink_parquet(path)
    n_kept = pl.scan_parquet(path).select(pl.len()).collect().item()
    n_all = lf.select(pl.len()).collect().item()
    return path, n_kept, n_all - n_kept


def load_kuzu(db_path: Path, tables_dir: Path, dim: int) -> StoreResult:
    """Create `db_path` (must not exist) from the pack's tables/*.parquet (written by
    `write_tables`): nodes are copied straight from them, edges are filtered to existing
    endpoints first. Then the HNSW and full-text indexes."""
    if db_path.exists():
        raise FileExistsError(f"{db_path} already exists; the store stage writes a fresh database")
    scan = {name: pl.scan_parquet(tables_dir / f"{name}.parquet") for name in fmt.TABLE_COLUMNS}
    ids = {name: scan[name].select("id") for name in (fmt.ARTICLES, fmt.SECTIONS,
                                                         fmt.ENTITIES, fmt.FACTS)}
    keyword = fmt.KEYWORD_EMBEDDING in scan[fmt.SECTIONS].collect_schema().names()
    sections = scan[fmt.SECTIONS].select("article_id", "id").rename(
        {"article_id": "src", "id": "dst"})
    dropped: dict[str, int] = {}
    db = kuzu.Database(str(db_path))
    conn = kuzu.Connection(db)
    try:
        for ddl in fmt.kuzu_schema(dim, keyword_vectors=keyword):
            conn.execute(ddl)
        for table, name in (("Article", fmt.ARTICLES), ("Section", fmt.SECTIONS),
                            ("Entity", fmt.ENTITIES), ("Fact", fmt.FACTS)):
            if scan[name].select(pl.len()).collect().item():
                conn.execute(f"COPY {table} FROM '{(tables_dir / f'{name}.parquet').as_posix()}'")
        with tempfile.TemporaryDirectory(prefix="kpack-store-") as tmp:
            edges = [
                ("HAS_SECTION", sections, "src", "dst", ids[fmt.ARTICLES], ids[fmt.SECTIONS]),
                ("MENTIONS", scan[fmt.MENTIONS].unique(), "section_id", "entity_id",
                 ids[fmt.SECTIONS], ids[fmt.ENTITIES]),
                ("RELATED_TO", scan[fmt.RELATIONSHIPS], "source_id", "target_id",
                 ids[fmt.ENTITIES], ids[fmt.ENTITIES]),
                ("HAS_FACT", scan[fmt.FACTS].filter(pl.col("entity_id").is_not_null())
                 .select(src="entity_id", dst="id"), "src", "dst", ids[fmt.ENTITIES],
                 ids[fmt.FACTS]),
                ("LINKS_TO", scan[fmt.LINKS].unique(), "source_id", "target_id",
                 ids[fmt.ARTICLES], ids[fmt.ARTICLES]),
            ]
            for rel, lf, src, dst, src_ids, dst_ids in edges:
                path, kept, dropped[rel] = _edges(rel, lf, src, dst, src_ids, dst_ids, Path(tmp))
                if kept:
                    conn.execute(f"COPY {rel} FROM '{path.as_posix()}'")
        for rel, n in dropped.items():
            if n:
                log.warning("dropped %d %s edges whose endpoints are not in the pack", n, rel)
        if scan[fmt.SECTIONS].select(pl.len()).collect().item():
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


# --- the writer in a process of its own -------------------------------------------------
#
# Kuzu runs in the build's own process otherwise: its buffer pool and index builds grow
# with the pack, and a fatal error inside it (disk full aborts the process) would take
# the build down with no error line and no history entry. In a child process the build's
# memory stays flat and such a death becomes one clear StoreError.

WRITER_TIMEOUT_S = 6 * 3600


class StoreError(RuntimeError):
    """The database could not be written or verified; the message says why."""


LOW_SPACE_BYTES = 64 * 1024 * 1024
# A writer whose file system stays full this long is stopped: Kuzu can also spin on a full
# disk instead of aborting (seen on a 600 kB tmpfs: 100% CPU for 10 minutes, 0 bytes free).
FULL_BYTES = 64 * 1024
FULL_FOR_S = 15.0
POLL_S = 0.5


def _space_note(folder: Path) -> str:
    """" (the disk ... is full)" when the folder's file system is nearly out of space:
    Kuzu aborts on a full disk with an unrelated message ('Invalid transaction type to
    rollback'), so the likely cause is named here."""
    free = _free_bytes(folder)
    if free is None or free >= LOW_SPACE_BYTES:
        return ""
    return f" (no space left on device: {free / 1e6:.1f} MB free where {folder} lives)"


def _free_bytes(folder: Path) -> int | None:
    import shutil

    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _child(args: list[str], timeout_s: float, where: Path | None = None) -> dict:
    """Run `python -m tasks.publish.kuzu_store ARGS`, its JSON reply. While it runs, the
    file system of `where` is watched: full (under FULL_BYTES free) for FULL_FOR_S seconds
    in a row, the child is stopped and the error says the disk is full."""
    import contextlib
    import json
    import subprocess
    import sys
    import tempfile
    import time

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "tasks.publish.kuzu_store", *args],
                                stdout=out, stderr=err, text=True)
        deadline, full_since = time.monotonic() + timeout_s, None
        try:
            while proc.poll() is None:
                now = time.monotonic()
                if now > deadline:
                    raise StoreError(f"the Kuzu writer did not finish in {timeout_s:.0f} s")
                free = _free_bytes(where) if where is not None else None
                if free is None or free >= FULL_BYTES:
                    full_since = None
                elif full_since is None:
                    full_since = now
                if full_since is not None and now - full_since >= FULL_FOR_S:
                    raise StoreError(f"the Kuzu writer was stopped: its disk stayed full for "
                                     f"{FULL_FOR_S:.0f} s{_space_note(where)}")
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=POLL_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        reason = lines[-1].strip() if lines else "no error message"
        how = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
               else f"exited with code {proc.returncode}")
        note = _space_note(where) if where is not None else ""
        raise StoreError(f"the Kuzu writer {how}: {reason}{note}")
    return json.loads(stdout.strip().splitlines()[-1])


def load_kuzu_isolated(db_path: Path, tables_dir: Path, dim: int,
                       timeout_s: float = WRITER_TIMEOUT_S) -> StoreResult:
    """`load_kuzu` in a child process; StoreError when it fails or dies."""
    data = _child(["load", str(db_path), str(tables_dir), str(dim)], timeout_s,
                  db_path.parent)
    return StoreResult(counts=data["counts"], dropped_edges=data["dropped_edges"],
                       keyword_vectors=data["keyword_vectors"])


def count_rows_isolated(db_path: Path, timeout_s: float = 600) -> dict[str, int]:
    """The row counts of a database opened read-only in a child process."""
    return _child(["count", str(db_path)], timeout_s)


def _main(argv: list[str]) -> None:
    import json
    from dataclasses import asdict

    if argv[0] == "load":
        result = load_kuzu(Path(argv[1]), Path(argv[2]), int(argv[3]))
        print(json.dumps(asdict(result)))
    elif argv[0] == "count":
        db = kuzu.Database(argv[1], read_only=True)
        conn = kuzu.Connection(db)
        try:
            print(json.dumps(count_rows(conn)))
        finally:
            conn.close()
            db.close()
    else:
        raise SystemExit("usage: python -m tasks.publish.kuzu_store load DB TABLES DIM | count DB")


if __name__ == "__main__":
    import sys

    _main(sys.argv[1:])
