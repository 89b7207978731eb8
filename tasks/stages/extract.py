"""extract (per shard): the shard's sections → extractions-<key>.parquet, one row per
section: section_id, request_key, status, reason, data (the validated extraction as
JSON), attempts (builds that got a failure for it, in a row), dropped (JSON {reason: n}
of the items validation dropped from its answer).

status: "ok"; "failed" (deterministic: an unusable answer or a refused request);
"transient" (429/5xx/timeouts after all retries); "skipped" (cost cap).

Answers are reused by request key from this shard's earlier outputs (the last build's,
and an incomplete run under the same key) and from the journal a killed run left, so a
section is paid for once. Failures are remembered the same way: a deterministic failure
is asked again on `failure_retries` later builds, then stays failed (listed with its
reason) until the prompt or model changes or `retry_failed` is set; transient failures
and skipped sections are always asked again. An output with such sections is not cached:
the next build runs the shard again and asks only for those. Entity resolution across
the pack happens later (`resolve`).

The Record's counts (what the flow and the publish guard read): rows["sections"],
rows["ok"]; info["failed"] (all failed sections), info["failed_deterministic"],
info["failed_transient"], info["failed_remembered"] (deterministic, not asked again),
info["not_extracted"] (cost cap), info["retryable"] (would be asked again next build),
info["dropped_items"] (items dropped from the answers now held) and info["dropped"]
({reason: n}); work holds this run's calls, tokens, cost_usd and estimate_usd.
Terminal errors (a rejected key, an open circuit breaker) raise and are never retried.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from pathlib import Path

import polars as pl

from tasks.extract import core as extract_core
from tasks.extract.claude import Memory, Settings, remembered
from tasks.extract.offline import OFFLINE_VERSION
from tasks.llm import failures as llm_failures
from tasks.llm import store as llm_store
from tasks.shards import Shard
from tasks.stages.common import (
    BuildContext,
    LogProgress,
    ProgressFn,
    Record,
    log,
    stage_key,
    write_parquet,
)

NAME = "extract"
VERSION = "extract-stage-v2"
SCOPE = "shard"
INPUTS = ("split",)
RETRIES = 1
RETRY_DELAY_S = 10
SECTION_COLUMNS = ["id", "page_title", "heading_path", "content", "content_hash"]
SCHEMA = {"section_id": pl.Utf8, "request_key": pl.Utf8, "status": pl.Utf8,
          "reason": pl.Utf8, "data": pl.Utf8, "attempts": pl.Int64, "dropped": pl.Utf8}
TERMINAL_ERRORS = (llm_failures.FatalError, extract_core.ExtractConfigError)  # never retried
WORK_KEYS = ("calls", "retries", "repairs", "batched_calls", "batched_sections", "batch_split",
             "cache_hits", "cache_misses", "input_tokens", "output_tokens",
             "cache_read_input_tokens", "cache_creation_input_tokens", "cost_usd",
             "estimate_usd", "estimate_calls", "dropped_items")


def settings(ctx: BuildContext) -> tuple:
    if ctx.extract_kind == "offline":
        return (VERSION, "offline", OFFLINE_VERSION)
    return (VERSION, "claude", ctx.extract.model, extract_core.PROMPT_VERSION)


def key(ctx: BuildContext, shard: Shard | None, inputs: dict) -> str:
    return stage_key(NAME, settings(ctx), inputs["split"].ref)


def output(ctx: BuildContext, content_key: str) -> Path:
    return ctx.work.stage(NAME) / f"extractions-{content_key}.parquet"


def _settings(ctx: BuildContext) -> Settings:
    x = ctx.extract
    return Settings(model=x.model, concurrency=x.concurrency,
                    batch_token_budget=x.batch_token_budget, batch_api=x.mode == "batch",
                    failure_retries=x.failure_retries, retry_failed=x.retry_failed,
                    batch_poll_s=x.batch_poll_s, batch_timeout_s=x.batch_timeout_s)


def _retryable(df: pl.DataFrame, ctx: BuildContext) -> int:
    """Sections of an output that the next run of this build's settings would ask again."""
    s = _settings(ctx)
    n = 0
    for status, reason, attempts in df.select("status", "reason", "attempts").iter_rows():
        if status == "ok":
            continue
        if not remembered({"status": status, "reason": reason, "attempts": attempts}, s):
            n += 1
    return n


def _read(path: Path | str, columns: list[str]) -> pl.DataFrame:
    """An extract output with the columns asked for (an older output lacks some: null)."""
    have = pl.read_parquet_schema(path)
    df = pl.read_parquet(path, columns=[c for c in columns if c in have])
    return df.with_columns(pl.lit(None, dtype=SCHEMA[c]).alias(c)
                           for c in columns if c not in have).select(columns)


def complete(ctx: BuildContext, content_key: str) -> bool:
    """The output exists and no section in it is to be asked again."""
    out = output(ctx, content_key)
    if not out.is_file():
        return False
    if ctx.extract_kind == "offline":
        return True
    return _retryable(_read(out, ["status", "reason", "attempts"]), ctx) == 0


def needs_rerun(record: Record, ctx: BuildContext | None = None) -> bool:
    """A cached extraction with sections to ask again runs again (for those)."""
    if ctx is not None and ctx.extract.retry_failed and record.info.get("failed"):
        return True
    return bool(record.info.get("retryable", record.info.get("failed"))
                or record.info.get("not_extracted"))


