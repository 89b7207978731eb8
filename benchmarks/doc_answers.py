"""Documentation answer sets: does the offline answer contain the values the docs give?

    python benchmarks/doc_answers.py [--data ../shared/data] [--work out/bench]
        [--corpus kubernetes --corpus rust-book --corpus cargo-book] [--split dev|test|both]
        [--test-round N (the test rows of round N only)]
        [--out FILE] [--questions FILE (with one --corpus: another answer set, same format)]
        [--misses] [--show-answers (dev only: each offline answer as given)]
        [--ids ID,ID,... (those dev or spent rows only, whatever their split)]

Questions: benchmarks/data/k8s_answers.jsonl (Kubernetes docs, prose subset),
benchmarks/data/rust_answers.jsonl (the Rust book) and, only when asked for with
`--corpus cargo-book`, benchmarks/data/cargo_answers.jsonl (the Cargo book as HTML, from
the Rust toolchain's docs: benchmarks/corpora.py), written for issue 34 by reading the
pages: each has its gold page(s) and `answers`, groups of short strings the answer must
contain (a flag, a setting, a number, a name, a list's items; any alternative of a group
counts, every group must be there), split dev / test by page. Each reported test split
was retired afterwards (`retired_test`: into dev, or `spent` where a fresh split shares its
pages) and a fresh one written from the pages alone by someone who never ran the product
on them: ids 201+ (round 2), 301+ (round 3), 401+ (round 4), 451+ (`test_round` 5), then
601+ (`test_round` 6, frozen in benchmarks/ledger.jsonl before issue 47's work and run once:
spent in the ledger, though its rows still say "test"); 701+ are dev questions added for issue
47, each with a `class` (identifier, paraphrase, two-page); 901+ (Kubernetes, `test_round` 7,
frozen 2026-11-29 on pages no earlier row uses: `--split test --test-round 7`); Kubernetes
941+ and Rust book 831+ are dev questions that set a scene before they ask one or two
things ("I set X on a Service. Which flag ..., and on which path ...?"; class `two-part`
when both answers are on one page), written 2026-11-29 from dev pages alone; 1001+
(Kubernetes, `test_round` 8, frozen 2026-11-29 evening on pages no earlier answer row uses,
before the reader's features v8 were fitted: `--split test --test-round 8`); Rust book 1001+
(`test_round` 7, frozen at the same time; no page is left that no answer row uses, so its
40 questions ask facts no earlier row asks, on 29 pages that dev rows also use); Kubernetes
1101+ (`test_round` 9) and 1201+ (`test_round` 10, on the last 15 pages no answer row used),
each frozen before the change it judged; Kubernetes 1301+ (`test_round` 11) and Rust book 1101+
(`test_round` 8), class `compare` ("What's the difference between A and B?", "A vs B", "How
does A differ from B?"), written 2026-11-30 by a helper from the pages alone (pages answer rows
already use; the pairs no row asks), frozen before the lead for each thing
(packs/retrieval/compare.py) was run on them; Kubernetes 1321+ (`test_round` 12) and Rust book
1121+ (`test_round` 9), a second compare round written the same way with other pairs and
more phrasings ("What distinguishes A from B?", "When would I use A rather than B?"), frozen
after the first was run and before the product was run on them; Kubernetes 1401+
(`test_round` 13) and Rust book 1201+ (`test_round` 10), 20 questions each of every class
(paraphrase with "what happens when" and "why", identifier, two-page), written by helpers
from the pages alone and frozen before the 2026-11-30 afternoon's answer changes; Kubernetes
1501+ (`test_round` 14) and Rust book 1301+ (`test_round` 11), written the same way with some
facts right after a table, code block or listing, frozen before the session's final code
was run on them; Kubernetes 1601+ (`test_round` 15) and Rust book 1401+ (`test_round` 12),
20 of every class again, frozen before the 2026-11-30 evening's reader refit was measured.
The shipped
reader is fitted on the dev and the spent rows (benchmarks/train_reader.py --with-spent), so a
fresh test split must be written on pages none of those rows use (the Rust book has no such
page left: 110 of its 112 are some answer row's). The packs are the ones benchmarks/corpora.py builds (reused when cached). Each question is
searched once with the default pipeline and the gate off; the gate's calibrated verdict, computed on the same
search, decides the `gate on` column. Answers compared and scoring: benchmarks/answer_eval.py.
Also printed: whether every gold string occurs in its gold page's sections in the pack (a
question the pack cannot answer is a bad question), the containment per question kind, and
the questions the product misses (dev only: test is looked at once), the time of the
product's offline answer alone (ask() on the search result: p50 and p90), and how many of
its answer lines are not their cited section's text (packs/retrieval/verbatim.py). Rows with a
"class" field (identifier / paraphrase / two-page) are also scored per class, for the
product and the turn-3 product. `--ids` runs the rows a change touches (say, those whose
asks.parts reading it changes), before and after it, from dev and spent rows only: a test
row of a round the ledger has not run is refused.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import answer_eval, common, corpora  # noqa: E402

FILES = {"kubernetes": "k8s_answers.jsonl", "rust-book": "rust_answers.jsonl",
         "cargo-book": "cargo_answers.jsonl"}
COLS = ("gate on", "gate off", "words")
RESULTS = ROOT / "benchmarks" / "results" / "doc_answers.md"


def load_questions(name: str) -> list[dict]:
    """The answer set of corpus `name` (rows of its jsonl file)."""
    return corpora.load_rows(corpora.DATA_DIR / FILES[name])


def check_golds(pack, rows: list[dict], base_url: str) -> list[str]:
    """Questions with a gold group that occurs in none of their gold pages' sections."""
    by_url = common.page_texts(pack)
    bad = []
    for r in rows:
        text = answer_eval.fold(" ".join(by_url.get(f"{base_url}/{g}", "") for g in r["gold"]))
        if not all(any(answer_eval.fold(a) in text for a in group) for group in r["answers"]):
            bad.append(r["id"])
    return bad


