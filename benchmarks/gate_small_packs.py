"""The confidence gate on small documentation packs: choose the weight of its `small`
signal (packs/retrieval/gate.py) on dev, report test.

    python benchmarks/gate_small_packs.py [--data ../shared/data] [--work out/bench/small]
        [--max-false 0.04] [--out benchmarks/results/gate_small_packs.md]

The gate is calibrated on packs of 1,791 sections or more (benchmarks/gate_calibration.py).
A user's pack is often much smaller. Each small pack here is cut from the Kubernetes docs or
the Rust book: the gold pages of N in-domain questions of one split, sampled with a seed,
plus F other pages of the corpus, built with the offline extractor (cached like the other
benchmark packs). Asked of it: those N questions (in-domain) and every adjacent-but-absent
question of the same split. Packs: N / F = 20 / 10 and 8 / 2, seeds 1 and 2, per corpus and
split (8 dev packs, 8 test packs; 130-620 sections). For comparison, small prose packs cut
from SciFact the same way (N / F = 40 / 60 and 15 / 15 abstracts: the gold abstracts of N
claims, F others), asked those claims and the adjacent SciFact questions of
benchmarks/data/ood_questions.jsonl: `small` is 0 in prose, so their rows show the gate as
it is there.

The shipped weights are kept but `small`'s: for each candidate weight the share of
in-domain and absent questions gated, per corpus and split. The weight chosen is the
smallest at which each corpus's dev in-domain questions gated stay within `--max-false`
(the calibration's own 4%; the documentation packs only, the ones it applies to), so that
the gate gives up no more abstention than it must.

Then, on dev only, whether prose should get the correction too: SciFact's dev packs scored
with a prose lift, weight × ln(limit / sections) (sections counted as at least
SMALLEST_MEASURED), for the technical packs' limit (SMALL_PACK) and for one below XQuAD's
312 sections (PROSE_LIMIT, so that no calibration pack moves). Nothing is chosen from it.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, corpora  # noqa: E402
from benchmarks.gate_calibration import SIGNAL_OPTIONS  # noqa: E402

CORPORA = ("kubernetes", "rust-book", "scifact")
TECHNICAL = ("kubernetes", "rust-book")
SPECS = {  # corpus → (questions, filler pages, seed) of its small packs
    "kubernetes": ((20, 10, 1), (20, 10, 2), (8, 2, 1), (8, 2, 2)),
    "rust-book": ((20, 10, 1), (20, 10, 2), (8, 2, 1), (8, 2, 2)),
    "scifact": ((40, 60, 1), (40, 60, 2), (15, 15, 1), (15, 15, 2)),
}
WEIGHTS = tuple(i / 4 for i in range(9))  # 0 .. 2
PROSE_WEIGHTS = tuple(i / 4 for i in range(13))  # 0 .. 3
# A prose lift that stops below XQuAD's pack (312 sections), a calibration pack.
PROSE_LIMIT = 300


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def question_rows(name: str, data: Path, split: str):
    """({page path: Page}, in-domain rows with gold page paths, absent rows) of `name`."""
    if name == "scifact":
        from benchmarks import scifact

        corpus_rows, queries, test_qrels, dev_qrels = scifact.load(data / "scifact")
        by_path = {p.path.lstrip("/"): p for p in scifact.pages(corpus_rows)}
        qrels = dev_qrels if split == "dev" else test_qrels
        in_domain = [{"question": queries[q], "gold": [f"doc/{d}" for d in rel]}
                     for q, rel in sorted(qrels.items(), key=lambda kv: int(kv[0]))
                     if q in queries]
        absent = [r for r in corpora.load_rows(corpora.OOD_FILE)
                  if r["target"] == name and r["split"] == split]
        return by_path, in_domain, absent
    _, questions_file, _ = corpora.DOCS[name]
    by_path = {p.path.lstrip("/"): p for p in corpora.doc_pages(data, name)}
    rows = corpora.load_rows(corpora.DATA_DIR / questions_file)
    in_domain = [r for r in rows if r["kind"] != "absent" and r["split"] == split]
    absent = [r for r in rows if r["kind"] == "absent" and r["split"] == split]
    return by_path, in_domain, absent


def sample(by_path: dict, in_domain: list[dict], n_questions: int, filler: int, seed: int):
    """(pages, chosen in-domain rows) of one small pack cut from the pages `by_path`."""
    in_domain = [r for r in in_domain if all(g in by_path for g in r["gold"])]
    rng = random.Random(seed)
    chosen = rng.sample(in_domain, n_questions)
    keep = {g for r in chosen for g in r["gold"]}
    keep |= set(rng.sample([p for p in by_path if p not in keep], filler))
    return [by_path[p] for p in sorted(keep)], chosen


def collect(data: Path, work: Path) -> list[dict]:
    """One row per (small pack, question): corpus, split, group, sections, signals."""
    from packs import KnowledgePack

    rows = []
    for split in ("dev", "test"):
        for name in CORPORA:
            by_path, in_domain, absent = question_rows(name, data, split)
            for n_q, filler, seed in SPECS[name]:
                pages, chosen = sample(by_path, in_domain, n_q, filler, seed)
                built = common.build_cached(f"{name}-{n_q}-{filler}-{seed}-{split}", pages, work)
                sections = built.counts["sections"]
                t0 = time.perf_counter()
                with KnowledgePack.open(built.pack_dir) as pack:
                    for group, questions in (("in", chosen), ("absent", absent)):
                        for q in questions:
                            r = pack.search(q["question"], **SIGNAL_OPTIONS)
                            rows.append({"corpus": name, "split": split, "group": group,
                                         "pack": f"{n_q}/{filler}/{seed}",
                                         "sections": sections, "signals": r.gate["signals"]})
                log(f"{name} {split} {n_q}/{filler} seed {seed}: {len(pages)} pages, "
                    f"{sections} sections, {len(chosen) + len(absent)} questions in "
                    f"{time.perf_counter() - t0:.0f} s")
    return rows


def gated_share(rows: list[dict], weight: float, prose: float = 0.0,
                limit: int | None = None) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(corpus, split, group) → (gated, asked) with the shipped parameters and `small`
    weighing `weight`; the rows of prose packs (corpora not in TECHNICAL) get a lift of
    `prose` × ln(`limit` (gate.SMALL_PACK) / sections), sections at least
    gate.SMALLEST_MEASURED, 0 from `limit` sections up."""
    from packs.retrieval import gate

    params = gate.params_for(gate.MINILM)
    weights = {**params["weights"], "small": weight, "prose_small": prose}
    limit = gate.SMALL_PACK if limit is None else limit
    out: dict[tuple[str, str, str], list[int]] = {}
    for r in rows:
        lift = 0.0
        if r["corpus"] not in TECHNICAL and 0 < r["sections"] < limit:
            lift = math.log(limit / max(r["sections"], gate.SMALLEST_MEASURED))
        values = {**r["signals"], "prose_small": lift}
        cell = out.setdefault((r["corpus"], r["split"], r["group"]), [0, 0])
        cell[0] += gate.probability(values, weights, params["bias"]) < params["cut"]
        cell[1] += 1
    return {k: (g, n) for k, (g, n) in out.items()}


