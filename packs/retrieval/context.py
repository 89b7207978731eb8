"""Context assembly under a token budget, as Markdown with headings, URLs and [n] numbers.

The budget (default 8,000) minus the answer reserve (default 2,000) is split 60% primary
sections, 30% related sections, 10% graph facts; a share left unused is not lent to the
others, so each part's size is predictable. Within a share items are taken greedily in the
order given (primary by score, related by hop distance then score); an item that does not
fit is skipped and `truncated` is set. If the first item of a share alone exceeds it, a
cut-down copy is used so the share is never empty.

Token counts are approximate: ceil(characters / 4), which tracks Claude's tokenizer on
English prose within ~10–15% and costs nothing; the reserve absorbs the error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from packs.result import Facts, RankedSection

PRIMARY_SHARE, RELATED_SHARE = 0.6, 0.3
CHARS_PER_TOKEN = 4


def count_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def split_budget(budget: int, reserve: int) -> tuple[int, int, int]:
    """(primary, related, facts) token shares of budget - reserve."""
    available = max(budget - reserve, 0)
    primary = int(available * PRIMARY_SHARE)
    related = int(available * RELATED_SHARE)
    return primary, related, available - primary - related


def _block_header(n: int, s: RankedSection) -> str:
    heading = s.heading_path or s.title or s.url
    title = f"{s.title} — {heading}" if s.title and s.title not in heading else heading
    rel = f" ({s.relation})" if s.relation else ""
    pack = f"Pack: {s.pack}\n" if s.pack else ""
    return f"### [{n}] {title}{rel}\n{pack}URL: {s.url}\n\n"


def section_block(n: int, s: RankedSection) -> str:
    return f"{_block_header(n, s)}{s.content.strip()}\n"


def _shown_span(n: int, s: RankedSection, block: str) -> tuple[int, int]:
    """(start, end) of the part of s.content that `block` shows (all of it, or the start
    of it when the block was cut to fit)."""
    shown = block[len(_block_header(n, s)):].rstrip("\n")
    lead = len(s.content) - len(s.content.lstrip())
    return lead, lead + len(shown)


def _cut(text: str, tokens: int) -> str:
    return text[: max(tokens, 0) * CHARS_PER_TOKEN].rstrip()


@dataclass
class Context:
    text: str
    tokens: int
    truncated: bool


def _fill(sections: list[RankedSection], share: int, start: int) -> tuple[list[str], int, bool]:
    blocks, used, truncated, n = [], 0, False, start
    for s in sections:
        block = section_block(n, s)
        cost = count_tokens(block)
        if used + cost > share:
            truncated = True
            if blocks:
                continue
            block = _cut(block, share - 1) + "\n"
            cost = count_tokens(block)
            if cost <= 0 or cost > share:
                continue
        s.citation = n
        s.context_span = _shown_span(n, s, block)
        blocks.append(block)
        used += cost
        n += 1
    return blocks, n, truncated


def assemble(primary: list[RankedSection], related: list[RankedSection], facts: Facts,
             budget: int = 8000, reserve: int = 2000) -> Context:
    """Markdown context; sets `citation` on every section it includes, and
    `context_span`, the (start, end) of its content that the context shows."""
    p_share, r_share, f_share = split_budget(budget, reserve)
    for s in (*primary, *related):
        s.citation = s.context_span = None
    p_blocks, n, p_trunc = _fill(primary, p_share, 1)
    r_blocks, _, r_trunc = _fill(related, r_share, n)
    f_lines, used, f_trunc = [], 0, False
    for line in facts.lines():
        cost = count_tokens(line) + 1
        if used + cost > f_share:
            f_trunc = True
            break
        f_lines.append(f"- {line}")
        used += cost
    parts = []
    if p_blocks:
        parts.append("## Sources\n\n" + "\n".join(p_blocks))
    if r_blocks:
        parts.append("## Related sections\n\n" + "\n".join(r_blocks))
    if f_lines:
        parts.append("## Facts from the pack's graph\n\n" + "\n".join(f_lines) + "\n")
    text = "\n".join(parts)
    return Context(text=text, tokens=count_tokens(text), truncated=p_trunc or r_trunc or f_trunc)
