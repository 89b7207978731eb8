"""The I/O shells of the build stages and their Prefect task wrappers.

Each shell reads its input table(s) from the work directory, calls a pure core from its
stage module, writes its output table(s) as Parquet named by a content key, and returns a
small `StageRecord` (key, paths, row counts, timings). The key of every stage is derived
from the content it consumes plus its own version and settings, never from a path or a
run id, so a rerun with unchanged inputs finds its outputs (the shell checks the files)
and Prefect's cache (keyed on the same content key) skips the task outright.

Work directory layout::

    <work>/cache/               shared by every pack: LLM cache + ledger, embedding cache
    <work>/prefect-results/     Prefect's persisted task results
    <work>/<pack>/<stage>/      Parquet intermediates named by content key
    <work>/<pack>/fetch/latest  the key of the last fetch (for conditional GETs)
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import kuzu
import polars as pl
from prefect import get_run_logger, task
from prefect.context import TaskRunContext
from prefect.exceptions import MissingContextError

from flows.artifacts import stage_progress
from packs import format as fmt
from packs.embedding import Embedder
from packs.diff import diff_builds, diff_tables, summary_line
from packs.manifest import EmbeddingInfo, ExtractorInfo, Manifest, SourceRecord, read_manifest
from tasks import embed as embed_core
from tasks import extract as extract_core
from tasks import fetch as fetch_core
from tasks import links as links_core
from tasks import publish as publish_core
from tasks import split as split_core
from tasks.sources import SourceConfig

LINKS_VERSION = "links-v1"
EMBED_VERSION = "embed-v1"


def logger() -> logging.Logger | logging.LoggerAdapter:
    """Prefect's run logger inside a run; the module logger when cores run on their own."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("kpack.build")


@dataclass(frozen=True)
class WorkDir:
    root: Path
    pack: str

    def stage(self, name: str) -> Path:
        path = self.root / self.pack / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def cache(self) -> Path:
        path = self.root / "cache"
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def results(self) -> Path:
        return self.root / "prefect-results"


@dataclass(frozen=True)
class StageRecord:
    """What a stage hands to the next: where its outputs are and how many rows they hold."""

    stage: str
    key: str
    paths: dict[str, str]
    rows: dict[str, int]
    seconds: float
    info: dict = field(default_factory=dict)

    def table(self, name: str) -> pl.DataFrame:
        return pl.read_parquet(self.paths[name])


def write_parquet(df: pl.DataFrame, path: Path) -> None:
    """Write via a temp file and rename, so a killed run never leaves a torn intermediate
    that the next run would mistake for finished work."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    df.write_parquet(tmp)
    os.replace(tmp, path)


def write_text(path: Path, text: str) -> None:
    """Atomic small-file write (markers and pointers), same reason as write_parquet."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _key(*parts: object) -> str:
    return fmt.short_hash(*(json.dumps(p, sort_keys=True, default=str) for p in parts))


def _content_key(ctx: TaskRunContext, params: dict) -> str:
    """Prefect cache key: the stage's content key (never a path string or a run id)."""
    return f"{ctx.task.name}-{params['key']}"


class Progress:
    """Plain log lines at every ~10% (and the first item) of a long loop, and with `pack`
    a Prefect progress artifact `progress-<pack>-<label>` (a no-op outside a run)."""

    def __init__(self, label: str, log: logging.Logger | logging.LoggerAdapter,
                 pack: str | None = None) -> None:
        self.label, self.log, self.next_pct = label, log, 0
        self.bar = stage_progress(label, pack) if pack else None

    def __call__(self, done: int, total: int, *_: object) -> None:
        if self.bar is not None:
            self.bar(done, total)
        pct = 100 * done // max(total, 1)
        if pct >= self.next_pct or done == total:
            self.log.info("%s: %d/%d (%d%%)", self.label, done, total, pct)
            self.next_pct = pct + 10


# --- fetch -------------------------------------------------------------------------


PAGE_COLUMNS = {
    "url": pl.Utf8, "status": pl.Utf8, "http_status": pl.Int64, "final_url": pl.Utf8,
    "content_type": pl.Utf8, "etag": pl.Utf8, "last_modified": pl.Utf8,
    "content_hash": pl.Utf8, "error": pl.Utf8, "title": pl.Utf8, "text": pl.Utf8,
    "links": pl.List(pl.Utf8), "fetched_at": pl.Utf8,
}


