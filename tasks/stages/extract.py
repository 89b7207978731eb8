"""extract (per shard): the shard's sections → extractions-<key>.parquet, one row per
section: section_id, request_key, status ("ok", "failed", "skipped"), reason, data (the
validated extraction as JSON).

Responses are reused by request key from this shard's earlier outputs (the last build's,
and an incomplete run under the same key) and from the journal a killed run left, so a
section is paid for once. Entity resolution across the pack happens later (`resolve`).
An output with failed or skipped sections is not cached: the next build runs the shard
again and asks only for those.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from pathlib import Path

import polars as pl

from tasks import extract as extract_core
from tasks import llm
from tasks.offline_extract import OFFLINE_VERSION
from tasks.shards import Shard
from tasks.stages.common import (
    BuildContext,
    LogProgress,
    ProgressFn,
    Record,
    logger,
    stage_key,
    write_parquet,
)

NAME = "extract"
VERSION = "extract-stage-v1"
SCOPE = "shard"
INPUTS = ("split",)
RETRIES = 1
RETRY_DELAY_S = 10
SECTION_COLUMNS = ["id", "page_title", "heading_path", "content", "content_hash"]
SCHEMA = {"section_id": pl.Utf8, "request_key": pl.Utf8, "status": pl.Utf8,
          "reason": pl.Utf8, "data": pl.Utf8}


def settings(ctx: BuildContext) -> tuple:
    if ctx.extract_kind == "offline":
        return (VERSION, "offline", OFFLINE_VERSION)
    return (VERSION, "claude", ctx.extract.model, extract_core.PROMPT_VERSION)


def key(ctx: BuildContext, shard: Shard | None, inputs: dict) -> str:
    return stage_key(NAME, settings(ctx), inputs["split"].ref)


def output(ctx: BuildContext, content_key: str) -> Path:
    return ctx.work.stage(NAME) / f"extractions-{content_key}.parquet"


def complete(ctx: BuildContext, content_key: str) -> bool:
    """The output exists and every section in it was extracted or failed for good."""
    out = output(ctx, content_key)
    if not out.is_file():
        return False
    return pl.scan_parquet(out).filter(pl.col("status") != "ok").select(pl.len()).collect().item() == 0


def needs_rerun(record: Record) -> bool:
    """A cached extraction with failed or skipped sections runs again (for those)."""
    return bool(record.info.get("failed") or record.info.get("not_extracted"))


def known_responses(paths: list[Path | str]) -> dict[str, dict]:
    """request key → validated response, from earlier outputs of this shard's pages."""
    known: dict[str, dict] = {}
    for path in paths:
        if not Path(path).is_file():
            continue
        df = pl.read_parquet(path, columns=["request_key", "status", "data"]).filter(
            (pl.col("status") == "ok") & pl.col("request_key").is_not_null())
        for k, data in df.select("request_key", "data").iter_rows():
            known[k] = json.loads(data)
    return known


def output_rows(sections: pl.DataFrame, result: extract_core.ExtractResult) -> pl.DataFrame:
    data = {sid: json.dumps(extract_core.dump_extraction(ex), ensure_ascii=False,
                            sort_keys=True) for sid, ex in result.extractions}
    failed = {f["section_id"]: f["reason"] for f in result.failures}
    skipped = set(result.not_extracted)
    rows = []
    for sid in sections["id"].to_list():
        status = "ok" if sid in data else "failed" if sid in failed else \
            "skipped" if sid in skipped else "missing"
        reason = failed.get(sid) or ("cost cap reached" if sid in skipped else None)
        rows.append({"section_id": sid, "request_key": result.request_keys.get(sid),
                     "status": status, "reason": reason, "data": data.get(sid)})
    return pl.DataFrame(rows, schema=SCHEMA)


def run(ctx: BuildContext, shard: Shard | None, inputs: dict,
        progress: ProgressFn | None = None) -> Record:
    start = time.perf_counter()
    log = logger()
    content_key = key(ctx, shard, inputs)
    out = output(ctx, content_key)
    work: dict = {}
    if not complete(ctx, content_key):
        sections = inputs["split"].table("sections", SECTION_COLUMNS)
        journal = out.with_name(out.stem + ".journal.jsonl")
        known = known_responses([*shard.previous_outputs(NAME), out])
        known.update(llm.read_journal(journal))
        budget = inputs.get("budget_usd")
        config = ctx.extract if budget is None else dataclasses.replace(
            ctx.extract, max_cost_usd=max(0.0, budget))
        ledger = ctx.work.stage("ledger") / f"{ctx.build_id}-extract-{shard.index}.jsonl"
        store = llm.ResponseStore(known, journal=journal, ledger=ledger)
        result = extract_core.extract_sections(
            sections, config, store, kind=ctx.extract_kind,
            progress=progress or LogProgress(f"extract {shard.label}", log))
        write_parquet(output_rows(sections, result), out)
        journal.unlink(missing_ok=True)
        stats = result.stats
        work = {k: stats.get(k, 0) for k in (
            "calls", "retries", "repairs", "cache_hits", "cache_misses", "input_tokens",
            "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
            "cost_usd")}
        log.info("extract %s: %d sections, %d failed, %d not extracted (%s), %d calls",
                 shard.label, sections.height, len(result.failures),
                 len(result.not_extracted), ctx.extract_kind, stats.get("calls", 0))
    df = pl.read_parquet(out, columns=["section_id", "status", "data"])
    statuses = Counter(df["status"].to_list())
    digest = stage_key(NAME, content_key, df.rows())
    return Record(NAME, content_key, shard.index, {"extractions": str(out)},
                  {"sections": df.height, "ok": statuses.get("ok", 0)},
                  time.perf_counter() - start, digest=digest, work=work,
                  info={"failed": statuses.get("failed", 0),
                        "not_extracted": statuses.get("skipped", 0)})
