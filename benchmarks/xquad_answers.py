"""XQuAD (English): does the offline (extractive) answer contain the gold answer text?

    python benchmarks/xquad_answers.py [--data ../shared/data] [--work out/bench] [--split both]
        [--questions FILE] [--out FILE]

The pack is the one benchmarks/xquad.py builds (one page per article, one section per
paragraph; reused when cached). Every question is searched once with the default pipeline
and the gate off, then answered offline from that one search result in the ways of
benchmarks/answer_eval.py (first sentence of the top section, the answer before issue 34,
the product). A question counts when one of its gold answers occurs in the answer
(case-folded, whitespace-normalised, the label line left out). Columns: `gate on` is what
a user gets (a question the shipped calibrated gate refuses has no answer; its verdict is
computed on the same search), `gate off` answers every question, `old rule` is gate on
with the plain rule "best similarity >= the model's base threshold" (0.42), which is what
this benchmark's `gate on` measured before 2026-11-27. 95% bootstrap intervals in
brackets. Also printed: the mean words per answer and how often the gold paragraph was
among the first 5 cited sections (a reference: the answer also reads cited sections 6-7
and the other paragraphs of the first 3 articles). Writes the output to --out when given
(the standing dev table is benchmarks/results/answers-xquad.md: `make bench`); without it,
it only prints, so a look at a split never writes over a recorded test figure. Tune on
dev, report test.

`--questions FILE`: the questions of a separate file instead of the articles' own (a fresh
split written on the same pack), one JSON row each: {"id", "article" (its index in
xquad.en.json), "paragraph" (index in the article), "question", "answers": [...], "split"};
`--split` picks its rows.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import answer_eval, common, xquad  # noqa: E402

COLS = ("gate on", "gate off", "old rule", "words")


def items(articles: list[dict], base_url: str, dev_articles: int):
    """{"dev": [(question, [gold answers], gold paragraph URL#heading)], "test": [...]}"""
    split: dict[str, list] = {"dev": [], "test": []}
    for n, a in enumerate(articles):
        for i, p in enumerate(a["paragraphs"]):
            for qa in p["qas"]:
                split["dev" if n < dev_articles else "test"].append(
                    (qa["question"], [x["text"] for x in qa["answers"]],
                     (f"{base_url}/xquad/{n}", xquad.heading(i))))
    return split


def file_items(path: Path, base_url: str) -> dict[str, list]:
    """The rows of a question file (see the module docstring) as `items` gives them."""
    from benchmarks import corpora

    split: dict[str, list] = {"dev": [], "test": []}
    for n, r in enumerate(corpora.load_rows(path), start=1):
        missing = [k for k in ("article", "paragraph", "question", "answers", "split")
                   if k not in r]
        if missing:
            raise SystemExit(f"{path}: row {n} lacks {', '.join(missing)} (each row needs "
                             '{"id", "article", "paragraph", "question", "answers", "split"})')
        answers = [a["text"] if isinstance(a, dict) else str(a) for a in r["answers"]]
        split.setdefault(r["split"], []).append(
            (r["question"], answers,
             (f"{base_url}/xquad/{int(r['article'])}", xquad.heading(int(r["paragraph"])))))
    return split


def run(pack, qs, log=print) -> dict[str, dict[str, str]]:
    """The table rows of one split: one search per question with the gate off; the gate
    verdicts (calibrated and the old plain rule) come from the same search."""
    from packs.retrieval import gate

    limit = pack.manifest.embedding.gate_threshold
    per_question, ceiling, old = [], [], []
    t0 = time.perf_counter()
    for k, (question, _, (url, head)) in enumerate(qs, start=1):
        result = pack.search(question, use_cache=False, gate_threshold=-1.0)
        cited = result.cited()
        ceiling.append(any(s.url == url and s.heading_path.endswith(head) for s in cited[:5]))
        old.append(not gate.passes(result.best_similarity, limit))
        per_question.append({"texts": answer_eval.answers(pack, result),
                             "gated": not result.gate.get("calibrated_passed", True)})
        if k % 100 == 0:
            log(f"  {k}/{len(qs)} questions, {time.perf_counter() - t0:.0f} s")
    groups = [[golds] for _, golds, _ in qs]  # one group: any human answer counts
    rows = answer_eval.score_rows(per_question, groups, ceiling, ceiling_label="ceiling: gold "
                                  "paragraph among the first 5 cited sections")
    for k, label in enumerate(answer_eval.METHODS):
        hit = [answer_eval.contains(q["texts"][k], g) and not o
               for q, g, o in zip(per_question, groups, old)]
        rows[label]["old rule"] = answer_eval.cell([float(h) for h in hit])
    rows[list(rows)[-1]]["old rule"] = answer_eval.cell(
        [float(c and not o) for c, o in zip(ceiling, old)])
    log(f"  gated: {sum(q['gated'] for q in per_question)} of {len(qs)} by the calibrated "
        f"gate, {sum(old)} by the old rule (similarity >= {limit}); ms per question "
        f"(search + all answers): {1000 * (time.perf_counter() - t0) / len(qs):.0f}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--dev-articles", type=int, default=xquad.DEV_ARTICLES)
    ap.add_argument("--split", choices=("dev", "test", "both"), default="both")
    ap.add_argument("--questions", type=Path, default=None,
                    help="a question file to use instead of the articles' own questions")
    ap.add_argument("--out", type=Path, default=None,
                    help="Markdown file for the output (none: printed only)")
    args = ap.parse_args(argv)
    data = args.data / "qa" / "xquad"
    if not (data / "xquad.en.json").is_file():
        print(f"skipped: no XQuAD at {data} (pass --data DIR holding qa/xquad/)")
        return 0
    log, printed = common.printing_log()

    log(common.machine_line())
    articles = xquad.load(data)
    built = common.build_cached("xquad", xquad.pages(articles), args.work,
                                description="XQuAD English (evaluation benchmark)")
    log(f"pack: {built.pack_dir} "
        f"({'reused' if built.reused else f'built in {built.seconds:.0f} s'}; "
        f"{built.counts['sections']} sections); model {common.MODEL}")
    split = (file_items(args.questions, built.base_url) if args.questions
             else items(articles, built.base_url, args.dev_articles))
    if args.questions:
        log(f"questions: {args.questions} ({sum(map(len, split.values()))} rows)")
    names = ("dev", "test") if args.split == "both" else (args.split,)

    from packs import KnowledgePack

    with KnowledgePack.open(built.pack_dir) as pack:
        for name in names:
            log(f"\n{name} split ({len(split[name])} questions), share whose gold answer "
                "text is in the answer:")
            rows = run(pack, split[name], log)
            log(answer_eval.table(rows, COLS))
    if args.out is None:
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        "# XQuAD (English): gold answer text in the offline answer\n\n"
        "- Command: `python benchmarks/xquad_answers.py "
        f"{' '.join(argv if argv is not None else sys.argv[1:])}` (HF_HUB_OFFLINE=1)\n"
        "- Tuned on dev (articles 0-23): the reader's weights "
        "(packs/retrieval/reader_weights.json); test = articles 24-47"
        + (f"; questions from {args.questions}" if args.questions else "") + ".\n"
        "- `gate on`: as a user gets it (the calibrated gate; a gated question has no "
        "answer to contain the text); `gate off`: every question answered; `old rule`: "
        "gated by best similarity >= 0.42, as this benchmark measured before.\n\n"
        "Output, as printed:\n\n```\n" + "\n".join(printed) + "\n```\n", encoding="utf-8")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