def run(pack, rows: list[dict], base_url: str, log) -> tuple[dict, list[dict]]:
    """(table rows, per-question records) for one split."""
    per_question, ceiling = [], []
    answer_eval.PRODUCT_MS.clear()
    answer_eval.PRODUCT_TYPES.clear()
    answer_eval.VERBATIM.clear()
    t0 = time.perf_counter()
    for k, r in enumerate(rows, start=1):
        result = pack.search(r["question"], use_cache=False, gate_threshold=-1.0)
        cited = result.cited()
        gold_urls = {f"{base_url}/{g}" for g in r["gold"]}
        ceiling.append(any(s.url in gold_urls for s in cited[:5]))
        asked = len(answer_eval.PRODUCT_TYPES)
        texts = answer_eval.answers(pack, result)
        path = answer_eval.PRODUCT_TYPES[-1] if len(answer_eval.PRODUCT_TYPES) > asked else None
        per_question.append({"id": r["id"], "kind": r["kind"], "texts": texts, "path": path,
                             "gated": not result.gate.get("calibrated_passed", True)})
        if k % 20 == 0:
            log(f"  {k}/{len(rows)} questions, {time.perf_counter() - t0:.0f} s")
    log(f"  {sum(q['gated'] for q in per_question)} of {len(rows)} gated by the calibrated "
        f"gate; ms per question (search + answers): "
        f"{1000 * (time.perf_counter() - t0) / max(len(rows), 1):.0f}")
    if answer_eval.VERBATIM:
        bad = [lines for _, lines in answer_eval.VERBATIM if lines]
        log(f"  answer lines that are not their cited section's text (issue 51): "
            f"{sum(map(len, bad))} in {len(bad)} of {len(answer_eval.VERBATIM)} answers "
            f"({sum(n for n, _ in answer_eval.VERBATIM)} bullets)")
        for line in [x for lines in bad for x in lines][:40]:
            log(f"    {line[:120]!r}")
    log(words_by_path(per_question))
    if answer_eval.PRODUCT_MS:
        ms = sorted(answer_eval.PRODUCT_MS)
        log(f"  product's offline answer alone (after the search): p50 {ms[len(ms) // 2]:.0f} ms,"
            f" p90 {ms[int(0.9 * (len(ms) - 1))]:.0f} ms")
    return (answer_eval.score_rows(per_question, [r["answers"] for r in rows], ceiling),
            per_question)


def by_ids(name: str, rows: list[dict], ids: str) -> list[dict]:
    """The rows of `ids` (comma-separated), each a dev or a spent row of corpus `name`
    (benchmarks/reader_data.py `dev_rows`); SystemExit naming any other."""
    from benchmarks import reader_data

    wanted = [x.strip() for x in ids.split(",") if x.strip()]
    allowed = {r["id"] for r in reader_data.dev_rows(name, spent=True)}
    if bad := [x for x in wanted if x not in allowed]:
        raise SystemExit(f"--ids: not dev or spent rows of {name}: {', '.join(bad)} (a test "
                         "row is read once, by its blind run)")
    return [r for r in rows if r["id"] in set(wanted)]


def words_by_path(per_question: list[dict]) -> str:
    """The product's mean words per answer path: the passages alone, or the passages and a
    whole-pack list of items (a list question, issue 48), whose length is the list's."""
    groups: dict[str, list[int]] = {}
    for q in per_question:
        if q.get("path"):
            groups.setdefault(q["path"], []).append(len(q["texts"][-1].split()))
    return "  product words by answer path: " + ", ".join(
        f"{k} {statistics.fmean(v):.1f} ({len(v)} q)" for k, v in sorted(groups.items()))


# A bullet of the offline answer that ends with ":" (and its [n]): a lead-in quoted
# without the list, table or code block it introduces.
_ALONE = re.compile(r"^- .*:[*_`\"')\]]* \[\d+[^\]]*\]$", re.M)


def lead_ins_alone(per_question: list[dict]) -> int:
    """How many product answers quote a lead-in without what follows it."""
    return sum(_ALONE.search(q["texts"][-1]) is not None for q in per_question)


