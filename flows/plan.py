"""What a build runs with, worked out before any stage runs: the stages' settings from the
source's pack.toml and the command line (`build_context`), the shard plan, and the
fingerprint of a build's inputs.

Pure apart from `plan_shards`, which writes the shards' URL lists into the work dir.
Raises SourceError for settings the model cannot honour (see `chunking`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from packs.embedding import ModelInfo
from packs.embedding import describe as describe_model
from packs.format import FORMAT_VERSION, QUERY_MODULE_VERSION
from packs.manifest import EmbeddingInfo
from tasks import faults, shards, stages
from tasks import sections as split_core
from tasks.extract import core as extract_core
from tasks.fetch import pages as fetch_core
from tasks.sources import CONFIG_FILE, SourceConfig, SourceError, resolve_embedding_model
from tasks.stages.common import (
    BuildContext,
    Record,
    WorkDir,
    previous_outputs,
    read_state,
    stage_key,
    write_text,
)

LAYOUT_FILE = "layout.json"  # the last plan's count and what it was cut for


def chunking(source: SourceConfig, embedder: ModelInfo) -> tuple[int, int]:
    """(words per chunk, overlap words) from pack.toml, or fitted to the model's window.
    A chunk_words the model cannot read whole is refused: its tail would never be embedded."""
    fits = split_core.words_for_window(embedder.max_seq_length)
    words = source.config.chunk_words or fits
    if words > fits:
        raise SourceError(
            f"{source.folder / CONFIG_FILE}: chunk_words = {words} is more than "
            f"{embedder.model_id} reads ({embedder.max_seq_length} tokens ≈ {fits} words); "
            f"use at most {fits} or leave it unset")
    return words, int(words * source.config.chunk_overlap)


def fetch_config(source: SourceConfig, allow_private_hosts: bool) -> fetch_core.FetchConfig:
    """pack.toml's fetch settings; `allow_private_hosts` from the command line adds to its."""
    cfg = source.config
    return fetch_core.FetchConfig.from_pack(
        cfg, allow_private_hosts=allow_private_hosts or cfg.allow_private_hosts,
        urls_file=str(source.urls_file))


def extract_config(source: SourceConfig, kind: str | None, max_cost_usd: float | None,
                   retry_failed: bool = False) -> extract_core.ExtractConfig:
    cfg = source.config
    return extract_core.ExtractConfig(
        kind=kind or cfg.extractor, model=cfg.extractor_model,
        concurrency=cfg.extract_concurrency, max_cost_usd=max_cost_usd,
        batch_token_budget=cfg.batch_token_budget, mode=cfg.extract_mode,
        failure_retries=cfg.extract_failure_retries, retry_failed=retry_failed,
        batch_timeout_s=cfg.batch_timeout_s,
    )


def plan_shards(ctx: BuildContext, urls: list[str], shard_pages: int,
                slots: int = 0, lastmod: dict[str, str] | None = None) -> list[shards.Shard]:
    """Assign URLs to shards (more of them with `slots` cluster task slots to fill, see
    shards.shard_count; the last build's count while the pages stay near it, see
    shards.stable_count), write each non-empty shard's URL list into the work dir (with
    each page's sitemap `lastmod` after a tab), and attach each shard's lineage (the last
    build's outputs for its pages)."""
    state = read_state(ctx.work)
    before = int(state.get("count") or 0)
    count = shards.stable_count(len(urls), shard_pages, slots,
                                previous=_comparable(ctx, before, shard_pages, slots))
    write_text(ctx.work.stage("plan") / LAYOUT_FILE,
               json.dumps({"count": count, "shard_pages": shard_pages, "slots": slots}))
    groups = shards.assign(urls, count)
    lastmod = lastmod or {}
    plan_key = (stage_key("plan", count, urls, sorted(lastmod.items())) if lastmod
                else stage_key("plan", count, urls))
    plan_dir = ctx.work.stage("plan") / plan_key
    plan_dir.mkdir(parents=True, exist_ok=True)
    layout = []
    for index, group in enumerate(groups):
        if not group:
            continue
        path = plan_dir / f"{index}.txt"
        if not path.is_file():
            path.write_text("".join(u + (f"\t{lastmod[u]}" if u in lastmod else "") + "\n"
                                    for u in group), encoding="utf-8")
        parents = shards.lineage(index, count, before)
        previous = tuple(
            (stage.NAME, previous_outputs(state, stage.NAME, stage.variant(ctx), parents))
            for stage in stages.PIPELINE if stage.LINEAGE)
        layout.append(shards.Shard(index, count, str(path), previous))
    return layout


def _comparable(ctx: BuildContext, before: int, shard_pages: int, slots: int) -> int:
    """The last completed build's shard count when it was cut with the same shard_pages
    and task slots (else 0: a changed setting gets the layout it asks for at once)."""
    try:
        last = json.loads((ctx.work.stage("plan") / LAYOUT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    same = last == {"count": before, "shard_pages": shard_pages, "slots": slots}
    return before if same else 0


def variant(ctx: BuildContext, name: str) -> str:
    """What a stage's per-section outputs depend on besides the pages: reused only under
    the same variant (the stage's `variant`)."""
    return stages.get(name).variant(ctx)


def inputs_fingerprint(ctx: BuildContext, made_from: list[Record]) -> str:
    """Everything a published build is made from: the records of the stages it starts
    from (the pages) and the settings of every stage this build runs."""
    settings = [(s.NAME, s.settings(ctx)) for s in stages.PIPELINE if s.enabled(ctx)]
    return stage_key("inputs", sorted(r.ref for r in made_from), settings, ctx.description,
                     FORMAT_VERSION, QUERY_MODULE_VERSION)


def build_context(source: SourceConfig, build_id: str, out_dir: str | Path, work_dir: str | Path,
                  embedding_model: str | None, extractor: str | None,
                  allow_private_hosts: bool, max_cost_usd: float | None,
                  force: bool = False, retry_failed: bool = False) -> BuildContext:
    """The settings every stage of this build runs with (models resolved, kinds checked)."""
    model_name = resolve_embedding_model(source.config, embedding_model)
    embedder = describe_model(model_name)
    embedding = EmbeddingInfo(
        model=embedder.model_id, dim=embedder.dim, normalized=True,
        query_prefix=embedder.spec.query_prefix, document_prefix=embedder.spec.document_prefix,
        max_seq_length=embedder.max_seq_length, gate_threshold=embedder.spec.gate_threshold,
    )
    max_words, overlap_words = chunking(source, embedder)
    xcfg = extract_config(source, extractor, max_cost_usd, retry_failed)
    return BuildContext(
        pack=source.name, work=WorkDir(Path(work_dir).resolve(), source.name),
        build_id=build_id, fetch=fetch_config(source, allow_private_hosts),
        max_words=max_words, overlap_words=overlap_words, extract=xcfg,
        extract_kind=extract_core.resolve_kind(xcfg), model=model_name, embedding=embedding,
        keyword_vectors=source.config.keyword_vectors, out_dir=str(Path(out_dir).resolve()),
        source_folder=str(source.folder), description=source.config.description,
        keep_builds=source.config.keep_builds, unit_vectors=source.config.unit_vectors,
        faults=os.environ.get(faults.ENV, ""),
        force=force, guard_max_failed_share=source.config.guard_max_failed_share,
        guard_max_loss_share=source.config.guard_max_loss_share,
        query_encoder=source.config.query_encoder,
    )
