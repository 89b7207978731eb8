"""Calibrate the confidence gate (packs/retrieval/gate.py) on dev questions, report test.

    python benchmarks/gate_calibration.py [--data ../shared/data] [--work out/bench]
        [--corpus kubernetes ...] [--max-false 0.03] [--out benchmarks/results/gate_calibration.md]
        [--rows ROWS.jsonl] [--before ROWS_BEFORE.jsonl]

Packs and questions: benchmarks/corpora.py. In-domain: the documentation questions with a
gold page (paraphrase, identifier, multihop), SciFact claims, XQuAD questions. Out of
domain: the documentation sets' adjacent-but-absent questions (kind "absent"), the
adjacent questions of benchmarks/data/ood_questions.jsonl for SciFact and XQuAD, and its
unrelated questions (asked of every pack). Everything is marked dev or test.

Each question is searched once (gate rule and later stages off); the gate's signals
(gate.SIGNALS) come from `SearchResult.gate`. On dev, a logistic model is fitted (L2, over
gate.FITTED_SIGNALS; `small` keeps the weight benchmarks/gate_small_packs.py chose; every
(corpus, in/out) group weighted equally), and the cut is the highest probability at which
the in-domain dev questions gated, averaged over the corpora, stay within `--max-false`
(4%; the target is 5% on test). Test questions never fit or choose anything.
Printed: the fitted parameters (for gate.CALIBRATED), then per corpus and split the share
gated of in-domain, absent and unrelated questions, with 95% bootstrap intervals, for the
gate fitted here, gate.CALIBRATED, the previous gate (PREVIOUS) and the old rule (best
similarity >= the model's threshold). `--before ROWS`: the `--rows` file of the code before
a change of the signals' text rules, on the same packs, scored with the gate shipped then
(BEFORE) in the same tables.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, corpora  # noqa: E402
from benchmarks.gate_history import BEFORE, PREVIOUS  # noqa: E402

SIGNAL_OPTIONS = {"gate_threshold": -1.0, "multi_doc": False, "graph_facts": False,
                  "fewshot": False, "use_cache": False}
GROUPS = ("in", "absent", "unrelated")
CUTS = [round(0.05 + i / 100, 2) for i in range(91)]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def collect(corpus, splits: tuple[str, ...] = ("dev", "test")) -> list[dict]:
    """One row per question of `splits`: corpus, split, group (in / absent / unrelated),
    signals, best similarity, the manifest's verdict."""
    from packs import KnowledgePack

    rows = []
    with KnowledgePack.open(corpus.built.pack_dir) as pack:
        t0 = time.perf_counter()
        for group, by_split in (("in", corpus.in_domain), ("absent", corpus.absent),
                                ("unrelated", corpus.unrelated)):
            for split, questions in by_split.items():
                for q in questions if split in splits else ():
                    r = pack.search(q.question, **SIGNAL_OPTIONS)
                    rows.append({"corpus": corpus.name, "split": split, "group": group,
                                 "signals": r.gate["signals"], "best": r.best_similarity or 0.0,
                                 "manifest": bool(r.gate["calibrated_passed"]),
                                 "base": pack.manifest.embedding.gate_threshold,
                                 "question": q.question})
        log(f"{corpus.name}: {len(rows)} questions searched in "
            f"{time.perf_counter() - t0:.0f} s")
    return rows


def fit(rows: list[dict], names: tuple[str, ...], l2: float = 1e-2, steps: int = 4000,
        lr: float = 0.5) -> tuple[dict[str, float], float]:
    """Logistic regression (in-domain = 1) by gradient descent on standardised signals,
    each (corpus, label) group weighted equally; (weights, bias) on the raw scale."""
    import numpy as np

    x = np.array([[r["signals"][n] for n in names] for r in rows], dtype=float)
    y = np.array([r["group"] == "in" for r in rows], dtype=float)
    w = group_weights(rows)
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = (x - mu) / sd
    beta, bias = np.zeros(len(names)), 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(z @ beta + bias)))
        g = (p - y) * w
        beta -= lr * (z.T @ g + l2 * beta)
        bias -= lr * g.sum()
    raw = beta / sd
    return ({n: round(float(v), 3) for n, v in zip(names, raw)},
            round(float(bias - (beta * mu / sd).sum()), 3))


def group_weights(rows: list[dict]):
    """One weight per row, summing to 1, each (corpus, in-domain or not) group's rows
    sharing an equal part: no corpus or class dominates a fit."""
    import numpy as np

    sizes = Counter((r["corpus"], r["group"] == "in") for r in rows)
    w = np.array([1.0 / sizes[(r["corpus"], r["group"] == "in")] for r in rows])
    return w / w.sum()


