"""topics (once per pack): the resolved entity tables and every shard's sections → the
topic tables (`tasks.topics.topics`: communities of the entity graph, each with a title,
its top entities and sections and a digest of representative sentences; with Claude as the
extractor, a short summary citing its sections instead: `tasks.topic_digest`, its answers
kept in the stage's folder so a rebuild asks only about topics whose sections changed).

A reduce step after resolve. Its key is resolve's and the split outputs' refs (the Stage
base class), so a rebuild with no change reuses its output and recomputes nothing.
"""

from __future__ import annotations

import os
import random
import time
import uuid

import polars as pl

from packs import format as fmt
from packs.llm.client import API_KEY_ENV, BASE_URL_ENV
from tasks import topic_digest
from tasks import topics as topics_core
from tasks.llm import guards
from tasks.llm import layers as llm
from tasks.llm import store as llm_store
from tasks.stages.base import PACK, Stage
from tasks.stages.common import BuildContext, write_parquet


class Topics(Stage):
    NAME = "topics"
    VERSION = f"topics-stage-v1+{topics_core.TOPICS_VERSION}"
    TABLES = (fmt.TOPICS, fmt.TOPIC_ENTITIES, fmt.TOPIC_SECTIONS)
    SCOPE = PACK
    INPUTS = ("resolve", "split")

    def settings(self, ctx: BuildContext) -> tuple:
        if ctx.extract_kind == "claude":
            return (self.VERSION, topic_digest.DIGEST_VERSION, ctx.extract.model)
        return (self.VERSION,)

    def compute(self, ctx, shard, inputs, files, progress) -> dict:
        resolved = inputs["resolve"]
        sections = pl.concat([r.table("sections", ["id", "page_title", "heading_path",
                                                   "content"])
                              for r in inputs["split"]], how="vertical_relaxed")
        tables = topics_core.topics(resolved.table(fmt.ENTITIES, ["id", "name"]),
                                    resolved.table(fmt.MENTIONS),
                                    resolved.table(fmt.RELATIONSHIPS), sections)
        work = {"computed": 1}
        if ctx.extract_kind == "claude" and os.environ.get(API_KEY_ENV, "").strip():
            client, store = _client(ctx)
            tables = topic_digest.claude_digests(tables, sections, client)
            work.update(calls=client.counters.calls,
                        cost_usd=round(client.counters.cost_usd, 6))
            store.close()
        for name, table in tables.items():
            write_parquet(table, files[name])
        return work

    def summary_line(self, shard, inputs, record) -> str:
        reused = "" if record.work else " (reused)"
        return (f"topics: {record.rows[fmt.TOPICS]} topics over "
                f"{record.rows[fmt.TOPIC_ENTITIES]} entities, {record.seconds:.1f} s{reused}")


def _client(ctx: BuildContext) -> tuple[llm.LLM, llm_store.ResponseStore]:
    """The build's LLM layer for digests, its cache the answers of earlier builds (JSON
    lines journals in the stage's folder, one per run)."""
    folder = ctx.work.stage("topics")
    known: dict[str, dict] = {}
    for path in sorted(folder.glob("digests-*.jsonl")):
        known.update(llm_store.read_journal(path))
    run_id = uuid.uuid4().hex
    store = llm_store.ResponseStore(known, journal=folder / f"digests-{run_id}.jsonl",
                                    ledger=ctx.work.pack_dir / "ledger" / f"topics-{run_id}.jsonl")
    x = ctx.extract
    provider = llm.AnthropicProvider(os.environ[API_KEY_ENV].strip(),
                                     base_url=x.base_url or os.environ.get(BASE_URL_ENV) or None,
                                     timeout_s=x.timeout_s)
    client = llm.LLM(provider, store, model=x.model, prompt_version=topic_digest.DIGEST_VERSION,
                     concurrency=min(x.concurrency, 4), max_retries=x.max_retries,
                     budget=guards.Budget(None), clock=time.monotonic, sleep=llm.default_sleep,
                     rng=random.Random(), run_id=run_id, base_url=provider.base_url,
                     breaker_threshold=x.breaker_threshold)
    return client, store


STAGE = Topics()
