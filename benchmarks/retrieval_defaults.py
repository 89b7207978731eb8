"""Does the default pipeline ever lose to a single retriever? nDCG@10 of the default search
against vector only, BM25 only and plain hybrid, on every benchmark corpus.

    python benchmarks/retrieval_defaults.py [--data ../shared/data] [--work out/bench]
        [--corpus kubernetes --corpus rust-book --corpus scifact --corpus xquad]
        [--split test] [--dev-limit N] [--no-titles] [--out benchmarks/results/retrieval_defaults.md]

Corpora and questions: benchmarks/corpora.py (packs built once and reused). For each corpus
and split, the in-domain questions are scored with `packs.evaluation` (page level for the
documentation sites and SciFact, paragraph level for XQuAD), gate off, with:

    vector only   use_enhancements=False (the HNSW ranking; the quality filter stays)
    BM25 only     fusion=weighted 0/1: the full-text ranking (vector-only candidates last)
    hybrid        RRF of the two, no graph rerank, no per-article cap, no distinct pages
                  first, no title match, no extra weight for a decisive BM25 match
    default       SearchOptions() as shipped

and the default must reach max(vector, BM25, hybrid) - 0.005 ("never loses"). The
documentation corpora also report each question kind, the share of multi-hop questions with
both gold pages in the top 5 pages and among the first 5 results (sections, with and without
`distinct_first`, and asked for only 5), and title queries: every page whose title is unique in the
pack, asked by its title alone and as "What is <title>?" (recall@1 / recall@5 of that page),
with and without the title match. Progress goes to stderr;
the tables to stdout and, with --out, to a Markdown file with the command and machine.
Each metric of the main tables comes with its 95% bootstrap interval over the questions
(`common.interval`), and the default's difference from the best single retriever with the
interval of the per-question differences.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, corpora  # noqa: E402

GATE_OFF = {"gate_threshold": -1.0}
BASELINES: dict[str, dict[str, object]] = {
    "vector only": {"use_enhancements": False},
    "BM25 only": {"fusion": "weighted", "vector_weight": 0.0, "bm25_weight": 1.0,
                  "graph_rerank": False, "per_article": 0},
    "hybrid RRF": {"fusion": "rrf", "graph_rerank": False, "per_article": 0,
                   "distinct_first": 0, "title_match": False, "bm25_decisive_weight": 1.0},
}
DEFAULT = "default"
# The multi-hop table of the first 5 results: the default with and without distinct pages
# first (on by default in a pack whose sections hold code), and asked for 5 results only
# (the first 5 must not depend on how many are asked for).
FIRST5: dict[str, dict[str, object]] = {"default, distinct_first=0": {"distinct_first": 0},
                                        DEFAULT: {}, "default, max_results=5": {"max_results": 5}}
# The title queries: each page asked by its title alone and in a question, by the plain
# retrievers and the default with and without the title match.
TITLE_RUNS: dict[str, dict[str, object]] = {
    "vector only": BASELINES["vector only"], "hybrid RRF": BASELINES["hybrid RRF"],
    "default, title_match=False": {"title_match": False}, DEFAULT: {}}
TITLE_PHRASINGS = {"alone": "{}", "'What is ...?'": "What is {}?"}
TOLERANCE = 0.005
COLS = ("ndcg@10", "recall@5", "recall@10", "mrr")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_config(pack, questions, overrides: dict[str, object]):
    """The evaluation report of `questions` with the defaults plus `overrides`, gate off."""
    from packs.evaluation import evaluate
    from packs.options import SearchOptions

    return evaluate(pack, questions, SearchOptions.build(None, **GATE_OFF, **overrides))


def both_in_top5(report) -> float:
    """Share of multi-hop questions with every gold page in the top 5."""
    rows = [r for r in report.per_question if r.kind == "multihop"]
    return statistics.fmean([r.metrics["recall@5"] >= 1.0 for r in rows]) if rows else 0.0


def with_intervals(report) -> dict[str, str]:
    """Each of COLS as "mean [95% bootstrap interval]" over the report's questions."""
    return {k: common.interval([r.metrics[k] for r in report.per_question]) for k in COLS}


def paired_differences(report, other) -> list[float]:
    """Per question, nDCG@10 of `report` minus that of `other` (the same questions, in
    the same order)."""
    return [a.metrics["ndcg@10"] - b.metrics["ndcg@10"]
            for a, b in zip(report.per_question, other.per_question, strict=True)]


def both_in_first5_results(pack, questions, overrides: dict[str, object]) -> float:
    """Share of multi-hop questions with every gold page among the first 5 results as a
    reader sees them (sections, a page's second section taking a place), defaults plus
    `overrides`, gate off."""
    from packs.eval_questions import matches
    from packs.options import SearchOptions

    opts = SearchOptions.build(None, use_cache=False, **GATE_OFF, **overrides)
    hits = []
    for q in (q for q in questions if q.kind == "multihop"):
        top = pack.search(q.question, opts).sections[:5]
        hits.append(all(any(matches(s.url, s.title, s.heading_path, g) for s in top)
                        for g in q.gold))
    return statistics.fmean(hits) if hits else 0.0


def title_questions(pack, template: str = "{}"):
    """One question per page whose title is unique in the pack: the title itself, or the
    title put in `template` ("What is {}?")."""
    from packs.eval_questions import Question, parse_gold

    rows = pack.db._run("MATCH (a:Article) RETURN a.url, a.title", {}, None)
    counts: dict[str, int] = {}
    for _, title in rows:
        counts[(title or "").casefold()] = counts.get((title or "").casefold(), 0) + 1
    return [Question(id=f"title-{i}", question=template.format(title),
                     gold=(parse_gold(url),), kind="title")
            for i, (url, title) in enumerate(sorted(rows))
            if title and counts[title.casefold()] == 1 and title != url]