def choose_cut(rows: list[dict], weights, bias, max_false: float) -> float:
    """The highest cut at which the in-domain questions gated, averaged over the corpora
    (each corpus counts once), stay within `max_false` (rows are dev rows)."""
    from packs.retrieval.gate import probability

    return cut_for(rows, lambda r: probability(r["signals"], weights, bias), max_false)


def cut_for(rows: list[dict], prob, max_false: float) -> float:
    """`choose_cut` for any model: `prob(row)` is its probability that a row is in-domain."""
    corpora_in: dict[str, list[float]] = {}
    for r in rows:
        if r["group"] == "in":
            corpora_in.setdefault(r["corpus"], []).append(prob(r))

    def mean_false(cut: float) -> float:
        return sum(sum(p < cut for p in ps) / len(ps) for ps in corpora_in.values()) / len(
            corpora_in)

    ok = [c for c in CUTS if mean_false(c) <= max_false]
    return max(ok) if ok else CUTS[0]


def rate_cells(rows: list[dict], passed) -> dict[tuple[str, str], str]:
    """(corpus, group) → "share gated [95% bootstrap interval]" (`common.interval`)."""
    out: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        out.setdefault((r["corpus"], r["group"]), []).append(float(not passed(r)))
    return {k: common.interval(v, ".1%") for k, v in out.items()}


def rates(rows: list[dict], passed) -> dict[tuple[str, str], tuple[float, int]]:
    """(corpus, group) → (share gated, count)."""
    out: dict[tuple[str, str], list[bool]] = {}
    for r in rows:
        out.setdefault((r["corpus"], r["group"]), []).append(not passed(r))
    return {k: (sum(v) / len(v), len(v)) for k, v in out.items()}


def fitted_rates(train: list[dict], scored: list[dict], fitter, max_false: float) -> dict:
    """The rates of `scored` (see `rates`) under weights fitted on `train` (`fitter(train)`
    → weights, bias) at the cut chosen on `train` (`choose_cut`)."""
    from packs.retrieval.gate import probability

    weights, bias = fitter(train)
    return cut_rates(train, scored, lambda r: probability(r["signals"], weights, bias),
                     max_false)


def cut_rates(train: list[dict], scored: list[dict], prob, max_false: float) -> dict:
    """The rates of `scored` (see `rates`) for any model, `prob(row)` its probability that
    a row is in-domain, at the cut chosen on `train` (`cut_for`)."""
    cut = cut_for(train, prob, max_false)
    return rates(scored, lambda r: prob(r) >= cut)


def gated_cell(got: dict, corpus: str) -> str:
    """'in-domain gated / absent gated' of one corpus from `rates`, "-" for a group it lacks."""
    return " / ".join(f"{got[(corpus, g)][0]:.1%}" if (corpus, g) in got else "-"
                      for g in ("in", "absent"))


def per_corpus_cut_lines(rows: list[dict], names: list[str], weights, bias,
                         max_false: float) -> list[str]:
    """The most a per-pack cut could do: each corpus's own cut, the highest that gates at
    most `max_false` of ITS dev in-domain questions (an oracle a build could only
    approximate), scored on its test split, with the weights given."""
    from packs.retrieval.gate import probability

    lines = ["## one cut per corpus (oracle: fitted on each corpus's own dev questions)", "",
             "| corpus | cut | test in-domain gated | test absent gated |", "|---|---|---|---|"]
    for name in names:
        cut = choose_cut([r for r in rows if r["corpus"] == name and r["split"] == "dev"],
                         weights, bias, max_false)
        got = rates([r for r in rows if r["corpus"] == name and r["split"] == "test"],
                    lambda r, c=cut: probability(r["signals"], weights, bias) >= c)
        lines.append(f"| {name} | {cut} | {got.get((name, 'in'), (0.0,))[0]:.3f} | "
                     f"{got.get((name, 'absent'), (0.0,))[0]:.3f} |")
    return [*lines, ""]


def same_cut_lines(rows: list[dict], names: list[str], gates: dict[str, tuple]) -> list[str]:
    """Test in-domain gated / absent gated per corpus for each gate (label → weights, bias)
    over a range of cuts: two sets of weights compared at equal cuts, apart from where
    each one's calibration put its cut."""
    from packs.retrieval.gate import probability

    test = [r for r in rows if r["split"] == "test"]
    table = []
    for label, (weights, bias) in gates.items():
        for cut in (0.34, 0.38, 0.42, 0.46):
            got = rates(test, lambda r, w=weights, b=bias, c=cut:
                        probability(r["signals"], w, b) >= c)
            table.append((f"{label}, cut {cut}", {name: gated_cell(got, name)
                                                  for name in names}))
    return ["## test split at equal cuts (in-domain gated / absent gated)", "",
            common.table(table, names), ""]


