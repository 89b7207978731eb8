"""Token usage and content of a Messages API reply, parsed in one place, and the query
side's usage record.

`completion_of` turns an SDK `Message` into a `Completion` (content blocks as dicts, `Usage`,
stop reason) for the build; `query_usage` turns one into the query side's record
{input_tokens, output_tokens, api_calls, cost_usd}, which `add_query_usage` sums over the
calls of one question (multi-query expansion, synthesis). Missing or null counters are 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from packs.llm.costs import cost_usd

QUERY_USAGE_KEYS = ("input_tokens", "output_tokens", "api_calls", "cost_usd")


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_input_tokens += other.cache_read_input_tokens
        self.cache_creation_input_tokens += other.cache_creation_input_tokens


@dataclass
class Completion:
    """What a provider returns: the assistant content blocks (as dicts) and usage."""

    content: list[dict]
    usage: Usage
    stop_reason: str | None = None


# The counters a reply's `usage` carries, named as the Messages API names them.
USAGE_FIELDS = tuple(f.name for f in fields(Usage))


def usage_of(message: Any) -> Usage:
    """The token counters of a reply (a `Message`); 0 for any the reply lacks."""
    u = getattr(message, "usage", None)
    return Usage(**{name: int(getattr(u, name, 0) or 0) for name in USAGE_FIELDS})


def completion_of(message: Any) -> Completion:
    """A reply as a `Completion`: content blocks dumped to JSON-ready dicts."""
    content = [b.model_dump(mode="json", exclude_none=True) for b in message.content]
    return Completion(content=content, usage=usage_of(message),
                      stop_reason=message.stop_reason)


def zero_query_usage() -> dict[str, Any]:
    """The usage record of a question that made no Claude call."""
    return {"input_tokens": 0, "output_tokens": 0, "api_calls": 0, "cost_usd": 0.0}


def query_usage(message: Any, model: str) -> dict[str, Any]:
    """One query-side call's record: its tokens and its $ at `model`'s list price."""
    u = usage_of(message)
    return {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
            "api_calls": 1, "cost_usd": round(cost_usd(model, **asdict(u)), 8)}


def add_query_usage(total: dict[str, Any], more: dict[str, Any]) -> None:
    """Add `more` to `total` in place (counters as ints, dollars rounded to 1e-8)."""
    for k in QUERY_USAGE_KEYS:
        if k == "cost_usd":
            total[k] = round(float(total.get(k, 0.0)) + float(more.get(k, 0.0)), 8)
        else:
            total[k] = int(total.get(k, 0)) + int(more.get(k, 0))
