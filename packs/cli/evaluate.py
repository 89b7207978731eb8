"""`kpack eval`: retrieval metrics (and graded answers) of a pack on a questions file.

`register(app)` adds the command to the main `kpack` app (packs/cli/__init__.py). Exit codes: 0 success, 1 the evaluation failed
(e.g. Claude refused the grading requests), 2 bad input (unreadable pack or questions
file, eval questions in the pack's few-shot pool). KPACK_DEBUG=1 re-raises.
The scorecard is kept next to the pack (`<pack>/eval/<build id>.json`; `--no-save` skips
it), where `kpack explore` shows the last one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer

from packs.cli.common import (
    TRUST_HELP,
    UNVERIFIED_HELP,
    OptionError,
    fail,
    open_checks,
    print_json,
)


def _fail(exc: BaseException) -> NoReturn:
    from packs.embedding import EmbeddingModelError
    from packs.eval_questions import EvalLeakError, QuestionsFileError
    from packs.format import PackFormatError
    from packs.options import OptionsError

    fail(exc, (PackFormatError, EmbeddingModelError, QuestionsFileError, EvalLeakError,
               OptionsError, OptionError, FileNotFoundError))


def eval_(
    pack: Annotated[Path, typer.Argument(help="Pack folder (or one build folder).")],
    questions: Annotated[Path, typer.Option("--questions", "-q", help="JSONL of {id, question, gold_sources[], answer?, kind?}; a gold source is URL (page) or URL#heading (section).")],
    k: Annotated[list[int] | None, typer.Option("--k", help="Cut-offs for recall@k (repeat the option; default 1, 5, 10). MRR and nDCG@10 are always reported.")] = None,
    binary: Annotated[bool, typer.Option("--binary", help="Binary gains for nDCG (every gold counts 1) instead of the gold grades.")] = False,
    no_gate: Annotated[bool, typer.Option("--no-gate", help="Score rankings with the confidence gate off (gated questions otherwise score 0).")] = False,
    judge: Annotated[bool, typer.Option(help="With ANTHROPIC_API_KEY set, ask() the questions that have a reference answer and let Claude grade the answers.")] = True,
    judge_model: Annotated[str, typer.Option(help="Claude model that grades answers.")] = "claude-sonnet-4-6",
    answers: Annotated[bool, typer.Option("--answers", help="Also ask() every question and report citation precision: the share of the answers' citations whose quote was found in the cited section (Claude with ANTHROPIC_API_KEY, else the extractive answer).")] = False,
    per_question: Annotated[bool, typer.Option("--per-question", help="Print one line per question.")] = False,
    embedding_model: Annotated[str | None, typer.Option(help="Local copy of the pack's model.")] = None,
    allow_unverified: Annotated[bool, typer.Option("--allow-unverified", help=UNVERIFIED_HELP)] = False,
    trust: Annotated[list[Path] | None, typer.Option("--trust", metavar="PUBKEY", help=TRUST_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full report (overall, per kind, per question) as JSON.")] = False,
    save: Annotated[bool, typer.Option(help="Keep the scorecard next to the pack (<pack>/eval/<build id>.json), where kpack explore shows it.")] = True,
) -> None:
    """Score PACK's retrieval on the QUESTIONS file: recall@k, MRR and nDCG@10 per question
    and overall, against the gold sources. When ANTHROPIC_API_KEY is set, answers to
    questions with a reference `answer` are graded by Claude (0, 0.5, 1) with a fixed rubric.
    With --answers (or a judge), answers are checked for citation precision.
    Refuses to run when a question is in the pack's few-shot pool."""
    try:
        from packs import KnowledgePack
        from packs.eval_judge import judge_client
        from packs.eval_metrics import DEFAULT_KS
        from packs.eval_questions import load_questions
        from packs.evaluation import evaluate
        from packs.options import SearchOptions

        qs = load_questions(questions)
        options = SearchOptions(gate_threshold=-1.0) if no_gate else None
        client = judge_client() if judge else None
        with KnowledgePack.open(pack, embedding_model=embedding_model,
                                **open_checks(allow_unverified, trust)) as kp:
            report = evaluate(kp, qs, options, ks=tuple(k or DEFAULT_KS), binary=binary,
                              judge=client, judge_model=judge_model, answers=answers)
            build_dir = kp.path
    except Exception as exc:  # the CLI edge: one clear line, KPACK_DEBUG re-raises
        _fail(exc)
    saved = _save(report, build_dir, questions) if save else None
    if as_json:
        print_json({**report.to_dict(), "saved_to": str(saved) if saved else None})
        return
    typer.echo(format_report(report, per_question))
    if saved:
        typer.echo(f"scorecard saved to {saved} (kpack explore shows it)")


def _save(report, build_dir: Path, questions: Path) -> Path | None:
    """Keep the scorecard (packs.evaluation.save_report) and return where, or None. A
    pack folder that is not writable costs a warning on stderr only: the evaluation
    itself succeeded."""
    from packs.evaluation import save_report

    try:
        return save_report(report, build_dir, str(questions))
    except OSError as exc:
        typer.echo(f"warning: scorecard not saved: {exc}", err=True)
        return None


def format_report(report, per_question: bool = False) -> str:
    """The report as a plain-text table: overall, then per kind, then (optionally) per
    question."""
    names = list(report.overall)
    width = max(12, *(len(k) for k in report.by_kind)) if report.by_kind else 12
    lines = [f"{report.pack} (build {report.build_id}): {report.questions} questions, "
             f"{report.gated} gated, {report.seconds:.1f} s",
             f"{'':{width}} {'n':>5} " + " ".join(f"{n:>10}" for n in names)]
    groups = [("overall", report.questions, report.overall)]
    for kind, metrics in report.by_kind.items():
        groups.append((kind, sum(r.kind == kind for r in report.per_question), metrics))
    for label, n, metrics in groups:
        lines.append(f"{label:{width}} {n:>5} "
                     + " ".join(f"{metrics.get(m, float('nan')):>10.3f}" for m in names))
    if report.judge_model:
        lines.append(f"answers graded by {report.judge_model}: {report.judged} "
                     f"({report.judge_failures} could not be graded)")
    if report.answered:
        precision = ("n/a (no citations)" if report.citation_precision is None
                     else f"{report.citation_precision:.3f}")
        lines.append(f"citation precision: {precision} ({report.citations_verified}/"
                     f"{report.citations} citations verified in {report.answered} answers)")
        lines.append(f"insufficient context: {report.insufficient_context} of "
                     f"{report.answered} answers ({report.insufficient_rate or 0:.1%}); "
                     f"unsupported (no verified citation): {report.unsupported}")
    for label, usage in (("answers", report.answer_usage), ("grading", report.judge_usage)):
        if usage.get("api_calls"):
            lines.append(f"Claude for {label}: {usage['api_calls']} calls, "
                         f"{usage['input_tokens']:,} tokens in, {usage['output_tokens']:,} out, "
                         f"${usage['cost_usd']:.4f}")
    if per_question:
        for r in report.per_question:
            top = r.retrieved[0] if r.retrieved else "(nothing)"
            lines.append(f"  {r.id}: " + " ".join(f"{m}={v:.2f}" for m, v in r.metrics.items())
                         + f"{' GATED' if r.gated else ''}  top: {top}")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    """Add `eval` to `app`."""
    app.command(name="eval")(eval_)
