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
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path

import polars as pl

from tasks.extract import core as extract_core
from tasks.extract.claude import Memory, Settings, remembered
from tasks.extract.offline import OFFLINE_VERSION
from tasks.llm import failures as llm_failures
from tasks.llm import store as llm_store
from tasks.shards import Shard
from tasks.stages.base import RecordsOf, Stage
from tasks.stages.common import BuildContext, LogProgress, Record, log, stage_key, write_parquet

NAME = "extract"
SECTION_COLUMNS = ["id", "page_title", "heading_path", "content", "content_hash"]
SCHEMA = {"section_id": pl.Utf8, "request_key": pl.Utf8, "status": pl.Utf8,
          "reason": pl.Utf8, "data": pl.Utf8, "attempts": pl.Int64, "dropped": pl.Utf8}
WORK_KEYS = ("calls", "retries", "repairs", "batched_calls", "batched_sections", "batch_split",
             "cache_hits", "cache_misses", "input_tokens", "output_tokens",
             "cache_read_input_tokens", "cache_creation_input_tokens", "cost_usd",
             "estimate_usd", "estimate_calls", "dropped_items")


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


# --- what the build summary and the Prefect UI show (flows/summary.py, flows/artifacts.py)

SHARD_KEYS = ("calls", "cache_hits", "input_tokens", "output_tokens", "cost_usd")
HELD_KEYS = ("failed", "failed_deterministic", "failed_transient", "failed_remembered",
             "not_extracted", "dropped_items")


def extract_totals(records: list[Record], pages: int) -> dict:
    """The extract shards' work and counts summed; drops merged by reason; $ per 100 pages
    of the pack, estimated (before the calls) and actual."""
    work: dict = defaultdict(float)
    dropped: Counter = Counter()
    for r in records:
        for k, v in r.work.items():
            if isinstance(v, dict):
                dropped.update(v)
            elif isinstance(v, (int, float)):
                work[k] += v
    out = {k: (round(v, 6) if k.endswith("_usd") else int(v)) for k, v in work.items()}
    for k in HELD_KEYS:
        out[f"held_{k}" if k == "dropped_items" else k] = sum(
            int(r.info.get(k, 0)) for r in records)
    if dropped:
        out["dropped"] = dict(dropped.most_common())
    if pages and "cost_usd" in out:
        out["pages"] = pages
        out["usd_per_100_pages"] = round(100 * out["cost_usd"] / pages, 4)
        out["usd_per_100_pages_estimate"] = round(100 * out.get("estimate_usd", 0.0) / pages, 4)
    return out


def extract_by_shard(records: list[Record], count: int) -> list[dict]:
    """One row per extract shard, in shard order: its label (`i/n`), sections, this run's
    API calls, cache hits, tokens and USD, and whether its output was reused whole.
    Empty when no shard made a call or found a cached answer (the offline extractor)."""
    rows = []
    for r in sorted(records, key=lambda r: r.shard if r.shard is not None else -1):
        row = {"shard": f"{(r.shard or 0) + 1}/{count}", "sections": r.rows.get("sections", 0)}
        for k in SHARD_KEYS:
            v = r.work.get(k, 0)
            row[k] = round(float(v), 6) if k == "cost_usd" else int(v)
        row["reused"] = bool(r.info.get("reused"))
        rows.append(row)
    if not any(row["calls"] or row["cache_hits"] or row["cost_usd"] for row in rows):
        return []
    return rows


ESTIMATE_SUMS = ("sections", "cached", "remembered", "to_call", "calls", "input_tokens",
                 "output_tokens", "cost_usd")
ESTIMATE_META = ("model", "mode", "price_known", "prices_as_of")


# --- the stage ------------------------------------------------------------------------


