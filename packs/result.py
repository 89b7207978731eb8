"""What `search()` returns: ranked sections, related sections, graph facts, and the
assembled context, all plain dataclasses with `to_dict()` for JSON."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from packs.rows import SectionFields


@dataclass
class RankedSection(SectionFields):
    score: float  # 0-1, the same across questions (packs/retrieval/scores.py)
    similarity: float | None = None  # cosine similarity to the question
    stages: list[str] = field(default_factory=list)  # stages that found or moved it
    relation: str | None = None  # related sections: links_to / linked_from / same_page / ...
    hops: int = 0
    quality: float | None = None
    citation: int | None = None  # [n] in the context, when it made it in
    word_count: int = 0
    pack: str | None = None  # the pack's label, in results of several packs (PackSet)
    # (start, end) of `content` shown in the context (a cut block shows only its start).
    context_span: tuple[int, int] | None = None
    # The raw score the section was ranked by (fused RRF score; similarity when related).
    fusion_score: float | None = None

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass
class Facts:
    entities: list[dict[str, str]] = field(default_factory=list)  # {name, type}
    facts: list[str] = field(default_factory=list)
    triples: list[tuple[str, str, str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [*self.facts, *(f"{s} — {r} → {o}" for s, r, o in self.triples)]


@dataclass
class SearchResult:
    question: str
    sections: list[RankedSection]
    related: list[RankedSection]
    facts: Facts
    context: str
    context_tokens: int
    truncated: bool
    gated: bool
    best_similarity: float | None
    gate_threshold: float
    analysis: dict[str, object]
    cypher_query: str
    fallback_full_articles: bool = False
    fewshot: list[dict[str, str]] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    build_id: str = ""
    # Claude calls made while searching (multi-query expansion).
    token_usage: dict[str, Any] = field(default_factory=dict)  # see packs.llm.usage
    # The filters the candidates were narrowed by (explicit, or suggested with auto_filters).
    filters: dict[str, str] = field(default_factory=dict)
    # Several packs: per pack, its label, path, model, best similarity, gate and sections.
    packs: list[dict[str, object]] = field(default_factory=list)
    # The confidence gate's verdict (packs.retrieval.gate.decide): rule, passed,
    # confidence, cut, signals.
    gate: dict[str, object] = field(default_factory=dict)
    # The question's unit vector, as search embedded it (the offline answer weighs the cited
    # pages' other sections by it without embedding the question again); not in to_dict().
    question_vector: Any = field(default=None, repr=False, compare=False)

    def cited(self) -> list[RankedSection]:
        """Sections that made it into the context, in citation order."""
        both = [s for s in (*self.sections, *self.related) if s.citation is not None]
        return sorted(both, key=lambda s: s.citation or 0)

    def to_dict(self) -> dict[str, object]:
        d = dataclasses.asdict(dataclasses.replace(self, question_vector=None))
        del d["question_vector"]
        d["facts"]["triples"] = [list(t) for t in self.facts.triples]
        return d
