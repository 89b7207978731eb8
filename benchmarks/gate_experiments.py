"""Candidate gate signals, each added to the shipped ones and scored like a release.

    python benchmarks/gate_experiments.py [--data ../shared/data] [--work out/bench]
        [--searches out/bench/gate_searches.jsonl] [--only entities ...] [--out FILE]

The packs and questions are those of benchmarks/gate_calibration.py. Each question is
searched once (gate rule and later stages off) and what the gate saw is kept: the vector
similarities and the heading path + text of the 10 best fused sections (`--searches` keeps
them in a file, so a second run only recomputes signals). Every experiment computes extra
signals per question from that, the pack and the question; the shipped signals
(gate.FITTED_SIGNALS) plus the extra ones are refitted on dev (gate_calibration.fit / choose_cut),
then scored on the test split and leave-one-corpus-out, next to the shipped ones alone
refitted the same way. Experiments (BENCHMARKS.md, issue 16, "tried and not shipped"):

    masked     a second search with the question's specific words taken out: the drop in
               best similarity
    entities   the pack's entity names (offline extractor: identifiers, defined terms,
               headings) in the question
    frequency  English word frequencies (the wordfreq package, when installed): words rare
               in English the pack lacks or barely uses
    joint      the embedding model reading question + best section as one text
    typos      an unknown word one edit from a pack word read as that word
    stoplist   scikit-learn's English stop words for the question and the pack's pairs
    focus      whether the best sections dwell on the question's rarest pack words (how
               often, in a heading) or only mention them, and how rare the rarest is
    neighbours single specific words ("HAProxy", "Karpenter") none of whose neighbouring
               word pairs in the question the pack ever uses
    technical  the technical-pack switch of gate-v6 as a bias, on other signals (unknown,
               names, lone names), with rare names at 2 sections, and rare names in every
               pack, not only technical ones
    compounds  hyphenated lower-case words the pack never writes as one ("iptables-persistent",
               "live-restore"), and technical-pack rare names counted only when the best
               sections do not write them
    interactions  products of the shipped signals (similarity x coverage, ...), and the
               technical switch times each signal: a non-linear gate on the same evidence
    agreement  whether the vector and the BM25 rankings agree: the same page first, the
               vector's first page among BM25's first 3, the pages both put in their top 5
    chunks     each run of content words of the question ("enable live-restore", "Docker
               daemon") searched alone: the weakest one's best similarity, their mean, and
               the question's best similarity over the weakest
    operating  weights chosen by random search for the operating point (not a signal)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, corpora  # noqa: E402
from benchmarks.gate_calibration import (  # noqa: E402
    SIGNAL_OPTIONS,
    choose_cut,
    fit,
    fitted_rates,
    gated_cell,
    log,
    rates,
)
from benchmarks.gate_experiment_signals import EXPERIMENTS  # noqa: E402

TOP_KEPT = 10
MAX_FALSE = 0.04


# --- searches --------------------------------------------------------------------------------


@contextmanager
def gate_inputs(sink: dict):
    """While active, every search puts what its gate saw into `sink` (similarities, the
    texts of the TOP_KEPT best fused sections). The pipeline reads gate.TOP_SECTIONS and
    gate.decide at call time, so both are swapped here and restored after; the decision
    itself is the shipped one, on the shipped number of sections."""
    from packs.retrieval import gate

    decide, top = gate.decide, gate.TOP_SECTIONS

    def capture(question, sims, texts, *args):
        sink["sims"], sink["top"] = [float(s) for s in sims[:50]], list(texts)
        return decide(question, sims, texts[:top], *args)

    gate.decide, gate.TOP_SECTIONS = capture, TOP_KEPT
    try:
        yield
    finally:
        gate.decide, gate.TOP_SECTIONS = decide, top


def collect(corpus) -> list[dict]:
    from packs import KnowledgePack

    rows, seen = [], {}
    with KnowledgePack.open(corpus.built.pack_dir) as pack, gate_inputs(seen):
        t0 = time.perf_counter()
        for group, by_split in (("in", corpus.in_domain), ("absent", corpus.absent),
                                ("unrelated", corpus.unrelated)):
            for split, questions in by_split.items():
                for q in questions:
                    pack.search(q.question, **SIGNAL_OPTIONS)
                    rows.append({"corpus": corpus.name, "split": split, "group": group,
                                 "question": q.question, "sims": seen["sims"],
                                 "top": seen["top"], "pack": str(pack.path),
                                 "base": pack.manifest.embedding.gate_threshold})
        log(f"{corpus.name}: {len(rows)} questions searched in "
            f"{time.perf_counter() - t0:.0f} s")
    return rows


# --- scoring ---------------------------------------------------------------------------------


def _label(extra: list[str]) -> str:
    """A table row's name for the extra signals: listed, or counted when there are many."""
    if extra[0].endswith("_"):
        return "all recomputed"
    if len(extra) > 3:
        return f"+ {len(extra)} signals ({', '.join(extra[:2])}, ...)"
    return "+ " + ", ".join(extra)


