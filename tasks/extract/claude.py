"""Claude extraction of one run's sections (`tasks.extract.core.extract_sections` calls `run`).

Each distinct request (identical sections are asked once) goes through, in order:

1. **cache**: a validated answer the store holds (earlier builds, a killed run's journal):
   no call;
2. **memory**: a deterministic failure (an unusable answer, a refused request) that an
   earlier build recorded and retried `failure_retries` times already: listed again with
   its reason, no call, until the prompt or model changes (the request key changes) or
   `retry_failed` is set. Transient failures (429/5xx/timeouts) are always asked again;
3. **requests** for the rest, planned by `tasks.extract.batching` (small sections batched),
   sent directly from a thread pool, or with mode "batch" through the Message Batches API
   first and directly for whatever does not come back.

Answers are salvaged item by item (`tasks.extract.schema.salvage`). In a batched answer a
section whose part is unusable, or lost most of its items, is asked again on its own (with
the one-repair rule of `LLM.structured`); the others are cached per section at once.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from packs.llm.usage import Completion, Usage
from tasks.extract.batching import plan_units, reserve_usd
from tasks.extract.prompt import (
    BATCH_TOOL_NAME,
    PROMPT_VERSION,
    TOOL_NAME,
    build_batch_request,
    build_request,
)
from tasks.extract.schema import Salvaged, dump_extraction, salvage, section_key
from tasks.llm import failures as llm_failures
from tasks.llm import layers as llm
from tasks.llm import store as llm_store


@dataclass
class Memory:
    """What earlier outputs of this shard say, by request key."""

    failures: dict[str, dict] = field(default_factory=dict)  # {status, reason, attempts}
    dropped: dict[str, dict] = field(default_factory=dict)  # {reason: n} of the stored answer


@dataclass
class Settings:
    model: str
    concurrency: int
    batch_token_budget: int
    batch_api: bool
    failure_retries: int
    retry_failed: bool
    batch_poll_s: float
    batch_timeout_s: float


@dataclass
class Run:
    """The outcome by request key, plus counters of what was sent."""

    results: dict[str, Salvaged] = field(default_factory=dict)
    cached: set[str] = field(default_factory=set)
    failures: dict[str, dict] = field(default_factory=dict)  # {reason, kind, attempts, remembered}
    skipped: set[str] = field(default_factory=set)
    counters: Counter = field(default_factory=Counter)
    batch_api: dict = field(default_factory=dict)


def _dump(value: Salvaged) -> dict:
    return dump_extraction(value.extraction)


def _quality(value: Salvaged) -> float:
    return value.quality


def remembered(failure: dict | None, s: Settings) -> bool:
    """A deterministic failure that used up its retries (and no --retry-failed)."""
    return bool(failure and failure.get("status") == "failed" and not s.retry_failed
                and int(failure.get("attempts") or 1) >= 1 + s.failure_retries)


class _Extraction:
    def __init__(self, client: llm.LLM, s: Settings, rows: dict[str, dict], memory: Memory,
                 tick: Callable[[list[str]], None]) -> None:
        self.client, self.s, self.rows, self.memory, self.tick = client, s, rows, memory, tick
        self.run = Run()
        self._lock = threading.Lock()

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.run.counters[name] += n

    def fail(self, key: str, reason: str, kind: str) -> None:
        before = self.memory.failures.get(key) or {}
        attempts = int(before.get("attempts") or 0) + 1
        self.run.failures[key] = {"reason": reason, "kind": kind, "attempts": attempts,
                                  "remembered": False}

    def single(self, key: str, completion: Completion | None = None) -> None:
        row = self.rows[key]
        try:
            out = self.client.structured(
                build_request(self.s.model, row.get("page_title") or "",
                              row.get("heading_path") or "", row.get("content") or ""),
                tool_name=TOOL_NAME, parse=salvage, dump=_dump, quality=_quality, key=key,
                estimate_usd=reserve_usd([row], self.s.model), item_id=row["id"],
                content_hash=row.get("content_hash"), completion=completion)
            self.run.results[key] = out.value
        except llm_failures.BudgetExhausted:
            self.run.skipped.add(key)
        except llm_failures.ItemError as exc:
            self.fail(key, str(exc), exc.kind)

    def unit(self, keys: list[str]) -> None:
        """One request for `keys` (a single section, or a batch of them)."""
        if len(keys) == 1:
            self.single(keys[0])
            return
        rows = [self.rows[k] for k in keys]
        request = build_batch_request(self.s.model, rows)
        usage = Usage()
        try:
            completion = self.client.call(
                request, key=llm_store.cache_key(request, PROMPT_VERSION),
                item_id=",".join(r["id"] for r in rows), purpose="extract-batch",
                estimate_usd=reserve_usd(rows, self.s.model), usage=usage)
        except llm_failures.BudgetExhausted:
            self.run.skipped.update(keys)
            return
        except llm_failures.ItemError as exc:
            if exc.kind == llm_failures.TRANSIENT:
                for k in keys:
                    self.fail(k, str(exc), exc.kind)
                return
            self.count("batch_split", len(keys))  # refused as a whole: ask one by one
            for k in keys:
                self.single(k)
            return
        self.batch_answer(keys, completion)

    def batch_answer(self, keys: list[str], completion: Completion) -> None:
        self.count("batched_calls")
        self.count("batched_sections", len(keys))
        try:
            data = llm.tool_input(completion, BATCH_TOOL_NAME)
        except ValueError:
            data = {}
        u = completion.usage
        share = Usage(*(v // len(keys) for v in (
            u.input_tokens, u.output_tokens, u.cache_read_input_tokens,
            u.cache_creation_input_tokens)))
        redo = []
        for i, key in enumerate(keys, start=1):
            try:
                value = salvage(data.get(section_key(i)))
            except ValueError:
                redo.append(key)
                continue
            if value.lost_most:
                redo.append(key)
                continue
            row = self.rows[key]
            self.client.breaker.answer(True)
            self.client.cache.put(key, prompt_version=PROMPT_VERSION, model=self.s.model,
                                  content_hash=row.get("content_hash"), item_id=row["id"],
                                  response=_dump(value), usage=share)
            self.run.results[key] = value
        self.count("batch_split", len(redo))
        for key in redo:
            self.single(key)

    def direct(self, units: list[list[str]]) -> None:
        """Send `units` from a thread pool; the first FatalError stops everything."""
        with ThreadPoolExecutor(max_workers=self.s.concurrency,
                                thread_name_prefix="extract") as pool:
            futures = {pool.submit(self.unit, u): u for u in units}
            not_done = set(futures)
            while not_done:
                finished, not_done = wait(not_done, return_when=FIRST_EXCEPTION)
                for fut in finished:
                    if fut.exception() is not None:
                        for other in not_done:
                            other.cancel()
                        raise fut.exception()
                    self.tick(futures[fut])

    def batch_api(self, units: list[list[str]]) -> list[list[str]]:
        """Send `units` as one Message Batch; returns the units to send directly."""
        items: dict[str, tuple[dict, float, str]] = {}
        by_id: dict[str, list[str]] = {}
        for keys in units:
            rows = [self.rows[k] for k in keys]
            if len(keys) == 1:
                r = rows[0]
                request = build_request(self.s.model, r.get("page_title") or "",
                                        r.get("heading_path") or "", r.get("content") or "")
                cid = keys[0]  # a request key: 64 hex digits, a valid custom_id
            else:
                request = build_batch_request(self.s.model, rows)
                cid = llm_store.cache_key(request, PROMPT_VERSION)
            items[cid] = (request, reserve_usd(rows, self.s.model, batch_api=True),
                          ",".join(r["id"] for r in rows))
            by_id[cid] = keys
        outcome = self.client.batch(items, poll_s=self.s.batch_poll_s,
                                    timeout_s=self.s.batch_timeout_s)
        direct: list[list[str]] = []
        for cid, keys in by_id.items():
            if cid in outcome.completions:
                completion = outcome.completions[cid]
                if len(keys) == 1:
                    self.single(keys[0], completion)
                else:
                    self.batch_answer(keys, completion)
                self.tick(keys)
            elif cid in outcome.errors and outcome.errors[cid][0] == llm_failures.DETERMINISTIC:
                if len(keys) == 1:
                    self.fail(keys[0], outcome.errors[cid][1], llm_failures.DETERMINISTIC)
                    self.tick(keys)
                else:
                    direct.extend([k] for k in keys)
            elif cid in outcome.skipped:
                self.run.skipped.update(keys)
                self.tick(keys)
            else:
                direct.append(keys)
        self.run.batch_api = {
            "batch_id": outcome.batch_id, "requests": len(items),
            "returned": len(outcome.completions) + len(outcome.errors),
            "sent_directly": sum(len(u) for u in direct), "http_requests": outcome.http_requests,
            "reason": outcome.reason}
        return direct


def run(client: llm.LLM, s: Settings, rows: dict[str, dict], memory: Memory,
        tick: Callable[[list[str]], None]) -> Run:
    """Extract the sections `rows` (request key → a representative row, in section order)."""
    ex = _Extraction(client, s, rows, memory, tick)
    pending: list[str] = []
    for key in rows:
        value = client.cached(key, salvage)
        if value is not None:
            ex.run.results[key] = value
            ex.run.cached.add(key)
            tick([key])
        elif remembered(memory.failures.get(key), s):
            before = memory.failures[key]
            ex.run.failures[key] = {"reason": before.get("reason") or "failed earlier",
                                    "kind": llm_failures.DETERMINISTIC,
                                    "attempts": int(before.get("attempts") or 1),
                                    "remembered": True}
            tick([key])
        else:
            pending.append(key)
    plan = plan_units([rows[k] for k in pending], s.batch_token_budget)
    units = [[pending[i] for i in unit] for unit in plan]
    if s.batch_api and units:
        units = ex.batch_api(units)
    ex.direct(units)
    return ex.run
