"""The topic map's community detection: igraph + leidenalg against networkx's Louvain on a
pack's entity graph (speed and modularity), and the topic stage's share of the build.

    python benchmarks/topic_communities.py --pack PACK [--pack PACK ...] [--repeat 3]
        [--out FILE]

For each pack (its current build's tables): the graph tasks/topics.py builds (nodes,
edges), then each method `--repeat` times on it (median milliseconds, communities, those of
MIN_ENTITIES or more, Newman modularity: higher is a better split), the whole topic core
(`tasks.topics.topics`) timed, and, from the build's manifest, the topics stage's seconds
against the whole build's (the stage's cost in the build, side by side in one run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402
from benchmarks.graph_precision import tables_dir  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pack", type=Path, action="append", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    import polars as pl

    from packs import format as fmt
    from tasks import topics as T

    lines = [common.machine_line(), ""]
    for pack in args.pack:
        tables = tables_dir(pack)
        read = {t: pl.read_parquet(tables / f"{t}.parquet") for t in
                (fmt.ENTITIES, fmt.MENTIONS, fmt.RELATIONSHIPS)}
        sections = pl.read_parquet(tables / f"{fmt.SECTIONS}.parquet",
                                   columns=["id", "title", "content"])
        t0 = time.perf_counter()
        kept, weights = T.entity_graph(read[fmt.MENTIONS], read[fmt.RELATIONSHIPS],
                                       sections.height)
        graph_ms = 1000 * (time.perf_counter() - t0)
        lines.append(f"{pack}: graph of {len(kept)} entities, {len(weights)} edges "
                     f"({graph_ms:.0f} ms to build)")
        lines += ["| method | ms (median) | communities | topics (>= "
                  f"{T.MIN_ENTITIES} entities) | modularity |", "|---|---|---|---|---|"]
        for method in ("leiden", "louvain"):
            times, groups = [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                groups = T.communities(len(kept), weights, method)
                times.append(1000 * (time.perf_counter() - t0))
            big = sum(len(g) >= T.MIN_ENTITIES for g in groups)
            lines.append(f"| {method} | {statistics.median(times):.0f} | {len(groups)} | {big} "
                         f"| {T.modularity(len(kept), weights, groups):.4f} |")
        t0 = time.perf_counter()
        out = T.topics(read[fmt.ENTITIES], read[fmt.MENTIONS], read[fmt.RELATIONSHIPS],
                       sections)
        lines.append(f"topic core (tasks.topics.topics, leiden): {time.perf_counter() - t0:.2f} s,"
                     f" {out[fmt.TOPICS].height} topics")
        manifest = json.loads((tables.parent / fmt.MANIFEST_FILE).read_text())
        durations = manifest.get("durations") or {}
        if "topics" in durations:
            total = sum(v for v in durations.values() if isinstance(v, int | float))
            lines.append(f"this build: topics stage {durations['topics']:.1f} s of "
                         f"{total:.1f} s summed over its stages "
                         f"({100 * durations['topics'] / max(total, 1e-9):.1f} %); durations "
                         + json.dumps({k: round(v, 1) for k, v in durations.items()}))
        lines.append("")
    text = "\n".join(lines)
    common.print_report(text, args.out, "Topic map: community detection", "topic_communities.py",
                        argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
