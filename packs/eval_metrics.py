"""Retrieval metrics of one question's ranking, as pure functions.

Ranking: a search returns sections; metrics are over distinct sources at the gold's
granularity — pages (first section of each canonical URL) when every gold of the question
is a URL, sections (one per URL + heading path, so chunks of one section count once) when
any names a heading. Each gold source is credited once, at the first rank that matches it
(`matches`, packs/eval_questions.py).

Metrics (on the credited ranking): recall@k = golds found in the top k / golds; MRR = 1 /
rank of the first relevant source (0 when none is returned); nDCG@10 = DCG / ideal DCG with
linear gains (the gold's grade, or 1 for every gold with `binary=True`) and log2(rank + 1)
discounts, as trec_eval computes it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packs.eval_questions import Gold, matches
from packs.urls import canonical_url

if TYPE_CHECKING:
    from packs.result import RankedSection

DEFAULT_KS = (1, 5, 10)
NDCG_K = 10


@dataclass(frozen=True)
class Source:
    """One distinct retrieved source: a page, or a section of a page."""

    url: str
    title: str
    heading_path: str


def distinct_sources(sections: Sequence[RankedSection], section_level: bool) -> list[Source]:
    """Sections in rank order, collapsed to pages or to sections (chunks folded)."""
    out: dict[tuple[str, str], Source] = {}
    for s in sections:
        key = (canonical_url(s.url), s.heading_path if section_level else "")
        out.setdefault(key, Source(s.url, s.title, s.heading_path))
    return list(out.values())


def credit(ranked: Sequence[Source], gold: Sequence[Gold]) -> list[int | None]:
    """For each ranked source, the index of the gold it is credited with (the highest-graded
    gold it matches that no earlier source took), or None."""
    taken: set[int] = set()
    out: list[int | None] = []
    for src in ranked:
        hits = [i for i, g in enumerate(gold)
                if i not in taken and matches(src.url, src.title, src.heading_path, g)]
        best = max(hits, key=lambda i: gold[i].grade, default=None)
        if best is not None:
            taken.add(best)
        out.append(best)
    return out


def recall_at(credited: Sequence[int | None], n_gold: int, k: int) -> float:
    """Share of the gold sources credited in the top k (0 when there is no gold)."""
    if n_gold == 0:
        return 0.0
    return sum(c is not None for c in credited[:k]) / n_gold


def reciprocal_rank(credited: Sequence[int | None]) -> float:
    """1 / rank of the first credited source; 0 when none is."""
    return next((1.0 / r for r, c in enumerate(credited, start=1) if c is not None), 0.0)


def dcg(gains: Sequence[float]) -> float:
    return sum(g / math.log2(r + 1) for r, g in enumerate(gains, start=1))


def ndcg_at(credited: Sequence[int | None], grades: Sequence[float], k: int = NDCG_K,
            binary: bool = False) -> float:
    """nDCG@k of a credited ranking against the gold grades (linear gains; 1 each when
    `binary`); 0 when there is no gold."""
    gain = (lambda g: 1.0 if g > 0 else 0.0) if binary else float
    ideal = dcg(sorted((gain(g) for g in grades), reverse=True)[:k])
    if ideal == 0:
        return 0.0
    got = [gain(grades[c]) if c is not None else 0.0 for c in credited[:k]]
    return dcg(got) / ideal


def score_ranking(ranked: Sequence[Source], gold: Sequence[Gold],
                  ks: Sequence[int] = DEFAULT_KS, binary: bool = False) -> dict[str, float]:
    """recall@k for each k, mrr and ndcg@10 of one question's ranking."""
    credited = credit(ranked, gold)
    out = {f"recall@{k}": recall_at(credited, len(gold), k) for k in ks}
    out["mrr"] = reciprocal_rank(credited)
    out[f"ndcg@{NDCG_K}"] = ndcg_at(credited, [g.grade for g in gold], NDCG_K, binary)
    return out


def mean_metrics(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    """Per-metric means over questions (metrics missing from a row are skipped)."""
    names = list(dict.fromkeys(k for r in rows for k in r))
    return {n: statistics.fmean([r[n] for r in rows if n in r]) for n in names
            if any(n in r for r in rows)}
