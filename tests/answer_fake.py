"""Responders that make tests/anthropic_fake.FakeAnthropic answer pack questions the way
Claude does through the answer tool (packs/retrieval/synthesis.py): read the excerpts of
the request's context block, answer with their first sentences, each cited as [n], and
return a quote per marker. `misquote` replaces the quote given for an excerpt, to test
what happens to a quote that is not in its section.
"""

from __future__ import annotations

import re

from anthropic_fake import _first_user_text

CONTEXT = re.compile(r"<pack_context_([0-9a-f]{16})>\n(.*)\n</pack_context_\1>", re.S)
EXCERPT = re.compile(r"^### \[(\d+)\][^\n]*\n(?:Pack: [^\n]*\n)?URL: [^\n]*\n\n(.*?)"
                     r"(?=^### \[\d+\]|^## |\Z)", re.S | re.M)
ALTERNATIVES = '["How often does Kestrel retry a job?", "RetryPolicy max_attempts default"]'
GATED_TEXT = "The pack does not cover this; from general knowledge: France won in 1998."


def excerpts(request: dict) -> dict[int, str]:
    """[n] → the excerpt's text, from the first user message's context block."""
    block = CONTEXT.search(_first_user_text(request))
    if block is None:
        return {}
    return {int(m.group(1)): m.group(2).strip() for m in EXCERPT.finditer(block.group(2))}


def first_sentence(text: str) -> str:
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def cited_answer(request: dict, cite: tuple[int, ...] = (1, 2),
                 misquote: dict[int, str] | None = None,
                 extra_markers: str = "") -> dict:
    """The answer tool's input: the first sentence of each excerpt in `cite`, marked [n],
    with that sentence as its quote (or misquote[n]); `extra_markers` is appended to the
    answer with no quotes for it."""
    found = excerpts(request)
    parts, quotes = [], []
    for n in cite:
        if n in found:
            sentence = first_sentence(found[n])
            parts.append(f"{sentence} [{n}]")
            quotes.append({"n": n, "quote": (misquote or {}).get(n, sentence)})
    return {"answerable": True, "answer": " ".join(parts) + extra_markers, "citations": quotes}


def unanswerable(request: dict) -> dict:
    """The answer tool's input when the excerpts do not answer the question, with an
    invented answer in `answer` that must never reach the user."""
    return {"answerable": False, "answer": "Probably 42 times [1].",
            "citations": [{"n": 1, "quote": "invented"}]}


def text_reply(request: dict) -> str:
    """Plain replies: rephrasings for multi-query expansion, else the gated answer."""
    text = _first_user_text(request)
    return ALTERNATIVES if "Rephrase the search question" in text else GATED_TEXT
