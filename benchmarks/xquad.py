"""XQuAD (English): is the paragraph a question was written on among the top 5 sections?

    python benchmarks/xquad.py [--data ../shared/data] [--work out/bench] [--dev-articles 24]

Layout: one Markdown page per article at /xquad/<n> (`# Article title`), each paragraph
under its own heading `## Paragraph <i>`; the gold source of a question is
`<page URL>#Paragraph <i>`, so metrics are at section level (chunks of one paragraph count
once). Prints recall@5 (and recall@1, MRR, nDCG@10) per split — dev = articles
0..dev-articles-1, test = the rest — for the default pipeline, vector only and BM25 only,
and for plain-library baselines over the same paragraphs (title + paragraph) in the same
run. Rankings are scored with the confidence gate off; the number the default gate would
have gated is printed. Skips with a message when the data is absent.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402

DEV_ARTICLES = 24
COLS = ("recall@5", "recall@1", "mrr", "ndcg@10")
CONFIGS: dict[str, dict[str, object]] = {
    "default pipeline": {},
    "vector only (use_enhancements=False)": {"use_enhancements": False},
    "BM25 only (weighted 0/1, no graph)": {"fusion": "weighted", "vector_weight": 0.0,
                                           "bm25_weight": 1.0, "graph_rerank": False},
}


def heading(i: int) -> str:
    return f"Paragraph {i + 1}"


def load(data: Path) -> list[dict]:
    return json.loads((data / "xquad.en.json").read_text(encoding="utf-8"))["data"]


def title_of(article: dict) -> str:
    return article["title"].replace("_", " ")


def pages(articles: list[dict]) -> list[common.Page]:
    """One page per article, one `## Paragraph i` section per paragraph."""
    return [common.Page(f"/xquad/{n}", title_of(a), common.markdown_page(
        title_of(a), [(heading(i), p["context"]) for i, p in enumerate(a["paragraphs"])]))
        for n, a in enumerate(articles)]


def questions(articles: list[dict], base_url: str, dev_articles: int = DEV_ARTICLES):
    """{"dev": [...], "test": [...]} Questions with `<page>#Paragraph i` as gold."""
    from packs.eval_questions import Question, parse_gold

    split: dict[str, list] = {"dev": [], "test": []}
    for n, a in enumerate(articles):
        for i, p in enumerate(a["paragraphs"]):
            gold = (parse_gold(f"{base_url}/xquad/{n}#{heading(i)}"),)
            for qa in p["qas"]:
                split["dev" if n < dev_articles else "test"].append(
                    Question(id=str(qa["id"]), question=qa["question"], gold=gold))
    return split


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA,
                    help="the shared data folder (holding qa/xquad/)")
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--dev-articles", type=int, default=DEV_ARTICLES)
    args = ap.parse_args(argv)
    data = args.data / "qa" / "xquad"
    if not (data / "xquad.en.json").is_file():
        print(f"skipped: no XQuAD at {data} (pass --data DIR holding qa/xquad/)")
        return 0

    print(common.machine_line())
    articles = load(data)
    built = common.build_cached("xquad", pages(articles), args.work,
                                description="XQuAD English (evaluation benchmark)")
    split = questions(articles, built.base_url, args.dev_articles)
    n_par = sum(len(a["paragraphs"]) for a in articles)
    print(f"XQuAD: {len(articles)} articles, {n_par} paragraphs, "
          f"{sum(map(len, split.values()))} questions (dev {len(split['dev'])}, test "
          f"{len(split['test'])}); model {common.MODEL}")
    print(f"pack: {built.pack_dir} ({'reused' if built.reused else f'built in {built.seconds:.0f} s'}; "
          f"{built.counts['articles']} articles, {built.counts['sections']} sections)")

    ids, texts = [], []
    for n, a in enumerate(articles):
        for i, p in enumerate(a["paragraphs"]):
            ids.append(f"{built.base_url}/xquad/{n}#{title_of(a)} > {heading(i)}")
            texts.append(f"{title_of(a)} {p['context']}")

    from packs import KnowledgePack
    from packs.options import SearchOptions

    with KnowledgePack.open(built.pack_dir) as pack:
        for name, qs in split.items():
            if not qs:
                print(f"\n{name}: no questions")
                continue
            golds = [[g.source for g in q.gold] for q in qs]
            qtexts = [q.question for q in qs]
            bm = common.bm25_rankings(ids, texts, qtexts)
            dense = common.dense_rankings(ids, texts, qtexts)
            rows = [("baseline: BM25 (bm25s, stemmed)", common.score_url_run(bm, golds)),
                    ("baseline: MiniLM dense", common.score_url_run(dense, golds)),
                    ("baseline: RRF(BM25, dense)",
                     common.score_url_run(common.rrf_rankings(bm, dense), golds))]
            for label, over in CONFIGS.items():
                opts = SearchOptions.build(None, gate_threshold=-1.0, **over)
                metrics, ms = common.product_run(pack, qs, opts)
                metrics["ms/q"] = f"{ms:.0f}"
                rows.append((label, metrics))
            gated = sum(pack.search(q, use_cache=False, use_enhancements=False).gated
                        for q in qtexts)
            print(f"\n{name} split ({len(qs)} questions; the default gate "
                  f"({pack.manifest.embedding.gate_threshold}) would gate {gated}):")
            print(common.table(rows, (*COLS, "ms/q")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