def _previous_pages(work: WorkDir) -> pl.DataFrame | None:
    latest = work.stage("fetch") / "latest"
    if not latest.is_file():
        return None
    path = work.stage("fetch") / f"pages-{latest.read_text().strip()}.parquet"
    return pl.read_parquet(path) if path.is_file() else None


def fetch_stage(source: SourceConfig, work: WorkDir, config: fetch_core.FetchConfig) -> StageRecord:
    """Fetch every URL (conditional GETs against the last fetch) → pages-<key>.parquet."""
    start = time.perf_counter()
    log = logger()
    urls = [u.url for u in source.urls]
    previous_df = _previous_pages(work)
    previous: dict[str, dict] = {}
    if previous_df is not None:
        for row in previous_df.filter(pl.col("text").is_not_null()).iter_rows(named=True):
            previous[row["url"]] = row
    log.info("fetch: %d URLs (%d known from the last build)", len(urls), len(previous))
    pages = fetch_core.fetch_pages(
        urls, config, previous=previous, progress=Progress("fetch", log, work.pack)
    )
    rows = []
    for page in pages:
        row = {col: getattr(page, col) for col in PAGE_COLUMNS}
        if page.status == "not_modified" and page.url in previous:
            old = previous[page.url]
            row.update(text=old["text"], title=old["title"], links=old["links"],
                       content_hash=old["content_hash"])
        rows.append(row)
    df = pl.DataFrame(rows, schema=PAGE_COLUMNS)
    # Keyed on what the pages hold, not how they were fetched: a 304 and a 200 with the
    # same bytes give the same key, so an unchanged site rebuilds nothing.
    usable_status = pl.when(pl.col("text").is_not_null()).then(pl.lit("text")).otherwise("status")
    key = _key("fetch", df.select("url", usable_status.alias("s"), "content_hash",
                                  "final_url").rows())
    out = work.stage("fetch") / f"pages-{key}.parquet"
    write_parquet(df, out)
    write_text(work.stage("fetch") / "latest", key)
    usable = df.filter(pl.col("text").is_not_null())
    counts = df.group_by("status").len().rows()
    log.info("fetch: done, %s", ", ".join(f"{n} {s}" for s, n in sorted(counts)))
    return StageRecord(
        "fetch", key, {"pages": str(out)}, {"pages": df.height, "usable": usable.height},
        time.perf_counter() - start, {"status_counts": dict(counts)},
    )


# --- split and links -----------------------------------------------------------------


def split_stage(key: str, pages: StageRecord, work: WorkDir, max_words: int,
                overlap_words: int) -> StageRecord:
    start = time.perf_counter()
    out = work.stage("split") / f"sections-{key}.parquet"
    if not out.is_file():
        df = pl.read_parquet(pages.paths["pages"]).filter(pl.col("text").is_not_null())
        write_parquet(split_core.split_pages(df, max_words, overlap_words), out)
    rows = pl.scan_parquet(out).select(pl.len()).collect().item()
    logger().info("split: %d sections from %d pages", rows, pages.rows["usable"])
    return StageRecord("split", key, {"sections": str(out)}, {"sections": rows},
                       time.perf_counter() - start)


def links_stage(key: str, pages: StageRecord, work: WorkDir) -> StageRecord:
    start = time.perf_counter()
    out = work.stage("links") / f"links-{key}.parquet"
    if not out.is_file():
        df = pl.read_parquet(pages.paths["pages"]).filter(pl.col("text").is_not_null())
        write_parquet(links_core.links_table(df), out)
    rows = pl.scan_parquet(out).select(pl.len()).collect().item()
    logger().info("links: %d links between pages of the pack", rows)
    return StageRecord("links", key, {"links": str(out)}, {"links": rows},
                       time.perf_counter() - start)


# --- extract ---------------------------------------------------------------------------

EXTRACT_TABLES = (fmt.ENTITIES, fmt.MENTIONS, fmt.RELATIONSHIPS, fmt.FACTS)


