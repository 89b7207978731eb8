"""publish (once per pack, the single writer): every shard's outputs → the pack's tables,
its Kuzu database and manifest, verified, then made current atomically
(`tasks.publish.atomic`). Never cached: it runs whenever the inputs changed.

It reads the records of every stage before it in the pipeline (`READS_ALL`), and the
flow's own inputs it declares (`FLOW_INPUTS`): `fingerprint` (what the build was made from,
for the next build's no-change check), `durations`, `freshness` and `stats` (aggregated by
the flow from the stages' declarations). Its Record's info is the build's summary.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import kuzu
import polars as pl

from packs import format as fmt
from packs import layout
from packs.diff import diff_builds, diff_tables, summary_line
from packs.manifest import ExtractorInfo, Freshness, Manifest, SourceRecord, read_manifest
from packs.retrieval import unit_store
from packs.retrieval.gate import gate_info
from tasks.encoder_export import write_encoder
from tasks.extract.core import extractor_info
from tasks.publish import atomic as publish_core
from tasks.publish.guard import BuildFacts, GuardError
from tasks.publish.guard import check as guard_check
from tasks.publish.tables import write_unit_vectors
from tasks.shards import Shard
from tasks.stages.base import PACK, Stage
from tasks.stages.common import BuildContext, ProgressFn, Record, log

NAME = "publish"
MAX_LISTED = 50  # URLs / sections a summary lists; manifests keep them all
SOURCE_COLUMNS = ("url", "status", "http_status", "final_url", "content_type",
                  "content_hash", "etag", "last_modified", "error", "lastmod", "outcome")


def _pages(inputs: dict) -> pl.DataFrame:
    """Every URL's fetch result, without the page text (a `usable` flag instead)."""
    return (pl.scan_parquet([r.paths["pages"] for r in inputs["fetch"]],
                            missing_columns="insert")
            .with_columns(pl.col("text").is_not_null().alias("usable"))
            .drop("text", "links").collect())


def _sections(inputs: dict) -> pl.LazyFrame:
    """The split stage's sections in its order, with their vectors. A join that does not
    keep the left order lists them differently at each build (a hash join over threads),
    and the order reaches the pack: ties in the search and in the whole-pack items follow
    it, so two builds of the same pages answered differently."""
    sections = pl.scan_parquet([r.paths["sections"] for r in inputs["split"]])
    vectors = pl.scan_parquet([r.paths["embeddings"] for r in inputs["embed"]]).select(
        "id", "embedding")
    joined = sections.join(vectors, on="id", how="left", maintain_order="left")
    if inputs.get("keywords"):
        joined = joined.join(pl.scan_parquet([r.paths["keywords"] for r in inputs["keywords"]])
                             .select("id", fmt.KEYWORD_EMBEDDING), on="id", how="left",
                             maintain_order="left")
    return joined


def _failures(inputs: dict) -> tuple[list[dict], list[str]]:
    df = (pl.scan_parquet([r.paths["extractions"] for r in inputs["extract"]])
          .filter(pl.col("status") != "ok").select("section_id", "status", "reason")
          .sort("section_id").collect())
    failed = [{"section_id": s, "reason": r or st, "status": st} for s, st, r in df.iter_rows()
              if st != "skipped"]
    skipped = [s for s, st, _ in df.iter_rows() if st == "skipped"]
    return failed, skipped


def _source_records(pages: pl.DataFrame) -> list[SourceRecord]:
    columns = [c for c in SOURCE_COLUMNS if c in pages.columns]
    return [SourceRecord(**row) for row in pages.select(columns).rename(
        {"lastmod": "sitemap_lastmod"}, strict=False).iter_rows(named=True)]


def _freshness(inputs: dict, pages: pl.DataFrame, removed_urls: list[str]) -> Freshness:
    """The flow's freshness record (flows/freshness.py) with `removed`: the last build's
    pages that this build no longer lists (a listed page that failed counts as failed)."""
    listed = set(pages["url"].to_list())
    fresh = Freshness.model_validate(inputs.get("freshness") or {})
    fresh.pages.removed = sum(url not in listed for url in removed_urls)
    return fresh


def _capped(changes: dict) -> dict:
    return {k: (v[:MAX_LISTED] if isinstance(v, list) else v) for k, v in changes.items()}


