"""Fit the offline answer's learned reader on the dev questions, and say how well it does on
questions it was not fitted on.

    python benchmarks/train_reader.py [--data ../shared/data] [--work out/bench]
        [--corpus kubernetes --corpus rust-book --corpus cargo-book --corpus xquad]
        [--folds 5] [--weights packs/retrieval/reader_weights.json]
        [--out benchmarks/results/issue47_train_reader.md] [--no-write]

Reads the dev questions of each corpus on its benchmark pack (benchmarks/reader_data.py:
dev rows only, never a test split), then:
1. picks the penalty and the selection limits (margin, cover, top_n) by k-fold
   cross-validation by page (the pages of each corpus dealt to --folds folds: no page has
   questions on both sides), on the mean containment over the corpora;
2. reports, with those settings, per corpus: the first-sentence baseline and the turn-3
   product (issue 34's hand-weighted answer, benchmarks/baseline_turn3) on the same
   searches, the reader cross-validated by page, leave-one-corpus-out (fitted on the
   other corpora only), without its second model (no unit similarity), and in-sample;
   each the share of questions whose answer contains every gold group, gate on and off,
   with 95% bootstrap intervals, and the mean words;
3. fits the reader on every dev question and writes its weights (--weights, loaded by
   packs/retrieval/reader.py) and this output (--out).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import answer_eval, common, reader_data, reader_fit  # noqa: E402
from packs.retrieval import reader  # noqa: E402

NAME = "reader-1"
L2 = (1.0, 10.0)
MARGINS = (1.0, 2.0, 3.0)
COVERS = (0.0, 1.0, 2.0)
TOP_N = (6, 10)
COLS = ("gate on", "gate off", "words")
RESULTS = ROOT / "benchmarks" / "results" / "issue47_train_reader.md"


def _mean_by_corpus(answers: list[str], items: list) -> float:
    off = reader_fit.scores(answers, items)["gate off"]
    corpora = sorted({it.corpus for it in items})
    return statistics.fmean(statistics.fmean(h for h, it in zip(off, items) if it.corpus == c)
                            for c in corpora)


def choose(items: list, folds: list[int], log) -> tuple[float, reader.Limits, list]:
    """(penalty, limits, the grid's rows) with the best mean containment by k-fold CV."""
    rows = []
    for l2, top_n in itertools.product(L2, TOP_N):
        base = reader.Limits(top_n=top_n)
        models = {}
        for part in sorted(set(folds)):
            models[part] = reader_fit.fit([it for it, f in zip(items, folds) if f != part],
                                          l2, base)
        for margin, cover in itertools.product(MARGINS, COVERS):
            limits = reader.Limits(top_n=top_n, margin=margin, cover=cover)
            answers = []
            for it, f in zip(items, folds):
                m = models[f]
                answers.append(reader_fit.answer_of(reader.Reader("cv", m.first, m.second,
                                                                  limits), it))
            score = _mean_by_corpus(answers, items)
            rows.append((score, l2, limits))
            log(f"  l2 {l2:g}, top_n {top_n}, margin {margin:g}, cover {cover:g}: "
                f"mean containment {score:.3f}")
    score, l2, limits = max(rows, key=lambda r: (r[0], -r[2].top_n))
    return l2, limits, rows


def table(items: list, columns: dict[str, list[str]]) -> str:
    lines = []
    for corpus in sorted({it.corpus for it in items}):
        idx = [k for k, it in enumerate(items) if it.corpus == corpus]
        sub = [items[k] for k in idx]
        rows = {label: reader_fit.summary(reader_fit.scores([a[k] for k in idx], sub))
                for label, a in columns.items()}
        lines += [f"\n{corpus} ({len(sub)} dev questions)", answer_eval.table(rows, COLS)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--corpus", action="append", choices=reader_data.CORPORA)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--weights", type=Path, default=reader.WEIGHTS_FILE)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--no-write", action="store_true", help="report only: write no weights")
    args = ap.parse_args(argv)
    printed: list[str] = []

    def log(line: str) -> None:
        print(line, flush=True)
        printed.append(line)

    log(common.machine_line())
    t0 = time.perf_counter()
    items = []
    for name in args.corpus or reader_data.CORPORA:
        items += reader_data.load(name, args.data, args.work, log)
    log(f"{len(items)} dev questions, {sum(len(it.units) for it in items)} units; "
        f"{sum(it.labels.sum() == 0 for it in items)} with no unit that holds a gold group")
    folds = reader_fit.folds_by_page(items, args.folds)
    log(f"\nchoosing the penalty and limits by {args.folds}-fold cross-validation by page:")
    l2, limits, _ = choose(items, folds, log)
    log(f"chosen: l2 {l2:g}, {limits}")

    corpora = [it.corpus for it in items]
    final = reader_fit.fit(items, l2, limits)
    columns = {
        "baseline: first sentence": [it.baselines["first sentence"] for it in items],
        "baseline: turn-3 product": [it.baselines["turn-3 product"] for it in items],
        f"reader, {args.folds}-fold CV by page": reader_fit.cross_validate(items, folds, l2,
                                                                           limits),
        **({"reader, leave-one-corpus-out": reader_fit.cross_validate(items, corpora, l2,
                                                                       limits)}
           if len(set(corpora)) > 1 else {}),
        "reader without unit similarity, CV": reader_fit.cross_validate(items, folds, l2,
                                                                        limits, second=False),
        "reader, in-sample": [reader_fit.answer_of(final, it) for it in items],
    }
    log("\nshare of dev questions whose answer contains every gold group (95% bootstrap "
        "interval), same searches:" + table(items, columns))
    weights = dict(zip(final.second.features, final.second.weights.round(3)))
    log("\nsecond model's weights (standardised features): " + ", ".join(
        f"{k} {v:+.2f}" for k, v in sorted(weights.items(), key=lambda kv: -abs(kv[1]))))
    if not args.no_write:
        trained = {"at": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC", "l2": l2,
                   "questions": {c: corpora.count(c) for c in sorted(set(corpora))},
                   "command": "python benchmarks/train_reader.py " + " ".join(
                       argv if argv is not None else sys.argv[1:])}
        args.weights.write_text(common.json.dumps(final.to_json(NAME, trained), indent=1)
                                + "\n", encoding="utf-8")
        reader.load.cache_clear()
        log(f"\nwritten: {args.weights} ({reader.load(args.weights).version})")
    log(f"done in {time.perf_counter() - t0:.0f} s")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("# The learned reader: fitted on dev, cross-validated\n\n"
                            f"- Command: `python benchmarks/train_reader.py "
                            f"{' '.join(argv if argv is not None else sys.argv[1:])}` "
                            "(HF_HUB_OFFLINE=1)\n\nOutput, as printed:\n\n```\n"
                            + "\n".join(printed) + "\n```\n", encoding="utf-8")
        print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