def _names(extra: list[str]) -> tuple[str, ...]:
    from packs.retrieval import gate

    if len(extra) == 1 and extra[0].endswith("_"):
        return tuple(extra[0] + s for s in gate.FITTED_SIGNALS)
    return (*gate.FITTED_SIGNALS, *extra)


def score(rows: list[dict], names: tuple[str, ...], corpus_names: list[str],
          weights_for=None) -> dict[str, str]:
    """'in-domain gated / absent gated' per corpus on test (fitted on dev) and leave one
    corpus out (fitted on the other corpora's dev questions), plus the test mean absent."""
    fitter = weights_for or (lambda train: fit(train, names))

    def run(train: list[dict], scored: list[dict]) -> dict:
        return fitted_rates(train, scored, fitter, MAX_FALSE)

    dev = [r for r in rows if r["split"] == "dev"]
    test = run(dev, [r for r in rows if r["split"] == "test"])
    out = {f"{c} test": gated_cell(test, c) for c in corpus_names}
    absent = [test[(c, "absent")][0] for c in corpus_names if (c, "absent") in test]
    out["mean absent (test)"] = f"{sum(absent) / len(absent):.1%}" if absent else "-"
    if len(corpus_names) > 1:
        for held in corpus_names:
            out[f"{held} left out"] = gated_cell(run([r for r in dev if r["corpus"] != held],
                                                     [r for r in rows if r["corpus"] == held]),
                                                 held)
    return out


def operating_point(names: tuple[str, ...], steps: int = 2000, seed: int = 0):
    """A fitter: logistic weights, then a random search that keeps the bias and moves the
    weights to maximise the mean absent gated at the choose_cut operating point."""
    from packs.retrieval import gate

    def fitter(train: list[dict]):
        w, b = fit(train, names)
        corpus_names = sorted({r["corpus"] for r in train})

        def value(weights) -> float:
            cut = choose_cut(train, weights, b, MAX_FALSE)
            got = rates(train, lambda r: gate.probability(r["signals"], weights, b) >= cut)
            return sum(got.get((c, "absent"), (0.0,))[0] for c in corpus_names)

        rng = random.Random(seed)
        best, best_value = dict(w), value(w)
        for _ in range(steps):
            cand = {n: v + rng.gauss(0, 1) * (abs(v) * 0.15 + 0.05) for n, v in best.items()}
            if (v := value(cand)) > best_value:
                best, best_value = cand, v
        return best, b

    return fitter


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--work", type=Path, default=ROOT / "out" / "bench")
    ap.add_argument("--corpus", action="append", choices=corpora.CORPORA)
    ap.add_argument("--searches", type=Path, default=None,
                    help="JSONL of the searches: read when it exists, else written")
    ap.add_argument("--only", action="append", choices=list(EXPERIMENTS))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    from packs import KnowledgePack
    from packs.retrieval import gate

    names = [n for n in (args.corpus or corpora.CORPORA) if corpora.available(args.data, n)]
    if not names:
        print(f"skipped: no benchmark corpus under {args.data} (pass --data DIR)")
        return 0
    if args.searches and args.searches.is_file():
        rows = [r for r in map(json.loads, args.searches.open()) if r["corpus"] in names]
        log(f"{len(rows)} searches read from {args.searches}")
    else:
        rows = [r for n in names for r in collect(corpora.load(args.data, n, args.work))]
        if args.searches:
            args.searches.write_text("".join(json.dumps(r) + "\n" for r in rows))
    packs = {r["corpus"]: r["pack"] for r in rows}
    for r in rows:
        r["signals"] = {}
    for n in names:
        with KnowledgePack.open(Path(packs[n])) as pack:
            mine = [r for r in rows if r["corpus"] == n]
            for r in mine:
                r["signals"].update(gate.signals(r["question"], r["sims"], r["top"],
                                                 pack.vocabulary(), r["base"]))
            for name in args.only or EXPERIMENTS:
                compute = EXPERIMENTS[name][0]
                if compute is None:
                    continue
                t0 = time.perf_counter()
                try:
                    extra = compute(pack, mine)
                except ImportError as exc:
                    log(f"{name}: skipped ({exc})")
                    continue
                for r, e in zip(mine, extra):
                    r["signals"].update(e)
                log(f"{n}: {name} in {time.perf_counter() - t0:.0f} s")
    table = [("the shipped signals (gate.FITTED_SIGNALS)", score(rows, tuple(gate.FITTED_SIGNALS), names))]
    for name in args.only or EXPERIMENTS:
        compute, sets = EXPERIMENTS[name]
        if compute is None:
            table.append(("operating point: weights by random search",
                          score(rows, tuple(gate.FITTED_SIGNALS), names,
                                operating_point(tuple(gate.FITTED_SIGNALS)))))
            continue
        for extra in sets:
            if all(n in rows[0]["signals"] for n in _names(extra)):
                table.append((f"{name}: {_label(extra)}", score(rows, _names(extra), names)))
    cols = list(table[0][1])
    text = "\n".join([common.machine_line(), "",
                      f"questions: {len(rows)} over {', '.join(names)}; cells: in-domain "
                      "gated / adjacent-but-absent gated", "", common.table(table, cols)])
    common.print_report(text, args.out, "Gate experiments", "gate_experiments.py", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
