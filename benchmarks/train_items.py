"""Fit the whole-pack answer's item model (packs/retrieval/whole_pack_rank.py) on dev
questions, and say how well it picks items on questions it was not fitted on.

    python benchmarks/train_items.py [--data ../shared/data] [--work-answers out/bench]
        [--work-whole out/bench] [--folds 8] [--no-write]
        [--weights packs/retrieval/item_weights.json] [--with-spent]
        [--out benchmarks/results/issue48_train_items.md]

Questions (dev splits only; no test split is read): the whole-pack dev rows of the
Kubernetes docs, the Rust book and the Cargo book (benchmarks/data/*_whole_pack.jsonl,
their packs under --work-whole), and the answer dev rows (benchmarks/data/*_answers.jsonl,
packs under --work-answers) that ask() reads as list or across questions; with
--with-spent also the spent whole-pack rows (the test splits benchmarks/ledger.jsonl
records a blind run of: their figures stand there; `spent_rows`), reported apart. For each: one
search, the offline answer's passages (packs/answer.py `passages`), the item candidates
(packs/retrieval/whole_pack.py `candidates`), their FEATURES, and each candidate's label:
whether its name or quote holds a gold item (an answer string) the passages do not.

The model is a logistic regression (numpy, Newton's method, L2 penalty) over standardised
features. The report gives, by --folds cross-validation by question (no question is scored
by a model fitted on it), per corpus and question source: the recall of gold items (for
answer rows the containment of every answer string) and the words of the passages plus the
listed items (each quote cut to the clause the answer shows) and the less likely items'
names (whole_pack_rank's `more`), for each `alpha` of the selection grid, beside the hand order in the same
run (the old rule: the candidates in score order, none under 0.12 of the best, at most
20). `alpha` is chosen as the largest whose mean cross-validated whole-pack recall is
within ALPHA_SLACK of the best; the model fitted on every question ships with it.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import answer_eval, common, corpora, doc_answers  # noqa: E402
from benchmarks.answer_eval import fold  # noqa: E402
from benchmarks.whole_pack import recall  # noqa: E402
from packs.retrieval import whole_pack_rank as rank  # noqa: E402
from packs.retrieval.reader import Model  # noqa: E402
from packs.retrieval.whole_pack_items import shown_span  # noqa: E402

CORPORA = ("kubernetes", "rust-book", "cargo-book")
WHOLE = {"kubernetes": "k8s_whole_pack.jsonl", "rust-book": "rust_whole_pack.jsonl",
         "cargo-book": "cargo_whole_pack.jsonl"}
# Whole-pack test rounds of a corpus, beside WHOLE's own test split: spent once the ledger
# records their run (`spent_rows`); a round frozen but not yet run is read by nothing here.
ROUNDS = {c: tuple(sorted((p.name for p in corpora.DATA_DIR.glob(f"{prefix}_whole_pack_r*.jsonl")),
                          key=lambda n: int(n.rsplit("_r", 1)[1].split(".")[0])))
          for c, prefix in (("kubernetes", "k8s"), ("rust-book", "rust"))}
# The second and third whole-pack dev sets, written later (--more-dev fits on them too).
MORE_DEV = {"kubernetes": ("k8s_whole_pack_dev2.jsonl", "k8s_whole_pack_dev3.jsonl"),
            "rust-book": ("rust_whole_pack_dev2.jsonl", "rust_whole_pack_dev3.jsonl")}
ALPHAS = (0.0, 0.1, 0.15, 0.2, 0.3)
ALPHA_SLACK = 0.005
L2 = 1.0
HAND_FLOOR, HAND_MAX = 0.12, 20


@dataclass
class Row:
    id: str
    corpus: str
    source: str  # "whole" or "spent" (a whole-pack row: item recall), "answer" (containment)
    golds: list  # groups of alternatives
    above: str  # the passages' text
    pages: str  # the page items' text (an across question's, listed before the model's)
    items: list  # the candidates (whole_pack_items.Item)
    x: np.ndarray
    y: np.ndarray


def _item_text(items, more=()) -> str:
    """The listed items as the answer shows them (each quote cut to the clause that names
    the item: whole_pack_items.clause), then the less likely items' names."""
    listed = []
    for i in items:
        a, b = shown_span([i])
        listed.append(f"{i.name}: {i.section.content[a:b]}")
    return "\n".join([*listed, ", ".join(i.name for i in more)])


def spent_rows(corpus: str) -> list[dict]:
    """The whole-pack test rows of `corpus` whose split benchmarks/ledger.jsonl records a
    blind run of (WHOLE's test split and ROUNDS): spent, their figures standing there."""
    from benchmarks import ledger

    ran = ledger.ran_splits()
    out = []
    for name in (WHOLE[corpus], *ROUNDS.get(corpus, ())):
        if f"{name}:split=test" in ran:
            out += [r for r in corpora.load_rows(corpora.DATA_DIR / name)
                    if r.get("split") == "test"]
    return out


