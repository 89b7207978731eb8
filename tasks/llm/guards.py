"""The LLM layer's guards: what may start a call, shared by all of a stage's workers.

- `RateLimiter`: at most `concurrency` requests in flight, and a shared cool-down: a
  Retry-After seen by one worker pauses all of them.
- `Budget`: the cost cap. A call is only started when the spend so far, plus what in-flight
  calls are expected to cost, plus this call's estimate, stays within the cap
  (`BudgetExhausted` otherwise).
- `Breaker`: when `threshold` attempts in a row failed in transport (connection errors,
  timeouts, 5xx; not 429, which is the API pacing us) or `threshold` answers in a row were
  unusable, the API is dead or its answers are: `CircuitOpen` (a `FatalError`) stops the
  whole stage with one line, instead of five tries with backoff for every remaining item.

All three are thread-safe; the clock and sleep are injected so tests never sleep.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tasks.llm.failures import BudgetExhausted, CircuitOpen


class RateLimiter:
    """Bounded concurrency plus a shared cool-down set by Retry-After."""

    def __init__(self, concurrency: int, *, clock: Callable[[], float],
                 sleep: Callable[[float], None]) -> None:
        self._slots = threading.BoundedSemaphore(concurrency)
        self._lock = threading.Lock()
        self._not_before = float("-inf")
        self._clock = clock
        self._sleep = sleep

    def pause_all(self, seconds: float) -> None:
        with self._lock:
            self._not_before = max(self._not_before, self._clock() + seconds)

    def __enter__(self) -> RateLimiter:
        with self._lock:
            wait = self._not_before - self._clock()
        if wait > 0:
            self._sleep(wait)
        self._slots.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._slots.release()


class Budget:
    """A USD cap over actual spend plus reservations for calls in flight."""

    def __init__(self, cap_usd: float | None) -> None:
        self.cap = cap_usd
        self.spent = 0.0
        self._reserved = 0.0
        self._lock = threading.Lock()

    def reserve(self, estimate: float) -> None:
        with self._lock:
            if self.cap is not None and self.spent + self._reserved + estimate > self.cap:
                raise BudgetExhausted(
                    f"max_cost_usd={self.cap} reached (spent ${self.spent:.4f}, "
                    f"${self._reserved:.4f} in flight, next call ~${estimate:.4f})"
                )
            self._reserved += estimate

    def settle(self, estimate: float, actual: float) -> None:
        with self._lock:
            self._reserved -= estimate
            self.spent += actual


class Breaker:
    """Counts failures in a row; `open` once `threshold` transport failures (attempts) or
    `threshold` unusable answers follow each other with no success in between."""

    def __init__(self, threshold: int, base_url: str = "") -> None:
        self.threshold = threshold
        self.base_url = base_url
        self._lock = threading.Lock()
        self._attempts = 0
        self._answers = 0
        self.error: CircuitOpen | None = None

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def attempt(self, ok: bool, message: str = "") -> None:
        """Count a call that failed in transport (or reset the count on one that did not)."""
        self._count("_attempts", ok, lambda n: (
            f"{n} calls in a row to {self.base_url or 'the API'} failed (last: {message}). "
            "Check that the API is reachable (ANTHROPIC_BASE_URL, network), or build with "
            "--extractor offline"))

    def answer(self, ok: bool, message: str = "") -> None:
        """Count an unusable answer (or reset the count on a usable one)."""
        self._count("_answers", ok, lambda n: (
            f"the last {n} answers were all unusable (last: {message}). Check "
            "extractor_model in pack.toml, or build with --extractor offline"))

    def _count(self, counter: str, ok: bool, why: Callable[[int], str]) -> None:
        """Add a failure to `counter` (or reset it); open the breaker at `threshold`."""
        with self._lock:
            n = 0 if ok else getattr(self, counter) + 1
            setattr(self, counter, n)
            if not ok and self.threshold and n >= self.threshold and self.error is None:
                self.error = CircuitOpen(f"stopped calling Claude: {why(n)}")
