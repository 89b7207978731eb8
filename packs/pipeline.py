"""The retrieval pipeline: the list of search stages, and the runner that walks it.

    analysis (+ filters) → BM25 started → embed → vector (+ keyword vectors) → multi-query
    → BM25 + fusion → title match → gate → each part of a question searched alone → pool
    → cross-encoder → diversification → graph rerank → the chosen sections
    → multi-document expansion → quality filter → graph facts → few-shot → dedupe → scores
    → context

Each stage is a function of (state, pack) in packs/retrieval/candidates.py or
selection.py, over one `QueryState` (packs/retrieval/state.py) and the pack as a
`PackReader`; `SEARCH` lists them with the condition each runs under, so a stage is
switched off by its option and a new one is one function and one entry. Each stage that
runs is timed into `SearchResult.timings_ms`; each that found or moved a section is listed
in that section's `stages`. When the gate finds that the pack cannot answer, only the
`TAIL` still runs (packs/retrieval/finish.py: dedupe, readable scores, context), the same
tail a PackSet's fan-out ends with (packs/packset.py).

ask: search → packs/answer.py (Claude synthesis with verified citations, or the extractive
and gated answers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from packs import answer
from packs.llm.usage import zero_query_usage
from packs.options import MAX_QUESTION_CHARS, MAX_QUESTION_INPUT_CHARS, SearchOptions
from packs.result import SearchResult
from packs.retrieval import candidates, finish, gate, graph, hybrid, selection
from packs.retrieval.candidates import BM25_CANDIDATES, CANDIDATES
from packs.retrieval.state import PackReader, QueryState

__all__ = ["ASK_FIELDS", "BM25_CANDIDATES", "CANDIDATES", "FIND", "SEARCH", "TAIL",
           "QuestionError", "Stage", "ask", "ask_stream", "clean_question", "confidence_gate",
           "run", "search"]

# ask() lives in packs/answer.py; these names stay importable from here.
ASK_FIELDS, ask, ask_stream = answer.ASK_FIELDS, answer.ask, answer.ask_stream

Runs = Callable[[QueryState, PackReader], bool]


@dataclass(frozen=True)
class Stage:
    name: str  # its key in timings_ms
    run: Callable[[QueryState, PackReader], None]
    when: Runs = lambda st, pack: True  # noqa: E731 - most stages always run
    finishes: bool = False  # runs on a gated search too (the TAIL)


def _on(option: str) -> Runs:
    return lambda st, pack: st.opts.enabled(option)


def _linked(st: QueryState, pack: PackReader) -> bool:
    return graph.enabled(pack.manifest.avg_links_per_article)


# The last stages of every search, one pack's or several packs' (packs/packset.py).
TAIL: tuple[Stage, ...] = (
    Stage("dedupe", finish.dedupe, finishes=True),
    Stage("scores", finish.scores, finishes=True),
    Stage("context", finish.context, finishes=True),
)

# The stages that find the candidates, up to the gate.
FIND: tuple[Stage, ...] = (
    Stage("analysis", candidates.analyse),
    Stage("bm25_start", candidates.start_bm25, _on("hybrid")),
    Stage("embed", candidates.embed),
    Stage("vector", candidates.vector),
    Stage("multi_query", candidates.multi_query, _on("multi_query")),
    Stage("bm25", candidates.bm25, _on("hybrid")),
    Stage("fusion", candidates.fuse, _on("hybrid")),
    Stage("titles", candidates.title_match, lambda st, pack: (
        st.opts.enabled("hybrid") and st.opts.enabled("title_match")
        and st.opts.fusion == "rrf")),
)
# A part of a question searched alone: the candidates and the gate's verdict on them.
PART_SEARCH: tuple[Stage, ...] = (*FIND, Stage("gate", selection.confidence_gate))


def confidence_gate(st: QueryState, pack: PackReader) -> None:
    """selection.confidence_gate; a question that asks several things and that the
    calibrated gate refuses passes when each thing it asks, searched alone (PART_SEARCH,
    without Claude's rephrasings), passes (gate.parts_to_search, gate.with_parts): its halves may
    sit on two pages, each as close to its half as any question about one thing."""
    selection.confidence_gate(st, pack)
    asked = gate.parts_to_search(st.question, st.verdict) if st.sims else []
    if not asked:
        return
    verdicts = [searched_alone(st, pack, part).verdict for part in asked]
    st.verdict = gate.with_parts(st.verdict, verdicts)
    st.gated = not st.verdict["passed"]


def searched_alone(st: QueryState, pack: PackReader, part: str) -> QueryState:
    """The search of `part`, one thing `st`'s question asks, alone (PART_SEARCH, without
    Claude's rephrasings); kept on `st`, so the gate and the part search run it once."""
    if part not in st.alone:
        opts = dataclasses.replace(st.opts, multi_query=False)
        st.alone[part] = run(QueryState(part, opts, usage=zero_query_usage()), pack,
                             PART_SEARCH)
    return st.alone[part]


def part_search(st: QueryState, pack: PackReader) -> None:
    """A question that asks two or three things (gate.asked_parts), not a whole-pack one:
    each thing is searched alone (FIND and the gate, without Claude's rephrasings), and
    when its best section is of a page none of the first `max_results` candidates is from,
    that section goes second, just under the first: the page that answers the second thing
    is among the results even when the whole question's words all favour the first
    thing's page. A thing the calibrated gate refuses alone adds nothing: a clause such as
    "what value must it have?" matches no page of its own, and its best section is noise."""
    asked = gate.asked_parts(st.question)
    if not asked:
        return
    shown = {st.rows[i].article_id for i in st.order[:st.opts.max_results]}
    for part in asked:
        found = searched_alone(st, pack, part)
        best = found.order[0] if found.order else None
        if (best is None or found.rows[best].article_id in shown
                or not found.verdict.get("calibrated_passed")):
            continue
        st.rows.setdefault(best, found.rows[best])
        st.stages.setdefault(best, []).append("part_search")
        st.scores[best] = max(st.scores.values(), default=1.0) * PART_SCORE
    st.order = hybrid.ranked(st.scores)


# A part's page that was missing goes just under the first candidate (see part_search).
PART_SCORE = 0.999

SEARCH: tuple[Stage, ...] = (
    *FIND,
    Stage("gate", confidence_gate),
    Stage("part_search", part_search, _on("part_search")),
    Stage("pool", selection.pool),
    Stage("cross_encoder", selection.cross_encoder, _on("cross_encoder")),
    Stage("diversify", selection.diversify),
    Stage("graph_rerank", selection.graph_rerank, lambda st, pack: (
        st.opts.enabled("graph_rerank") and _linked(st, pack))),
    Stage("primary", selection.primary),
    Stage("multi_doc", selection.multi_doc, lambda st, pack: (
        st.opts.enabled("multi_doc") and bool(st.primary) and _linked(st, pack))),
    Stage("quality", selection.quality_filter),
    # A pack without entities (the offline extractor found none) has no facts to look up.
    Stage("graph_facts", selection.graph_facts, lambda st, pack: (
        st.opts.enabled("graph_facts") and bool(st.primary)
        and bool(pack.manifest.counts.entities))),
    Stage("fewshot", selection.fewshot, lambda st, pack: (
        st.opts.enabled("fewshot") and bool(st.opts.fewshot_k))),
    *TAIL,
)


class QuestionError(ValueError):
    """The question is empty (after trimming)."""


def clean_question(question: str) -> str:
    """Trimmed question, capped at MAX_QUESTION_CHARS characters. QuestionError for an
    empty question, one over MAX_QUESTION_INPUT_CHARS, or one that is not valid Unicode
    text: lone surrogates, which is what bytes that are not UTF-8 become in sys.argv."""
    if not isinstance(question, str) or not question.strip():
        raise QuestionError("the question is empty; ask something, e.g. \"how do I ...?\"")
    if len(question) > MAX_QUESTION_INPUT_CHARS:
        raise QuestionError(f"the question is {len(question):,} characters long, over the "
                            f"limit of {MAX_QUESTION_INPUT_CHARS:,}; ask in at most "
                            f"{MAX_QUESTION_CHARS:,} (only the first {MAX_QUESTION_CHARS:,} "
                            "of a longer question are used)")
    bad = next((i for i, c in enumerate(question) if "\ud800" <= c <= "\udfff"), None)
    if bad is not None:
        raw = ord(question[bad]) - 0xDC00 if "\udc80" <= question[bad] <= "\udcff" else None
        what = f"byte 0x{raw:02x}" if raw is not None else f"U+{ord(question[bad]):04X}"
        raise QuestionError(f"the question is not valid UTF-8 text ({what} at character "
                            f"{bad + 1}); check the terminal's encoding and type it again")
    return " ".join(question.split())[:MAX_QUESTION_CHARS]


def run(st: QueryState, reader, stages: tuple[Stage, ...]) -> QueryState:
    """Run `stages` in order on `st`, each when its condition holds; once a stage has
    gated the search, only the stages that finish it (`finishes`) still run."""
    for stage in stages:
        if (st.gated and not stage.finishes) or not stage.when(st, reader):
            continue
        with st.timer(stage.name):
            stage.run(st, reader)
    return st


def search(pack: PackReader, question: str, opts: SearchOptions,
           stages: tuple[Stage, ...] = SEARCH) -> SearchResult:
    """Run `stages` on one question (see `run`); the result, with its context assembled
    by the TAIL (none for a gated search)."""
    st = run(QueryState(clean_question(question), opts, usage=zero_query_usage()), pack, stages)
    return _result(st, pack)


def _result(st: QueryState, pack: PackReader) -> SearchResult:
    """The SearchResult of a finished search."""
    ctx = finish.empty_context() if st.context is None else st.context
    return SearchResult(
        question=st.question, sections=st.primary, related=st.related, facts=st.facts,
        context=ctx.text, context_tokens=ctx.tokens, truncated=ctx.truncated, gated=st.gated,
        best_similarity=st.best,
        gate_threshold=gate.threshold(st.opts.gate_threshold,
                                      pack.manifest.embedding.gate_threshold),
        analysis=st.analysis, cypher_query=st.qlog.text(),
        fallback_full_articles=st.fallback,
        fewshot=[{"question": e.question, "answer": e.answer} for e in st.examples],
        timings_ms=dict(st.timer.ms), warnings=st.warnings, build_id=pack.manifest.build_id,
        token_usage=st.usage, filters=st.active.to_dict(), gate=st.verdict,
        question_vector=st.qvec)
