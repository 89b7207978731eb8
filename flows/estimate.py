"""`kpack build --estimate`: fetch and split like a build, then price the Claude extraction
of the sections without calling Claude (sections the last build extracted count zero).
Publishes nothing. Reuses the build's scheduler (flows.scheduler) and plan (flows.plan),
and names no stage: it runs what the priced stages (`PRICED`) read, then asks them.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.freshness import prepare
from flows.plan import build_context, plan_shards
from flows.scheduler import Scheduler
from flows.settings import quiet_libraries, result_settings
from flows.summary import build_facts
from tasks import stages
from tasks.publish.atomic import new_build_id
from tasks.sources import load_source


@flow(name="estimate-pack", flow_run_name="{name}-estimate", log_prints=False)
def estimate_pack(
    name: str, source_dir: str, work_dir: str, embedding_model: str | None = None,
    extractor: str | None = None, allow_private_hosts: bool = False,
) -> dict:
    """Run the stages the priced ones read (fetch and split), as a build would, then price
    the stages that declare a cost (`PRICED`: the Claude extraction) without running them."""
    source = load_source(source_dir)
    ctx = build_context(source, new_build_id(), Path(work_dir) / "estimate-out", work_dir,
                        embedding_model, extractor or "offline", allow_private_hosts, None)
    ctx, expanded = prepare(ctx, source)  # sitemaps → the URL list
    layout = plan_shards(ctx, expanded.urls, source.config.shard_pages,
                         lastmod=expanded.lastmod)
    sched = Scheduler(ctx, layout)
    priced = [s for s in stages.PIPELINE if s.PRICED and s.enabled(ctx)]
    sched.run(upstream([s.NAME for s in priced]))
    facts = build_facts(sched.records)
    out = {"pack": source.name, "pages": facts.get("pages", 0)}
    for stage in priced:
        runs = [(shard, sched.inputs(stage.NAME, shard)) for shard in layout]
        out.update(stage.estimate(ctx, runs, facts))
    return out


def upstream(names: list[str]) -> list[str]:
    """The stages that `names` read, directly or through others, in pipeline order."""
    wanted: set[str] = set()
    todo = [dep for name in names for dep in stages.inputs_of(name)]
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(stages.inputs_of(name))
    return [name for name in stages.names() if name in wanted]


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
