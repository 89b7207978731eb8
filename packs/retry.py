"""One retry policy for everything that calls out over HTTP: page fetches (tasks/fetch/) and
Claude calls (tasks/llm/, packs/llm/).

- which answers are worth asking again: `RETRYABLE_STATUS` (`is_retryable`);
- how long the server asked us to wait: `retry_after_s` reads `retry-after-ms` (Anthropic),
  then `Retry-After` in seconds or as an HTTP date;
- how long to wait when it did not say: `backoff_s`, exponential with "equal jitter" (half
  fixed, half random: workers spread out but every one still waits);
- `RetryPolicy`: how many retries and the caps, and `delay()`, the one rule combining them;
- the one retry loop, tenacity driven by a policy: `call` (a function, blocking),
  `retrying` and `async_retrying` (the same loop as tenacity objects, for a caller that
  wants the attempt's state, e.g. the fetch client's log line). The SDK's own retries are
  off wherever this loop retries (`packs.llm.client`).

The rules are pure: no I/O, no clock of their own (`now` and the random draw are
arguments). The loop takes its `sleep` and random draw as arguments, so tests inject them
and never really sleep. tenacity is imported when a loop is built, not with this module.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

T = TypeVar("T")
Transient = Callable[[BaseException], bool]  # whether an error is worth another attempt
RetryAfter = Callable[[BaseException], "float | None"]  # the wait the error asks for

# Timeouts (408), conflicts the server asks to repeat (409), rate limits (429), server
# errors and overload (529, Anthropic's). 501 and 505 say the request itself is wrong.
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


def is_retryable(status: int) -> bool:
    """Whether an HTTP status is worth asking again (after a delay)."""
    return status in RETRYABLE_STATUS


def retry_after_s(headers: Mapping[str, str] | None, now: datetime | None = None
                  ) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, else `retry-after` as seconds
    or an HTTP date (relative to `now`, default the current time); never negative. None when
    absent or unreadable (the caller then backs off exponentially)."""
    if headers is None:
        return None
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return max(0.0, millis / 1000)
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    seconds = _number(value)
    if seconds is not None:
        return max(0.0, seconds)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def backoff_s(attempt: int, rand: float, *, base: float = 1.0, cap: float = 30.0) -> float:
    """The wait before retry number `attempt` (1-based): base * 2**(attempt-1), capped at
    `cap`, scaled by a factor in [0.5, 1.0) drawn from `rand` in [0, 1)."""
    ceiling = min(cap, base * 2 ** (attempt - 1))
    return ceiling * (0.5 + rand / 2)


@dataclass(frozen=True)
class RetryPolicy:
    """How often to ask again and how long to wait in between."""

    max_retries: int = 3
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0
    max_retry_after_s: float = 30.0  # a longer Retry-After is cut to this

    def delay(self, attempt: int, retry_after: float | None, rand: float) -> float:
        """The wait before retry `attempt` (1-based): the server's Retry-After when it gave
        one (up to `max_retry_after_s`), else jittered exponential backoff."""
        if retry_after is not None:
            return min(retry_after, self.max_retry_after_s)
        return backoff_s(attempt, rand, base=self.backoff_base_s, cap=self.backoff_cap_s)


def _options(policy: RetryPolicy, transient: Transient, retry_after: RetryAfter | None,
             rand: Callable[[], float],
             before_sleep: Callable[[int, BaseException, float], Any] | None) -> dict:
    """tenacity's arguments for `policy`: at most max_retries + 1 attempts, retrying the
    errors `transient` accepts after `policy.delay` (the error's `retry_after`, else
    backoff), the last error re-raised. `before_sleep(attempt, error, wait)` runs before
    each wait. The random draw is taken only before a wait that happens."""
    from tenacity import retry_if_exception, stop_after_attempt

    def wait(state: Any) -> float:
        if state.attempt_number > policy.max_retries:  # no wait follows the last attempt
            return 0.0
        exc = state.outcome.exception()
        asked = retry_after(exc) if retry_after is not None else None
        return policy.delay(state.attempt_number, asked, rand())

    def before(state: Any) -> None:
        if before_sleep is not None:
            before_sleep(state.attempt_number, state.outcome.exception(),
                         state.next_action.sleep)

    return {"stop": stop_after_attempt(policy.max_retries + 1), "wait": wait,
            "retry": retry_if_exception(transient), "before_sleep": before, "reraise": True}


def retrying(policy: RetryPolicy, *, transient: Transient,
             retry_after: RetryAfter | None = None,
             sleep: Callable[[float], None] = time.sleep,
             rand: Callable[[], float] = random.random,
             before_sleep: Callable[[int, BaseException, float], Any] | None = None) -> Any:
    """The retry loop for blocking calls (a `tenacity.Retrying`; see `_options`)."""
    from tenacity import Retrying

    return Retrying(sleep=sleep, **_options(policy, transient, retry_after, rand, before_sleep))


def async_retrying(policy: RetryPolicy, *, transient: Transient,
                   sleep: Callable[[float], Awaitable[None]],
                   retry_after: RetryAfter | None = None,
                   rand: Callable[[], float] = random.random,
                   before_sleep: Callable[[int, BaseException, float], Any] | None = None
                   ) -> Any:
    """The same loop for coroutines (a `tenacity.AsyncRetrying`)."""
    from tenacity import AsyncRetrying

    return AsyncRetrying(sleep=sleep,
                         **_options(policy, transient, retry_after, rand, before_sleep))


def call(fn: Callable[[], T], policy: RetryPolicy, *, transient: Transient,
         retry_after: RetryAfter | None = None,
         sleep: Callable[[float], None] = time.sleep,
         rand: Callable[[], float] = random.random,
         before_sleep: Callable[[int, BaseException, float], Any] | None = None) -> T:
    """`fn()`, asked again after each error `transient` accepts, at most
    `policy.max_retries` times; the last error is re-raised, and any other at once."""
    return retrying(policy, transient=transient, retry_after=retry_after, sleep=sleep,
                    rand=rand, before_sleep=before_sleep)(fn)


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None
