"""Fit the question-kind model (packs/retrieval/question_kinds.py) on the labelled questions
of benchmarks/data, and say how well it reads questions of sets it was not fitted on.

    python benchmarks/train_kinds.py [--no-write] [--c 1.0]
        [--weights packs/retrieval/kind_weights.json]
        [--out benchmarks/results/issue48_train_kinds.md]

Labelled rows: every whole-pack set (*_whole_pack*.jsonl: its row's "list", "across" or
"overview") and every set of single-passage questions (answers, retrieval, out-of-domain,
XQuAD: "none"), dev rows and the test rows of splits benchmarks/ledger.jsonl records a
blind run of (spent: their figures stand there; an answer set's rounds are split by
test_round); a frozen split not yet run is never read. A set of LABELLED_SETS gives each
row's own label (release notes: both whole-pack and single-passage questions).
An answer row of kind "list" ("What are the three stable API kinds?") asks for a list one
passage gives: either path may answer it, so it is left out of the fit and reported apart.

The model is scikit-learn's multinomial logistic regression (L2, --c, classes weighted by
their inverse frequency) over the FEATURES of question_kinds.py; features seen in fewer
than MIN_DF questions are dropped. The report gives, for each set, whether each question is
read as a whole-pack question or not and its exact kind, by the model fitted without that
set (a whole-pack set leaves itself out; single-passage rows are split into FOLDS folds),
beside the hand rules (`rule_kind`) in the same run. The model fitted on every row ships.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, corpora, ledger  # noqa: E402
from packs.retrieval import question_kinds as qk  # noqa: E402
from packs.retrieval.whole_pack_questions import rule_kind  # noqa: E402

SINGLE_SETS = ("k8s_answers", "rust_answers", "cargo_answers", "k8s_questions", "rust_questions",
               "ood_questions", "xquad_fresh", "k8s_issue47")
# Sets whose rows carry their own label ("list", "across", "overview" or "none"): the forms
# of corpora no other set has, written as dev data. release_kinds: release notes ("What
# changed in the scheduler from release to release?", the issue's example).
LABELLED_SETS = ("release_kinds",)
MIN_DF = 2
FOLDS = 8
VERSION = "kinds-2026-12-04"


def _shown(path: Path) -> str:
    """`path` relative to the repository when it is inside it (weights written elsewhere
    to compare fits are named as given)."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def labelled_rows(data_dir: Path = corpora.DATA_DIR) -> list[dict]:
    """Each usable row as {set, id, question, label, group}; see the module docstring."""
    ran = ledger.ran_splits()
    rows = []
    for path in sorted(data_dir.glob("*.jsonl")):
        name = path.stem
        whole = "_whole_pack" in name
        if not whole and name not in SINGLE_SETS and name not in LABELLED_SETS:
            continue
        for r in corpora.load_rows(path):
            split = r.get("split")
            if split == "test" and not {f"{path.name}:split=test",
                                        f"{path.name}:test_round={r.get('test_round')}"} & ran:
                continue  # frozen (or never frozen) and not run: never read
            label, set_name, group = _label(name, split, r, whole)
            rows.append({"set": set_name, "id": r.get("id"), "question": r["question"],
                         "label": label, "group": group, "rule": rule_kind(r["question"])})
    return rows


def _label(name: str, split: str, r: dict, whole: bool) -> tuple[str, str, str]:
    """(label, set, group) of row `r` of set `name`: a whole-pack set's row its kind, held
    out with its set; a LABELLED_SETS row its own label, the set held out whole (reported
    as its whole-pack and its single-passage rows); any other row "none" (or "list?"), in
    one of FOLDS groups."""
    if name in LABELLED_SETS:
        label = r["kind"]
        return (label, f"{name}:{split}:{'one' if label == qk.NONE else 'whole'}",
                f"{name}:{split}")
    if whole:
        return r["kind"], f"{name}:{split}", f"{name}:{split}"
    if name.endswith("_answers") and r.get("kind") == "list":
        label = "list?"  # either path may answer it (the module docstring)
    else:
        label = qk.NONE
    digest = int(hashlib.sha256(str(r.get("id", r["question"])).encode()).hexdigest(), 16)
    return label, f"{name}:{split}", f"single{digest % FOLDS}"


def fit(rows: list[dict], c: float):
    """(classes, intercept, {feature: weights}) of the model fitted on `rows`."""
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression

    feats = [qk.features(r["question"], r["rule"]) for r in rows]
    df: dict[str, int] = defaultdict(int)
    for f in feats:
        for k in f:
            df[k] += 1
    feats = [{k: v for k, v in f.items() if df[k] >= MIN_DF or k in ("ctx", "plurals")}
             for f in feats]
    vec = DictVectorizer()
    x = vec.fit_transform(feats)
    model = LogisticRegression(C=c, max_iter=3000, class_weight="balanced")
    model.fit(x, [r["label"] for r in rows])
    classes = [str(k) for k in model.classes_]
    coef = model.coef_
    weights = {name: tuple(round(float(coef[i, j]), 5) for i in range(len(classes)))
               for name, j in vec.vocabulary_.items()
               if max(abs(coef[i, j]) for i in range(len(classes))) >= 1e-4}
    return classes, [round(float(v), 5) for v in model.intercept_], weights


