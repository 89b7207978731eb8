"""Multi-query expansion (opt-in): Claude Haiku rephrases the question twice.

Data residency: with this option on, the question (truncated to 500 characters) is sent to
the Anthropic API before retrieval, so a pack queried offline or under a no-egress policy
must leave it off (the default). Any failure — no key, network, refusal, unparsable reply —
returns no alternatives and retrieval uses the original question alone.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from packs.llm import client as llm_client
from packs.llm import errors as llm_errors
from packs.llm.usage import query_usage, zero_query_usage

log = logging.getLogger("kpack.query")

QUESTION_CHARS = 500
ALTERNATIVE_CHARS = 300
N_ALTERNATIVES = 2
PROMPT = (
    "Rephrase the search question inside <question> tags in {n} different ways that could "
    "match how documentation words it. Reply with only a JSON array of {n} strings.\n"
    "<question>\n{question}\n</question>"
)
_ARRAY = re.compile(r"\[.*\]", re.S)


def parse_alternatives(text: str, original: str) -> list[str]:
    """Up to 2 distinct strings from a JSON array in `text`, each capped at 300 chars."""
    m = _ARRAY.search(text or "")
    if not m:
        return []
    try:
        raw = json.loads(m.group(0))
    except json.JSONDecodeError:
        return []
    if not isinstance(raw, list):
        return []
    out: list[str] = []
    seen = {original.strip().lower()}
    for item in raw:
        if not isinstance(item, str):
            continue
        alt = item.strip()[:ALTERNATIVE_CHARS]
        if alt and alt.lower() not in seen:
            seen.add(alt.lower())
            out.append(alt)
        if len(out) == N_ALTERNATIVES:
            break
    return out


def alternatives(question: str, model: str) -> tuple[list[str], dict[str, Any], str | None]:
    """(alternatives, usage {input_tokens, output_tokens, api_calls, cost_usd}, warning or
    None)."""
    usage = zero_query_usage()
    api = llm_client.shared_client()
    if api is None:
        return [], usage, "multi_query needs ANTHROPIC_API_KEY; used the original query alone"
    prompt = PROMPT.format(n=N_ALTERNATIVES, question=question[:QUESTION_CHARS])
    try:
        usage["api_calls"] = 1
        msg = api.messages.create(model=model, max_tokens=300,
                                  messages=[{"role": "user", "content": prompt}])
    except Exception as exc:  # every API failure → the original query alone
        if not llm_errors.is_api_error(exc):
            raise
        log.warning("multi-query expansion failed (%s); using the original query alone",
                    type(exc).__name__)
        return [], usage, f"multi_query failed: {type(exc).__name__}"
    usage = query_usage(msg, model)
    alts = parse_alternatives(llm_client.text_of(msg), question)
    return alts, usage, None if alts else "multi_query reply had no usable alternatives"


def merge_by_article(result_lists, article_of, score_of):
    """Merge several ranked lists, one item per article (the best-scoring), best first."""
    best = {}
    for items in result_lists:
        for item in items:
            art = article_of(item)
            if art not in best or score_of(item) > score_of(best[art]):
                best[art] = item
    return sorted(best.values(), key=lambda i: -score_of(i))
