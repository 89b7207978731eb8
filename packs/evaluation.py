"""Retrieval evaluation of a pack against a questions file, and optional Claude grading.

`evaluate` searches every question, scores the ranking against its gold sources and, with a
judge client, asks the questions that have a reference answer and grades the answers. The
parts it runs have their own modules: the questions file, gold sources, matching and the
few-shot leak check in packs/eval_questions.py; the metrics (recall@k, MRR, nDCG@10) in
packs/eval_metrics.py; grading with Claude in packs/eval_judge.py.

Answers asked are also counted by outcome: `insufficient_context` (Claude said the
retrieved excerpts do not answer the question; `insufficient_rate` is their share of the
answers asked) and `unsupported` (an answer none of whose citations verifies).

Citation precision: every answer asked (`answers=True` asks every question; a judge asks
those with a reference answer) has its citations counted; precision = verified citations /
all citations over the run (packs/citations.py), and per question as `citation_precision`.

Cost: what the run spent on Claude is reported like the query side's `token_usage`
({input_tokens, output_tokens, api_calls, cost_usd}): `answer_usage` sums the answers asked,
`judge_usage` the grading calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from packs import layout
from packs.citations import precision as citation_precision
from packs.eval_judge import DEFAULT_JUDGE_MODEL, Judgement, judge_answer
from packs.eval_metrics import DEFAULT_KS, NDCG_K, distinct_sources, mean_metrics, score_ranking
from packs.eval_questions import Question, check_no_leak
from packs.llm.usage import add_query_usage, zero_query_usage
from packs.options import SearchOptions

if TYPE_CHECKING:
    from packs.pack import KnowledgePack

# Sections asked of search() per distinct source scored: a page is often several sections.
OVERFETCH = 3


# --- the runner --------------------------------------------------------------------------


@dataclass
class QuestionResult:
    id: str
    question: str
    kind: str | None
    metrics: dict[str, float]
    gated: bool
    best_similarity: float | None
    retrieved: list[str]  # the top sources scored, as URL or URL#heading path
    judgement: Judgement | None = None


@dataclass
class EvalReport:
    pack: str
    build_id: str
    questions: int
    ks: tuple[int, ...]
    options: dict[str, object]
    overall: dict[str, float]
    by_kind: dict[str, dict[str, float]]
    gated: int
    judged: int = 0
    judge_failures: int = 0
    judge_model: str | None = None
    answered: int = 0  # questions answered with ask()
    citations: int = 0  # citations in those answers
    citations_verified: int = 0
    citation_precision: float | None = None  # verified / citations; None without any
    insufficient_context: int = 0  # answers labelled insufficient_context (Claude: no answer)
    insufficient_rate: float | None = None  # their share of the answers; None without any
    unsupported: int = 0  # answers none of whose citations verifies
    answer_usage: dict[str, object] = field(default_factory=zero_query_usage)  # ask() calls
    judge_usage: dict[str, object] = field(default_factory=zero_query_usage)  # grading calls
    seconds: float = 0.0
    per_question: list[QuestionResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def eval_options(options: SearchOptions | None, depth: int) -> SearchOptions:
    """`options` with enough sections and articles to fill `depth` distinct sources, and no
    result cache (every question is asked once)."""
    base = options or SearchOptions()
    want = max(base.max_results, depth * OVERFETCH)
    return SearchOptions.build(base, max_results=want,
                               max_articles=max(base.max_articles, want), use_cache=False)


def evaluate(pack: KnowledgePack, questions: Sequence[Question],
             options: SearchOptions | None = None, ks: Sequence[int] = DEFAULT_KS, *,
             binary: bool = False, judge: object | None = None,
             judge_model: str = DEFAULT_JUDGE_MODEL, answers: bool = False,
             progress: Callable[[int, int], None] | None = None) -> EvalReport:
    """Search every question, score the ranking; with a `judge` client (judge_client())
    also `ask()` the questions that have a reference answer and grade the answers; with
    `answers`, `ask()` every question. The citations of every answer asked are counted
    (citation precision), and the Claude tokens and $ of the answers and of the grading
    are summed (`answer_usage`, `judge_usage`).

    Raises EvalLeakError before any search when a question is in the few-shot pool.
    """
    check_no_leak(pack.path, questions)
    ks = tuple(sorted(set(ks)))
    depth = max(max(ks), NDCG_K)
    opts = eval_options(options, depth)
    ask_opts = SearchOptions.build(options, use_cache=False)  # answers as users get them
    t0 = time.perf_counter()
    rows: list[QuestionResult] = []
    answered = n_cits = n_verified = n_insufficient = n_unsupported = 0
    answer_usage, judge_usage = zero_query_usage(), zero_query_usage()
    for n, q in enumerate(questions, start=1):
        result = pack.search(q.question, opts)
        ranked = distinct_sources(result.sections, q.section_level)[:depth]
        metrics = score_ranking(ranked, q.gold, ks, binary)
        judgement = None
        graded = judge is not None and q.answer
        if answers or graded:
            answer = pack.ask(q.question, ask_opts)
            answered += 1
            n_insufficient += answer.get("query_type") == "insufficient_context"
            n_unsupported += bool(answer.get("unsupported"))
            add_query_usage(answer_usage, answer.get("token_usage") or {})
            verified, total = citation_precision(answer.get("citations", []))
            n_cits, n_verified = n_cits + total, n_verified + verified
            if total:
                metrics["citation_precision"] = verified / total
            if graded:
                judgement = judge_answer(judge, q.question, str(q.answer),
                                         str(answer["answer"]), judge_model)
                add_query_usage(judge_usage, judgement.usage)
                if judgement.score is not None:
                    metrics["answer_score"] = judgement.score
        rows.append(QuestionResult(
            id=q.id, question=q.question, kind=q.kind, metrics=metrics, gated=result.gated,
            best_similarity=result.best_similarity, judgement=judgement,
            retrieved=[s.url + (f"#{s.heading_path}" if q.section_level else "")
                       for s in ranked]))
        if progress:
            progress(n, len(questions))
    kinds = sorted({r.kind for r in rows if r.kind})
    judged = [r for r in rows if r.judgement is not None]
    return EvalReport(
        pack=pack.manifest.name, build_id=pack.manifest.build_id, questions=len(rows), ks=ks,
        options=opts.to_dict(), overall=mean_metrics([r.metrics for r in rows]),
        by_kind={k: mean_metrics([r.metrics for r in rows if r.kind == k]) for k in kinds},
        gated=sum(r.gated for r in rows), judged=len(judged),
        judge_failures=sum(r.judgement.score is None for r in judged),
        judge_model=judge_model if judge is not None else None,
        answered=answered, citations=n_cits, citations_verified=n_verified,
        citation_precision=n_verified / n_cits if n_cits else None,
        insufficient_context=n_insufficient, unsupported=n_unsupported,
        insufficient_rate=n_insufficient / answered if answered else None,
        answer_usage=answer_usage, judge_usage=judge_usage,
        seconds=round(time.perf_counter() - t0, 2), per_question=rows)


def save_report(report: EvalReport, build_dir: Path, questions_file: str = "") -> Path | None:
    """Keep `report` as the last scorecard of its build, next to the pack
    (`<pack>/eval/<build_id>.json`, packs.layout; never inside the published build), where
    `kpack explore` shows it. Returns the path, or None for a build folder standing alone
    (no pack folder to keep it in). OSError when the pack folder is not writable."""
    root = layout.pack_root_of(build_dir)
    if root is None:
        return None
    data = {**report.to_dict(), "questions_file": questions_file,
            "saved_at": datetime.now(UTC).isoformat(timespec="seconds")}
    return layout.save_eval_report(root, report.build_id, data)