class Publish(Stage):
    NAME = NAME
    VERSION = "publish-v1"
    SCOPE = PACK
    READS_ALL = True  # every stage before it: what it leaves out of the pack is its choice
    RETRIES = 0
    ISOLATE = True
    PUBLISHES = True
    # what the flow hands it: `fingerprint` (what the build was made from, for the next
    # build's no-change check), `durations`, `freshness` and `stats` (the build summary's)
    FLOW_INPUTS = ("fingerprint", "durations", "freshness", "stats")

    def key(self, ctx: BuildContext, shard: Shard | None, inputs: dict) -> None:
        """None: never cached, it runs whenever the inputs changed."""
        return None

    def settings(self, ctx: BuildContext) -> tuple:
        """Its version and the rules of the answer units it stores (tables/units.jsonl):
        the first build after those rules change publishes again, unchanged pages and all,
        so that readers get units they can use (others they work out again)."""
        return (self.VERSION, unit_store.VERSION)

    def unchanged(self, ctx: BuildContext, fingerprint: str) -> dict | None:
        """The published build's summary if it was made from exactly these inputs."""
        return unchanged_build(Path(ctx.out_dir), ctx.pack, fingerprint)

    def run(self, ctx: BuildContext, shard: Shard | None, inputs: dict,
            progress: ProgressFn | None = None) -> Record:
        """Assemble, write, verify and atomically publish the pack; its Record's info is the
        build's summary (its rows the pack's counts).

        The manifest records `inputs_fingerprint` (see flows.build) so that the next build
        can tell it has nothing new, and `changes`, the diff against the build it replaces.
        """
        start = time.perf_counter()
        pages = _pages(inputs)
        resolved, topics = inputs["resolve"], inputs.get("topics")
        graph = {t: resolved.table(t) for t in resolved.paths}
        if topics is not None:  # the topic map (tasks/stages/topics.py)
            graph.update({t: topics.table(t) for t in topics.paths})
        tables = publish_core.assemble_tables(
            pages, _sections(inputs), inputs["links"].table("links"), graph)
        failures, not_extracted = _failures(inputs)
        out_dir = Path(ctx.out_dir)
        pack_root = out_dir / ctx.pack
        previous = layout.current_id(pack_root)
        _refuse_older(ctx, previous)
        if not ctx.force:
            _guard(ctx, inputs, pages, len(failures), pack_root, previous)
        stats = inputs.get("stats") or {}
        manifest = _manifest(ctx, inputs, pages, tables, failures, not_extracted)
        t0 = time.perf_counter()
        changes: dict = {}

        def fill(tmp: Path) -> None:
            before = pack_root / fmt.BUILDS_DIR / previous if previous else None
            publish_core.write_build(tmp, tables, manifest, Path(ctx.source_folder),
                                     before if before is not None and before.is_dir() else None)
            manifest.encoder = write_encoder(tmp, ctx.model, ctx.query_encoder)
            if inputs.get("unit_vectors"):  # every answer unit's vector, for the reader
                write_unit_vectors(tmp / fmt.TABLES_DIR,
                                   [r.paths["unit_vectors"] for r in inputs["unit_vectors"]],
                                   ctx.embedding.model)
            if previous and (pack_root / fmt.BUILDS_DIR / previous).is_dir():
                changes.update(diff_builds(pack_root / fmt.BUILDS_DIR / previous, tmp))
            else:
                changes.update(diff_tables_first(tables))
            manifest.extra["changes"] = {k: changes[k] for k in ("pages", "sections", "entities")}
            manifest.extra["previous_build"] = previous
            manifest.freshness = _freshness(inputs, pages, changes.get("pages_removed") or [])
            manifest.write(tmp)

        build_dir = publish_core.publish(pack_root, ctx.build_id, fill, keep=ctx.keep_builds)
        log.info("publish: %s (%.1f s); changes: %s", build_dir, time.perf_counter() - t0,
                 summary_line(changes))
        layout.append_history(pack_root, ctx.build_id, "published", summary_line(changes),
                              pages=manifest.freshness.pages.model_dump())
        summary = {
            **_summary(manifest, pack_root, build_dir, ctx.build_id),
            "changes": _capped(changes),
            "extract_stats": stats.get("extract", {}),
            "extract_failures": failures[:MAX_LISTED],
            "extract_failures_total": len(failures),
            "embed_stats": stats.get("embed", {}),
            "freshness": manifest.freshness.model_dump(),
            "status": "published",
        }
        return Record(NAME, ctx.build_id, None, {"build_dir": str(build_dir)},
                      manifest.counts.model_dump(), time.perf_counter() - start, info=summary)


def _manifest(ctx: BuildContext, inputs: dict, pages: pl.DataFrame,
              tables: dict[str, pl.DataFrame], failures: list[dict],
              not_extracted: list[str]) -> Manifest:
    """The build's manifest before its files are written (encoder, changes and freshness
    are filled in when they are)."""
    stats = inputs.get("stats") or {}
    partial_reasons = []
    if not_extracted:
        partial_reasons.append(f"{len(not_extracted)} sections not extracted: cost cap reached")
    if failures:
        partial_reasons.append(f"{len(failures)} sections failed extraction")
    extractor = extractor_info(ctx.extract_kind, ctx.extract)
    return Manifest(
        name=ctx.pack,
        description=ctx.description,
        build_id=ctx.build_id,
        built_at=datetime.now(UTC).isoformat(timespec="seconds"),
        partial=bool(partial_reasons),
        partial_reasons=partial_reasons,
        sources=_source_records(pages),
        embedding=ctx.embedding,
        extractor=ExtractorInfo(**{k: v for k, v in extractor.items()
                                   if k in ExtractorInfo.model_fields}),
        kuzu_version=kuzu.__version__,
        query_module_version=fmt.QUERY_MODULE_VERSION,
        gate=gate_info(ctx.embedding.model),
        durations=inputs.get("durations") or {},
        avg_links_per_article=(
            tables[fmt.LINKS].height / tables[fmt.ARTICLES].height
            if tables[fmt.ARTICLES].height else 0.0
        ),
        extra={
            "extract_stats": stats.get("extract", {}),
            "extract_failures": failures,
            "not_extracted": not_extracted,
            "embed_stats": stats.get("embed", {}),
            "shards": stats.get("shards", {}),
            "inputs_fingerprint": inputs["fingerprint"],
            # The publish guard's verdict on this build (a refused build is not published:
            # its verdict is in history.jsonl).
            "guard": "skipped (--force)" if ctx.force else "passed",
        },
    )