def cell(got: dict, corpus: str, split: str) -> str:
    """"gated/asked = share / absent share" of one corpus and split of `gated_share`."""
    gi, ni = got[(corpus, split, "in")]
    ga, na = got[(corpus, split, "absent")]
    return f"{gi}/{ni} = {gi / ni:.1%} / {ga / na:.1%}"


def prose_lines(rows: list[dict]) -> list[str]:
    """The dev-only prose study of the module docstring: SciFact's dev packs, in-domain
    gated / absent gated at each prose weight, for both limits."""
    from packs.retrieval import gate

    dev = [r for r in rows if r["split"] == "dev" and r["corpus"] not in TECHNICAL]
    limits = (gate.SMALL_PACK, PROSE_LIMIT)
    cols = [f"prose lift below {n} sections" for n in limits]
    table = []
    for weight in PROSE_WEIGHTS:
        cells: dict[str, object] = {}
        for col, limit in zip(cols, limits):
            got = gated_share(dev, 0.0, weight, limit)
            cells[col] = ", ".join(f"{c} {cell(got, c, 'dev')}"
                                   for c in sorted({r["corpus"] for r in dev}))
        table.append((f"{weight}" + (" (shipped: none)" if weight == 0 else ""), cells))
    xquad = math.log(gate.SMALL_PACK / 312)
    return ["prose packs, dev only (nothing chosen from it): in-domain gated / adjacent-"
            "but-absent gated with a prose lift of weight × ln(limit / sections); below "
            f"{gate.SMALL_PACK} sections XQuAD's calibration pack (312) would be lifted by "
            f"{xquad:.2f} × weight, not measured here", "", common.table(table, cols), ""]


def choose(rows: list[dict], max_false: float) -> float:
    """The smallest weight at which each corpus's dev in-domain questions gated stay within
    `max_false` (the largest weight tried when none does)."""
    for weight in WEIGHTS:
        got = gated_share([r for r in rows if r["split"] == "dev" and r["corpus"] in TECHNICAL],
                          weight)
        if all(g / n <= max_false for (_, _, group), (g, n) in got.items() if group == "in"):
            return weight
    return WEIGHTS[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK / "small")
    ap.add_argument("--max-false", type=float, default=0.04)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if not all(corpora.available(args.data, n) for n in CORPORA):
        print(f"skipped: the Kubernetes docs, the Rust book and SciFact are not all under "
              f"{args.data}")
        return 0
    from packs.retrieval import gate

    rows = collect(args.data, args.work)
    chosen = choose(rows, args.max_false)
    shipped = gate.params_for(gate.MINILM)["weights"].get("small", 0.0)
    sizes = sorted({(r["corpus"], r["split"], r["pack"], r["sections"]) for r in rows})
    lines = [common.machine_line(), "",
             "packs (corpus, split, questions/filler pages/seed, sections): "
             + "; ".join(f"{c} {s} {p} {n}" for c, s, p, n in sizes), "",
             f"weight of `small` chosen on dev: {chosen} (smallest with at most "
             f"{args.max_false:.0%} of each corpus's dev in-domain questions gated); "
             f"shipped: {shipped}", "",
             "in-domain gated / adjacent-but-absent gated, the shipped parameters with "
             "`small` at each weight:", ""]
    cols = [f"{c} {s}" for s in ("dev", "test") for c in CORPORA]
    table = []
    for weight in WEIGHTS:
        got = gated_share(rows, weight)
        cells: dict[str, object] = {}
        for s in ("dev", "test"):
            for c in CORPORA:
                cells[f"{c} {s}"] = cell(got, c, s)
        label = f"{weight}" + (" (gate-v6: none)" if weight == 0 else "") + (
            " (shipped)" if weight == shipped else "")
        table.append((label, cells))
    lines += [common.table(table, cols), ""]
    lines += prose_lines(rows)
    common.print_report("\n".join(lines), args.out, "The gate on small packs",
                        "gate_small_packs.py", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
