"""What can go wrong in an LLM call, as exception classes the build's callers catch.

The layered client (`tasks.llm.layers`), its guards (`tasks.llm.guards`) and the Message Batches
path (`tasks.llm.batches`) raise these; the extract stage decides from the class whether to
stop the stage (`FatalError`), skip one item (`ItemError`, whose `kind` says whether a later
build should ask again) or stop spending (`BudgetExhausted`). Classifying an API error into
one of these is shared with the query side: `packs.llm.errors.classify`.
"""

from __future__ import annotations


class LLMError(RuntimeError):
    """Base class for errors from the LLM layer."""


class FatalError(LLMError):
    """The whole stage must stop: the key, the account or the model is wrong (401/402/403/404)."""


class CircuitOpen(FatalError):
    """Too many calls or answers in a row failed: the stage stops (see `Breaker`)."""


DETERMINISTIC = "deterministic"  # the same request will fail the same way (400, bad output)
TRANSIENT = "transient"  # worth asking again on a later build (429/5xx/timeouts exhausted)


class ItemError(LLMError):
    """This one request failed (bad request, retries exhausted, invalid output).

    `kind` is DETERMINISTIC (asking again gives the same result) or TRANSIENT."""

    def __init__(self, message: str, kind: str = DETERMINISTIC) -> None:
        super().__init__(message)
        self.kind = kind


class BudgetExhausted(LLMError):
    """Starting this call could take spend past max_cost_usd; it was not started."""