def _refuse_older(ctx: BuildContext, current: str | None) -> None:
    """Build ids are start times: a current build that started after this one holds newer
    pages, and this build must not put older content back (the pack lock makes this rare:
    only a lock taken over from a build that was still alive gets here)."""
    if current and current > ctx.build_id:
        raise GuardError(f"{ctx.pack}: build {current} started after this one "
                         f"({ctx.build_id}) and is already current; nothing published")


def _facts(pages: pl.DataFrame, sections: int, entities: int, failed: int) -> BuildFacts:
    usable = pages.filter(pl.col("usable") if "usable" in pages.columns
                          else pl.col("status").is_in(["ok", "not_modified"]))
    return BuildFacts(sections=sections, entities=entities, failed_sections=failed,
                      pages=dict(usable.select("url", "content_hash").iter_rows()))


def _guard(ctx: BuildContext, inputs: dict, pages: pl.DataFrame, failed: int,
           pack_root: Path, current_id: str | None) -> None:
    """GuardError when this build must not replace the current one (tasks.publish.guard)."""
    new = _facts(pages, sum(r.rows["sections"] for r in inputs["split"]),
                 inputs["resolve"].rows[fmt.ENTITIES], failed)
    current = None
    if current_id:
        try:
            m = read_manifest(pack_root / fmt.BUILDS_DIR / current_id)
        except fmt.PackFormatError:
            m = None  # an unreadable current build is nothing to protect
        if m is not None:
            current = BuildFacts(
                sections=m.counts.sections, entities=m.counts.entities,
                pages={s.url: s.content_hash for s in m.sources
                       if s.status in ("ok", "not_modified")})
    listed = set(pages["url"].to_list())
    reason = guard_check(new, current, listed, max_failed_share=ctx.guard_max_failed_share,
                         max_loss_share=ctx.guard_max_loss_share)
    if reason:
        keeps = f"build {current_id} stays current" if current_id else "nothing was published"
        counts = {"sources": len(listed), "failed_sources": len(listed - set(new.pages)),
                  "sections": new.sections, "entities": new.entities}
        raise GuardError(f"{ctx.pack}: publish refused: {reason}; {keeps} "
                         "(fix the cause, or rebuild with --force to publish anyway)", counts)


def diff_tables_first(tables: dict[str, pl.DataFrame]) -> dict:
    """The diff of a first build: everything is added."""
    empty = {
        "articles": pl.DataFrame(schema={"url": pl.Utf8, "content_hash": pl.Utf8}),
        "sections": pl.DataFrame(schema={"id": pl.Utf8, "url": pl.Utf8}),
        "entities": pl.DataFrame(schema={"id": pl.Utf8, "name": pl.Utf8}),
    }
    return diff_tables(empty, {k: tables[k].lazy().select(empty[k].columns).collect()
                               for k in empty})


def unchanged_build(out_dir: Path, name: str, fingerprint: str) -> dict | None:
    """The published build's summary if it was made from exactly these inputs, else None.

    A partial build never counts as unchanged: the next build retries what it missed.
    """
    pack_root = out_dir / name
    current = layout.current_id(pack_root)
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
        **_summary(manifest, pack_root, build_dir, current),
        "changes": {"pages": {"added": 0, "changed": 0, "removed": 0,
                              "unchanged": manifest.counts.articles},
                    "sections": {"added": 0, "removed": 0, "unchanged": manifest.counts.sections},
                    "entities": {"added": 0, "removed": 0}},
        "status": "no changes",
    }


def _summary(manifest: Manifest, pack_root: Path, build_dir: Path, build_id: str) -> dict:
    """What a build's summary says of the build a manifest describes."""
    failed = [s.model_dump() for s in manifest.sources if s.status not in ("ok", "not_modified")]
    return {
        "pack": str(pack_root), "build_dir": str(build_dir), "build_id": build_id,
        "counts": manifest.counts.model_dump(), "partial": manifest.partial,
        "partial_reasons": list(manifest.partial_reasons),
        "failed_sources": failed[:MAX_LISTED], "failed_sources_total": len(failed),
        "sources_total": len(manifest.sources),
        "extractor": manifest.extractor.model_dump(),
        "embedding_model": manifest.embedding.model,
    }


STAGE = Publish()