def loco_lines(rows: list[dict], names: list[str], max_false: float) -> list[str]:
    """Leave one corpus out: fit weights and cut on the other corpora's dev questions, score
    the left-out corpus (how the gate does on a pack it was not fitted on), for the current
    signals and the previous gate's (PREVIOUS) side by side."""
    from packs.retrieval import gate

    if len(names) < 2:
        return []
    sets = {"current signals": tuple(gate.FITTED_SIGNALS),
            f"{PREVIOUS['version']} signals": tuple(PREVIOUS["weights"])}
    table = []
    for held in names:
        train = [r for r in rows if r["split"] == "dev" and r["corpus"] != held]
        m: dict[str, object] = {}
        for label, signal_names in sets.items():
            got = fitted_rates(train, [r for r in rows if r["corpus"] == held],
                               lambda t, n=signal_names: fit(t, n), max_false)
            m[f"{label}: in gated"] = got[(held, "in")][0]
            m[f"{label}: absent gated"] = got.get((held, "absent"), (None, 0))[0]
        held_splits = " + ".join(sorted({r["split"] for r in rows if r["corpus"] == held}))
        table.append((f"{held} left out ({held_splits})", m))
    cols = [f"{k}: {g}" for k in sets for g in ("in gated", "absent gated")]
    return ["## leave one corpus out (fitted on the other corpora's dev questions)", "",
            common.table(table, cols), ""]


