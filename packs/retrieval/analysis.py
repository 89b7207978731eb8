"""Query analysis without an LLM: intent, entities, and the expanded BM25 terms.

Intent is decided by the first matching rule (troubleshooting, comparison, definition,
how-to, usage), else "general". Entities are code identifiers (snake_case, dotted names,
calls), CamelCase words, paths, quoted terms, and entity names the pack knows (matched on
1–3 word n-grams of the question, case-insensitive). BM25 terms are the question's
keywords plus synonyms from a small map plus the matched pack entity names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from packs.text import CAMEL_CASE as _CAMEL
from packs.text import PATH as _PATH
from packs.text import QUESTION_IDENTIFIER as _CODE_IDENT
from packs.text import QUOTED as _QUOTED
from packs.text import STOP_WORDS
from packs.text import tokens as tokenize

_INTENT_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("troubleshooting", re.compile(
        r"\b(error|errors|fail|fails|failed|failing|failure|crash\w*|stuck|broken|hang\w*|"
        r"not working|doesn'?t work|debug\w*|troubleshoot\w*|fix)\b", re.I)),
    ("comparison", re.compile(
        r"\b(vs\.?|versus|compare[ds]?|comparison|difference between|differ|better than)\b",
        re.I)),
    ("definition", re.compile(r"^\s*(what\s+(is|are)|what's|define|meaning of|who is)\b",
                              re.I)),
    ("how-to", re.compile(r"(^\s*how\s+(do|can|should|to)\b|\bhow to\b|\bsteps to\b)", re.I)),
    ("usage", re.compile(
        r"\b(use|using|usage|example|syntax|configure|option|options|parameter|flag|"
        r"argument|set)\b", re.I)),
)

SYNONYMS: dict[str, tuple[str, ...]] = {
    "delete": ("remove",), "remove": ("delete",),
    "start": ("run", "launch"), "run": ("start", "execute"), "stop": ("terminate", "kill"),
    "error": ("failure", "exception"), "fail": ("error", "failure"),
    "config": ("configuration", "settings"), "configure": ("configuration", "settings"),
    "settings": ("configuration",), "install": ("installation", "setup"),
    "setup": ("install", "installation"), "create": ("add", "new"),
    "update": ("upgrade", "change"), "upgrade": ("update",), "retry": ("retries", "attempts"),
    "auth": ("authentication",), "permission": ("access", "authorization"),
    "list": ("show",), "show": ("list", "display"), "log": ("logs", "logging"),
    "crash": ("failure", "restart"), "slow": ("performance", "latency"),
}


@dataclass(frozen=True)
class QueryAnalysis:
    intent: str
    entities: tuple[str, ...] = ()
    known_entities: tuple[str, ...] = ()
    terms: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, object]:
        return {"intent": self.intent, "entities": list(self.entities),
                "known_entities": list(self.known_entities), "terms": list(self.terms)}


def detect_intent(question: str) -> str:
    """One of definition / how-to / usage / comparison / troubleshooting / general."""
    for intent, pattern in _INTENT_RULES:
        if pattern.search(question):
            return intent
    return "general"


def extract_entities(question: str) -> list[str]:
    """Code identifiers, CamelCase words, paths and quoted terms, in order, deduplicated."""
    found: dict[str, None] = {}
    for m in _QUOTED.finditer(question):
        found.setdefault(next(g for g in m.groups() if g), None)
    for pattern in (_CODE_IDENT, _CAMEL):
        for m in pattern.finditer(question):
            found.setdefault(m.group(0), None)
    for m in _PATH.finditer(question):
        found.setdefault(m.group(1), None)
    return list(found)


def build_entity_index(names: list[tuple[str, list[str]]]) -> dict[str, str]:
    """Lower-cased name or alias → the entity's name, for `match_known_entities`."""
    index: dict[str, str] = {}
    for name, aliases in names:
        for key in (name, *aliases):
            k = " ".join(tokenize(key))
            if k and k not in STOP_WORDS:
                index.setdefault(k, name)
    return index


def match_known_entities(question: str, index: dict[str, str], max_n: int = 3) -> list[str]:
    """Pack entity names whose (1..max_n word) tokenised form occurs in the question."""
    toks = tokenize(question)
    found: dict[str, None] = {}
    for n in range(max_n, 0, -1):
        for i in range(len(toks) - n + 1):
            name = index.get(" ".join(toks[i:i + n]))
            if name:
                found.setdefault(name, None)
    return list(found)


def expand_terms(question: str, entities: list[str]) -> list[str]:
    """The question's keywords, their synonyms, then entity names (deduplicated)."""
    keywords = [t for t in tokenize(question) if t not in STOP_WORDS]
    out: dict[str, None] = dict.fromkeys(keywords)
    for k in keywords:
        for syn in SYNONYMS.get(k, ()):
            out.setdefault(syn, None)
    for e in entities:
        out.setdefault(e, None)
    return list(out)


def analyse(question: str, entity_index: dict[str, str] | None = None) -> QueryAnalysis:
    """Intent, entities, and BM25 terms of a question (no LLM, no I/O)."""
    entities = extract_entities(question)
    known = match_known_entities(question, entity_index or {})
    return QueryAnalysis(
        intent=detect_intent(question),
        entities=tuple(entities),
        known_entities=tuple(known),
        terms=tuple(expand_terms(question, [*entities, *known])),
    )