def extract_stage(key: str, sections: StageRecord, work: WorkDir,
                  config: extract_core.ExtractConfig) -> StageRecord:
    """Entities, mentions, relationships and facts of every section.

    Outputs are written under the key only when every section was extracted; a run with
    failures or a reached cost cap writes `incomplete-<key>.json` instead, so the next
    build retries just those sections (the LLM cache holds the rest).
    """
    start = time.perf_counter()
    folder = work.stage("extract")
    paths = {t: str(folder / f"{t}-{key}.parquet") for t in EXTRACT_TABLES}
    stats_path = folder / f"stats-{key}.json"
    if stats_path.is_file() and all(Path(p).is_file() for p in paths.values()):
        info = json.loads(stats_path.read_text())
        info["stats"] = {**info["stats"], "reused_stage_output": True}
    else:
        log = logger()
        df = sections.table("sections")
        result = extract_core.extract_sections(
            df, config, work.cache, progress=Progress("extract", log, work.pack)
        )
        complete = not result.failures and not result.not_extracted
        target = folder if complete else folder / f"incomplete-{key}"
        target.mkdir(exist_ok=True)
        for t in EXTRACT_TABLES:
            p = target / f"{t}-{key}.parquet"
            write_parquet(getattr(result, t), p)
            paths[t] = str(p)
        info = {
            "stats": result.stats, "extractor": result.extractor,
            "failures": result.failures, "not_extracted": result.not_extracted,
        }
        write_text(stats_path if complete else target / "stats.json",
                   json.dumps(info, default=str))
        log.info(
            "extract: %d sections, %d failed, %d not extracted (%s)", df.height,
            len(result.failures), len(result.not_extracted), result.extractor.get("kind"),
        )
    rows = {t: pl.scan_parquet(p).select(pl.len()).collect().item() for t, p in paths.items()}
    return StageRecord("extract", key, paths, rows, time.perf_counter() - start, info)


def _extract_cache_key(ctx: TaskRunContext, params: dict) -> str | None:
    # Only a complete extraction is worth caching in Prefect; see extract_stage.
    work: WorkDir = params["work"]
    if (work.root / work.pack / "extract" / f"stats-{params['key']}.json").is_file():
        return f"{ctx.task.name}-{params['key']}"
    return None


# --- embed ------------------------------------------------------------------------------


def embed_stage(key: str, sections: StageRecord, work: WorkDir, model: str) -> StageRecord:
    start = time.perf_counter()
    out = work.stage("embed") / f"embeddings-{key}.parquet"
    info: dict = {}
    if not out.is_file():
        log = logger()
        embedder = Embedder(model)
        cache = embed_core.EmbeddingCache(work.cache / embed_core.CACHE_FILE)
        df = sections.table("sections")
        vectors, stats = embed_core.embed_sections(
            df, embedder, cache, progress=Progress("embed", log, work.pack)
        )
        write_parquet(vectors, out)
        info = {"computed": stats.computed, "cached": stats.cached, "seconds": stats.seconds}
        log.info("embed: %d sections encoded, %d from cache, %.1f s (%.1f sections/s)",
                 stats.computed, stats.cached, stats.seconds,
                 stats.computed / stats.seconds if stats.seconds else 0.0)
    else:
        info = {"computed": 0, "cached": sections.rows["sections"], "reused_stage_output": True}
    rows = pl.scan_parquet(out).select(pl.len()).collect().item()
    return StageRecord("embed", key, {"embeddings": str(out)}, {"embeddings": rows},
                       time.perf_counter() - start, info)


def _file_sha(path: str) -> str:
    import hashlib

    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def keywords_key(embedded: StageRecord, extracted: StageRecord) -> str:
    """The keyword stage's content key: the embed key, the bytes of the extraction tables it
    reads (an incomplete extraction has other bytes than the complete one under the same
    extract key), and the keyword recipe."""
    return _key("keywords", embedded.key, _file_sha(extracted.paths[fmt.ENTITIES]),
                _file_sha(extracted.paths[fmt.MENTIONS]), embed_core.KEYWORD_VERSION)