def model_family_lines(rows: list[dict], names: list[str], max_false: float) -> list[str]:
    """Other model families on the same signals (scikit-learn, installed with the build's
    sentence-transformers): each fitted on dev with the groups weighted as `fit` weights
    them, its cut chosen as `choose_cut` chooses, scored on test and leaving one corpus out
    as `loco_lines` does. Does a non-linear model find what the logistic one misses?"""
    import numpy as np
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    from packs.retrieval.gate import FITTED_SIGNALS, probability

    families = {
        "gradient-boosted trees (depth 3)": lambda: HistGradientBoostingClassifier(
            max_depth=3, max_iter=150, learning_rate=0.05, min_samples_leaf=20, random_state=0),
        "random forest (300 trees)": lambda: RandomForestClassifier(
            n_estimators=300, min_samples_leaf=5, random_state=0),
        "MLP (16 hidden)": lambda: MLPClassifier(hidden_layer_sizes=(16,), alpha=1e-2,
                                                 max_iter=3000, random_state=0),
    }

    def matrix(subset: list[dict]):
        return np.array([[r["signals"][n] for n in FITTED_SIGNALS] for r in subset])

    every = matrix(rows)

    def fitted(make, train: list[dict]):
        x = matrix(train)
        scaler = StandardScaler().fit(x)
        y = np.array([r["group"] == "in" for r in train], dtype=float)
        model = make()
        # MLPClassifier takes no sample weights: it sees the groups as they come.
        kwargs = {} if isinstance(model, MLPClassifier) else {
            "sample_weight": group_weights(train) * len(train)}
        model.fit(scaler.transform(x), y, **kwargs)
        probs = dict(zip(map(id, rows), model.predict_proba(scaler.transform(every))[:, 1]))
        return lambda r: probs[id(r)]

    def logistic(train: list[dict]):
        weights, bias = fit(train, FITTED_SIGNALS)
        return lambda r: probability(r["signals"], weights, bias)

    fitters = {"logistic (`fit`, as calibrated above)": logistic,
               **{label: lambda train, m=make: fitted(m, train)
                  for label, make in families.items()}}
    dev = [r for r in rows if r["split"] == "dev"]
    test = [r for r in rows if r["split"] == "test"]
    table = []
    for label, fitter in fitters.items():
        got = cut_rates(dev, test, fitter(dev), max_false)
        m: dict[str, object] = {f"{n} test": gated_cell(got, n) for n in names}
        for held in names if len(names) > 1 else ():
            train = [r for r in dev if r["corpus"] != held]
            left = cut_rates(train, [r for r in rows if r["corpus"] == held], fitter(train),
                             max_false)
            m[f"{held} left out"] = gated_cell(left, held)
        table.append((label, m))
    cols = [f"{n} test" for n in names] + ([f"{n} left out" for n in names]
                                           if len(names) > 1 else [])
    return ["## model families on the same signals (in-domain gated / absent gated)", "",
            common.table(table, cols), ""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--corpus", action="append", choices=corpora.CORPORA)
    ap.add_argument("--max-false", type=float, default=0.04,
                    help="in-domain false abstention allowed on dev, mean over the corpora")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--model-families", action="store_true",
                    help="also fit other model families (trees, forest, MLP) on the signals")
    ap.add_argument("--before", type=Path, default=None,
                    help="JSONL rows (--rows) searched with the code before a change of the "
                         "signals' text rules: scored with BEFORE's parameters beside this run")
    ap.add_argument("--rows", type=Path, default=None,
                    help="JSONL of the searched questions' signals: written after searching, "
                         "or read instead of searching when it exists (refits are cheap)")
    ap.add_argument("--split", choices=("dev", "both"), default="both",
                    help="dev: search and report the dev questions only, never the test "
                         "split (what `make bench` runs); both (default): fit on dev, report both")
    args = ap.parse_args(argv)
    splits = ("dev",) if args.split == "dev" else ("dev", "test")
    names = [n for n in (args.corpus or corpora.CORPORA) if corpora.available(args.data, n)]
    if not names:
        print(f"skipped: no benchmark corpus under {args.data} (pass --data DIR)")
        return 0

    from packs.retrieval import gate

    rows: list[dict] = []
    if args.rows and args.rows.is_file():
        rows = [r for r in corpora.load_rows(args.rows)
                if r["corpus"] in names and r["split"] in splits]
        log(f"{len(rows)} questions' signals read from {args.rows}")
    else:
        for name in names:
            rows += collect(corpora.load(args.data, name, args.work), splits)
        if args.rows:
            args.rows.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    dev = [r for r in rows if r["split"] == "dev"]
    shipped = gate.params_for(gate.MINILM)
    # `small` is 0 on all four packs (none is a small technical one): it keeps the weight
    # benchmarks/gate_small_packs.py chose, which moves nothing here.
    weights, bias = fit(dev, gate.FITTED_SIGNALS)
    weights["small"] = shipped["weights"].get("small", 0.0)
    cut = choose_cut(dev, weights, bias, args.max_false)
    rules = {
        "calibrated (this run)": lambda r: gate.probability(r["signals"], weights, bias) >= cut,
        "shipped parameters (gate.CALIBRATED)": lambda r: gate.probability(
            r["signals"], shipped["weights"], shipped["bias"]) >= shipped["cut"],
        f"previous gate ({PREVIOUS['version']}, {len(PREVIOUS['weights'])} signals)":
            lambda r: gate.probability(r["signals"], PREVIOUS["weights"],
                                       PREVIOUS["bias"]) >= PREVIOUS["cut"],
        "best similarity >= model threshold": lambda r: r["best"] >= r["base"],
    }
    scored = {label: (rows, rule) for label, rule in rules.items()}
    if args.before:
        before = [r for r in corpora.load_rows(args.before) if r["corpus"] in names]
        scored = {f"{BEFORE['version']} on the code before (--before)": (before, lambda r: (
            gate.probability(r["signals"], BEFORE["weights"], BEFORE["bias"])
            >= BEFORE["cut"])), **scored}
    lines = [common.machine_line(), "",
             f"questions: {len(rows)} ({len(dev)} dev) over {', '.join(names)}",
             f"fitted on dev: weights {weights}, bias {bias}, cut {cut} (highest cut with at "
             f"most {args.max_false:.0%} of the in-domain dev questions gated, mean over the "
             "corpora); cells: share gated [95% bootstrap interval over the questions]", ""]
    for split in splits:
        table = []
        for label, (subset, rule) in scored.items():
            got = rate_cells([r for r in subset if r["split"] == split], rule)
            m: dict[str, object] = {}
            for name in names:
                for group, col in (("in", "in-domain gated"), ("absent", "absent gated"),
                                   ("unrelated", "unrelated gated")):
                    if (name, group) in got:
                        m[f"{name} {col}"] = got[(name, group)]
            table.append((label, m))
        counts = rates([r for r in rows if r["split"] == split], lambda r: True)
        lines += [f"## {split} (n: " + ", ".join(f"{c} {g} {n}" for (c, g), (_, n)
                                                 in sorted(counts.items())) + ")", ""]
        for name in names:
            cols = [f"{name} {c}" for c in ("in-domain gated", "absent gated", "unrelated gated")]
            lines += [common.table([(label, {c: m.get(c) for c in cols}) for label, m in table],
                                   cols), ""]
    if "test" in splits:
        lines += same_cut_lines(rows, names, {
            "this run's weights": (weights, bias),
            f"{PREVIOUS['version']} weights": (PREVIOUS["weights"], PREVIOUS["bias"])})
    lines += loco_lines(rows, names, args.max_false)
    if "test" in splits:
        lines += per_corpus_cut_lines(rows, names, weights, bias, args.max_false)
    if args.model_families and "test" in splits:
        lines += model_family_lines(rows, names, args.max_false)
    lines.append(f'gate.CALIBRATED[model] = {{"weights": {weights}, "bias": {bias}, '
                 f'"cut": {cut}}}')
    text = "\n".join(lines)
    common.print_report(text, args.out, "Confidence-gate calibration", "gate_calibration.py", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