def model_of(fitted, version: str = VERSION) -> qk.KindModel:
    classes, intercept, weights = fitted
    return qk.KindModel(tuple(classes), tuple(intercept), weights, version)


def cross_validate(rows: list[dict], c: float, log) -> dict[int, str]:
    """Each fitted row's kind by a model fitted without its group; the "list?" answer rows
    by the model fitted without the single-passage fold they fall in."""
    fitted_rows = [r for r in rows if r["label"] != "list?"]
    out: dict[int, str] = {}
    groups = sorted({r["group"] for r in rows})
    for n, g in enumerate(groups, 1):
        model = model_of(fit([r for r in fitted_rows if r["group"] != g], c))
        for i, r in enumerate(rows):
            if r["group"] == g:
                out[i] = model.kind(r["question"])  # as question_kind decides
        log(f"  fold {n}/{len(groups)} ({g}) done")
    return out


def table(rows: list[dict], cv: dict[int, str]) -> list[str]:
    by_set: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_set[r["set"]].append(i)
    lines = ["| set | questions | model: whole-pack or not | model: exact kind | "
             "rules: whole-pack or not | rules: exact kind |", "|---|---|---|---|---|---|"]
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0, 0])

    def whole(k: str | None) -> bool:
        return k not in (None, qk.NONE)

    for name in sorted(by_set, key=lambda s: ("_whole_pack" not in s, s)):
        idx = by_set[name]
        rs = [rows[i] for i in idx]
        if all(r["label"] == "list?" for r in rs):
            continue
        fitted = [(i, r) for i, r in zip(idx, rs) if r["label"] != "list?"]
        want = [whole(r["label"]) for _, r in fitted]
        m = [whole(cv[i]) == w for (i, _), w in zip(fitted, want)]
        me = [cv[i] == r["label"] for i, r in fitted]
        h = [whole(r["rule"]) == w for (_, r), w in zip(fitted, want)]
        he = [(r["rule"] or qk.NONE) == r["label"] for _, r in fitted]
        n = len(fitted)
        lines.append(f"| {name} | {n} | {sum(m) / n:.3f} | {sum(me) / n:.3f} | "
                     f"{sum(h) / n:.3f} | {sum(he) / n:.3f} |")
        key = "whole-pack sets" if any(want) else "single-passage sets"
        for j, v in enumerate((n, sum(m), sum(me), sum(h), sum(he))):
            totals[key][j] += v
    for key, (n, m, me, h, he) in totals.items():
        lines.append(f"| **all {key}** | {n} | **{m / n:.3f}** | {me / n:.3f} | "
                     f"{h / n:.3f} | {he / n:.3f} |")
    amb = [(i, r) for i, r in enumerate(rows) if r["label"] == "list?"]
    if amb:
        lines += ["", f"Answer rows of kind \"list\" (left out of the fit, {len(amb)}): read as "
                  f"whole-pack questions by the model {sum(whole(cv[i]) for i, _ in amb)}, "
                  f"by the rules {sum(whole(r['rule']) for _, r in amb)}."]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--c", type=float, default=1.0, help="inverse L2 strength")
    ap.add_argument("--weights", type=Path, default=qk.WEIGHTS_FILE)
    ap.add_argument("--out", type=Path,
                    default=ROOT / "benchmarks" / "results" / "issue48_train_kinds.md")
    ap.add_argument("--no-write", action="store_true", help="report only; keep the weights")
    args = ap.parse_args(argv)
    log, _ = common.printing_log()
    started = time.perf_counter()
    rows = labelled_rows()
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        counts[r["label"]] += 1
    log(f"{len(rows)} labelled questions ({dict(counts)}); cross-validating by set")
    cv = cross_validate(rows, args.c, log)
    fitted = fit([r for r in rows if r["label"] != "list?"], args.c)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    report = [
        common.machine_line(),
        "",
        f"Labelled questions: {len(rows)} ({', '.join(f'{k} {v}' for k, v in counts.items())}). "
        "Model columns: each set read by the model fitted without it (single-passage rows in "
        f"{FOLDS} folds); rules: `rule_kind` in the same run. \"Whole-pack or not\": the "
        "question is read as a list, across or overview question exactly when it is one.",
        "",
        *table(rows, cv),
        "",
        f"Shipped: fitted on all {sum(counts.values()) - counts.get('list?', 0)} rows, C "
        f"{args.c}, {len(fitted[2])} features"
        + ("" if args.no_write else f", written to {_shown(args.weights)}") + ".",
    ]
    if not args.no_write:
        payload = {"version": VERSION, "features_version": qk.FEATURES_VERSION,
                   "classes": fitted[0], "intercept": fitted[1],
                   "trained": {"date": stamp, "questions": len(rows) - counts.get("list?", 0),
                               "c": args.c, "min_df": MIN_DF},
                   "weights": dict(sorted(fitted[2].items()))}
        args.weights.write_text(json.dumps(payload, separators=(",", ":")) + "\n")
        qk.load.cache_clear()
        qk.question_kind.cache_clear()
    report.append(f"Done in {time.perf_counter() - started:.0f} s.")
    common.print_report("\n".join(report), args.out, "Question-kind model", "train_kinds.py",
                        argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
