"""The LLM layer. One call goes through four visible layers, outermost first:

    cache  →  retry  →  rate limit  →  provider

- **cache** (`ResponseStore`: responses of earlier runs handed in by the caller, plus a
  journal file per run): the key hashes the request (no secrets in it: the key lives in
  the client) plus a version constant, so an unchanged section costs nothing on a rebuild.
  It is outermost so a hit never touches the budget, the limiter or the network. Only
  *validated* output is stored: a response that failed validation (even after the one
  repair round) or a request that errored is never cached, so the next build tries again
  instead of replaying garbage.
- **validate / repair** (in `LLM.structured`, between cache and retry): the tool input is
  parsed by the caller's validator, which may keep part of an answer (item-level salvage)
  and say how much of it survived (`quality`). Only an answer that is unusable, or lost most
  of its items, goes back to the model once as a `tool_result` with `is_error`; the better
  of the two answers is kept, and an item fails only when neither is usable.
- **retry** (`LLM.call`): transient errors (the statuses of `packs.retry`: 408, 409, 429,
  5xx, 529 overloaded; connection errors, timeouts) are asked again by the one retry loop
  (`packs.retry.call` on `RetryPolicy`: Retry-After honoured, else exponential backoff with
  jitter; the clock, sleep and random draw injected). Terminal
  errors are never retried: 400/413/422 fail the one item; 401/402/403/404 raise `FatalError`
  and poison the `LLM` object so every later call fails at once (a bad key is reported once,
  not hammered N times). The SDK's own retries are off (`max_retries=0`) so that the clock and
  sleep are injectable and every attempt is visible in the ledger.
- **circuit breaker** (`Breaker`, checked by the retry layer): when `threshold` attempts in
  a row failed in transport (connection errors, timeouts, 5xx; not 429, which is the API
  pacing us) or `threshold` answers in a row were unusable, the API is dead or its answers
  are: `CircuitOpen` (a `FatalError`) stops the whole stage with one line, instead of five
  tries with backoff for every remaining item.
- **rate limit** (`RateLimiter`): at most `concurrency` requests in flight, and a shared
  cool-down: a Retry-After seen by one worker pauses all of them. The cost cap (`Budget`) sits
  here too: a call is only started when the spend so far, plus what in-flight calls are
  expected to cost, plus this call's estimate, stays within the cap.
- **provider** (`AnthropicProvider`): one Messages API call through the `anthropic` SDK.
  Every attempt, successful or not, is written to the ledger with its token usage and $.

The client, error classification, usage parsing and prices are the shared layer in
`packs/llm/` (the query side uses it too); this module adds the build's layers on top. The
layers it composes live next to it, one job each: the cache and ledger in
`tasks.llm.store`, the rate limiter, cost cap and circuit breaker in `tasks.llm.guards`,
the error classes in `tasks.llm.failures`.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from packs import retry
from packs.llm import client as llm_client
from packs.llm.costs import cost_usd
from packs.llm.errors import classify, counts_against_breaker, is_api_error
from packs.llm.usage import Completion, Usage, completion_of
from packs.retry import RetryPolicy
from tasks.llm.failures import DETERMINISTIC, TRANSIENT, BudgetExhausted, FatalError, ItemError
from tasks.llm.guards import Breaker, Budget, RateLimiter
from tasks.llm.store import ResponseStore, cache_key, now_iso

# A Claude call is worth a longer wait than a page: its answer is paid for and cached.
MAX_BACKOFF_S = 60.0
MAX_RETRY_AFTER_S = 600.0
REPAIR_BELOW = 0.5  # repair when less than half of an answer's items validated

T = TypeVar("T")


# --- provider -------------------------------------------------------------------------


class AnthropicProvider:
    """Calls the Messages API with the real SDK; SDK retries off (the retry layer owns them)."""

    def __init__(self, api_key: str, *, base_url: str | None, timeout_s: float) -> None:
        self.client = llm_client.new_client(api_key, base_url=base_url, timeout=timeout_s,
                                            max_retries=0)
        self.base_url = str(self.client.base_url)

    def __call__(self, request: dict) -> Completion:
        return completion_of(self.client.messages.create(**request))


# --- the layered client -------------------------------------------------------------------


@dataclass
class Outcome:
    value: Any
    cached: bool
    usage: Usage = field(default_factory=Usage)


@dataclass
class Counters:
    calls: int = 0
    retries: int = 0
    repairs: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0


class LLM:
    """cache → (validate/repair) → retry → rate limit → provider, for tool-forced calls."""

    def __init__(self, provider: Callable[[dict], Completion], cache: ResponseStore, *,
                 model: str, prompt_version: str, concurrency: int, max_retries: int,
                 budget: Budget, clock: Callable[[], float], sleep: Callable[[float], None],
                 rng: random.Random, run_id: str, base_url: str = "",
                 breaker_threshold: int = 5) -> None:
        self.provider = provider
        self.cache = cache
        self.model = model
        self.prompt_version = prompt_version
        self.policy = RetryPolicy(max_retries=max_retries, backoff_cap_s=MAX_BACKOFF_S,
                                  max_retry_after_s=MAX_RETRY_AFTER_S)
        self.budget = budget
        self.limiter = RateLimiter(concurrency, clock=clock, sleep=sleep)
        self.clock = clock
        self.sleep = sleep
        self.rng = rng
        self.run_id = run_id
        self.base_url = base_url
        self.counters = Counters()
        self._lock = threading.Lock()
        self.fatal: FatalError | None = None
        self.breaker = Breaker(breaker_threshold, base_url)

    def cached(self, key: str, parse: Callable[[dict], T]) -> T | None:
        """The validated cached value for `key`, or None (a row that no longer validates, e.g.
        after a schema change without a version bump, counts as a miss)."""
        hit = self.cache.get(key)
        if hit is None:
            return None
        try:
            return parse(hit)
        except ValueError:
            return None

    def structured(self, request: dict, *, tool_name: str, parse: Callable[[dict], T],
                   dump: Callable[[T], dict], estimate_usd: float, item_id: str = "",
                   content_hash: str | None = None, key: str | None = None,
                   quality: Callable[[T], float] | None = None,
                   completion: Completion | None = None) -> Outcome:
        """The validated tool input for `request`, from the cache or the API.

        `parse` raises ValueError for an unusable answer; `quality` (0..1, the share of
        the answer that survived validation) below REPAIR_BELOW also asks for one repair.
        The result is stored under `key` (default: the request's cache key). A
        `completion` already paid for (a Message Batches answer) replaces the first call.
        Raises FatalError (stage must stop), ItemError (this item failed, with the reason
        and its kind), BudgetExhausted (not started: the cost cap was reached).
        """
        key = key or cache_key(request, self.prompt_version)
        hit = self.cached(key, parse)
        if hit is not None:
            return Outcome(hit, cached=True)
        usage = Usage()
        if completion is None:
            completion = self.call(request, key=key, item_id=item_id, purpose="extract",
                                   estimate_usd=estimate_usd, usage=usage)
        else:
            usage.add(completion.usage)
        first, first_error = _parsed(parse, completion, tool_name)
        value = first
        if first is None or (quality is not None and quality(first) < REPAIR_BELOW):
            with self._lock:
                self.counters.repairs += 1
            why = first_error or ValueError("most items of the answer were invalid")
            repair = _repair_request(request, completion, tool_name, why)
            completion = self.call(repair, key=key, item_id=item_id, purpose="repair",
                                   estimate_usd=estimate_usd, usage=usage)
            second, second_error = _parsed(parse, completion, tool_name)
            if second is not None and (first is None or quality is None
                                       or quality(second) >= quality(first)):
                value = second
            if value is None:
                message = f"invalid output after one repair: {_short(second_error)}"
                self.breaker.answer(False, message)
                raise ItemError(message, DETERMINISTIC) from second_error
        self.breaker.answer(True)
        self.cache.put(key, prompt_version=self.prompt_version, model=self.model,
                       content_hash=content_hash, item_id=item_id, response=dump(value),
                       usage=usage)
        return Outcome(value, cached=False, usage=usage)

    def call(self, request: dict, *, key: str, item_id: str, purpose: str,
             estimate_usd: float, usage: Usage) -> Completion:
        """Retry layer around one logical call (the one loop of `packs.retry`): the
        completion, or FatalError / CircuitOpen (stop everything), ItemError (this request
        failed; `kind` says whether a later build should ask again), BudgetExhausted (not
        started)."""
        if self.fatal is not None:
            raise FatalError(str(self.fatal))
        self.breaker.check()
        self.budget.reserve(estimate_usd)
        spent: list[float] = []
        attempts = iter(range(self.policy.max_retries + 1))

        def attempt() -> Completion:
            row = self._row(key, item_id, purpose, next(attempts))
            completion, cost = self._attempt(request, row)
            spent.append(cost)
            usage.add(completion.usage)
            return completion

        try:
            return retry.call(attempt, self.policy, transient=_is_retry,
                              retry_after=lambda exc: exc.retry_after, sleep=self.sleep,
                              rand=self._random, before_sleep=self._before_retry)
        except _Retry as exc:
            raise ItemError(f"gave up after {self.policy.max_retries + 1} attempts: "
                            f"{exc.message}", TRANSIENT) from exc.__cause__
        finally:
            self.budget.settle(estimate_usd, sum(spent))

    def _attempt(self, request: dict, row: dict) -> tuple[Completion, float]:
        """One attempt through the rate limiter to the provider, written to the ledger:
        (the completion, its cost). Raises _Retry for a transient failure, FatalError /
        CircuitOpen / ItemError for the others."""
        if self.fatal is not None:
            raise FatalError(str(self.fatal))
        self.breaker.check()
        started = self.clock()
        try:
            with self.limiter:
                completion = self.provider(request)
        except Exception as exc:
            if not is_api_error(exc):  # status and connection errors only
                raise
            kind, message, wait = classify(exc, model=self.model, base_url=self.base_url)
            self._record(row, status=_status_name(exc), error=message,
                         http_status=getattr(exc, "status_code", None),
                         duration_s=self.clock() - started)
            if kind == "fatal":
                self.fatal = FatalError(message)
                raise self.fatal from None  # one line: the SDK's stack adds nothing
            if kind == "item":
                self.breaker.attempt(True)  # the API answered, if with a refusal
                raise ItemError(message, DETERMINISTIC) from exc
            if counts_against_breaker(exc):
                self.breaker.attempt(False, message)
                self.breaker.check()
            raise _Retry(message, wait) from exc
        self.breaker.attempt(True)
        cost = cost_usd(self.model, **asdict(completion.usage))
        self._record(row, status="ok", http_status=200, usage=completion.usage, cost=cost,
                     duration_s=self.clock() - started)
        return completion, cost

    def _random(self) -> float:
        with self._lock:  # one random stream, shared by the stage's workers
            return self.rng.random()

    def _before_retry(self, attempt: int, exc: BaseException, wait: float) -> None:
        with self._lock:
            self.counters.retries += 1
        if isinstance(exc, _Retry) and exc.retry_after is not None:
            self.limiter.pause_all(wait)  # one worker's Retry-After pauses them all

    def batch(self, items: dict[str, tuple[dict, float, str]], *, poll_s: float,
              timeout_s: float):
        """Send `items` (custom_id → (request, estimate_usd, item_id)) through the Message
        Batches API (`tasks.llm.batches.run_batch`) at half price, with ledger rows (purpose
        "batch"), counters and the cost cap. Items the cap does not admit are returned in
        `skipped`; items that did not come back are in neither `completions` nor `errors`
        (send them as ordinary calls). Raises FatalError / CircuitOpen like `call`."""
        from tasks.llm.batches import BatchOutcome, run_batch

        if self.fatal is not None:
            raise FatalError(str(self.fatal))
        self.breaker.check()
        admitted: dict[str, tuple[dict, float, str]] = {}
        skipped: list[str] = []
        for cid, item in items.items():
            try:
                self.budget.reserve(item[1])
                admitted[cid] = item
            except BudgetExhausted:
                skipped.append(cid)
        outcome = BatchOutcome()
        spent: dict[str, float] = {}
        try:
            if admitted:
                started = self.clock()
                outcome = run_batch(
                    self.provider.client, {cid: it[0] for cid, it in admitted.items()},
                    model=self.model, base_url=self.base_url, clock=self.clock,
                    sleep=self.sleep, poll_s=poll_s, timeout_s=timeout_s)
                took = self.clock() - started
                for cid, completion in outcome.completions.items():
                    spent[cid] = cost_usd(self.model, **asdict(completion.usage), batch=True)
                    self._record(self._row(cid, admitted[cid][2], "batch", 0), status="ok",
                                 http_status=200, usage=completion.usage, cost=spent[cid],
                                 duration_s=took)
                for cid, (_, message) in outcome.errors.items():
                    self._record(self._row(cid, admitted[cid][2], "batch", 0),
                                 status="batch_errored", error=message, duration_s=took)
        finally:
            for cid, item in admitted.items():
                self.budget.settle(item[1], spent.get(cid, 0.0))
        outcome.skipped = skipped
        return outcome

    def _row(self, key: str, item_id: str, purpose: str, attempt: int) -> dict:
        return {"run_id": self.run_id, "key": key, "item_id": item_id, "model": self.model,
                "purpose": purpose, "attempt": attempt}

    def _record(self, row: dict, *, status: str, http_status: int | None = None,
                usage: Usage | None = None, cost: float = 0.0, error: str | None = None,
                duration_s: float | None = None) -> None:
        usage = usage or Usage()
        row = {**row, **asdict(usage), "ts": now_iso(), "status": status,
               "http_status": http_status, "cost_usd": cost, "error": error,
               "duration_s": duration_s}
        with self._lock:
            self.counters.calls += 1
            self.counters.usage.add(usage)
            self.counters.cost_usd += cost
        self.cache.record(row)


class _Retry(Exception):
    """A transient failure of one attempt: asked again after `retry_after` (the server's
    Retry-After, when it gave one) or the policy's backoff."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.message, self.retry_after = message, retry_after


def _is_retry(exc: BaseException) -> bool:
    return isinstance(exc, _Retry)


def _status_name(exc: Exception) -> str:
    code = getattr(exc, "status_code", None)
    return f"http_{code}" if code else "connection_error"


def _short(exc: Exception, limit: int = 500) -> str:
    """One line for an error; pydantic errors as "loc: message; ..." without doc links."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        text = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ())) or 'input'}: {e.get('msg', '')}"
            for e in errors()[:8]
        )
    else:
        text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _parsed(parse: Callable[[dict], T], completion: Completion,
            tool_name: str) -> tuple[T | None, ValueError | None]:
    try:
        return parse(tool_input(completion, tool_name)), None
    except ValueError as exc:
        return None, exc


def tool_input(completion: Completion, tool_name: str) -> dict:
    """The input of the forced tool call; ValueError when there is none (or it is cut)."""
    for block in completion.content:
        if block.get("type") == "tool_use" and block.get("name") == tool_name:
            value = block.get("input")
            if not isinstance(value, dict):
                raise ValueError(f"tool input is {type(value).__name__}, expected an object")
            return value
    if completion.stop_reason == "max_tokens":
        raise ValueError("the response hit max_tokens before the tool call was complete")
    raise ValueError(f"the response did not call the {tool_name} tool")


def _repair_request(request: dict, completion: Completion, tool_name: str,
                    error: Exception) -> dict:
    """The original request plus the bad answer and the validation error, as a tool_result."""
    tool_use = next((b for b in completion.content if b.get("type") == "tool_use"), None)
    message = (f"The {tool_name} input was invalid: {_short(error, 2000)}\n"
               f"Call {tool_name} again with the complete, corrected input.")
    if tool_use is not None:
        assistant = [{"type": "tool_use", "id": tool_use["id"], "name": tool_use["name"],
                      "input": tool_use.get("input", {})}]
        reply = [{"type": "tool_result", "tool_use_id": tool_use["id"], "is_error": True,
                  "content": message}]
    else:
        text = "".join(b.get("text", "") for b in completion.content) or "(no output)"
        assistant = [{"type": "text", "text": text}]
        reply = [{"type": "text", "text": message}]
    return {**request, "messages": [*request["messages"],
                                    {"role": "assistant", "content": assistant},
                                    {"role": "user", "content": reply}]}


def default_sleep(seconds: float) -> None:
    time.sleep(seconds)
