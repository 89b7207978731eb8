"""Calibrate the confidence gate: the best-similarity threshold that best separates in-domain
questions from out-of-domain ones, per embedding model.

    python benchmarks/gate_calibration.py [--data ../shared/data] [--work out/bench]
                                          [--ood benchmarks/data/ood_questions.jsonl]

Packs: the SciFact and XQuAD packs of benchmarks/scifact.py and benchmarks/xquad.py (built
here, or reused from --work). In-domain: SciFact claims (dev = qrels/train.tsv, test =
qrels/test.tsv) and XQuAD questions (dev = articles 0-23, test = 24-47), each against its
own pack. Out-of-domain: benchmarks/data/ood_questions.jsonl, written for this benchmark —
"unrelated" questions (asked of both packs) and "adjacent" ones (in the pack's field but not
in it, asked of that pack), each marked dev or test.

For each threshold t on a 0.01 grid, in-domain questions pass when their best similarity
is >= t and out-of-domain ones are gated when it is below; balanced accuracy is the mean of
the two rates, each first averaged over the packs (so neither pack's question count
dominates). The threshold with the best dev balanced accuracy (the middle of a tie) is
chosen, and abstention rates on test are reported for it and for the 0.3 / 0.5 defaults.
Skips with a message when the data is absent.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, scifact, xquad  # noqa: E402

DEFAULT_OOD = ROOT / "benchmarks" / "data" / "ood_questions.jsonl"
GRID = [round(i / 100, 2) for i in range(0, 101)]
COMPARE = (0.3, 0.5)


def load_ood(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def rates(sims: dict[str, dict[str, list[float]]], t: float) -> tuple[float, float]:
    """(in-domain pass rate, out-of-domain gated rate) at t, each a mean over packs."""
    passed = [sum(s >= t for s in v["in"]) / len(v["in"]) for v in sims.values() if v["in"]]
    gated = [sum(s < t for s in v["ood"]) / len(v["ood"]) for v in sims.values() if v["ood"]]
    return (statistics.fmean(passed) if passed else 0.0,
            statistics.fmean(gated) if gated else 0.0)


def balanced_accuracy(sims: dict[str, dict[str, list[float]]], t: float) -> float:
    return sum(rates(sims, t)) / 2


def choose_threshold(sims: dict[str, dict[str, list[float]]]) -> tuple[float, float]:
    """(threshold, balanced accuracy): the best grid point, the middle one of a tie."""
    scores = [(t, balanced_accuracy(sims, t)) for t in GRID]
    best = max(s for _, s in scores)
    ties = [t for t, s in scores if abs(s - best) < 1e-12]
    return ties[len(ties) // 2], best


def quantiles(values: list[float]) -> str:
    if not values:
        return "-"
    v = sorted(values)
    pick = lambda q: v[min(len(v) - 1, int(q * len(v)))]  # noqa: E731
    return f"min {v[0]:.2f}  p10 {pick(0.1):.2f}  median {pick(0.5):.2f}  p90 {pick(0.9):.2f}  max {v[-1]:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--ood", type=Path, default=DEFAULT_OOD)
    ap.add_argument("--dev-articles", type=int, default=xquad.DEV_ARTICLES)
    args = ap.parse_args(argv)
    sf_dir, xq_dir = args.data / "scifact", args.data / "qa" / "xquad"
    if not (sf_dir / "corpus.jsonl").is_file() or not (xq_dir / "xquad.en.json").is_file():
        print(f"skipped: needs scifact/ and qa/xquad/ under {args.data} (pass --data DIR)")
        return 0

    print(common.machine_line())
    ood = load_ood(args.ood)
    corpus, queries, test_qrels, dev_qrels = scifact.load(sf_dir)
    articles = xquad.load(xq_dir)
    sf = common.build_cached("scifact", scifact.pages(corpus), args.work,
                             description="SciFact abstracts (evaluation benchmark)")
    xq = common.build_cached("xquad", xquad.pages(articles), args.work,
                             description="XQuAD English (evaluation benchmark)")
    for name, built in (("scifact", sf), ("xquad", xq)):
        print(f"pack {name}: {built.pack_dir} "
              f"({'reused' if built.reused else f'built in {built.seconds:.0f} s'})")
    xq_split = xquad.questions(articles, xq.base_url, args.dev_articles)
    in_domain = {
        "scifact": {"dev": [queries[q] for q in dev_qrels if q in queries],
                    "test": [queries[q] for q in test_qrels if q in queries]},
        "xquad": {s: [q.question for q in qs] for s, qs in xq_split.items()},
    }

    from packs import KnowledgePack

    sims: dict[str, dict[str, dict[str, list[float]]]] = {"dev": {}, "test": {}}
    by_kind: dict[tuple[str, str, str], list[float]] = {}
    model = None
    for name, built in (("scifact", sf), ("xquad", xq)):
        with KnowledgePack.open(built.pack_dir) as pack:
            model = pack.manifest.embedding.model

            def best(q: str) -> float:
                return pack.search(q, use_enhancements=False, use_cache=False).best_similarity or 0.0

            for split in ("dev", "test"):
                ood_here = [o for o in ood if o["split"] == split and o["target"] in ("any", name)]
                sims[split][name] = {"in": [best(q) for q in in_domain[name][split]],
                                     "ood": [best(o["question"]) for o in ood_here]}
                for o, s in zip(ood_here, sims[split][name]["ood"]):
                    by_kind.setdefault((split, name, o["kind"]), []).append(s)

    print(f"model {model}; out-of-domain questions: {len(ood)} ({args.ood.name})")
    print("\nbest vector similarity per question:")
    for split in ("dev", "test"):
        for name, v in sims[split].items():
            print(f"  {split:4} {name:8} in-domain  n={len(v['in']):4}  {quantiles(v['in'])}")
            for kind in ("unrelated", "adjacent"):
                vals = by_kind.get((split, name, kind), [])
                print(f"  {split:4} {name:8} {kind:10} n={len(vals):4}  {quantiles(vals)}")

    chosen, dev_bacc = choose_threshold(sims["dev"])
    print(f"\nchosen threshold (best dev balanced accuracy {dev_bacc:.3f}): {chosen:.2f}")
    rows = []
    for t in (chosen, *[c for c in COMPARE if c != chosen]):
        for split in ("dev", "test"):
            passed, gated = rates(sims[split], t)
            m: dict[str, object] = {"bal. acc": (passed + gated) / 2}
            for name, v in sims[split].items():
                m[f"{name} in abst."] = sum(s < t for s in v["in"]) / max(len(v["in"]), 1)
                for kind in ("unrelated", "adjacent"):
                    vals = by_kind.get((split, name, kind), [])
                    m[f"{name} {kind[:5]}. abst."] = sum(s < t for s in vals) / max(len(vals), 1)
            rows.append((f"t={t:.2f} {split}", m))
    cols = ("bal. acc", "scifact in abst.", "scifact unrel. abst.", "scifact adjac. abst.",
            "xquad in abst.", "xquad unrel. abst.", "xquad adjac. abst.")
    print("\nabstention rates (share of questions gated); in-domain should be low, "
          "out-of-domain high:")
    print(common.table(rows, cols))
    print(f"\nKNOWN_MODELS[{model!r}].gate_threshold = {chosen:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
