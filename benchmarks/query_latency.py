"""Query latency of `KnowledgePack.search()` on a pack of >= 5,000 sections.

    python benchmarks/query_latency.py [--data ../shared/data] [--work DIR] [--queries 200]

Builds (once; reused on later runs) a pack from the SciFact corpus in ../shared/data: each
abstract is an article, split into sections of about 120 words. SciFact has no hyperlinks,
so LINKS_TO edges are synthetic: each article links to its 3 nearest articles by mean
section embedding (so graph rerank and multi-document expansion do real work). There are no
entities or facts (the graph-facts stage runs its queries and finds nothing). The pack is
written with tasks.store outside the repository (default: $TMPDIR/kpack-bench).

Reports p50/p95 of search() with default options (cache off, warm: after 10 warm-up
queries), per-stage p50s, and the same with each optional stage switched on or off.
Skips with a message (exit 0) when the data is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

MODEL = "all-MiniLM-L6-v2"
SECTION_WORDS = 120
N_LINKS = 3


def _sections_of(text: str) -> list[str]:
    sentences = re.split(r"(?<=[.!?])\s+", text.strip())
    out, buf, n = [], [], 0
    for s in sentences:
        buf.append(s)
        n += len(s.split())
        if n >= SECTION_WORDS:
            out.append(" ".join(buf))
            buf, n = [], 0
    if buf:
        out.append(" ".join(buf))
    return [s for s in out if s]


def build(corpus: Path, pack_dir: Path) -> None:
    import numpy as np
    import polars as pl

    from packs import format as fmt
    from packs.embedding import Embedder
    from packs.manifest import Counts, EmbeddingInfo, ExtractorInfo, Manifest
    from tasks.store import load_kuzu, write_tables

    t0 = time.perf_counter()
    embedder = Embedder(MODEL)
    articles, sections = [], []
    for line in corpus.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        url = f"https://scifact.test/{doc['_id']}"
        aid = fmt.article_id(url)
        title = doc.get("title") or doc["_id"]
        parts = _sections_of(doc.get("text") or "")
        articles.append({"id": aid, "url": url, "final_url": url, "title": title,
                         "content_hash": fmt.content_hash(doc.get("text") or ""),
                         "content_type": "text/plain",
                         "word_count": sum(len(p.split()) for p in parts)})
        for pos, content in enumerate(parts):
            path = f"{title} > Part {pos + 1}"
            ch = fmt.content_hash(content)
            sections.append({"id": fmt.section_id(url, path, ch, 0), "article_id": aid,
                             "url": url, "title": title, "heading_path": path, "level": 2,
                             "position": pos, "chunk": 0, "content": content,
                             "content_hash": ch, "word_count": len(content.split()),
                             "is_code": False})
    print(f"embedding {len(sections)} sections of {len(articles)} articles ...", flush=True)
    vecs = embedder.encode_documents([f"{s['heading_path']}\n{s['content']}" for s in sections],
                                     batch_size=64)
    for s, v in zip(sections, vecs):
        s["embedding"] = v.tolist()
    # Synthetic links: each article → its N_LINKS nearest articles (mean section vector).
    index = {a["id"]: i for i, a in enumerate(articles)}
    means = np.zeros((len(articles), embedder.dim), np.float32)
    for s, v in zip(sections, vecs):
        means[index[s["article_id"]]] += v
    means /= np.linalg.norm(means, axis=1, keepdims=True) + 1e-9
    links, degree = [], np.zeros(len(articles))
    for start in range(0, len(articles), 512):
        sims = means[start:start + 512] @ means.T
        for row, i in enumerate(range(start, min(start + 512, len(articles)))):
            sims[row, i] = -1
            for j in np.argpartition(-sims[row], N_LINKS)[:N_LINKS]:
                links.append({"source_id": articles[i]["id"], "target_id": articles[j]["id"]})
                degree[i] += 1
                degree[j] += 1
    for a, d in zip(articles, degree):
        a["centrality"] = float(d)
    empty = {
        fmt.ENTITIES: pl.DataFrame(schema={"id": pl.String, "name": pl.String, "type": pl.String,
                                           "description": pl.String,
                                           "aliases": pl.List(pl.String)}),
        fmt.MENTIONS: pl.DataFrame(schema={"section_id": pl.String, "entity_id": pl.String}),
        fmt.RELATIONSHIPS: pl.DataFrame(schema={c: pl.String for c in
                                                fmt.TABLE_COLUMNS[fmt.RELATIONSHIPS]}),
        fmt.FACTS: pl.DataFrame(schema={c: pl.String for c in fmt.TABLE_COLUMNS[fmt.FACTS]}),
    }
    tables = {fmt.ARTICLES: pl.DataFrame(articles), fmt.SECTIONS: pl.DataFrame(sections),
              fmt.LINKS: pl.DataFrame(links), **empty}
    build_dir = pack_dir / fmt.BUILDS_DIR / "bench"
    build_dir.mkdir(parents=True)
    write_tables(tables, build_dir / fmt.TABLES_DIR, embedder.dim)
    result = load_kuzu(build_dir / fmt.DB_FILE, build_dir / fmt.TABLES_DIR, embedder.dim)
    Manifest(name="scifact-bench", build_id="bench", built_at="1970-01-01T00:00:00Z",
             counts=Counts(**result.counts),
             embedding=EmbeddingInfo(model=embedder.model_id, dim=embedder.dim,
                                     gate_threshold=0.0),
             extractor=ExtractorInfo(kind="none", note="latency benchmark: no extraction"),
             kuzu_version="0.11.3", query_module_version="0.1.0",
             avg_links_per_article=len(links) / len(articles)).write(build_dir)
    (pack_dir / fmt.CURRENT_FILE).write_text("bench\n")
    print(f"built {pack_dir} in {time.perf_counter() - t0:.0f}s: {result.counts}", flush=True)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(int(round(q * (len(values) - 1))), len(values) - 1)]


def measure(pack, questions: list[str], **options) -> dict[str, object]:
    totals, stages = [], {}
    for q in questions[:10]:  # warm-up: model, index pages, centrality map
        pack.search(q, use_cache=False, **options)
    for q in questions:
        t0 = time.perf_counter()
        result = pack.search(q, use_cache=False, **options)
        totals.append((time.perf_counter() - t0) * 1000)
        for k, v in result.timings_ms.items():
            stages.setdefault(k, []).append(v)
    return {"p50_ms": round(statistics.median(totals), 2), "p95_ms": round(pct(totals, 0.95), 2),
            "stages_p50_ms": {k: round(statistics.median(v), 2) for k, v in stages.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--work", type=Path,
                    default=Path(tempfile.gettempdir()) / "kpack-bench" / "scifact")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--cross-encoder", help="a local CrossEncoder folder to time that stage")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)

    corpus = args.data / "scifact" / "corpus.jsonl"
    queries = args.data / "scifact" / "queries.jsonl"
    if not corpus.is_file() or not queries.is_file():
        print(f"skipped: SciFact not found under {args.data} (pass --data DIR)")
        return 0
    if not (args.work / "current").is_file():
        build(corpus, args.work)

    from packs import KnowledgePack

    questions = [json.loads(line)["text"] for line in
                 queries.read_text(encoding="utf-8").splitlines()[: args.queries]]
    report: dict[str, object] = {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(),
                                 "load_avg": os.getloadavg(), "queries": len(questions)}
    with KnowledgePack.open(args.work) as pack:
        report["pack"] = {"sections": pack.manifest.counts.sections,
                          "articles": pack.manifest.counts.articles,
                          "avg_links_per_article": round(pack.manifest.avg_links_per_article, 2)}
        t0 = time.perf_counter()
        pack.search("warm up the model", use_cache=False)
        report["cold_first_query_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        t0 = time.perf_counter()
        for q in questions:
            pack.embed_query(q)
        report["embed_only_mean_ms"] = round((time.perf_counter() - t0) * 1000 / len(questions), 2)
        variants: dict[str, dict] = {
            "default": {},
            "use_enhancements=False": {"use_enhancements": False},
            "fusion=weighted": {"fusion": "weighted"},
            "graph_rerank_mode=weighted": {"graph_rerank_mode": "weighted"},
            "expansion_mode=bfs": {"expansion_mode": "bfs"},
            "graph_rerank=False": {"graph_rerank": False},
            "multi_doc=False": {"multi_doc": False},
            "hybrid=False": {"hybrid": False},
        }
        if args.cross_encoder:
            variants["cross_encoder"] = {"cross_encoder": True,
                                         "cross_encoder_model": args.cross_encoder}
        results = {}
        for name, opts in variants.items():
            results[name] = measure(pack, questions, **opts)
            if not args.json:
                r = results[name]
                print(f"{name:28s} p50 {r['p50_ms']:7.2f} ms  p95 {r['p95_ms']:7.2f} ms  "
                      f"stages {r['stages_p50_ms']}", flush=True)
        report["results"] = results
        report["skipped"] = {"multi_query": "needs the Anthropic API (network per query)",
                             **({} if args.cross_encoder else
                                {"cross_encoder": "pass --cross-encoder PATH (no hub offline)"})}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(json.dumps({k: v for k, v in report.items() if k != "results"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
