"""One typed options object for `KnowledgePack.search` / `ask`, with every default here.

`SearchOptions` is frozen (hashable), so it is also part of the result-cache key. Build one
directly, or pass keyword arguments to `search()` / `ask()`; unknown names raise
`OptionsError` listing the valid ones, and so does a value of the wrong type or outside its
range (`BOUNDS`: every number has one; nothing is clamped).

`use_enhancements=False` switches off the optional stages (query-term expansion, BM25,
multi-query, cross-encoder, per-article diversification, graph rerank, multi-document
expansion, graph facts, few-shot)
and leaves plain vector search. It never switches off the confidence gate or the content
quality filter.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from typing import Literal

from packs import filters

DEFAULT_SYNTHESIS_MODEL = "claude-sonnet-4-6"
DEFAULT_EXPANSION_MODEL = "claude-haiku-4-5"
DEFAULT_CROSS_ENCODER = "cross-encoder/ms-marco-MiniLM-L-12-v2"
MAX_RESULTS_LIMIT = 1000
# Longer questions are truncated: they cost embedding time and prompt tokens for nothing.
MAX_QUESTION_CHARS = 2000
# ... and a question this long is refused: truncating it would hide that something sent a
# document, not a question (and splitting megabytes of it costs time for nothing).
MAX_QUESTION_INPUT_CHARS = 16 * MAX_QUESTION_CHARS


class OptionsError(ValueError):
    """An option has an unknown name or an invalid value; the message says which."""


@dataclass(frozen=True)
class SearchOptions:
    """Every query-time switch, with its default.

    Retrieval
      max_results: sections returned (1..1000). The vector search brings
        max(this, 30) candidates and BM25 max(this, 10) (packs.pipeline.CANDIDATES), so
        the first results are the same whether 1 or 10 are asked for; with the
        cross-encoder on, 2x this instead of this, and it scores them all (with
        `distinct_first` in force, every fused one).
      hybrid: add BM25 over the pack's full-text index to the vector search.
      fusion: "rrf" (reciprocal rank fusion, k=`rrf_k`), "weighted"
        (`vector_weight`*similarity + `bm25_weight`*BM25/max BM25) or "minmax"
        (the same weights on similarity and BM25 each scaled to [0, 1] over the candidates).
      bm25_decisive_weight: the BM25 ranking's RRF weight when its best section scores at
        least 1.5x its second (a decisive full-text match); otherwise it weighs 1 like the
        vector ranking. None: 2 in a prose pack (a question sharing a rare phrase with one
        paragraph is answered there), 1 in a technical pack (one whose sections hold code).
      title_match: a page whose title the question names ("StatefulSets", "What is Pod
        Security Admission?"; see packs.retrieval.titles) joins the RRF fusion as a third
        ranking, weighted like a first place in both others; its section is shown even
        when it is under the quality filter's 20 words (an index page is still the page
        asked for). RRF fusion only.
      query_analysis: detect intent and entities, expand BM25 terms with synonyms and
        entity names the pack knows.
      multi_query: ask Claude (`expansion_model`) for 2 rephrasings and merge their vector
        results (off by default: it sends the question to the Anthropic API).
      part_search: a question that asks two or three things ("Which flag ..., and which
        file ...?") has each searched alone; a thing whose best section is of a page the
        results lack puts that section second (packs.pipeline.part_search).
      cross_encoder: rerank candidates with a sentence-transformers CrossEncoder.
      graph_rerank: fuse vector rank with article centrality; "rrf" mode is
        1/(60+vector_rank) + 0.5/(60+centrality_rank), "weighted" is
        0.6*similarity + 0.4*normalised_centrality. Off by itself when the pack averages
        fewer than 2 links per article. Off by default: on the Kubernetes docs (the one
        benchmark pack with that many links) it lifted hub pages and cost 0.035 nDCG@10
        on both the dev and the test questions (BENCHMARKS.md).
      multi_doc: add sections of up to `linked_articles` articles linked from the top
        result ("neighbours"), or a 2-hop labelled neighbourhood ("bfs"). Runs only when
        the pack averages 2 or more links per article: below that the links found nothing
        the ranking had missed on the benchmark packs.
      max_related: cap on related sections in "bfs" mode.
      max_articles: cap on distinct articles among all sections used.
      per_article: at most this many sections of one article come before the next
        article's (the article's further sections follow, in order), so that one long
        page does not fill the results; 0 leaves the ranking alone.
      distinct_first: the first this many results come from as many different articles
        (where the candidates hold that many: every fused vector and BM25 candidate, not
        only the first `max_results`, which one long page can fill), so a question that
        needs two pages finds both in the top few; the other sections follow, in rank
        order. None: 5 in a
        technical pack (one whose sections hold code: documentation spreads a task over
        pages), 0 in prose (a question about an encyclopaedia article or an abstract is
        answered by its best paragraphs, wherever they rank).
      graph_facts: facts and entity triples of the chosen sections' entities.
      whole_pack: answer a list, across or overview question ("which X ...", "what does
        the chapter cover") as a list of items gathered through the graph, each citing
        its section (packs/retrieval/whole_pack.py; with a key, a map-reduce over the
        region's sections). Off: such questions get the single-passage answer.
      keyword_vectors: also search the keyword vectors (entities + key phrases of each
        section, format-2 packs) and rank vector candidates by
        (1 - keyword_weight) * content similarity + keyword_weight * keyword similarity.
        Off by default: it did not help on the benchmarks (BENCHMARKS.md / README).
    Filters (see packs.filters; applied inside the candidate queries, before fusion)
      url_prefix: a URL prefix ("https://host/docs/tasks/") or a path prefix ("/docs/tasks/").
      content_kind: "code" (sections mostly inside code fences) or "prose".
      language: a programming language of the section's code fences ("python", "yaml").
      auto_filters: apply the filters the query analyzer suggests from the question (always
        reported in `analysis["suggested_filters"]`) where no explicit filter is set.
    Several packs (PackSet; ignored by a single pack)
      pack_mode: "general" (one ranking over all packs, `max_results` in total) or
        "per_pack" (each pack keeps its top `per_pack_results`, for diverse results).
    Always on
      gate_threshold: best vector similarity below it → no pack context
        (None: the manifest's per-model value).
      quality_threshold: sections scoring below it are left out of the context (but for
        the section of a page the question names by title).
    Context and answer
      fewshot: the `fewshot_k` most similar examples from fewshot/examples.jsonl.
      token_budget / answer_reserve: the context gets budget - reserve tokens, split
        60% primary sections, 30% related sections, 10% graph facts.
      model / max_tokens: the synthesis model; with no ANTHROPIC_API_KEY the answer is
        extractive.
      use_cache: keep results in the pack's LRU+TTL cache.
    """

    max_results: int = 10
    use_enhancements: bool = True
    hybrid: bool = True
    fusion: Literal["rrf", "weighted", "minmax"] = "rrf"
    rrf_k: int = 60
    bm25_decisive_weight: float | None = None
    vector_weight: float = 0.7
    bm25_weight: float = 0.3
    title_match: bool = True
    query_analysis: bool = True
    multi_query: bool = False
    part_search: bool = True
    expansion_model: str = DEFAULT_EXPANSION_MODEL
    cross_encoder: bool = False
    cross_encoder_model: str = DEFAULT_CROSS_ENCODER
    graph_rerank: bool = False
    graph_rerank_mode: Literal["rrf", "weighted"] = "rrf"
    multi_doc: bool = True
    expansion_mode: Literal["neighbours", "bfs"] = "neighbours"
    linked_articles: int = 2
    max_related: int = 10
    max_articles: int = 7
    per_article: int = 3
    distinct_first: int | None = None
    graph_facts: bool = True
    max_facts: int = 20
    whole_pack: bool = True
    keyword_vectors: bool = False
    keyword_weight: float = 0.5
    url_prefix: str | None = None
    content_kind: Literal["code", "prose"] | None = None
    language: str | None = None
    auto_filters: bool = False
    pack_mode: Literal["general", "per_pack"] = "general"
    per_pack_results: int = 3
    gate_threshold: float | None = None
    quality_threshold: float = 0.3
    fewshot: bool = True
    fewshot_k: int = 2
    token_budget: int = 8000
    answer_reserve: int = 2000
    model: str = DEFAULT_SYNTHESIS_MODEL
    max_tokens: int = 1024
    use_cache: bool = True

    def __post_init__(self) -> None:
        _check_types(self)
        if self.fusion not in ("rrf", "weighted", "minmax"):
            raise OptionsError(
                f"fusion must be 'rrf', 'weighted' or 'minmax', got {self.fusion!r}")
        if self.graph_rerank_mode not in ("rrf", "weighted"):
            raise OptionsError(
                f"graph_rerank_mode must be 'rrf' or 'weighted', got {self.graph_rerank_mode!r}")
        if self.expansion_mode not in ("neighbours", "bfs"):
            raise OptionsError(
                f"expansion_mode must be 'neighbours' or 'bfs', got {self.expansion_mode!r}")
        if self.answer_reserve < 0 or self.token_budget <= self.answer_reserve:
            raise OptionsError(
                f"token_budget ({self.token_budget}) must exceed answer_reserve "
                f"({self.answer_reserve}) and the reserve must be >= 0")
        if self.bm25_decisive_weight is not None and self.bm25_decisive_weight < 0:
            raise OptionsError(
                f"bm25_decisive_weight must be >= 0, got {self.bm25_decisive_weight}")
        if not 0.0 <= float(self.keyword_weight) <= 1.0:
            raise OptionsError(f"keyword_weight must be within 0..1, got {self.keyword_weight}")
        if self.pack_mode not in ("general", "per_pack"):
            raise OptionsError(f"pack_mode must be 'general' or 'per_pack', got {self.pack_mode!r}")
        try:
            url_prefix, kind, language = filters.validate(
                self.url_prefix, self.content_kind, self.language)
        except ValueError as exc:
            raise OptionsError(str(exc)) from None
        object.__setattr__(self, "url_prefix", url_prefix)
        object.__setattr__(self, "content_kind", kind)
        object.__setattr__(self, "language", language)
        _check_bounds(self)

    @classmethod
    def build(cls, base: SearchOptions | None = None, **overrides: object) -> SearchOptions:
        """`base` (or the defaults) with `overrides` applied; unknown names → OptionsError."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise OptionsError(
                f"unknown search option(s) {unknown}; valid options: {sorted(known)}")
        return dataclasses.replace(base or cls(), **overrides)

    # Effective switches: `use_enhancements=False` wins over the individual flags.
    def enabled(self, stage: str) -> bool:
        """Whether an optional stage runs (gate and quality filter are not optional)."""
        return bool(self.use_enhancements and getattr(self, stage))

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


# Every number's valid range (inclusive). Out of range is an error naming the option and
# the range, never clamped: a typo such as max_results=-1 must not pass as some default.
BOUNDS: dict[str, tuple[float, float]] = {
    "max_results": (1, MAX_RESULTS_LIMIT),
    "per_pack_results": (1, MAX_RESULTS_LIMIT),
    "rrf_k": (0, 10_000),
    "bm25_decisive_weight": (0, 100),
    "vector_weight": (0, 1),
    "bm25_weight": (0, 1),
    "linked_articles": (0, 100),
    "max_related": (0, MAX_RESULTS_LIMIT),
    "max_articles": (0, MAX_RESULTS_LIMIT),
    "per_article": (0, MAX_RESULTS_LIMIT),
    "distinct_first": (0, MAX_RESULTS_LIMIT),
    "max_facts": (0, MAX_RESULTS_LIMIT),
    "keyword_weight": (0, 1),
    "gate_threshold": (-1, 1),  # a cosine similarity
    "quality_threshold": (0, 1),
    "fewshot_k": (0, 20),
    "token_budget": (1, 1_000_000),
    "answer_reserve": (0, 1_000_000),
    "max_tokens": (1, 64_000),
}
MAX_NAME_CHARS = 200  # model names


def _check_bounds(opts: SearchOptions) -> None:
    """OptionsError for a number outside its BOUNDS or an empty or over-long model name."""
    for name, (low, high) in BOUNDS.items():
        value = getattr(opts, name)
        if value is not None and not low <= value <= high:
            side = f">= {low:g}" if value < low else f"<= {high:g}"
            raise OptionsError(f"{name} must be {side} (within {low:g}..{high:g}), "
                               f"got {value!r}")
    for name in ("model", "expansion_model", "cross_encoder_model"):
        value = getattr(opts, name)
        if not value.strip() or len(value) > MAX_NAME_CHARS:
            raise OptionsError(f"{name} must be a model name (1..{MAX_NAME_CHARS} characters), "
                               f"got {value[:60]!r}")


def _check_types(opts: SearchOptions) -> None:
    """Refuse a value of the wrong kind with a message naming the option: a string where a
    number belongs, a bool posing as a number, NaN or infinity (they would slip past every
    range check and poison the ranking), None for a required value."""
    hints = typing.get_type_hints(type(opts))
    for f in dataclasses.fields(opts):
        value = getattr(opts, f.name)
        kinds = _kinds(hints[f.name])
        if value is None and type(None) in kinds:
            continue
        if bool in kinds and isinstance(value, bool):
            continue
        if int in kinds and isinstance(value, int) and not isinstance(value, bool):
            continue
        if float in kinds and isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise OptionsError(f"{f.name} must be a finite number, got {value!r}")
            continue
        if str in kinds and isinstance(value, str):
            continue
        raise OptionsError(f"{f.name} must be {_describe(kinds)}, got {value!r}")


def _kinds(hint: object) -> set[type]:
    """The plain types a field's annotation admits (a Literal counts as str)."""
    origin = typing.get_origin(hint)
    if origin is Literal:
        return {type(a) for a in typing.get_args(hint)}
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_kinds(a) for a in typing.get_args(hint)))
    return {hint} if isinstance(hint, type) else set()


def _describe(kinds: set[type]) -> str:
    names = {bool: "true or false", int: "a whole number", float: "a number",
             str: "a string", type(None): "null"}
    return " or ".join(names[k] for k in (bool, int, float, str, type(None)) if k in kinds)
