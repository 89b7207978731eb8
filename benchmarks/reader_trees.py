"""A study, not shipped: do boosted trees over the reader's features find what its linear
model misses? (issue 47; results/issue47zp_reader_trees.md)

    python benchmarks/reader_trees.py [--data ../shared/data] [--work out/bench]
        [--trees 100] [--depth 3] [--rate 0.1] [--min-leaf 100] [--top 30]
        [--held-out k8s_answers.jsonl:22 ...]

Reads the dev and spent questions of the four corpora as benchmarks/train_reader.py does
(benchmarks/reader_data.py, no unit embedded), then, on the same 5 folds by page:
- the linear reader (benchmarks/reader_fit.py, l2 10, the shipped limits);
- the same reader, its first `--top` units per question re-scored by the linear score plus
  `--trees` regression trees fitted to the gradient of the same softmax loss (Newton leaf
  values, the corpora weighed alike, as the linear fit does); the other units left below;
and prints each one's containment (gate off) and words per corpus. With --held-out (a
data file and a spent test round), also both fitted on every other question and read on
that round's: rounds spent after the shipped reader was fitted, as a blind round reads.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.tree import DecisionTreeRegressor

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, corpora, reader_data, reader_fit  # noqa: E402
from packs.retrieval import reader  # noqa: E402

L2 = 10.0
BELOW = 1000.0  # how far under the re-scored units the others are put
NEWTON_L2 = 1.0  # the leaf values' penalty


class Boosted:
    """A reader's first model whose best `top` units get the trees' sum on top."""

    def __init__(self, first: reader.Model, trees: list, rate: float, top: int):
        self.first, self.trees, self.rate, self.top = first, trees, rate, top
        self.features = first.features

    def score(self, x: np.ndarray) -> np.ndarray:
        s = self.first.score(x)
        if not len(x):
            return s
        top = np.argsort(-s, kind="stable")[:self.top]
        b = s[top].copy()
        xf = np.asarray(x[top], dtype=np.float32)
        for tree, values in self.trees:
            b += self.rate * values[tree.apply(xf)]
        out = s - BELOW
        out[top] = b
        return out


def _cases(items: list, linear: reader.Reader, top: int) -> list:
    """(features, labels, weight) of each case the linear fit learns from
    (reader_fit.cases), its best `top` units only."""
    out = []
    for _, x, labels, w in reader_fit.cases(items):
        best = np.argsort(-linear.first.score(x), kind="stable")[:top]
        if labels[best].sum() > 0:
            out.append((x[best], labels[best], w))
    return out


def fit(items: list, limits: reader.Limits, args) -> tuple[reader.Reader, reader.Reader]:
    """(the linear reader, the boosted one), fitted on `items`."""
    linear = reader_fit.fit(items, L2, limits, second=False)
    cases = _cases(items, linear, args.top)
    x, t, starts, qid, c = reader_fit._stack([x for x, _, _ in cases],
                                             [lab / lab.sum() for _, lab, _ in cases],
                                             [w for *_, w in cases])
    cq, xf, f = c[qid], x.astype(np.float32), linear.first.score(x)
    trees = []
    for m in range(args.trees):
        p = reader_fit._softmax(f, starts, qid)
        g, h = (t - p) * cq, p * (1 - p) * cq
        tree = DecisionTreeRegressor(max_depth=args.depth, min_samples_leaf=args.min_leaf,
                                     random_state=m).fit(xf, g)
        leaf = tree.apply(xf)
        n = tree.tree_.node_count
        values = (np.bincount(leaf, weights=g, minlength=n)
                  / (np.bincount(leaf, weights=h, minlength=n) + NEWTON_L2))
        f = f + args.rate * values[leaf]
        trees.append((tree, values))
    return linear, reader.Reader("trees", Boosted(linear.first, trees, args.rate, args.top),
                                 None, limits)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--rate", type=float, default=0.1)
    ap.add_argument("--min-leaf", type=int, default=100)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--held-out", action="append", default=[], metavar="FILE:ROUND")
    args = ap.parse_args(argv)
    log, _ = common.printing_log()
    log(common.machine_line())
    t0 = time.perf_counter()
    items = reader_data.load_all(args.data, args.work, log)
    limits = reader.load().limits
    log(f"{len(items)} questions; {args.trees} trees of depth {args.depth}, rate {args.rate}, "
        f"min leaf {args.min_leaf}, over the best {args.top} units; limits {limits}")
    folds = reader_fit.folds_by_page(items, 5)
    linear_cv, trees_cv = [""] * len(items), [""] * len(items)
    for part in range(5):
        linear, boosted = fit([it for it, f in zip(items, folds) if f != part], limits, args)
        for k in (k for k, f in enumerate(folds) if f == part):
            linear_cv[k] = reader_fit.answer_of(linear, items[k])
            trees_cv[k] = reader_fit.answer_of(boosted, items[k])
        log(f"  fold {part + 1}/5 done, {time.perf_counter() - t0:.0f} s")
    log("containment, gate off, 5-fold CV by page:")
    reader_fit.report(log, "linear", items, linear_cv)
    reader_fit.report(log, "with trees", items, trees_cv)
    held = set()
    for spec in args.held_out:
        name, _, round_ = spec.partition(":")
        held |= {r["id"] for r in corpora.load_rows(corpora.DATA_DIR / name)
                 if r.get("test_round") == int(round_)}
    if held:
        test = [it for it in items if it.id in held]
        linear, boosted = fit([it for it in items if it.id not in held], limits, args)
        log(f"held out ({len(test)} questions), fitted on the others:")
        reader_fit.report(log, "linear", test,
                          [reader_fit.answer_of(linear, it) for it in test])
        reader_fit.report(log, "with trees", test,
                          [reader_fit.answer_of(boosted, it) for it in test])
    log(f"done in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
