"""EXTRACT: sections in; entities, mentions, relationships and facts out.

Two extractors produce the same per-section shape (`Extraction`, tasks.extract.schema):
- **claude** (`tasks.extract.claude`): forced tool calls through `tasks.llm.layers` (cache →
  retry → circuit breaker → rate limit → provider). The tool schema is generated from the
  validating models; answers are salvaged item by item and repaired only when most of an
  answer is lost; small sections share a request (`batch_token_budget`), or all go through
  the Message Batches API (`mode="batch"`); deterministic failures are remembered;
- **offline**: the deterministic heuristics of `tasks.extract.offline` (no key needed).

`assemble` (pure) then resolves entities across the whole pack (`tasks.extract.entities`) and builds
the four tables with the column names of `packs.format.TABLE_COLUMNS`.

Shell: `extract_sections` (calls the API through a `llm_store.ResponseStore` the caller fills
with earlier answers) and `estimate_cost` (no calls). Everything else here is pure.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import polars as pl

from packs.format import ENTITIES, FACTS, MENTIONS, RELATIONSHIPS, TABLE_COLUMNS, fact_id
from packs.llm.client import API_KEY_ENV, BASE_URL_ENV
from packs.llm.costs import PRICES_AS_OF, price_for
from tasks.extract import batching, claude
from tasks.extract.entities import RawEntity, resolve_entities
from tasks.extract.offline import OFFLINE_NOTE, extract_offline
from tasks.extract.prompt import (  # noqa: F401 (re-exported: the prompt's public names)
    BATCH_TOOL_NAME,
    MAX_OUTPUT_TOKENS,
    PROMPT_VERSION,
    SYSTEM_PROMPT,
    TOOL,
    TOOL_NAME,
    build_batch_request,
    build_request,
    user_message,
)
from tasks.extract.schema import (  # noqa: F401 (re-exported)
    ENTITY_TYPES,
    EntityOut,
    Extraction,
    FactOut,
    RelationshipOut,
    dump_extraction,
    parse_extraction,
    salvage,
)
from tasks.llm import failures as llm_failures
from tasks.llm import guards
from tasks.llm import layers as llm
from tasks.llm import store as llm_store

# --- config + result ----------------------------------------------------------------------


class ExtractConfigError(ValueError):
    """The extract configuration cannot work; the message says how to fix it."""


@dataclass(frozen=True)
class ExtractConfig:
    kind: Literal["auto", "claude", "offline"] = "auto"  # auto: claude iff ANTHROPIC_API_KEY set
    model: str = "claude-haiku-4-5"
    concurrency: int = 8
    max_cost_usd: float | None = None
    timeout_s: float = 60.0
    max_retries: int = 4
    base_url: str | None = None  # else ANTHROPIC_BASE_URL / the SDK default
    # Section tokens one request may carry (small sections share it); 0: one per request.
    batch_token_budget: int = 2000
    # "direct": Messages API calls; "batch": the Message Batches API (half price, slower),
    # with direct calls for what does not come back within batch_timeout_s.
    mode: Literal["direct", "batch"] = "direct"
    # Later builds that ask again for a section whose answer was unusable (or whose
    # request was refused); then it stays failed until the prompt or model changes.
    failure_retries: int = 1
    retry_failed: bool = False  # ask again for remembered failures (--retry-failed)
    batch_poll_s: float = 30.0
    batch_timeout_s: float = 3600.0
    # Calls (transport failures) or answers (unusable) in a row that stop the stage.
    breaker_threshold: int = 5

    def __post_init__(self) -> None:
        if self.kind not in ("auto", "claude", "offline"):
            raise ExtractConfigError(f"extractor kind {self.kind!r}: use auto, claude or offline")
        if not 1 <= self.concurrency <= 64:
            raise ExtractConfigError(f"concurrency {self.concurrency}: use 1..64")
        if self.max_cost_usd is not None and self.max_cost_usd < 0:
            raise ExtractConfigError("max_cost_usd must be >= 0 (or None for no cap)")
        if self.timeout_s <= 0:
            raise ExtractConfigError("timeout_s must be positive")
        if self.max_retries < 0:
            raise ExtractConfigError("max_retries must be >= 0")
        if not 0 <= self.batch_token_budget <= 100_000:
            raise ExtractConfigError(
                f"batch_token_budget {self.batch_token_budget}: use 0 (no batching) to 100000")
        if self.mode not in ("direct", "batch"):
            raise ExtractConfigError(f"extract_mode {self.mode!r}: use direct or batch")
        if self.failure_retries < 0:
            raise ExtractConfigError("failure_retries must be >= 0")
        if self.batch_poll_s <= 0 or self.batch_timeout_s <= 0:
            raise ExtractConfigError("batch_poll_s and batch_timeout_s must be positive")
        if self.breaker_threshold < 1:
            raise ExtractConfigError("breaker_threshold must be >= 1")


@dataclass
class ExtractResult:
    """Per-section outcome of one extraction run (one shard, in the build)."""

    extractions: list[tuple[str, Extraction]]  # (section id, validated output), by id
    request_keys: dict[str, str] = field(default_factory=dict)  # section id → request key
    # {section_id, reason, kind ("deterministic"/"transient"), attempts, remembered}
    failures: list[dict] = field(default_factory=list)
    not_extracted: list[str] = field(default_factory=list)  # skipped: cost cap reached
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)  # sid → reason → items
    stats: dict = field(default_factory=dict)
    extractor: dict = field(default_factory=dict)

    @property
    def extracted(self) -> list[str]:
        return [sid for sid, _ in self.extractions]

    def tables(self) -> dict[str, pl.DataFrame]:
        """The four extraction tables of these sections alone (`assemble`)."""
        return assemble(self.extractions)


# --- pure core: per-section extractions -> tables ---------------------------------------------

_SCHEMAS = {
    ENTITIES: {"id": pl.Utf8, "name": pl.Utf8, "type": pl.Utf8, "description": pl.Utf8,
               "aliases": pl.List(pl.Utf8)},
    MENTIONS: {"section_id": pl.Utf8, "entity_id": pl.Utf8},
    RELATIONSHIPS: {"source_id": pl.Utf8, "target_id": pl.Utf8, "relation": pl.Utf8,
                    "evidence": pl.Utf8, "section_id": pl.Utf8},
    FACTS: {"id": pl.Utf8, "text": pl.Utf8, "entity_id": pl.Utf8, "section_id": pl.Utf8},
}
assert all(tuple(_SCHEMAS[t]) == TABLE_COLUMNS[t] for t in _SCHEMAS), "columns drifted"


def _frame(table: str, rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=_SCHEMAS[table])


def assemble(extractions: list[tuple[str, Extraction]]) -> dict[str, pl.DataFrame]:
    """Resolve entities across all sections and build the entities, mentions, relationships
    and facts tables (deterministic for a given input; sorted rows).

    Names used by a relationship or fact but missing from the section's entity list become
    entities of type "other" rather than being dropped.
    """
    raws: list[RawEntity] = []
    for sid, ex in extractions:
        declared = set()
        for e in ex.entities:
            raws.append(RawEntity(e.name, e.type, e.description, tuple(e.aliases), sid))
            declared.add(e.name.lower())
        extra = [r.source for r in ex.relationships] + [r.target for r in ex.relationships]
        extra += [f.entity for f in ex.facts]
        for name in extra:
            if name.lower() not in declared:
                declared.add(name.lower())
                raws.append(RawEntity(name, "other", "", (), sid))
    res = resolve_entities(raws)

    mentions = sorted({(r.section_id, res.lookup(r.name)) for r in raws
                       if res.lookup(r.name) is not None})
    rels: dict[tuple, dict] = {}
    facts: dict[str, dict] = {}
    for sid, ex in extractions:
        for r in ex.relationships:
            src, tgt = res.lookup(r.source), res.lookup(r.target)
            if src is None or tgt is None or src == tgt:
                continue
            rels.setdefault((src, tgt, r.relation, sid), {
                "source_id": src, "target_id": tgt, "relation": r.relation,
                "evidence": r.evidence, "section_id": sid})
        for f in ex.facts:
            eid = res.lookup(f.entity)
            if eid is None:
                continue
            fid = fact_id(f.text, sid)
            facts.setdefault(fid, {"id": fid, "text": f.text, "entity_id": eid,
                                   "section_id": sid})
    return {
        ENTITIES: _frame(ENTITIES, [
            {"id": e.id, "name": e.name, "type": e.type, "description": e.description,
             "aliases": e.aliases} for e in res.entities]),
        MENTIONS: _frame(MENTIONS, [{"section_id": s, "entity_id": e} for s, e in mentions]),
        RELATIONSHIPS: _frame(RELATIONSHIPS, [rels[k] for k in sorted(rels)]),
        FACTS: _frame(FACTS, [facts[k] for k in sorted(facts)]),
    }


# --- shell ----------------------------------------------------------------------------------


def resolve_kind(config: ExtractConfig, environ: dict | None = None) -> str:
    """"claude" or "offline". Raises ExtractConfigError for kind="claude" without a key."""
    env = os.environ if environ is None else environ
    has_key = bool(env.get(API_KEY_ENV, "").strip())
    if config.kind == "claude" and not has_key:
        raise ExtractConfigError(
            f"extractor 'claude' needs {API_KEY_ENV}; export it, or set extractor = "
            "\"offline\" (or \"auto\") in pack.toml"
        )
    if config.kind == "auto":
        return "claude" if has_key else "offline"
    return config.kind


def _rows(sections: pl.DataFrame) -> list[dict]:
    missing = {"id", "content"} - set(sections.columns)
    if missing:
        raise ValueError(f"sections table lacks columns {sorted(missing)}")
    cols = [c for c in ("id", "page_title", "heading_path", "content", "content_hash")
            if c in sections.columns]
    return sections.select(cols).to_dicts()


def extractor_info(kind: str, config: ExtractConfig) -> dict:
    if kind == "offline":
        return {"kind": "offline", "model": None, "prompt_version": "", "note": OFFLINE_NOTE}
    return {"kind": "claude", "model": config.model, "prompt_version": PROMPT_VERSION,
            "note": f"Claude tool-use extraction, prices as of {PRICES_AS_OF}"}


def section_request(row: dict, model: str) -> dict:
    return build_request(model, row.get("page_title") or "", row.get("heading_path") or "",
                         row["content"] or "")


def request_key(row: dict, model: str) -> str:
    """The cache key of a section's request: equal sections share it, and a response
    stored under it is reused by any later build."""
    return llm_store.cache_key(section_request(row, model), PROMPT_VERSION)


def _distinct(rows: list[dict], model: str) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """(request key → first row, request key → every row) in section order: identical
    sections (repeated boilerplate) share one request."""
    first: dict[str, dict] = {}
    groups: dict[str, list[dict]] = {}
    for row in rows:
        key = request_key(row, model)
        first.setdefault(key, row)
        groups.setdefault(key, []).append(row)
    return first, groups


def estimate_cost(sections: pl.DataFrame, config: ExtractConfig,
                  known: set[str] | frozenset[str] = frozenset(),
                  remembered: set[str] | frozenset[str] = frozenset()) -> dict:
    """Tokens and USD that extracting `sections` with Claude would cost, without calling it.

    Sections whose request key is in `known` (answers already held) or in `remembered`
    (failures that will not be asked again) cost nothing. The rest are planned into requests
    exactly as a run would (`tasks.extract.batching`: batching, prompt-cache pricing, the
    Message Batches discount with mode "batch"). Returns {sections, cached, remembered,
    to_call, calls, input_tokens, uncached_input_tokens, cache_write_tokens,
    cache_read_tokens, output_tokens, cost_usd, model, mode, price_known, prices_as_of}.
    """
    rows = _rows(sections)
    first, _ = _distinct(rows, config.model)
    todo = [row for key, row in first.items() if key not in known and key not in remembered]
    units = [[todo[i] for i in unit] for unit in
             batching.plan_units(todo, config.batch_token_budget)]
    est = batching.estimate(units, config.model, batch_api=config.mode == "batch")
    return {
        "sections": len(rows), "cached": sum(k in known for k in first),
        "remembered": sum(k in remembered and k not in known for k in first),
        "to_call": len(todo), **est, "model": config.model, "mode": config.mode,
        "price_known": price_for(config.model)[1], "prices_as_of": PRICES_AS_OF,
    }


def extract_sections(
    sections: pl.DataFrame,
    config: ExtractConfig,
    store: llm_store.ResponseStore | None = None,
    *,
    kind: str | None = None,
    memory: claude.Memory | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = llm.default_sleep,
    progress: Callable[[int, int], None] | None = None,
    rng: random.Random | None = None,
) -> ExtractResult:
    """Extract entities, relationships and facts from every section.

    `sections` needs id and content (page_title, heading_path, content_hash are used when
    present). The extractor is `kind`, else chosen by `config.kind` (see `resolve_kind`).
    With Claude, answers held by `store` (earlier runs) are reused, new validated answers
    are stored in it and every API attempt is written to its ledger; `memory` holds the
    failures (and drop counts) earlier runs recorded, by request key.

    Per-section problems do not raise: failed sections are in `failures` with the reason
    and its kind, sections skipped by the cost cap in `not_extracted`. Raises
    ExtractConfigError for an unusable config, llm_failures.FatalError when the API rejects the
    key/account/model, and llm_failures.CircuitOpen when calls or answers keep failing (the stage
    stops; no further calls are made).
    """
    started = time.perf_counter()
    kind = kind or resolve_kind(config)
    rows = _rows(sections)
    if kind == "offline":
        extractions = []
        for n, row in enumerate(rows, start=1):
            data = extract_offline(row.get("page_title") or "", row.get("heading_path") or "",
                                   row["content"] or "")
            try:  # the heuristics find the odd name without a letter ("--"): left out
                extraction = salvage(data).extraction
            except ValueError:
                extraction = Extraction()
            extractions.append((row["id"], extraction))
            if progress:
                progress(n, len(rows))
        stats = {"sections": len(rows), "calls": 0, "cache_hits": 0, "cache_misses": 0,
                 "failed": 0, "not_extracted": 0, "input_tokens": 0, "output_tokens": 0,
                 "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
                 "cost_usd": 0.0, "estimated": False}
        return _result(ExtractResult(sorted(extractions, key=lambda p: p[0])), stats,
                       extractor_info(kind, config), started)
    return _extract_claude(rows, config, store or llm_store.ResponseStore(),
                           memory or claude.Memory(), clock=clock, sleep=sleep,
                           progress=progress, rng=rng or random.Random(), started=started)


def _result(result: ExtractResult, stats: dict, info: dict, started: float) -> ExtractResult:
    result.stats = {**stats, "extracted": len(result.extractions), "extractor": info,
                    "duration_s": round(time.perf_counter() - started, 3)}
    result.extractor = info
    return result


def _extract_claude(rows: list[dict], config: ExtractConfig, store: llm_store.ResponseStore,
                    memory: claude.Memory, *, clock, sleep, progress,
                    rng: random.Random, started: float) -> ExtractResult:
    api_key = os.environ[API_KEY_ENV].strip()
    base_url = config.base_url or os.environ.get(BASE_URL_ENV) or None
    provider = llm.AnthropicProvider(api_key, base_url=base_url, timeout_s=config.timeout_s)
    run_id = uuid.uuid4().hex
    client = llm.LLM(provider, store, model=config.model, prompt_version=PROMPT_VERSION,
                     concurrency=config.concurrency, max_retries=config.max_retries,
                     budget=guards.Budget(config.max_cost_usd), clock=clock, sleep=sleep,
                     rng=rng, run_id=run_id, base_url=provider.base_url,
                     breaker_threshold=config.breaker_threshold)
    first, groups = _distinct(rows, config.model)
    total, done = len(rows), 0

    def tick(keys: list[str]) -> None:
        nonlocal done
        done += sum(len(groups[k]) for k in keys)
        if progress:
            progress(done, total)

    settings = claude.Settings(
        model=config.model, concurrency=config.concurrency,
        batch_token_budget=config.batch_token_budget, batch_api=config.mode == "batch",
        failure_retries=config.failure_retries, retry_failed=config.retry_failed,
        batch_poll_s=config.batch_poll_s, batch_timeout_s=config.batch_timeout_s)
    estimate = estimate_cost(pl.DataFrame(rows), config, frozenset(
        k for k in first if store.get(k) is not None), frozenset(
        k for k in first if claude.remembered(memory.failures.get(k), settings)))
    try:
        run = claude.run(client, settings, first, memory, tick)
    finally:
        provider.client.close()

    extractions, failures, not_extracted, dropped, keys = [], [], [], {}, {}
    run_dropped: Counter = Counter()
    for key, group in groups.items():
        value = run.results.get(key)
        if value is not None and key not in run.cached:
            run_dropped.update(value.dropped)
        drops = dict(memory.dropped.get(key) or {}) if key in run.cached else \
            dict(value.dropped) if value is not None else {}
        for row in group:
            keys[row["id"]] = key
            if value is not None:
                extractions.append((row["id"], value.extraction))
                if drops:
                    dropped[row["id"]] = drops
            elif key in run.failures:
                failures.append({"section_id": row["id"], **run.failures[key]})
            elif key in run.skipped:
                not_extracted.append(row["id"])
    failures.sort(key=lambda f: f["section_id"])
    c = client.counters
    hits = sum(len(groups[k]) for k in run.cached)
    by_kind = Counter(f["kind"] for f in failures)
    stats = {
        "sections": total, "calls": c.calls, "retries": c.retries, "repairs": c.repairs,
        "batched_calls": run.counters["batched_calls"],
        "batched_sections": run.counters["batched_sections"],
        "batch_split": run.counters["batch_split"],
        "cache_hits": hits, "cache_misses": total - hits, "failed": len(failures),
        "failed_deterministic": by_kind[llm_failures.DETERMINISTIC],
        "failed_transient": by_kind[llm_failures.TRANSIENT],
        "failed_remembered": sum(bool(f["remembered"]) for f in failures),
        "not_extracted": len(not_extracted),
        "dropped_items": sum(run_dropped.values()), "dropped": dict(run_dropped),
        "input_tokens": c.usage.input_tokens, "output_tokens": c.usage.output_tokens,
        "cache_read_input_tokens": c.usage.cache_read_input_tokens,
        "cache_creation_input_tokens": c.usage.cache_creation_input_tokens,
        "cost_usd": round(c.cost_usd, 6), "estimate_usd": estimate["cost_usd"],
        "estimate_calls": estimate["calls"],
        # True when the model is missing from the price table (priced at the top rate).
        "estimated": not price_for(config.model)[1],
        "prices_as_of": PRICES_AS_OF, "run_id": run_id, "mode": config.mode,
    }
    if run.batch_api:
        stats["batch_api"] = run.batch_api
    result = ExtractResult(sorted(extractions, key=lambda p: p[0]), keys, failures,
                           sorted(not_extracted), dropped)
    return _result(result, stats, extractor_info("claude", config), started)