def keywords_stage(sections: StageRecord, embedded: StageRecord, extracted: StageRecord,
                   work: WorkDir, model: str) -> StageRecord:
    """After extract and embed: a keyword vector per section (entities + key phrases, same
    model) added beside the content vector → embeddings-kw-<key>.parquet with columns id,
    embedding, keyword_embedding. Returned as the record the publish stage reads as its
    embeddings (info keeps the embed stats and adds `keyword_vectors`)."""
    start = time.perf_counter()
    key = keywords_key(embedded, extracted)
    out = work.stage("embed") / f"embeddings-kw-{key}.parquet"
    if not out.is_file():
        log = logger()
        embedder = Embedder(model)
        cache = embed_core.EmbeddingCache(work.cache / embed_core.CACHE_FILE)
        vectors, stats = embed_core.embed_keywords(
            sections.table("sections"), pl.read_parquet(extracted.paths[fmt.ENTITIES]),
            pl.read_parquet(extracted.paths[fmt.MENTIONS]), embedder, cache)
        write_parquet(embedded.table("embeddings").join(vectors, on="id", how="left"), out)
        kw = {"computed": stats.computed, "cached": stats.cached, "seconds": stats.seconds}
        log.info("keywords: %d keyword vectors encoded, %d from cache, %.1f s",
                 stats.computed, stats.cached, stats.seconds)
    else:
        kw = {"computed": 0, "reused_stage_output": True}
    rows = pl.scan_parquet(out).select(pl.len()).collect().item()
    return StageRecord("keywords", key, {"embeddings": str(out)}, {"embeddings": rows},
                       time.perf_counter() - start, {**embedded.info, "keyword_vectors": kw})


def _keywords_cache_key(ctx: TaskRunContext, params: dict) -> str:
    return f"{ctx.task.name}-{keywords_key(params['embedded'], params['extracted'])}"


# --- Prefect task wrappers --------------------------------------------------------------

fetch_task = task(fetch_stage, name="fetch", retries=1, retry_delay_seconds=5)
split_task = task(split_stage, name="split", cache_key_fn=_content_key, persist_result=True,
                  retries=1)
links_task = task(links_stage, name="links", cache_key_fn=_content_key, persist_result=True,
                  retries=1)
extract_task = task(extract_stage, name="extract", cache_key_fn=_extract_cache_key,
                    persist_result=True, retries=1, retry_delay_seconds=10)
embed_task = task(embed_stage, name="embed", cache_key_fn=_content_key, persist_result=True,
                  retries=1)
keywords_task = task(keywords_stage, name="keywords", cache_key_fn=_keywords_cache_key,
                     persist_result=True, retries=1)


# --- publish ------------------------------------------------------------------------------


def _source_records(pages: pl.DataFrame) -> list[SourceRecord]:
    return [
        SourceRecord(
            url=row["url"], status=row["status"], http_status=row["http_status"],
            final_url=row["final_url"], content_type=row["content_type"],
            content_hash=row["content_hash"], etag=row["etag"],
            last_modified=row["last_modified"], error=row["error"],
        )
        for row in pages.iter_rows(named=True)
    ]