def collect(pack, rows: list[dict], corpus: str, source: str, log) -> list[Row]:
    from packs import answer
    from packs.retrieval import whole_pack
    from packs.retrieval.question_kinds import question_kind

    out = []
    for n, r in enumerate(rows, start=1):
        kind = question_kind(r["question"])
        if kind not in ("list", "across"):
            continue
        result = pack.search(r["question"], use_cache=False)
        if result.gated:
            continue
        text, quotes, _ = answer.passages(pack, result)
        above = "\n".join(q for _, q in quotes)
        per_page, found = whole_pack.candidates(pack, result, kind)
        sims = whole_pack.section_sims(pack, result, found) if found else {}
        golds = ([g["alternatives"] for g in r["items"]] if source != "answer"
                 else r["answers"])
        shown = fold(text)
        new = [[fold(a) for a in alts if fold(a) not in shown] for alts in golds]
        named = [fold(f"{i.name} {i.section.content[i.start:i.end]}") for i in found]
        y = [float(any(a in n for alts in new for a in alts)) for n in named]
        out.append(Row(r["id"], corpus, source, golds, text, _item_text(per_page), found,
                       rank.features(found, r["question"], kind, above, sims),
                       np.asarray(y)))
        if n % 10 == 0:
            log(f"  {corpus} {source}: {n}/{len(rows)} questions read")
    return out


def fit(x: np.ndarray, y: np.ndarray, l2: float = L2, iters: int = 30):
    """(mean, scale, weights, bias) of an L2-penalised logistic regression."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    penalty = np.r_[np.full(len(w) - 1, l2), 0.0]
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-z @ w))
        grad = z.T @ (p - y) + penalty * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return mean, scale, w[:-1], float(w[-1])


def model_of(params, alpha: float) -> rank.ItemModel:
    mean, scale, weights, bias = params
    return rank.ItemModel(Model(rank.FEATURES, mean, scale, weights), bias,
                          rank.Limits(alpha=alpha), "fit")


def score(row: Row, text: str) -> float:
    """Item recall as benchmarks/whole_pack.py scores it, or containment as
    benchmarks/doc_answers.py does."""
    if row.source != "answer":
        return recall(text, [{"item": alts[0], "alternatives": alts} for alts in row.golds])[0]
    return float(answer_eval.contains(text, row.golds))


def outcome(row: Row, listed, more=()) -> tuple[float, int]:
    text = f"{row.above}\n{row.pages}\n{_item_text(listed, more)}"
    return score(row, text), len(text.split())


def hand(row: Row):
    top = max((i.score for i in row.items), default=1.0)
    return [i for i in row.items if i.score >= HAND_FLOOR * top][:HAND_MAX]


def picked(model: rank.ItemModel, row: Row):
    return rank.select(model, row.items, model.probability(row.x))


def cross_validate(rows: list[Row], folds: int) -> dict[float, dict[str, tuple]]:
    """alpha → row id → (score, words) of the model fitted without the row's fold."""
    dealt = sorted(rows, key=lambda r: hashlib.sha256(r.id.encode()).hexdigest())
    fold_of = {r.id: k % folds for k, r in enumerate(dealt)}
    out: dict[float, dict[str, tuple]] = {a: {} for a in ALPHAS}
    for f in range(folds):
        train = [r for r in rows if fold_of[r.id] != f and len(r.y)]
        params = fit(np.vstack([r.x for r in train]), np.concatenate([r.y for r in train]))
        for a in ALPHAS:
            model = model_of(params, a)
            for r in rows:
                if fold_of[r.id] == f:
                    out[a][r.id] = outcome(r, *picked(model, r))
    return out