def known_outputs(paths: list[Path | str]) -> tuple[dict[str, dict], Memory]:
    """(request key → validated answer, the failures and drop counts recorded) from
    earlier outputs of this shard's pages; later paths win."""
    known: dict[str, dict] = {}
    memory = Memory()
    for path in paths:
        if not Path(path).is_file():
            continue
        df = _read(path, ["request_key", "status", "reason", "data", "attempts", "dropped"])
        for key, status, reason, data, attempts, dropped in df.iter_rows():
            if key is None:
                continue
            if status == "ok" and data is not None:
                known[key] = json.loads(data)
                memory.failures.pop(key, None)
                if dropped:
                    memory.dropped[key] = json.loads(dropped)
            elif status in ("failed", "transient") and key not in known:
                memory.failures[key] = {"status": status, "reason": reason,
                                        "attempts": attempts or 1}
    return known, memory


def known_responses(paths: list[Path | str]) -> dict[str, dict]:
    """request key → validated response, from earlier outputs of this shard's pages."""
    return known_outputs(paths)[0]


def output_rows(sections: pl.DataFrame, result: extract_core.ExtractResult) -> pl.DataFrame:
    data = {sid: json.dumps(extract_core.dump_extraction(ex), ensure_ascii=False,
                            sort_keys=True) for sid, ex in result.extractions}
    failed = {f["section_id"]: f for f in result.failures}
    skipped = set(result.not_extracted)
    rows = []
    for sid in sections["id"].to_list():
        f = failed.get(sid)
        if sid in data:
            status = "ok"
        elif f is not None:
            status = "failed" if f["kind"] == llm_failures.DETERMINISTIC else "transient"
        else:
            status = "skipped" if sid in skipped else "missing"
        reason = f["reason"] if f else ("cost cap reached" if sid in skipped else None)
        drops = result.dropped.get(sid)
        rows.append({"section_id": sid, "request_key": result.request_keys.get(sid),
                     "status": status, "reason": reason, "data": data.get(sid),
                     "attempts": f["attempts"] if f else None,
                     "dropped": json.dumps(drops, sort_keys=True) if drops else None})
    return pl.DataFrame(rows, schema=SCHEMA)


def counts(df: pl.DataFrame, ctx: BuildContext) -> dict:
    """The Record.info counts of an output (see the module docstring)."""
    statuses = Counter(df["status"].to_list())
    dropped: Counter = Counter()
    for value in df["dropped"].drop_nulls().to_list():
        dropped.update(json.loads(value))
    s = _settings(ctx)
    remembered_n = sum(
        remembered({"status": st, "attempts": a}, s)
        for st, a in df.filter(pl.col("status") == "failed").select("status", "attempts")
        .iter_rows())
    return {"failed": statuses.get("failed", 0) + statuses.get("transient", 0),
            "failed_deterministic": statuses.get("failed", 0),
            "failed_transient": statuses.get("transient", 0),
            "failed_remembered": remembered_n,
            "not_extracted": statuses.get("skipped", 0) + statuses.get("missing", 0),
            "retryable": _retryable(df, ctx) if ctx.extract_kind != "offline" else 0,
            "dropped_items": sum(dropped.values()), "dropped": dict(dropped)}


def run(ctx: BuildContext, shard: Shard | None, inputs: dict,
        progress: ProgressFn | None = None) -> Record:
    start = time.perf_counter()
    content_key = key(ctx, shard, inputs)
    out = output(ctx, content_key)
    work: dict = {}
    if not complete(ctx, content_key):
        sections = inputs["split"].table("sections", SECTION_COLUMNS)
        journal = out.with_name(out.stem + ".journal.jsonl")
        known, memory = known_outputs([*shard.previous_outputs(NAME), out])
        known.update(llm_store.read_journal(journal))
        budget = inputs.get("budget_usd")
        config = ctx.extract if budget is None else dataclasses.replace(
            ctx.extract, max_cost_usd=max(0.0, budget))
        ledger = ctx.work.stage("ledger") / f"{ctx.build_id}-extract-{shard.index}.jsonl"
        store = llm_store.ResponseStore(known, journal=journal, ledger=ledger)
        result = extract_core.extract_sections(
            sections, config, store, kind=ctx.extract_kind, memory=memory,
            progress=progress or LogProgress(f"extract {shard.label}"))
        write_parquet(output_rows(sections, result), out)
        journal.unlink(missing_ok=True)
        stats = result.stats
        work = {k: stats.get(k, 0) for k in WORK_KEYS}
        work["dropped"] = stats.get("dropped") or {}
        log.info("extract %s: %d sections, %d failed (%d remembered), %d not extracted "
                 "(%s), %d calls, $%.4f (estimate $%.4f)", shard.label, sections.height,
                 len(result.failures), stats.get("failed_remembered", 0),
                 len(result.not_extracted), ctx.extract_kind, stats.get("calls", 0),
                 stats.get("cost_usd", 0.0), stats.get("estimate_usd", 0.0))
    df = _read(out, ["section_id", "status", "data", "reason", "attempts", "dropped"])
    digest = stage_key(NAME, content_key, df.select("section_id", "status", "data").rows())
    statuses = Counter(df["status"].to_list())
    return Record(NAME, content_key, shard.index, {"extractions": str(out)},
                  {"sections": df.height, "ok": statuses.get("ok", 0)},
                  time.perf_counter() - start, digest=digest, work=work,
                  info=counts(df, ctx))