def publish_stage(
    source: SourceConfig, out_dir: Path, build_id: str, embedder_info: EmbeddingInfo,
    fetched: StageRecord, split: StageRecord, links: StageRecord, extracted: StageRecord,
    embedded: StageRecord, durations: dict[str, float], fingerprint: str,
) -> dict:
    """Assemble, write, verify and atomically publish the pack; returns a summary dict.

    The manifest records `inputs_fingerprint` (see flows.build) so that the next build
    can tell it has nothing new, and `changes`, the diff against the build it replaces.
    """
    log = logger()
    pages = fetched.table("pages")
    tables = publish_core.assemble_tables(
        pages, split.table("sections"), embedded.table("embeddings"), links.table("links"),
        {t: pl.read_parquet(extracted.paths[t]) for t in EXTRACT_TABLES},
    )
    info = extracted.info
    partial_reasons = []
    if info.get("not_extracted"):
        partial_reasons.append(
            f"{len(info['not_extracted'])} sections not extracted: cost cap reached"
        )
    if info.get("failures"):
        partial_reasons.append(f"{len(info['failures'])} sections failed extraction")
    manifest = Manifest(
        name=source.name,
        description=source.config.description,
        build_id=build_id,
        built_at=datetime.now(UTC).isoformat(timespec="seconds"),
        partial=bool(partial_reasons),
        partial_reasons=partial_reasons,
        sources=_source_records(pages),
        embedding=embedder_info,
        extractor=ExtractorInfo(**{k: v for k, v in info["extractor"].items()
                                   if k in ExtractorInfo.model_fields}),
        kuzu_version=kuzu.__version__,
        query_module_version=fmt.QUERY_MODULE_VERSION,
        durations=durations,
        avg_links_per_article=(
            tables[fmt.LINKS].height / tables[fmt.ARTICLES].height
            if tables[fmt.ARTICLES].height else 0.0
        ),
        extra={
            "extract_stats": info.get("stats", {}),
            "extract_failures": info.get("failures", []),
            "not_extracted": info.get("not_extracted", []),
            "embed_stats": embedded.info,
            "inputs_fingerprint": fingerprint,
        },
    )
    t0 = time.perf_counter()
    pack_root = out_dir / source.name
    previous = publish_core.current_build(pack_root)
    changes: dict = {}

    def fill(tmp: Path) -> None:
        publish_core.write_build(tmp, tables, manifest, source.folder)
        if previous and (pack_root / fmt.BUILDS_DIR / previous).is_dir():
            changes.update(diff_builds(pack_root / fmt.BUILDS_DIR / previous, tmp))
        else:
            changes.update(diff_tables_first(tables))
        manifest.extra["changes"] = {k: changes[k] for k in ("pages", "sections", "entities")}
        manifest.extra["previous_build"] = previous
        manifest.write(tmp)

    build_dir = publish_core.publish(pack_root, build_id, fill, keep=source.config.keep_builds)
    log.info("publish: %s (%.1f s); changes: %s", build_dir, time.perf_counter() - t0,
             summary_line(changes))
    publish_core.append_history(pack_root, build_id, "published", summary_line(changes))
    return {
        "pack": str(pack_root), "build_dir": str(build_dir), "build_id": build_id,
        "counts": manifest.counts.model_dump(), "partial": manifest.partial,
        "failed_sources": [s.model_dump() for s in manifest.sources if s.status != "ok"
                           and s.status != "not_modified"],
        "extractor": manifest.extractor.model_dump(),
        "embedding_model": manifest.embedding.model,
        "changes": changes,
        "extract_stats": info.get("stats", {}),
        "extract_failures": info.get("failures", []),
        "embed_stats": embedded.info,
        "status": "published",
    }


def diff_tables_first(tables: dict[str, pl.DataFrame]) -> dict:
    """The diff of a first build: everything is added."""
    empty = {
        "articles": pl.DataFrame(schema={"url": pl.Utf8, "content_hash": pl.Utf8}),
        "sections": pl.DataFrame(schema={"id": pl.Utf8, "url": pl.Utf8}),
        "entities": pl.DataFrame(schema={"id": pl.Utf8, "name": pl.Utf8}),
    }
    return diff_tables(empty, {k: tables[k] for k in empty})


def unchanged_build(out_dir: Path, name: str, fingerprint: str) -> dict | None:
    """The published build's summary if it was made from exactly these inputs, else None.

    A partial build never counts as unchanged: the next build retries what it missed.
    """
    pack_root = out_dir / name
    current = publish_core.current_build(pack_root)
    if not current:
        return None
    build_dir = pack_root / fmt.BUILDS_DIR / current
    try:
        manifest = read_manifest(build_dir)
    except fmt.PackFormatError:
        return None
    if manifest.partial or manifest.extra.get("inputs_fingerprint") != fingerprint:
        return None
    return {
        "pack": str(pack_root), "build_dir": str(build_dir), "build_id": current,
        "counts": manifest.counts.model_dump(), "partial": False,
        "failed_sources": [s.model_dump() for s in manifest.sources
                           if s.status not in ("ok", "not_modified")],
        "extractor": manifest.extractor.model_dump(),
        "embedding_model": manifest.embedding.model,
        "changes": {"pages": {"added": 0, "changed": 0, "removed": 0,
                              "unchanged": manifest.counts.articles},
                    "sections": {"added": 0, "removed": 0, "unchanged": manifest.counts.sections},
                    "entities": {"added": 0, "removed": 0}},
        "status": "no changes",
    }


publish_task = task(publish_stage, name="publish", retries=0)
