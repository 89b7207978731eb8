"""What a finished build reports about itself: the stats of its stages, what a published
build lacks (`shortfalls`, for `kpack build --strict`), and why no page was usable.
Pure: plain values in, plain values out.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from tasks.stages.common import Record

if TYPE_CHECKING:
    from flows.scheduler import Scheduler


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
    for k in ("failed", "failed_deterministic", "failed_transient", "failed_remembered",
              "not_extracted", "dropped_items"):
        out[f"held_{k}" if k == "dropped_items" else k] = sum(
            int(r.info.get(k, 0)) for r in records)
    if dropped:
        out["dropped"] = dict(dropped.most_common())
    if pages and "cost_usd" in out:
        out["pages"] = pages
        out["usd_per_100_pages"] = round(100 * out["cost_usd"] / pages, 4)
        out["usd_per_100_pages_estimate"] = round(100 * out.get("estimate_usd", 0.0) / pages, 4)
    return out


SHARD_KEYS = ("calls", "cache_hits", "input_tokens", "output_tokens", "cost_usd")


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


def build_stats(pipe: Scheduler, shard_pages: int, slots: int = 0) -> dict:
    """The summary's "stats": extraction (work, failures, cost; per shard in "by_shard"),
    embedding (computed vs cached vectors) and the shard layout (with the cluster's task
    slots it was cut for), from the stage records the scheduler collected."""
    pages = sum(r.rows.get("usable", 0) for r in pipe.records["fetch"])
    extract = extract_totals(pipe.records["extract"], pages)
    sections = sum(r.rows["sections"] for r in pipe.records["split"])
    computed = sum(r.work.get("computed", 0) for r in pipe.records["embed"])
    embed = {"computed": computed, "cached": sections - computed,
             "seconds": round(sum(r.work.get("encode_seconds", 0.0)
                                  for r in pipe.records["embed"]), 3)}
    if pipe.records["keywords"]:
        kw = sum(r.work.get("computed", 0) for r in pipe.records["keywords"])
        embed["keyword_vectors"] = {"computed": kw, "cached": sections - kw}
    extract_stats = {**extract, "sections": sections, "reused_shards": sum(
        bool(r.info.get("reused")) for r in pipe.records["extract"])}
    by_shard = extract_by_shard(pipe.records["extract"], pipe.count)
    if by_shard:
        extract_stats["by_shard"] = by_shard
    return {"extract": extract_stats, "embed": embed,
            "shards": {"count": pipe.count, "non_empty": len(pipe.layout),
                       "shard_pages": shard_pages, "slots": slots,
                       "task_runs": pipe.task_runs}}


def shortfalls(summary: dict) -> list[str]:
    """What a published build lacks: failed sources, a partial pack (empty when clean)."""
    out = []
    if summary.get("failed_sources_total"):
        out.append(f"{summary['failed_sources_total']} sources not included")
    if summary.get("partial"):
        out.append("the pack is partial (see manifest partial_reasons)")
    return out


def fetch_reasons(fetched: list[Record]) -> str:
    """The three commonest reasons pages were not usable, for a build that fetched none."""
    reasons: dict[str, int] = defaultdict(int)
    for r in fetched:
        for reason, n in r.info.get("reasons", {}).items():
            reasons[reason] += n
    top = sorted(reasons.items(), key=lambda kv: -kv[1])[:3]
    return "; ".join(f"{n} × {reason}" for reason, n in top) or "no reason recorded"
