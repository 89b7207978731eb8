"""One dated price table for the Claude models the build and the query side call, and $ from
token usage.

PRICES_AS_OF is the date this table was written (from Anthropic's published list prices, not
re-checked online: the build machine has no internet). Prices change: when they do, edit the
table and the date together. A model missing from the table is priced at the most expensive
entry and flagged `known=False`, so an unknown model over-estimates rather than under-runs a
cost cap.
"""

from __future__ import annotations

from dataclasses import dataclass

PRICES_AS_OF = "2026-11-21"

# Prompt-cache multipliers relative to the base input price (5-minute ephemeral cache).
CACHE_WRITE_MULTIPLIER = 1.25
CACHE_READ_MULTIPLIER = 0.10
# The Message Batches API bills every token at half the price.
BATCH_DISCOUNT = 0.5

# The shortest prefix (tokens up to the cache breakpoint) each model caches; a shorter one is
# processed at the full input price without an error (both cache counters stay 0). From
# Anthropic's prompt-caching documentation, "cache limitations", as quoted in
# github.com/anthropics/anthropic-sdk-python/issues/1194 and docs.orq.ai/docs/proxy/prompt-caching.
MIN_CACHEABLE_TOKENS: dict[str, int] = {
    "claude-haiku-4-5": 4096,
    "claude-opus-4-5": 4096,
    "claude-sonnet-4-5": 1024,
    "claude-sonnet-4": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-3-5-haiku": 2048,
}


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float

    @property
    def cache_write_per_mtok(self) -> float:
        return self.input_per_mtok * CACHE_WRITE_MULTIPLIER

    @property
    def cache_read_per_mtok(self) -> float:
        return self.input_per_mtok * CACHE_READ_MULTIPLIER


PRICES: dict[str, Price] = {
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-sonnet-4-6": Price(3.0, 15.0),  # the default synthesis model (packs/options.py)
    "claude-sonnet-4-5": Price(3.0, 15.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-opus-4": Price(15.0, 75.0),
    "claude-3-5-haiku": Price(0.8, 4.0),
}

_MOST_EXPENSIVE = max(PRICES.values(), key=lambda p: (p.output_per_mtok, p.input_per_mtok))


def price_for(model: str) -> tuple[Price, bool]:
    """(price, known) for a model id; dated ids ("claude-haiku-4-5-20251001") and "-latest"
    aliases match their family by longest prefix. Unknown models get the most expensive price
    and known=False."""
    best = ""
    for name in PRICES:
        if (model == name or model.startswith(name + "-")) and len(name) > len(best):
            best = name
    if best:
        return PRICES[best], True
    return _MOST_EXPENSIVE, False


def min_cacheable_tokens(model: str) -> int:
    """The model's minimum cacheable prefix (longest-prefix match like `price_for`); the
    largest known minimum for an unknown model, so the estimate never assumes a cache hit
    that may not happen."""
    best = ""
    for name in MIN_CACHEABLE_TOKENS:
        if (model == name or model.startswith(name + "-")) and len(name) > len(best):
            best = name
    return MIN_CACHEABLE_TOKENS[best] if best else max(MIN_CACHEABLE_TOKENS.values())


def cost_usd(
    model: str,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cache_read_input_tokens: int = 0,
    cache_creation_input_tokens: int = 0,
    batch: bool = False,
) -> float:
    """USD for one call's usage. `input_tokens` excludes cached tokens, as the API reports it.
    `batch`: the call went through the Message Batches API (half price)."""
    price, _ = price_for(model)
    usd = (
        input_tokens * price.input_per_mtok
        + output_tokens * price.output_per_mtok
        + cache_read_input_tokens * price.cache_read_per_mtok
        + cache_creation_input_tokens * price.cache_write_per_mtok
    ) / 1_000_000
    return usd * BATCH_DISCOUNT if batch else usd
