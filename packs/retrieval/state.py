"""What the search stages share: the state of one search, and the pack as they read it.

`QueryState` is the trace of one search (the question, its options, the candidates and
their scores, which stage found or moved each, the gate's verdict, the sections chosen,
the facts, the Cypher run); each stage in packs/pipeline.py reads and writes it.
`PackReader` is all the stages need of a pack: its manifest and database, the question's
vector, a worker thread, and the lookups a pack loads once (vocabulary, entity and title
indexes, path prefixes, few-shot examples). `KnowledgePack` is one; a test can pass any.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from packs import filters as filters_mod
from packs.db import PackDB, QueryLog, Row
from packs.manifest import Manifest
from packs.options import SearchOptions
from packs.result import Facts, RankedSection
from packs.retrieval import fewshot, gate, titles
from packs.retrieval.context import Context


class PackReader(Protocol):
    """The read side of a pack, as the search stages use it."""

    manifest: Manifest
    db: PackDB

    def embed_query(self, text: str) -> np.ndarray: ...

    def background(self, fn: Callable[..., Any], *args: Any) -> Future: ...

    def vocabulary(self) -> gate.Vocabulary: ...

    def entity_index(self) -> dict[str, str]: ...

    def path_prefixes(self) -> dict[str, int]: ...

    def title_index(self) -> titles.TitleIndex: ...

    def fewshot_examples(self, qvec: np.ndarray, k: int) -> list[fewshot.Example]: ...


class Timer:
    """Milliseconds per stage; a stage run twice adds up."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.ms[stage] = self.ms.get(stage, 0.0) + (time.perf_counter() - t0) * 1000


@dataclass
class QueryState:
    """One search, as its stages build it up (see packs/pipeline.py for their order)."""

    question: str
    opts: SearchOptions
    qlog: QueryLog = field(default_factory=QueryLog)
    warnings: list[str] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)  # Claude calls while searching
    timer: Timer = field(default_factory=Timer)
    # analysis and filters
    analysis: dict[str, Any] = field(default_factory=dict)
    terms: list[str] = field(default_factory=list)  # the expanded BM25 terms
    explicit: filters_mod.Filters = field(default_factory=filters_mod.Filters)
    active: filters_mod.Filters = field(default_factory=filters_mod.Filters)
    # candidates
    n_candidates: int = 0
    n_bm25: int = 0
    fts_job: Future | None = None  # the full-text query, run while the question is embedded
    fts_filters: filters_mod.Filters = field(default_factory=filters_mod.Filters)
    fts_log: QueryLog = field(default_factory=QueryLog)
    qvec: np.ndarray | None = None
    keyword_weight: float = 0.0
    rows: dict[str, Row] = field(default_factory=dict)
    bm25_rows: list[Row] = field(default_factory=list)  # the BM25 ranking, best first
    order: list[str] = field(default_factory=list)  # section ids, best first
    scores: dict[str, float] = field(default_factory=dict)  # the ranking's own score
    stages: dict[str, list[str]] = field(default_factory=dict)  # id → stages that found it
    rankings: list[list[str]] = field(default_factory=list)  # the fused rankings
    weights: list[float] = field(default_factory=list)  # and their RRF weights
    sims: list[float] = field(default_factory=list)  # vector similarities, best first
    # the gate and what was chosen
    verdict: dict[str, Any] = field(default_factory=dict)
    gated: bool = False
    alone: dict[str, QueryState] = field(default_factory=dict)  # a part asked → its search
    distinct: int = 0  # the first results come from this many pages
    primary: list[RankedSection] = field(default_factory=list)
    related: list[RankedSection] = field(default_factory=list)
    fallback: bool = False  # every section was filtered: whole pages instead
    facts: Facts = field(default_factory=Facts)
    examples: list[fewshot.Example] = field(default_factory=list)
    # the result (packs/retrieval/finish.py): the gate confidence a section's score is
    # read against (None: this search's verdict; a PackSet's is per pack), the context
    confidence: Callable[[RankedSection], float | None] | None = None
    context: Context | None = None

    @property
    def best(self) -> float | None:
        return self.sims[0] if self.sims else None

    def ranked(self, section_id: str, score: float | None = None,
               stages: list[str] | None = None, **kw: Any) -> RankedSection:
        """The candidate `section_id` as a result section."""
        row = self.rows[section_id]
        return ranked(row, self.scores.get(section_id, 0.0) if score is None else score,
                      self.stages.get(section_id, []) if stages is None else stages, **kw)


def ranked(row: Row, score: float, stages: list[str], **kw: Any) -> RankedSection:
    """A database row as a result section."""
    return RankedSection(id=row.id, article_id=row.article_id, url=row.url, title=row.title,
                         heading_path=row.heading_path, content=row.content, score=score,
                         similarity=row.similarity, stages=stages, word_count=row.word_count,
                         **kw)
