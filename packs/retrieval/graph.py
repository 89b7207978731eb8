"""Graph stages: centrality rerank, multi-document expansion, BFS labelling, per-article
diversification, article cap.

Centrality is Article.centrality (degree over LINKS_TO, precomputed at build time).
RRF mode: 1/(60 + vector_rank) + 0.5/(60 + centrality_rank), both ranks 1-based within the
candidate list (centrality_rank: higher centrality first, ties by vector rank).
Weighted mode: 0.6 * similarity + 0.4 * centrality / max centrality among the candidates.
Graph rerank is off when the pack averages fewer than 2 links per article: degree then
says little about importance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

MIN_AVG_LINKS = 2.0
RRF_K = 60
CENTRALITY_WEIGHT = 0.5
SIMILARITY_SHARE, CENTRALITY_SHARE = 0.6, 0.4

T = TypeVar("T")


def enabled(avg_links_per_article: float) -> bool:
    return avg_links_per_article >= MIN_AVG_LINKS


def centrality_ranks(centralities: Sequence[float]) -> list[int]:
    """1-based rank of each candidate by descending centrality (stable on ties)."""
    order = sorted(range(len(centralities)), key=lambda i: -centralities[i])
    ranks = [0] * len(centralities)
    for rank, i in enumerate(order, start=1):
        ranks[i] = rank
    return ranks


def rrf_scores(centralities: Sequence[float]) -> list[float]:
    """Fused scores for candidates given in vector-rank order."""
    return [
        1 / (RRF_K + vr) + CENTRALITY_WEIGHT / (RRF_K + cr)
        for vr, cr in zip(range(1, len(centralities) + 1), centrality_ranks(centralities))
    ]


def weighted_scores(similarities: Sequence[float], centralities: Sequence[float]) -> list[float]:
    top = max(centralities, default=0.0)
    return [
        SIMILARITY_SHARE * s + (CENTRALITY_SHARE * c / top if top > 0 else 0.0)
        for s, c in zip(similarities, centralities)
    ]


def diversify(items: Sequence[T], article_of, per_article: int) -> list[T]:
    """Stable reorder so that one article does not fill the top: each article's first
    `per_article` items keep their places relative to each other, its further items follow
    all of those, in their order. 0 leaves the order alone."""
    if per_article <= 0:
        return list(items)
    seen: dict[str, int] = {}
    head, tail = [], []
    for item in items:
        art = article_of(item)
        seen[art] = seen.get(art, 0) + 1
        (head if seen[art] <= per_article else tail).append(item)
    return head + tail


# Results that come from distinct articles first, in a technical pack (see SearchOptions).
DISTINCT_FIRST = 5
TECHNICAL = 0.5


def is_technical(technical: float) -> bool:
    """A pack whose sections hold code (gate.Vocabulary.technical >= TECHNICAL)."""
    return technical >= TECHNICAL


def distinct_count(option: int | None, technical: float) -> int:
    """The `distinct_first` in force: the option, else DISTINCT_FIRST in a pack at least
    TECHNICAL technical (gate.Vocabulary.technical), else 0."""
    if option is not None:
        return option
    return DISTINCT_FIRST if is_technical(technical) else 0


def distinct_first(items: Sequence[T], article_of, n: int) -> list[T]:
    """Stable reorder so that the first `n` items come from `n` different articles (where
    there are that many): the first item of each of the first `n` articles, in order, then
    every other item in its order. 0 leaves the order alone."""
    if n <= 0:
        return list(items)
    seen: set[str] = set()
    head: list[T] = []
    rest: list[T] = []
    for item in items:
        art = article_of(item)
        if len(head) < n and art not in seen:
            seen.add(art)
            head.append(item)
        else:
            rest.append(item)
    return head + rest


def cap_articles(items: Sequence[T], article_of, max_articles: int) -> list[T]:
    """Keep items (in order) while they come from at most `max_articles` distinct articles."""
    seen: set[str] = set()
    out = []
    for item in items:
        art = article_of(item)
        if art not in seen:
            if len(seen) >= max_articles:
                continue
            seen.add(art)
        out.append(item)
    return out


def best_per_article(items: Sequence[T], article_of, score_of, exclude: set[str],
                     limit: int) -> list[T]:
    """The best-scoring item of each article not in `exclude`, top `limit` articles."""
    best: dict[str, T] = {}
    for item in items:
        art = article_of(item)
        if art in exclude:
            continue
        if art not in best or score_of(item) > score_of(best[art]):
            best[art] = item
    return sorted(best.values(), key=lambda i: -score_of(i))[:limit]


def label_related(candidates: Mapping[str, Sequence[T]], id_of, score_of,
                  exclude: set[str]) -> list[tuple[str, T]]:
    """Merge labelled neighbour lists: each item once, under its first label in `candidates`
    order (the closer relation), sorted by that label's order then descending score."""
    labels = list(candidates)
    seen = set(exclude)
    out: list[tuple[int, float, str, T]] = []
    for li, label in enumerate(labels):
        for item in candidates[label]:
            key = id_of(item)
            if key in seen:
                continue
            seen.add(key)
            out.append((li, -score_of(item), label, item))
    out.sort(key=lambda t: (t[0], t[1]))
    return [(label, item) for _, _, label, item in out]
