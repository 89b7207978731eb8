"""What a finished build reports about itself: the stats of its stages (each stage says
what it adds: `tasks.stages.base.Stage.facts` and `stats`) and what a published build
lacks (`shortfalls`, for `kpack build --strict`).
Pure: plain values in, plain values out.
"""

from __future__ import annotations

from collections.abc import Mapping

from tasks import stages
from tasks.stages.common import Record


def build_facts(records: Mapping[str, list[Record]]) -> dict[str, int]:
    """The build's counts that stages declare from their records ("pages", "sections")."""
    facts: dict[str, int] = {}
    for stage in stages.PIPELINE:
        facts.update(stage.facts(records.get(stage.NAME, [])))
    return facts


def build_stats(records: Mapping[str, list[Record]], count: int, non_empty: int,
                shard_pages: int, slots: int = 0, task_runs: int = 0) -> dict:
    """The summary's "stats": what each stage adds under its STATS key (extraction work,
    failures and cost, per shard in "by_shard"; embedding computed vs cached vectors), from
    the records of this build's stages, and the shard layout (`count` shards, `non_empty`
    of them with pages, cut for `slots` cluster task slots)."""
    facts = build_facts(records)
    out: dict = {}
    for stage in stages.PIPELINE:
        if stage.STATS:
            out.setdefault(stage.STATS, {}).update(
                stage.stats(records.get(stage.NAME, []), facts, count))
    out["shards"] = {"count": count, "non_empty": non_empty, "shard_pages": shard_pages,
                     "slots": slots, "task_runs": task_runs}
    return out


def shortfalls(summary: dict) -> list[str]:
    """What a published build lacks: failed sources, a partial pack (empty when clean)."""
    out = []
    if summary.get("failed_sources_total"):
        out.append(f"{summary['failed_sources_total']} sources not included")
    if summary.get("partial"):
        out.append("the pack is partial (see manifest partial_reasons)")
    return out
