"""Which sections go into which request, and what the requests will cost. Pure.

**Batching** (`plan_units`): small sections are packed, in order, into one request of up
to `batch_token_budget` estimated section tokens and MAX_BATCH_SECTIONS sections, while
their expected answers fit the batch's output limit. A section at least as large as the
budget goes alone. Only sections that need a call are planned (cached ones never are),
and each answer is still cached per section, so batches never change what a rebuild
reuses: a changed page costs its own sections' calls only.

**Cost** (`estimate`): input is chars / 4 of each request plus the API's tool-use prompt;
output is a fixed part plus 1.2 × the section's tokens. When the fixed prefix (tool +
system prompt) reaches the model's minimum cacheable length, the first request of each
prefix (one per batch size) writes the cache at 1.25× and the others read it at 0.1×;
below the minimum the prefix is full price on every call. Message Batches halve it all.
"""

from __future__ import annotations

from dataclasses import dataclass

from packs.llm.costs import cost_usd, min_cacheable_tokens
from tasks.extract.prompt import (
    BATCH_MAX_OUTPUT_TOKENS,
    CHARS_PER_TOKEN,
    MAX_OUTPUT_TOKENS,
    TOOL_USE_OVERHEAD_TOKENS,
    batch_message,
    prefix_tokens,
    user_message,
)

MAX_BATCH_SECTIONS = 8
# Share of a batch's max_tokens its expected answers may fill: answers vary, and a batch
# cut at max_tokens loses the sections at its end (they are then asked for alone).
BATCH_OUTPUT_SHARE = 0.6
EXPECTED_OUTPUT_BASE = 250
EXPECTED_OUTPUT_RATIO = 1.2


def section_tokens(row: dict) -> int:
    """Estimated tokens of a section's own text in a request (title, path, content)."""
    return int(len(batch_message([row])) / CHARS_PER_TOKEN)


def expected_output(row: dict) -> int:
    return min(MAX_OUTPUT_TOKENS, int(EXPECTED_OUTPUT_BASE + EXPECTED_OUTPUT_RATIO
                                      * len(row.get("content") or "") / CHARS_PER_TOKEN))


def plan_units(rows: list[dict], budget_tokens: int,
               max_sections: int = MAX_BATCH_SECTIONS) -> list[list[int]]:
    """Indexes of `rows` grouped into requests (see the module docstring). budget 0: one
    section per request."""
    if budget_tokens <= 0 or max_sections <= 1:
        return [[i] for i in range(len(rows))]
    out_limit = BATCH_MAX_OUTPUT_TOKENS * BATCH_OUTPUT_SHARE
    units: list[list[int]] = []
    current: list[int] = []
    tokens = output = 0
    for i, row in enumerate(rows):
        t, o = section_tokens(row), expected_output(row)
        if t >= budget_tokens:
            units.append([i])
            continue
        if current and (tokens + t > budget_tokens or output + o > out_limit
                        or len(current) >= max_sections):
            units.append(current)
            current, tokens, output = [], 0, 0
        current.append(i)
        tokens += t
        output += o
    if current:
        units.append(current)
    return units


@dataclass
class UnitTokens:
    prefix: int  # tool + system prompt (+ the API's tool-use prompt)
    cacheable: bool  # the prefix reaches the model's minimum cacheable length
    user: int
    output: int


def unit_tokens(rows: list[dict], model: str) -> UnitTokens:
    n = len(rows)
    prefix = prefix_tokens(n)
    if n == 1:
        r = rows[0]
        user = len(user_message(r.get("page_title") or "", r.get("heading_path") or "",
                                r.get("content") or "")) / CHARS_PER_TOKEN
    else:
        user = len(batch_message(rows)) / CHARS_PER_TOKEN
    return UnitTokens(prefix=prefix + TOOL_USE_OVERHEAD_TOKENS,
                      cacheable=prefix >= min_cacheable_tokens(model), user=int(user),
                      output=sum(expected_output(r) for r in rows))


def reserve_usd(rows: list[dict], model: str, batch_api: bool = False) -> float:
    """What one request may cost at most, for the cost cap: its prefix priced as a cache
    write (the dearest case), plus its section text and expected output."""
    t = unit_tokens(rows, model)
    return cost_usd(model, input_tokens=t.user, output_tokens=t.output,
                    cache_creation_input_tokens=t.prefix, batch=batch_api)


def estimate(units: list[list[dict]], model: str, batch_api: bool = False) -> dict:
    """Tokens and USD of sending `units` (each a list of section rows) as requests.

    Returns {calls, input_tokens (all input), uncached_input_tokens, cache_write_tokens,
    cache_read_tokens, output_tokens, cost_usd}."""
    seen: set[int] = set()
    tin = write = read = tout = 0
    for rows in units:
        t = unit_tokens(rows, model)
        tin += t.user
        tout += t.output
        if not t.cacheable:
            tin += t.prefix
        elif len(rows) in seen:
            read += t.prefix
        else:
            seen.add(len(rows))
            write += t.prefix
    usd = cost_usd(model, input_tokens=tin, output_tokens=tout, cache_read_input_tokens=read,
                   cache_creation_input_tokens=write, batch=batch_api)
    return {"calls": len(units), "input_tokens": tin + write + read,
            "uncached_input_tokens": tin, "cache_write_tokens": write,
            "cache_read_tokens": read, "output_tokens": tout, "cost_usd": round(usd, 6)}
