"""`kpack build --estimate`: fetch and split like a build, then price the Claude extraction
of the sections without calling Claude (sections the last build extracted count zero).
Publishes nothing. Reuses the build's scheduler (flows.scheduler) and plan (flows.plan).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path

from prefect import flow

from flows.freshness import prepare
from flows.plan import build_context, extract_config, plan_shards
from flows.scheduler import Scheduler
from flows.settings import quiet_libraries, result_settings
from tasks.extract import core as extract_core
from tasks.publish.atomic import new_build_id
from tasks.sources import load_source


@flow(name="estimate-pack", flow_run_name="{name}-estimate", log_prints=False)
def estimate_pack(
    name: str, source_dir: str, work_dir: str, embedding_model: str | None = None,
    extractor: str | None = None, allow_private_hosts: bool = False,
) -> dict:
    """Fetch and split like a build, then price the extraction without calling Claude."""
    source = load_source(source_dir)
    ctx = build_context(source, new_build_id(), Path(work_dir) / "estimate-out", work_dir,
                        embedding_model, extractor or "offline", allow_private_hosts, None)
    ctx, expanded = prepare(ctx, source)  # sitemaps → the URL list
    layout = plan_shards(ctx, expanded.urls, source.config.shard_pages,
                         lastmod=expanded.lastmod)
    sched = Scheduler(ctx, layout)
    sched.run(["fetch", "split"])
    fetched, split = sched.outputs("fetch"), sched.outputs("split")
    xcfg = extract_config(source, "claude", None)
    total: dict = defaultdict(int)
    from tasks.extract.claude import remembered
    from tasks.stages.extract import _settings, known_outputs

    settings = _settings(dataclasses.replace(ctx, extract=xcfg))
    for shard, record in zip(layout, split):
        known, memory = known_outputs(list(shard.previous_outputs("extract")))
        est = extract_core.estimate_cost(
            record.table("sections"), xcfg, set(known),
            {k for k, f in memory.failures.items() if remembered(f, settings)})
        for k in ("sections", "cached", "remembered", "to_call", "calls", "input_tokens",
                  "output_tokens"):
            total[k] += est[k]
        total["cost_usd"] += est["cost_usd"]
        meta = {k: est[k] for k in ("model", "mode", "price_known", "prices_as_of")}
    pages = sum(r.rows["usable"] for r in fetched)
    return {"pack": source.name, "pages": pages, **dict(total),
            "cost_usd": round(total["cost_usd"], 6),
            "usd_per_100_pages": round(100 * total["cost_usd"] / pages, 4) if pages else 0.0,
            **meta}


def run_estimate(source_dir: str | Path, out_dir: str | Path, *, work_dir=None,
                 embedding_model: str | None = None, extractor: str | None = None,
                 allow_private_hosts: bool = False) -> dict:
    """`kpack build --estimate`: tokens and USD of extracting the source's sections.

    Sections the last build already extracted count zero. Nothing is published.
    """
    source = load_source(source_dir)
    work = Path(work_dir) if work_dir else Path(out_dir) / ".work"
    work.mkdir(parents=True, exist_ok=True)
    quiet_libraries()
    with result_settings(work):
        return estimate_pack(
            name=source.name, source_dir=str(source.folder), work_dir=str(work.resolve()),
            embedding_model=embedding_model, extractor=extractor,
            allow_private_hosts=allow_private_hosts,
        )