def by_field(per_question: list[dict], rows: list[dict], field: str, k: int = -1) -> str:
    """The containment (gate off) of method k (the product by default) per value of each
    row's `field` ("kind", or "class": identifier / paraphrase / two-page)."""
    groups: dict[str, list[float]] = {}
    for q, r in zip(per_question, rows):
        groups.setdefault(str(r.get(field)), []).append(
            float(answer_eval.contains(q["texts"][k], r["answers"])))
    return ", ".join(f"{g} {statistics.fmean(v):.2f} ({len(v)})" for g, v in sorted(groups.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--corpus", action="append", choices=tuple(FILES))
    ap.add_argument("--split", choices=("dev", "test", "both"), default="both")
    ap.add_argument("--test-round", type=int, default=None,
                    help="with --split test: only the rows of this test_round (6 is spent)")
    ap.add_argument("--misses", action="store_true", help="print the dev questions missed")
    ap.add_argument("--show-answers", action="store_true",
                    help="print each dev question's offline answer, as the product gives it")
    ap.add_argument("--questions", type=Path, default=None,
                    help="an answer set to use instead of the corpus's (with one --corpus)")
    ap.add_argument("--ids", default=None,
                    help="comma-separated row ids, dev or spent rows only (reported as 'ids')")
    ap.add_argument("--out", type=Path, default=None, help="Markdown file for the output")
    args = ap.parse_args(argv)
    log, printed = common.printing_log()

    # The Cargo book comes from the Rust toolchain, not from --data: only when asked for.
    default = [n for n in FILES if n not in corpora.HTML_DOCS]
    names = [n for n in args.corpus or default if corpora.available(args.data, n)]
    if not names:
        print(f"skipped: no documentation corpus under {args.data} (pass --data DIR holding "
              "kubernetes-docs/ or rust-book/)")
        return 0
    if args.test_round is not None and args.split != "test":
        ap.error("--test-round needs --split test")
    if args.questions and len(names) != 1:
        ap.error("--questions needs exactly one --corpus")
    log(common.machine_line())
    from packs import KnowledgePack

    for name in names:
        corpus = corpora.load(args.data, name, args.work)
        rows = (corpora.load_rows(args.questions) if args.questions else load_questions(name))
        with KnowledgePack.open(corpus.built.pack_dir) as pack:
            bad = check_golds(pack, rows, corpus.built.base_url)
            if rows and len(bad) == len(rows):  # no gold page at all: the URLs do not match
                raise SystemExit(
                    f"{name}: no question's gold page is in {corpus.built.pack_dir} under "
                    f"{corpus.built.base_url}; the pack was built under other URLs than "
                    f"{args.work / name / 'state.json'} records: delete that file to rebuild")
            log(f"\n{name}: {len(rows)} questions, pack {corpus.built.pack_dir}; gold strings "
                f"missing from their gold pages in the pack: {bad or 'none'}")
            for split in (("ids",) if args.ids else ("dev", "test") if args.split == "both"
                          else (args.split,)):
                subset = (by_ids(name, rows, args.ids) if args.ids else
                          [r for r in rows if r["split"] == split and (
                              args.test_round is None or r.get("test_round") == args.test_round)])
                log(f"\n{name} {split} ({len(subset)} questions), share whose answer contains "
                    "every gold group (95% bootstrap interval):")
                table, per_question = run(pack, subset, corpus.built.base_url, log)
                log(answer_eval.table(table, COLS))
                log(f"product by kind (gate off): {by_field(per_question, subset, 'kind')}")
                if any("class" in r for r in subset):
                    for k, label in ((-1, "product"), (2, "turn-3 product")):
                        log(f"{label} by class (gate off): "
                            f"{by_field(per_question, subset, 'class', k)}")
                log(f"product answers that quote a lead-in without what follows it: "
                    f"{lead_ins_alone(per_question)} of {len(subset)}")
                if args.show_answers and split in ("dev", "ids"):
                    for q, r in zip(per_question, subset):
                        verdict = ("contains every gold group"
                                   if answer_eval.contains(q["texts"][-1], r["answers"])
                                   else f"misses some of {r['answers']}")
                        log(f"\n### {r['id']}: {r['question']} ({verdict})\n\n"
                            f"{q['texts'][-1].strip()}")
                if args.misses and split in ("dev", "ids"):
                    for q, r in zip(per_question, subset):
                        if not answer_eval.contains(q["texts"][-1], r["answers"]):
                            log(f"  miss {r['id']}: {r['question']} {r['answers']}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        command = " ".join(["python benchmarks/doc_answers.py", *(argv or sys.argv[1:])])
        args.out.write_text("# Documentation answer sets: gold values in the offline answer\n\n"
                            f"- Command: `{command}` (HF_HUB_OFFLINE=1)\n\n"
                            "Output, as printed:\n\n```\n" + "\n".join(printed) + "\n```\n",
                            encoding="utf-8")
        print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
