"""Publish stage: assemble a build directory, verify it, and swap it in atomically.

A build is written to `<pack>/builds/.tmp-<id>/`, verified (the database opens and its
row counts equal the Parquet tables'), renamed to `<pack>/builds/<id>/` and only then
named in `<pack>/current` (packs/layout.py owns that layout). A build that fails
anywhere before that leaves the previous `current` untouched, so nothing already
published is lost. Older builds beyond `keep` are removed, never the current one.
"""

from __future__ import annotations

import logging
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from packs import format as fmt
from packs import integrity, layout
from packs.manifest import KeywordVectorsInfo, Manifest, read_manifest
from packs.vendor import write_zipapp
from tasks.publish.kuzu_store import count_rows_isolated, load_kuzu_isolated
from tasks.publish.tables import write_tables

log = logging.getLogger("kpack.publish")

class PublishError(RuntimeError):
    """The new build failed verification; the previous build stays current."""


def new_build_id(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return now.strftime("%Y%m%dT%H%M%S") + f"{now.microsecond // 1000:03d}Z"


def write_build(
    build_dir: Path,
    tables: dict[str, pl.DataFrame | pl.LazyFrame],
    manifest: Manifest,
    source_folder: Path | None = None,
    previous: Path | None = None,
) -> dict[str, int]:
    """Fill an empty build directory: tables, Kuzu database, manifest, extras. `previous`:
    the build before (its stored answer units are reused for unchanged sections).

    Returns the database's row counts (also written into the manifest).
    """
    dim = manifest.embedding.dim
    write_tables(tables, build_dir / fmt.TABLES_DIR, dim,
                 None if previous is None else previous / fmt.TABLES_DIR)
    result = load_kuzu_isolated(build_dir / fmt.DB_FILE, build_dir / fmt.TABLES_DIR, dim)
    if source_folder is not None:
        for rel in (fmt.EVAL_QUESTIONS, fmt.FEWSHOT_EXAMPLES):
            src = source_folder / rel
            if src.is_file():
                (build_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, build_dir / rel)
    write_zipapp(build_dir / fmt.VENDORED_MODULE)
    manifest.counts = manifest.counts.model_copy(update=result.counts)
    if result.keyword_vectors:
        from tasks.vectors import KEYWORD_VERSION

        manifest.keyword_vectors = KeywordVectorsInfo(present=True, dim=dim,
                                                      version=KEYWORD_VERSION)
    if result.dropped_edges:
        manifest.extra["dropped_edges"] = result.dropped_edges
    manifest.write(build_dir)
    return result.counts


def verify_build(build_dir: Path) -> None:
    """Open the database read-only (in a child process) and check its counts against
    the Parquet tables."""
    counts = count_rows_isolated(build_dir / fmt.DB_FILE)
    expected = {
        "articles": fmt.ARTICLES, "sections": fmt.SECTIONS, "entities": fmt.ENTITIES,
        "facts": fmt.FACTS,
    }
    for key, table in expected.items():
        rows = pl.scan_parquet(build_dir / fmt.TABLES_DIR / f"{table}.parquet").select(
            pl.len()
        ).collect().item()
        if counts[key] != rows:
            raise PublishError(
                f"verification failed: {counts[key]} {key} in the database, {rows} in "
                f"tables/{table}.parquet"
            )
    if counts["sections"] == 0:
        raise PublishError("verification failed: the pack has no sections")


def seal(build_dir: Path) -> None:
    """Record the checksum of every file `fill` wrote in the manifest, last, so that
    readers can tell a damaged file from a good one (packs.integrity)."""
    manifest = read_manifest(build_dir)
    manifest.checksums = integrity.checksums(build_dir)
    manifest.write(build_dir)


def publish(pack_root: Path, build_id: str, fill, keep: int = 2) -> Path:
    """Build with `fill(tmp_dir)`, verify, and make it current atomically.

    `fill` writes a complete build into the (empty) directory it is given.
    Returns the published build directory.
    """
    tmp, final = layout.temp_path(pack_root, build_id), layout.build_path(pack_root, build_id)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        raise PublishError(f"build {build_id} already exists in {final.parent}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        fill(tmp)
        seal(tmp)
        verify_build(tmp)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    layout.set_current(pack_root, build_id)
    layout.prune(pack_root, keep)
    return final


def assemble_tables(
    pages: pl.DataFrame,
    sections: pl.DataFrame | pl.LazyFrame,
    links: pl.DataFrame,
    extracted: dict[str, pl.DataFrame],
) -> dict[str, pl.DataFrame | pl.LazyFrame]:
    """The pure core of publishing: stage outputs → the seven pack tables.

    `pages` has one row per URL with a `usable` flag (or its `text`, usable when not
    null); `sections` carries its `embedding` (and `keyword_embedding`, if built).
    Articles are the usable pages; their word count sums their sections and their
    centrality is degree over LINKS_TO (see tasks.link_graph.degree_centrality). Sections come
    back as a lazy frame, streamed to the pack's Parquet by `write_build`.
    """
    from tasks.link_graph import canonical_url, degree_centrality

    usable_flag = pl.col("usable") if "usable" in pages.columns else pl.col("text").is_not_null()
    usable = pages.filter(usable_flag)
    articles = usable.select(
        pl.col("url").map_elements(lambda u: fmt.article_id(canonical_url(u)),
                                   return_dtype=pl.Utf8).alias("id"),
        "url",
        pl.coalesce("final_url", "url").alias("final_url"),
        pl.coalesce("title", "url").alias("title"),
        "content_hash", "content_type",
    ).unique(subset="id", keep="first", maintain_order=True)
    sections = sections.lazy()
    words = sections.group_by("article_id").agg(pl.col("word_count").sum()).collect()
    edges = list(links.select("source_id", "target_id").iter_rows())
    centrality = degree_centrality(articles["id"].to_list(), edges)
    articles = articles.join(words, left_on="id", right_on="article_id", how="left",
                             maintain_order="left").with_columns(
        pl.col("word_count").fill_null(0),
        pl.col("id").replace_strict(centrality, default=0.0, return_dtype=pl.Float64)
        .alias("centrality"),
    )
    missing = sections.select(pl.col("embedding").null_count()).collect().item()
    if missing:
        raise PublishError(f"{missing} sections have no embedding; rerun the build")
    return {
        fmt.ARTICLES: articles,
        fmt.SECTIONS: sections,
        fmt.LINKS: links,
        **{name: extracted[name] for name in (fmt.ENTITIES, fmt.MENTIONS, fmt.RELATIONSHIPS,
                                               fmt.FACTS)},
        # The topic map (tasks/topics.py): empty tables when the build made none.
        **{name: extracted.get(name, _empty(name)) for name in fmt.OPTIONAL_TABLES},
    }


def _empty(name: str) -> pl.DataFrame:
    from tasks.topics import SCHEMAS

    return pl.DataFrame(schema=SCHEMAS[name])
