"""Hybrid search: fuse the vector ranking with the BM25 ranking.

RRF: score(d) = sum over rankings of w / (k + rank(d)), rank 1-based, k = 60 by default.
Weighted: w_v * similarity + w_b * bm25 / max(bm25), with missing values counted as 0.
Min-max: w_v * (s - min s) / (max s - min s) + w_b * (b - min b) / (max b - min b), each
range taken over the candidates; every candidate has a similarity, a candidate BM25 did not
return counts as the lowest BM25. Scaling both signals to [0, 1] keeps the weights
meaningful whatever the spread of cosine similarities or BM25 scores of a pack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# A decisive full-text match: the best BM25 section scores at least DECISIVE_RATIO times the
# second (or is the only match). In a prose pack its ranking then counts DECISIVE_WEIGHT in
# RRF: a question that shares a rare phrase with one paragraph (an encyclopaedia, an
# abstract) is answered there. Documentation keeps 1: on the benchmark docs the weight moved
# no nDCG and cost a two-page question, BM25 being sure of one half of it. See BENCHMARKS.md.
DECISIVE_RATIO = 1.5
DECISIVE_WEIGHT = 2.0


def rrf(rankings: Sequence[Sequence[str]], k: int = 60,
        weights: Sequence[float] | None = None) -> dict[str, float]:
    """Reciprocal rank fusion of ranked id lists → id: fused score."""
    weights = weights or [1.0] * len(rankings)
    scores: dict[str, float] = {}
    for ranking, w in zip(rankings, weights):
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + w / (k + rank)
    return scores


def weighted(similarity: Mapping[str, float], bm25: Mapping[str, float],
             vector_weight: float = 0.7, bm25_weight: float = 0.3) -> dict[str, float]:
    """Weighted sum of similarity and max-normalised BM25 → id: fused score."""
    top = max(bm25.values(), default=0.0)
    ids = list(dict.fromkeys([*similarity, *bm25]))
    return {
        d: vector_weight * similarity.get(d, 0.0)
        + (bm25_weight * bm25.get(d, 0.0) / top if top > 0 else 0.0)
        for d in ids
    }


def minmax(similarity: Mapping[str, float], bm25: Mapping[str, float],
           vector_weight: float = 0.5, bm25_weight: float = 0.5) -> dict[str, float]:
    """Weighted sum of min-max normalised similarity and BM25 → id: fused score.
    `similarity` must hold every candidate (ids of `bm25` included)."""
    sim = _unit_range(similarity)
    bm = _unit_range(bm25)
    return {d: vector_weight * sim[d] + bm25_weight * bm.get(d, 0.0) for d in similarity}


def _unit_range(scores: Mapping[str, float]) -> dict[str, float]:
    """Scores mapped linearly onto [0, 1]; all equal → all 1."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi - lo <= 1e-12:
        return {d: 1.0 for d in scores}
    return {d: (v - lo) / (hi - lo) for d, v in scores.items()}


def ranked(scores: Mapping[str, float]) -> list[str]:
    """Ids by descending score; ties keep insertion order (the earlier ranking wins)."""
    order = {d: i for i, d in enumerate(scores)}
    return sorted(scores, key=lambda d: (-scores[d], order[d]))


def decisive(bm25: Sequence[float]) -> bool:
    """Whether BM25 scores (best first) make a decisive match (see DECISIVE_RATIO)."""
    if not bm25 or bm25[0] <= 0:
        return False
    return len(bm25) == 1 or bm25[0] >= DECISIVE_RATIO * max(bm25[1], 0.0)


def bm25_weight(bm25: Sequence[float], decisive_weight: float) -> float:
    """The RRF weight of the BM25 ranking: `decisive_weight` on a decisive match, else 1."""
    return decisive_weight if decisive(bm25) else 1.0
