"""SciFact through the product: 5,183 abstracts served as pages, built into a pack, 300 claims.

    python benchmarks/scifact.py [--data ../shared/data] [--work out/bench] [--no-tune]
                                 [--dev-limit N] [--no-ablations] [--chunk-words N --chunk-overlap X]

Each abstract is one Markdown page at /doc/<id> (`# title`, then the abstract), served over
loopback and built into a pack with the real build flow (offline extractor, offline
all-MiniLM-L6-v2); the pack is cached under --work. The 300 test claims (qrels/test.tsv) are
scored with `packs.evaluation` at page level (gold = the abstract's URL): nDCG@10 and
recall@10 for vector only, BM25 only, hybrid, the default pipeline, the cross-encoder, and
the default pipeline with each optional stage switched off. Rankings are scored with the
confidence gate off (a gated claim would score 0 whatever the ranking); the number the
default gate would have gated is printed. Fusion settings are tuned on the dev claims
(qrels/train.tsv) and only the best one is run on test. Plain-library baselines on the same
texts in the same run: bm25s (stemmed), all-MiniLM-L6-v2 dense (encode + cosine), RRF.
Skips with a message when the data is absent.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402

COLS = ("ndcg@10", "recall@10", "recall@1", "mrr")
# name → SearchOptions overrides on top of the defaults (gate off for ranking comparisons)
CONFIGS: dict[str, dict[str, object]] = {
    "vector only (use_enhancements=False)": {"use_enhancements": False},
    "BM25 only (weighted 0/1, no graph)": {"fusion": "weighted", "vector_weight": 0.0,
                                           "bm25_weight": 1.0, "graph_rerank": False},
    "hybrid RRF (no graph)": {"graph_rerank": False, "fusion": "rrf"},
    "hybrid min-max 0.5/0.5 (no graph)": {"graph_rerank": False, "fusion": "minmax",
                                          "vector_weight": 0.5, "bm25_weight": 0.5},
    "default: hybrid + graph/quality stages": {},
    "default + cross-encoder": {"cross_encoder": True},
}
ABLATIONS: dict[str, dict[str, object]] = {
    "default - query_analysis": {"query_analysis": False},
    "default - hybrid (BM25)": {"hybrid": False},
    "default - graph_rerank": {"graph_rerank": False},
    "default - quality filter (threshold 0)": {"quality_threshold": 0.0},
    "default - multi_doc": {"multi_doc": False},
    "default - graph_facts": {"graph_facts": False},
    "default - fewshot": {"fewshot": False},
    "default, fusion=weighted 0.7/0.3": {"fusion": "weighted"},
}
TUNING: list[dict[str, object]] = (
    [{"fusion": "rrf", "rrf_k": k} for k in (10, 60)]
    + [{"fusion": "weighted", "vector_weight": w, "bm25_weight": round(1 - w, 2)}
       for w in (0.5, 0.7)]
    + [{"fusion": "minmax", "vector_weight": w, "bm25_weight": round(1 - w, 2)}
       for w in (0.3, 0.4, 0.5, 0.6, 0.7)]
)


def load(data: Path):
    """(corpus rows, {query id: text}, test qrels, dev qrels) of the BEIR layout."""
    corpus = [json.loads(line) for line in (data / "corpus.jsonl").open(encoding="utf-8")]
    queries = {}
    for name in ("queries.jsonl", "queries_test.jsonl"):
        for line in (data / name).open(encoding="utf-8"):
            q = json.loads(line)
            queries[str(q["_id"])] = q["text"]

    def qrels(name: str) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        with (data / "qrels" / name).open(encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                if int(row["score"]) > 0:
                    out.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
        return out

    return corpus, queries, qrels("test.tsv"), qrels("train.tsv")


def pages(corpus) -> list[common.Page]:
    """One page per abstract: /doc/<id>, the title as heading, the abstract as its text."""
    out = []
    for d in corpus:
        title = " ".join(d["title"].split()) or f"Document {d['_id']}"
        out.append(common.Page(f"/doc/{d['_id']}", title,
                               common.markdown_page(title, [(None, d["text"])])))
    return out


def questions(queries, qrels, base_url: str):
    from packs.eval_questions import Question, parse_gold

    return [Question(id=qid, question=queries[qid],
                     gold=tuple(parse_gold({"source": f"{base_url}/doc/{doc}", "grade": g})
                                for doc, g in rel.items()))
            for qid, rel in sorted(qrels.items(), key=lambda kv: int(kv[0]))
            if qid in queries]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA,
                    help="the shared data folder (holding scifact/)")
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--no-tune", action="store_true", help="skip fusion tuning on dev")
    ap.add_argument("--no-ablations", action="store_true",
                    help="run the main configurations only, not each stage switched off")
    ap.add_argument("--dev-limit", type=int, default=None, help="tune on the first N dev claims")
    ap.add_argument("--chunk-words", type=int, default=None,
                    help="pack.toml chunk_words for the pack (default: fitted to the model)")
    ap.add_argument("--chunk-overlap", type=float, default=None,
                    help="pack.toml chunk_overlap for the pack (default 0.15)")
    args = ap.parse_args(argv)
    data = args.data / "scifact"
    if not (data / "corpus.jsonl").is_file():
        print(f"skipped: no SciFact at {data} (pass --data DIR holding scifact/)")
        return 0

    print(common.machine_line())
    corpus, queries, test_qrels, dev_qrels = load(data)
    print(f"SciFact: {len(corpus)} abstracts, {len(test_qrels)} test claims, "
          f"{len(dev_qrels)} dev claims; model {common.MODEL}")

    site = pages(corpus)
    settings = {k: v for k, v in (("chunk_words", args.chunk_words),
                                   ("chunk_overlap", args.chunk_overlap)) if v is not None}
    name = "scifact" + "".join(f"-{k.split('_')[1]}{v}" for k, v in settings.items())
    built = common.build_cached(name, site, args.work, settings=settings,
                                description="SciFact abstracts (evaluation benchmark)")
    print(f"pack settings: {settings or 'defaults (chunks fitted to the model window)'}")
    print(f"pack: {built.pack_dir} ({'reused' if built.reused else f'built in {built.seconds:.0f} s'}; "
          f"{built.counts['articles']} articles, {built.counts['sections']} sections, "
          f"{built.counts['links']} links)")
    test_q = questions(queries, test_qrels, built.base_url)
    dev_q = questions(queries, dev_qrels, built.base_url)[: args.dev_limit]

    # --- plain-library baselines, same texts (title + abstract), same run -------------------
    ids = [f"{built.base_url}/doc/{d['_id']}" for d in corpus]
    texts = [f"{d['title']} {d['text']}" for d in corpus]
    qtexts = [q.question for q in test_q]
    golds = [[g.source for g in q.gold] for q in test_q]
    t0 = time.perf_counter()
    bm = common.bm25_rankings(ids, texts, qtexts)
    t_bm = time.perf_counter() - t0
    t0 = time.perf_counter()
    cache = args.work / "scifact" / "baseline"
    reused = any(cache.glob("dense-*.npy"))
    dense = common.dense_rankings(ids, texts, qtexts, cache_dir=cache)
    t_dense = time.perf_counter() - t0
    fused = common.rrf_rankings(bm, dense)
    baselines = [("baseline: BM25 (bm25s, stemmed)", common.score_url_run(bm, golds)),
                 ("baseline: MiniLM dense (encode + cosine)", common.score_url_run(dense, golds)),
                 ("baseline: RRF(BM25, dense), k=60", common.score_url_run(fused, golds))]
    print(f"\nbaselines on test ({len(test_q)} claims; BM25 {t_bm:.0f} s, dense {t_dense:.0f} s "
          f"{'with the cached abstract vectors' if reused else f'incl. encoding {len(texts)} abstracts'}):")
    print(common.table(baselines, COLS))

    from packs import KnowledgePack
    from packs.options import SearchOptions

    with KnowledgePack.open(built.pack_dir) as pack:
        m = pack.manifest
        print(f"\npack manifest: gate_threshold {m.embedding.gate_threshold}, "
              f"avg links/article {m.avg_links_per_article:.2f} (graph rerank needs >= 2)")
        gated = sum(pack.search(q.question, use_cache=False, use_enhancements=False).gated
                    for q in test_q)
        print(f"default gate ({m.embedding.gate_threshold}) would gate {gated}/{len(test_q)} "
              "test claims; rankings below are scored with the gate off")

        def run(overrides: dict[str, object], qs) -> tuple[dict, float]:
            opts = SearchOptions.build(None, gate_threshold=-1.0, **overrides)
            return common.product_run(pack, qs, opts)

        rows = []
        for label, over in {**CONFIGS, **({} if args.no_ablations else ABLATIONS)}.items():
            metrics, ms = run(over, test_q)
            metrics["ms/q"] = f"{ms:.0f}"
            rows.append((label, metrics))
        ce = pack.search(test_q[0].question, cross_encoder=True, use_cache=False,
                         gate_threshold=-1.0).warnings
        print(f"\nthe product on test ({len(test_q)} claims), gate off:")
        print(common.table(rows, (*COLS, "ms/q"), extra=[
            "", "cross-encoder: " + ("; ".join(ce) if ce else "loaded")
            + " (no model can be downloaded on this machine)" * bool(ce),
            "multi_query: not run (needs ANTHROPIC_API_KEY; sends the question to the API)"]))

        if not args.no_tune:
            print(f"\nfusion tuning on dev ({len(dev_q)} claims, qrels/train.tsv), graph off:")
            tuned = []
            for over in TUNING:
                metrics, _ = run({**over, "graph_rerank": False}, dev_q)
                tuned.append((", ".join(f"{k}={v}" for k, v in over.items()), metrics))
            print(common.table(tuned, COLS))
            best_label, _ = max(tuned, key=lambda r: r[1]["ndcg@10"])
            best = TUNING[[r[0] for r in tuned].index(best_label)]
            metrics, ms = run(best, test_q)
            metrics["ms/q"] = f"{ms:.0f}"
            print(f"\nbest on dev: {best_label}; on test (default stages + these fusion "
                  "settings):")
            print(common.table([(f"default, {best_label}", metrics)], (*COLS, "ms/q")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
