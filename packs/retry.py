"""One retry policy for everything that calls out over HTTP: page fetches (tasks/fetch/) and
Claude calls (tasks/llm/, packs/llm/).

- which answers are worth asking again: `RETRYABLE_STATUS` (`is_retryable`);
- how long the server asked us to wait: `retry_after_s` reads `retry-after-ms` (Anthropic),
  then `Retry-After` in seconds or as an HTTP date;
- how long to wait when it did not say: `backoff_s`, exponential with "equal jitter" (half
  fixed, half random: workers spread out but every one still waits);
- `RetryPolicy`: how many retries and the caps, and `delay()`, the one rule combining them.

Pure: no I/O, no clock of its own (`now` and the random draw are arguments), so the loops
that use it (tenacity in the fetch client, the LLM layer's retry loop) keep their injected
clocks and sleeps.
"""

from __future__ import annotations

import email.utils
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

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


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None