def corpus_tables(corpus, splits, titles: bool) -> tuple[list[str], list[tuple]]:
    """(Markdown lines, verdict rows) for one corpus."""
    from packs import KnowledgePack

    lines: list[str] = []
    verdicts = []
    with KnowledgePack.open(corpus.built.pack_dir) as pack:
        m = pack.manifest
        lines.append(f"\n## {corpus.name}: {m.counts.articles} pages, {m.counts.sections} "
                     f"sections, {m.counts.links} links (avg {m.avg_links_per_article:.2f} per "
                     "page)\n")
        for split in splits:
            qs = corpus.in_domain.get(split, [])
            if not qs:
                continue
            rows, reports = [], {}
            for label, over in {**BASELINES, DEFAULT: {}}.items():
                t0 = time.perf_counter()
                reports[label] = run_config(pack, qs, over)
                log(f"{corpus.name} {split} {label}: ndcg@10 "
                    f"{reports[label].overall['ndcg@10']:.3f} ({time.perf_counter() - t0:.0f} s)")
                rows.append((label, with_intervals(reports[label])))
            best_label = max(BASELINES, key=lambda k: reports[k].overall["ndcg@10"])
            best = reports[best_label].overall["ndcg@10"]
            default = reports[DEFAULT].overall["ndcg@10"]
            diff = common.interval(paired_differences(reports[DEFAULT], reports[best_label]))
            verdicts.append((corpus.name, split, len(qs), default, best_label, best,
                             default >= best - TOLERANCE, diff))
            extra = []
            kinds = sorted({q.kind for q in qs if q.kind})
            if kinds:
                cols = [f"{k} ndcg" for k in kinds] + (["multihop both@5"] if "multihop" in kinds
                                                       else [])
                kind_rows = []
                for label, rep in reports.items():
                    d = {f"{k} ndcg": rep.by_kind[k]["ndcg@10"] for k in kinds}
                    if "multihop" in kinds:
                        d["multihop both@5"] = both_in_top5(rep)
                    kind_rows.append((label, d))
                extra = ["", f"by kind ({split}):", "", common.table(kind_rows, cols)]
                if "multihop" in kinds:
                    first5 = [(label, {"both in first 5 results": both_in_first5_results(
                        pack, qs, over)}) for label, over in FIRST5.items()]
                    extra += ["", f"multi-hop, both gold pages among the first 5 results "
                              f"(sections, {split}):", "",
                              common.table(first5, ("both in first 5 results",))]
            lines += [f"### {split}: {len(qs)} questions", "",
                      common.table(rows, COLS), *extra, ""]
        if titles and corpus.name in corpora.DOCS:
            asked = {phrasing: title_questions(pack, template)
                     for phrasing, template in TITLE_PHRASINGS.items()}
            rows = []
            for label, overrides in TITLE_RUNS.items():
                cells: dict[str, object] = {}
                for phrasing, tq in asked.items():
                    rep = run_config(pack, tq, overrides)
                    cells.update({f"{phrasing} {k}": rep.overall[k]
                                  for k in ("recall@1", "recall@5")})
                rows.append((label, cells))
            pages = len(next(iter(asked.values())))
            lines += [f"### title queries: {pages} pages asked by their title", "",
                      common.table(rows, list(rows[0][1])), ""]
    return lines, verdicts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--corpus", action="append", choices=corpora.CORPORA)
    ap.add_argument("--split", action="append", choices=("dev", "test"))
    ap.add_argument("--dev-limit", type=int, default=None,
                    help="score only the first N dev questions of each corpus")
    ap.add_argument("--no-titles", action="store_true", help="skip the title queries")
    ap.add_argument("--out", type=Path, default=None, help="also write the tables here")
    args = ap.parse_args(argv)
    names = [n for n in (args.corpus or corpora.CORPORA) if corpora.available(args.data, n)]
    if not names:
        print(f"skipped: no benchmark corpus under {args.data} (pass --data DIR)")
        return 0
    splits = args.split or ["dev", "test"]
    lines = [common.machine_line(), ""]
    verdicts = []
    for name in names:
        corpus = corpora.load(args.data, name, args.work)
        if args.dev_limit:
            corpus.in_domain["dev"] = corpus.in_domain["dev"][: args.dev_limit]
        more, v = corpus_tables(corpus, splits, not args.no_titles)
        lines += more
        verdicts += v
    rows = [(f"{c} {s} ({n} q)", {"default": d, "best single": b, "best is": bl,
                                  "default - best": d - b, "paired difference [95%]": diff,
                                  "never loses": "yes" if ok else "NO"})
            for c, s, n, d, bl, b, ok, diff in verdicts]
    lines += ["\n## default against the best of vector only / BM25 only / hybrid (nDCG@10)", "",
              common.table(rows, ("default", "best single", "best is", "default - best",
                                  "paired difference [95%]", "never loses")),
              f"\n(never loses: default >= best - {TOLERANCE}; cells are means with 95% "
              "bootstrap intervals over the questions)"]
    text = "\n".join(lines)
    common.print_report(text, args.out, "Default pipeline against single retrievers",
                        "retrieval_defaults.py", argv)
    return 0 if all(v[-1] for v in verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