class Extract(Stage):
    NAME = NAME
    VERSION = "extract-stage-v2"
    INPUTS = ("split",)
    OUTPUTS = {"extractions": "extractions"}
    RETRY_DELAY_S = 10
    TERMINAL_ERRORS = (llm_failures.FatalError, extract_core.ExtractConfigError)
    LINEAGE = True
    STATS = "extract"
    PRICED = "the Claude extraction of the sections"
    SHARD_ARTIFACT = "Claude calls and cost"

    def settings(self, ctx: BuildContext) -> tuple:
        if ctx.extract_kind == "offline":
            return (self.VERSION, "offline", OFFLINE_VERSION)
        return (self.VERSION, "claude", ctx.extract.model, extract_core.PROMPT_VERSION)

    def variant(self, ctx: BuildContext) -> str:
        """Extraction responses are keyed by their request (model and prompt included), so
        any earlier extraction may serve."""
        return "any"

    def complete(self, ctx: BuildContext, content_key: str) -> bool:
        """The output exists and no section in it is to be asked again."""
        if not super().complete(ctx, content_key):
            return False
        if ctx.extract_kind == "offline":
            return True
        out = self.paths(ctx, content_key)["extractions"]
        return _retryable(_read(out, ["status", "reason", "attempts"]), ctx) == 0

    def shard_inputs(self, ctx: BuildContext, records_of: RecordsOf) -> dict[int, dict]:
        """Each shard's share of the cost cap (`budget_usd`), in proportion to its sections,
        so that the build as a whole never passes the cap; {} without a cap (no wait for the
        split shards then)."""
        cap = ctx.extract.max_cost_usd
        if cap is None:
            return {}
        split = records_of("split")
        total = sum(r.rows["sections"] for r in split) or 1
        return {r.shard: {"budget_usd": cap * r.rows["sections"] / total} for r in split}

    def compute(self, ctx, shard, inputs, files, progress) -> dict:
        out = Path(files["extractions"])
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
        return work

    def record(self, ctx, shard, content_key, files, work, seconds) -> Record:
        df = _read(files["extractions"],
                   ["section_id", "status", "data", "reason", "attempts", "dropped"])
        digest = stage_key(NAME, content_key, df.select("section_id", "status", "data").rows())
        statuses = Counter(df["status"].to_list())
        return Record(NAME, content_key, shard.index, files,
                      {"sections": df.height, "ok": statuses.get("ok", 0)}, seconds,
                      digest=digest, work=work, info=counts(df, ctx))

    def stats(self, records: list[Record], facts: Mapping[str, int], count: int) -> dict:
        """Extraction work, failures and cost summed; per shard in "by_shard"."""
        out = {**extract_totals(records, facts.get("pages", 0)),
               "sections": facts.get("sections", 0),
               "reused_shards": sum(bool(r.info.get("reused")) for r in records)}
        by_shard = extract_by_shard(records, count)
        if by_shard:
            out["by_shard"] = by_shard
        return out

    def shard_row(self, record: Record, count: int) -> dict | None:
        rows = extract_by_shard([record], count)
        return rows[0] if rows else None

    def estimate(self, ctx: BuildContext, runs: list[tuple[Shard, dict]],
                 facts: Mapping[str, int]) -> dict:
        """Tokens and USD of asking Claude about the sections of these shards, and per 100
        pages; sections the last build extracted (or failed on for good) count zero."""
        config = dataclasses.replace(ctx.extract, kind="claude")
        settings = _settings(dataclasses.replace(ctx, extract=config))
        total: dict = dict.fromkeys(ESTIMATE_SUMS, 0)
        meta: dict = {}
        for shard, inputs in runs:
            known, memory = known_outputs(list(shard.previous_outputs(NAME)))
            est = extract_core.estimate_cost(
                inputs["split"].table("sections"), config, set(known),
                {k for k, f in memory.failures.items() if remembered(f, settings)})
            for k in ESTIMATE_SUMS:
                total[k] += est[k]
            meta = {k: est[k] for k in ESTIMATE_META}
        pages = facts.get("pages", 0)
        return {**total, "cost_usd": round(total["cost_usd"], 6),
                "usd_per_100_pages": round(100 * total["cost_usd"] / pages, 4) if pages else 0.0,
                **meta}


STAGE = Extract()
