"""Query latency of the default `KnowledgePack.search()` against the index floor, measured
side by side in one run.

    python benchmarks/query_latency.py [--data ../shared/data] [--work out/bench]
        [--corpus kubernetes --corpus scifact] [--queries 100] [--out FILE]

Packs: benchmarks/corpora.py (the Kubernetes docs and SciFact by default, built once and
reused). Questions: the corpus's questions (documentation sets: in-domain and absent;
SciFact: the test claims), the first --queries of them.

The floor of a question is what any hybrid search must pay, run one after the other:
the question's embedding (`pack.embed_query`), the HNSW top-k (`PackDB.vector_search`)
and the bare full-text top-k (`PackDB.fts_floor` over the question's words: section
columns and score, no vectors), k = the default `max_results`. For every question the floor and the default search (cache off) are timed
back to back, in alternating order, so load on the machine hits both alike. After 10
warm-up questions (model, index pages, vocabulary), it reports p50 and p95 of both, the
ratios default/floor (targets: p50 <= 1.5, p95 <= 2.0), the per-stage p50 of the default
search, and the same for `use_enhancements=False`. Skips with a message when no data.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks import common, corpora  # noqa: E402

TARGET_P50, TARGET_P95 = 1.5, 2.0
WARMUP = 10


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(int(round(q * (len(values) - 1))), len(values) - 1)]


def floor_ms(pack, question: str, k: int) -> dict[str, float]:
    """Embedding, HNSW top-k and FTS top-k of one question, sequentially, in ms."""
    from packs.db import fts_query_text
    from packs.text import STOP_WORDS, tokens

    t0 = time.perf_counter()
    qvec = pack.embed_query(question)
    t1 = time.perf_counter()
    pack.db.vector_search(qvec, k)
    t2 = time.perf_counter()
    pack.db.fts_floor(fts_query_text([t for t in tokens(question) if t not in STOP_WORDS]), k)
    t3 = time.perf_counter()
    return {"embed": (t1 - t0) * 1000, "hnsw": (t2 - t1) * 1000, "fts": (t3 - t2) * 1000,
            "total": (t3 - t0) * 1000}


def search_ms(pack, question: str, options) -> tuple[float, dict[str, float]]:
    t0 = time.perf_counter()
    result = pack.search(question, options)
    return (time.perf_counter() - t0) * 1000, result.timings_ms


def measure(pack, questions: list[str], options) -> dict[str, object]:
    """Floor and search of every question, back to back in alternating order."""
    for q in questions[:WARMUP]:
        floor_ms(pack, q, options.max_results)
        search_ms(pack, q, options)
    floors, totals, stages, parts = [], [], {}, {}
    for n, q in enumerate(questions):
        if n % 2:
            total, timings = search_ms(pack, q, options)
            f = floor_ms(pack, q, options.max_results)
        else:
            f = floor_ms(pack, q, options.max_results)
            total, timings = search_ms(pack, q, options)
        floors.append(f["total"])
        totals.append(total)
        for k, v in f.items():
            parts.setdefault(k, []).append(v)
        for k, v in timings.items():
            stages.setdefault(k, []).append(v)
    med = statistics.median
    return {"floor_p50": med(floors), "floor_p95": pct(floors, 0.95),
            "p50": med(totals), "p95": pct(totals, 0.95),
            "ratio_p50": med(totals) / med(floors), "ratio_p95": pct(totals, 0.95) / pct(floors, 0.95),
            "floor_parts_p50": {k: med(v) for k, v in parts.items()},
            "stages_p50": {k: med(v) for k, v in stages.items()}}


def questions_of(corpus, limit: int) -> list[str]:
    qs = [q.question for split in ("test", "dev") for q in corpus.in_domain[split]]
    qs += [q.question for split in ("test", "dev") for q in corpus.absent.get(split, [])]
    return qs[:limit]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--corpus", action="append", choices=corpora.CORPORA)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    names = [n for n in (args.corpus or ["kubernetes", "scifact"])
             if corpora.available(args.data, n)]
    if not names:
        print(f"skipped: no benchmark corpus under {args.data} (pass --data DIR)")
        return 0

    from packs import KnowledgePack
    from packs.options import SearchOptions

    variants = {"default": SearchOptions(use_cache=False),
                "use_enhancements=False": SearchOptions(use_cache=False, use_enhancements=False)}
    lines = [common.machine_line(), f"load average at start: {os.getloadavg()[0]:.1f}", ""]
    ok = True
    for name in names:
        corpus = corpora.load(args.data, name, args.work)
        qs = questions_of(corpus, args.queries)
        with KnowledgePack.open(corpus.built.pack_dir) as pack:
            m = pack.manifest
            lines += [f"## {name}: {m.counts.sections} sections, {m.counts.articles} pages, "
                      f"{len(qs)} questions (+{WARMUP} warm-up), k = "
                      f"{variants['default'].max_results}", ""]
            rows, stage_rows = [], []
            for label, opts in variants.items():
                r = measure(pack, qs, opts)
                print(f"{name} {label}: p50 {r['p50']:.1f} ms (floor {r['floor_p50']:.1f}), "
                      f"p95 {r['p95']:.1f} ms (floor {r['floor_p95']:.1f})", file=sys.stderr,
                      flush=True)
                rows.append((label, {"floor p50": r["floor_p50"], "search p50": r["p50"],
                                     "ratio p50": r["ratio_p50"], "floor p95": r["floor_p95"],
                                     "search p95": r["p95"], "ratio p95": r["ratio_p95"]}))
                stage_rows.append((f"{label}: search stages", r["stages_p50"]))
                stage_rows.append((f"{label}: floor parts", r["floor_parts_p50"]))
                if label == "default":
                    ok &= r["ratio_p50"] <= TARGET_P50 and r["ratio_p95"] <= TARGET_P95
            cols = ("floor p50", "search p50", "ratio p50", "floor p95", "search p95",
                    "ratio p95")
            stage_cols = sorted({k for _, d in stage_rows for k in d})
            lines += ["milliseconds; ratio = search / floor (targets: p50 <= 1.5, p95 <= 2.0)",
                      "", common.table(rows, cols), "", "per-stage p50 (ms):", "",
                      common.table(stage_rows, stage_cols), ""]
    text = "\n".join(lines)
    common.print_report(text, args.out, "Query latency against the index floor",
                        "query_latency.py", argv)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
