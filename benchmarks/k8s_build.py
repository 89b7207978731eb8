"""Build the Kubernetes docs prose subset (405 pages) over loopback, then ask it questions.

    python benchmarks/k8s_build.py [--data ../shared/data/kubernetes-docs] [--out DIR]
                                   [--limit N] [--model all-MiniLM-L6-v2] [--rebuild]
                                   [--baseline]
    python benchmarks/k8s_build.py --score PACK_DIR

Serves the Markdown files with a real HTTP server on 127.0.0.1, writes a source whose
urls.txt lists the `concepts/ tasks/ tutorials/ setup/` pages from MANIFEST.jsonl, runs
the real build flow (offline extractor unless ANTHROPIC_API_KEY is set), and prints
per-stage times and throughput. `--rebuild` runs a second, no-change build and reports
its time as a fraction of the first. `--baseline` times a plain `encode()` of the same
section texts with the same model, for the build's overhead over raw embedding.
After the build (or alone, on a pack built before, with `--score`) the 20 questions of
benchmarks/keyword_vectors.py are scored (page-level nDCG@10, recall@10, MRR; gate off)
with vector search only, each fusion, and the default pipeline with and without graph
rerank.
Skips with a message when the data folder is absent.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import tempfile
import time
from datetime import UTC, datetime
from functools import partial
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROSE_DIRS = ("concepts", "tasks", "tutorials", "setup")
QUESTIONS = [
    ("How do I configure a liveness probe for a container?",
     "tasks/configure-pod-container/configure-liveness-readiness-startup-probes.md"),
    ("What is a Pod in Kubernetes?", "concepts/workloads/pods/_index.md"),
    ("How does a Service expose an application running on a set of Pods?",
     "concepts/services-networking/service.md"),
    ("How do I create a Secret with kubectl?",
     "tasks/configmap-secret/managing-secret-using-kubectl.md"),
]


class _Quiet(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".md": "text/markdown"}

    def log_message(self, *args: object) -> None:
        pass


def prose_paths(data: Path, limit: int | None) -> list[str]:
    rows = [json.loads(line) for line in (data / "MANIFEST.jsonl").open()]
    paths = [r["path"] for r in rows if r["path"].split("/")[0] in PROSE_DIRS]
    return paths[:limit] if limit else paths


# name → SearchOptions overrides (gate off: a gated question would score 0 whatever the ranking)
SCORE_CONFIGS: dict[str, dict[str, object]] = {
    "vector only": {"use_enhancements": False},
    "hybrid RRF, no graph": {"fusion": "rrf", "graph_rerank": False},
    "hybrid min-max 0.5/0.5, no graph": {"fusion": "minmax", "vector_weight": 0.5,
                                         "bm25_weight": 0.5, "graph_rerank": False},
    "default pipeline": {},
    "default, fusion=rrf": {"fusion": "rrf"},
    "default, fusion=minmax 0.5/0.5": {"fusion": "minmax", "vector_weight": 0.5,
                                       "bm25_weight": 0.5},
}


def score_questions(pack_dir: Path) -> None:
    """Page-level metrics of the 20 keyword_vectors questions on a Kubernetes pack."""
    from benchmarks import common
    from benchmarks.keyword_vectors import QUESTIONS as TWENTY
    from packs import KnowledgePack
    from packs.eval_questions import Question, parse_gold
    from packs.options import SearchOptions

    with KnowledgePack.open(pack_dir) as pack:
        # The pack was built from http://127.0.0.1:PORT/<prose dir>/...: recover that base.
        prefix = re.compile(rf"^(.*?)/(?:{'|'.join(PROSE_DIRS)})/")
        base = next(m.group(1) for u in pack.db.article_urls() if (m := prefix.match(u)))
        qs = [Question(id=f"k8s-{i}", question=q,
                       gold=(parse_gold({"source": f"{base}/{path}"}),))
              for i, (q, path) in enumerate(TWENTY, start=1)]
        rows = []
        for label, over in SCORE_CONFIGS.items():
            metrics, ms = common.product_run(
                pack, qs, SearchOptions.build(None, gate_threshold=-1.0, **over))
            rows.append((label, {**metrics, "ms/q": f"{ms:.0f}"}))
    print(f"\n{len(qs)} questions (benchmarks/keyword_vectors.py), page-level, gate off:")
    print(common.table(rows, ("ndcg@10", "recall@10", "mrr", "ms/q")))


def build_arguments(doc: str) -> argparse.ArgumentParser:
    """The parser of a benchmark that builds the Kubernetes docs (described by the first
    paragraph of `doc`), after applying the entry point's Prefect settings: --data (the
    corpus), --out (the work folder), --limit (pages), --model (the embedding model)."""
    from flows.settings import configure_prefect_env

    configure_prefect_env()  # the entry point's settings, before Prefect is imported
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared/data/kubernetes-docs")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_arguments(__doc__)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--baseline", action="store_true")
    ap.add_argument("--score", type=Path, default=None, metavar="PACK_DIR",
                    help="only score the 20 questions on a pack built before")
    args = ap.parse_args(argv)
    if args.score:
        score_questions(args.score)
        return 0
    if not (args.data / "MANIFEST.jsonl").is_file():
        print(f"skipped: no Kubernetes docs at {args.data} (pass --data DIR)")
        return 0

    from benchmarks import common

    with common.serve_handler(partial(_Quiet, directory=str(args.data))) as base:
        return measure(args, base)


def measure(args: argparse.Namespace, base: str) -> int:
    """Build the pages served at `base` and print what the module docstring lists."""
    from flows.build import run_build
    from packs import KnowledgePack

    out = args.out or Path(tempfile.mkdtemp(prefix="kpack-k8s-"))
    paths = prose_paths(args.data, args.limit)
    source = out / "sources" / "k8s-docs"
    source.mkdir(parents=True, exist_ok=True)
    (source / "urls.txt").write_text("\n".join(f"{base}/{p}" for p in paths) + "\n")
    (source / "pack.toml").write_text(
        'description = "Kubernetes docs (concepts, tasks, tutorials, setup)"\n'
        f'allow_private_hosts = true\nembedding_model = "{args.model}"\n'
    )
    print(f"machine: {platform.node()} {platform.machine()}, {platform.python_version()}; "
          f"date {datetime.now(UTC):%Y-%m-%d}")
    print(f"building {len(paths)} pages from {base} into {out}")
    t0 = time.perf_counter()
    summary = run_build(source, out / "packs")
    full_s = time.perf_counter() - t0
    c = summary["counts"]
    d = summary["durations"]
    flow_s = summary["seconds"]
    print(f"\nfull build: {full_s:.1f} s wall, of which the flow {flow_s:.1f} s (the rest is "
          "imports and the start of the ephemeral Prefect server, not paid against a running "
          "server)")
    print(f"built: {c['articles']} articles, {c['sections']} sections, "
          f"{c['entities']} entities, {c['facts']} facts, {c['links']} links")
    print(f"failed sources: {len(summary['failed_sources'])}")
    for f in summary["failed_sources"]:
        print(f"  {f['url']}: {f['status']} {f['error']}")
    print("stage seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in d.items()))
    print(f"fetch+parse: {len(paths) / d['fetch']:.1f} pages/s; "
          f"embed: {c['sections'] / d['embed']:.1f} sections/s")

    pack_dir = Path(summary["pack"])
    with KnowledgePack.open(pack_dir) as pack:
        hits = 0
        for question, gold in QUESTIONS:
            answer = pack.ask(question)
            top = answer["sources"][0]["url"] if answer["sources"] else "(none)"
            ok = top.endswith("/" + gold)
            hits += ok
            print(f"\nQ: {question}\n  top source: {top} {'(expected)' if ok else f'(expected {gold})'}"
                  f"\n  query_type: {answer['query_type']}\n  answer: {answer['answer'][:300]!r}")
        print(f"\n{hits}/{len(QUESTIONS)} questions cite the expected page first")
    score_questions(pack_dir)

    if args.baseline:
        import polars as pl

        from packs.embedding import Embedder
        from tasks.vectors import embedding_text

        sections = pl.read_parquet(Path(summary["build_dir"]) / "tables" / "sections.parquet")
        texts = [embedding_text(h, c) for h, c in zip(sections["heading_path"], sections["content"])]
        embedder = Embedder(args.model)
        t = time.perf_counter()
        embedder.encode_documents(texts, batch_size=64)
        raw = time.perf_counter() - t
        print(f"\nraw encode() of the same {len(texts)} texts: {raw:.1f} s; "
              f"the flow {flow_s:.1f} s = {100 * (flow_s / raw - 1):.0f}% over raw encode; "
              f"wall {full_s:.1f} s = {100 * (full_s / raw - 1):.0f}% over")

    if args.rebuild:
        t = time.perf_counter()
        again = run_build(source, out / "packs")
        re_s = time.perf_counter() - t
        print(f"\nno-change rebuild: {re_s:.1f} s = {100 * re_s / full_s:.1f}% of the full build; "
              "stage seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in again["durations"].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