def table(rows: list[Row], cv: dict[float, dict[str, tuple]],
          shipped: rank.ItemModel | None = None) -> tuple[list[str], float]:
    """The report's table (`shipped`: the model shipped before, its own alpha, a column
    beside the hand order) and the chosen alpha."""
    lines = ["| questions | corpus | n | hand order | " + ("shipped before | " if shipped else "")
             + " | ".join(f"alpha {a}" for a in ALPHAS) + " |",
             "|---|---|---|---|" + "---|" * (len(ALPHAS) + bool(shipped))]
    for source in ("whole", "spent", "answer"):
        for c in CORPORA:
            group = [r for r in rows if r.corpus == c and r.source == source]
            if not group:
                continue
            bases = [[outcome(r, hand(r)) for r in group]]
            if shipped:
                bases.append([outcome(r, *picked(shipped, r)) for r in group])
            cells = [f"{statistics.fmean(s for s, _ in base):.3f} @ "
                     f"{statistics.fmean(w for _, w in base):.0f} w" for base in bases]
            for a in ALPHAS:
                got = [cv[a][r.id] for r in group]
                cells.append(f"{statistics.fmean(s for s, _ in got):.3f} @ "
                             f"{statistics.fmean(w for _, w in got):.0f} w")
            label = {"whole": "whole-pack (item recall)", "answer": "answers (containment)",
                     "spent": "spent whole-pack test rows (item recall)"}[source]
            lines.append(f"| {label} | {c} | {len(group)} | " + " | ".join(cells) + " |")
    whole = [r for r in rows if r.source == "whole"]
    means = {a: statistics.fmean(statistics.fmean(cv[a][r.id][0] for r in whole
                                                  if r.corpus == c)
                                 for c in CORPORA if any(r.corpus == c for r in whole))
             for a in ALPHAS}
    best = max(means.values())
    chosen = max(a for a in ALPHAS if means[a] >= best - ALPHA_SLACK)
    return lines, chosen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work-answers", type=Path, default=ROOT / "out" / "bench")
    ap.add_argument("--work-whole", type=Path, default=ROOT / "out" / "bench")
    ap.add_argument("--folds", type=int, default=8)
    ap.add_argument("--weights", type=Path, default=rank.WEIGHTS_FILE)
    ap.add_argument("--out", type=Path,
                    default=ROOT / "benchmarks" / "results" / "issue48_train_items.md")
    ap.add_argument("--no-write", action="store_true", help="report only; keep the weights")
    ap.add_argument("--with-spent", action="store_true",
                    help="fit on the spent whole-pack test rows too (`spent_rows`), reported "
                         "apart")
    ap.add_argument("--more-dev", action="store_true",
                    help="fit on the second and third whole-pack dev sets too (MORE_DEV)")
    args = ap.parse_args(argv)
    if not args.no_write and args.weights.resolve() == args.out.with_suffix(".json").resolve():
        ap.error(f"--weights {args.weights} is where the results' summary of --out {args.out} "
                 "goes (the .md's .json): give the weights another name")
    log, _ = common.printing_log()
    started = time.perf_counter()
    from packs import KnowledgePack

    rows: list[Row] = []
    for c in CORPORA:
        whole = [r for name in (WHOLE[c], *(MORE_DEV.get(c, ()) if args.more_dev else ()))
                 for r in corpora.load_rows(corpora.DATA_DIR / name) if r.get("split") == "dev"]
        answers = [r for r in doc_answers.load_questions(c) if r.get("split") == "dev"]
        spent = spent_rows(c) if args.with_spent else []
        for source, work, qs in (("whole", args.work_whole, whole),
                                 ("spent", args.work_whole, spent),
                                 ("answer", args.work_answers, answers)):
            if not qs:
                continue
            corpus = corpora.load(args.data, c, work)
            with KnowledgePack.open(corpus.built.pack_dir) as pack:
                log(f"{c} {source}: reading {len(qs)} dev questions")
                rows += collect(pack, qs, c, source, log)
    n_pos = int(sum(r.y.sum() for r in rows))
    log(f"{len(rows)} list or across questions, {sum(len(r.y) for r in rows)} candidates, "
        f"{n_pos} with a new gold item; cross-validating ({args.folds} folds)")
    cv = cross_validate(rows, args.folds)
    try:  # the weights shipped before, beside the new ones (a file for other features: none)
        shipped = rank.load()
    except rank.ItemWeightsError as exc:
        shipped = None
        log(f"the item model shipped before is not compared: {exc}")
    lines, alpha = table(rows, cv, shipped)
    params = fit(np.vstack([r.x for r in rows if len(r.y)]),
                 np.concatenate([r.y for r in rows if len(r.y)]))
    model = model_of(params, alpha)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    trained = {"date": stamp, "questions": len(rows), "with_spent": args.with_spent, "more_dev": args.more_dev, "candidates": int(sum(len(r.y) for r in rows)),
               "positives": n_pos, "l2": L2, "folds": args.folds}
    report = [
        common.machine_line(),
        "",
        f"Dev questions read as list or across questions: {len(rows)}; candidates "
        f"{trained['candidates']}, of which {n_pos} name a gold item the passages do not.",
        "Each figure: the mean over the questions, the passages above plus the listed items "
        f"(words: both). Model columns by {args.folds}-fold cross-validation by question; "
        "the hand order is the rule it replaces, on the same candidates; `shipped before`: "
        "the weights packs/retrieval/item_weights.json held when this ran (in-sample on the "
        "rows it was fitted on: see its `trained`).",
        "",
        *lines,
        "",
        f"Chosen alpha: {alpha} (the largest within {ALPHA_SLACK} of the best mean "
        "whole-pack recall).",
        "",
        "Weights (standardised features): " + ", ".join(
            f"{f} {w:+.2f}" for f, w in zip(rank.FEATURES, params[2], strict=True)),
    ]
    if not args.no_write:
        import json

        args.weights.write_text(json.dumps(model.to_json(f"items-{stamp}", trained),
                                           indent=1) + "\n")
        args.out.parent.mkdir(parents=True, exist_ok=True)
    common.print_report("\n".join(report), None if args.no_write else args.out,
                        "Issue 48: the whole-pack answer's item model "
                        "(packs/retrieval/whole_pack_rank.py)", "train_items.py", argv)
    log(f"done in {time.perf_counter() - started:.0f} s: {len(rows)} questions, alpha {alpha}"
        + ("" if args.no_write else f", weights written to {args.weights}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
