"""The Kubernetes docs prose subset (405 pages) built on the default threads runner and on a
local 2-process Dask cluster, on the same machine, side by side: what distribution costs
when there is only one machine (goal: dask:2 wall time <= 1.10 x threads).

    python benchmarks/k8s_runners.py [--data ../shared/data/kubernetes-docs] [--out DIR]
                                     [--runners threads dask:2] [--rounds 1] [--limit N]
                                     [--shard-pages N]
                                     [--results FILE]

Every build starts from an empty work directory in a fresh process (imports, the
ephemeral Prefect server and, for Dask, the cluster and its model loads all count), with
the offline extractor and the packaged all-MiniLM-L6-v2. `--rounds 2` runs the runners in
A B B A order to even out drift on a noisy machine. The packs of the two runners are
compared table by table (same rows; vectors within 1e-6).
Skips with a message when the data folder is absent.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402
from benchmarks.k8s_build import _Quiet, prose_paths  # noqa: E402
from benchmarks.scale_build import _run_child  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "k8s_runners.md"


def same_tables(a: Path, b: Path) -> str:
    """"identical" or what differs between two builds' tables."""
    import numpy as np
    import polars as pl

    from packs import format as fmt

    for name in fmt.TABLE_COLUMNS:
        x = pl.read_parquet(a / fmt.TABLES_DIR / f"{name}.parquet")
        y = pl.read_parquet(b / fmt.TABLES_DIR / f"{name}.parquet")
        if x.columns != y.columns or x.height != y.height:
            return f"{name}: {x.height} vs {y.height} rows"
        vectors = [c for c in x.columns if "embedding" in c]
        keys = [c for c in x.columns if c not in vectors and x[c].dtype != pl.List(pl.Utf8)]
        x, y = x.sort(keys), y.sort(keys)
        if not x.drop(vectors).equals(y.drop(vectors)):
            return f"{name}: rows differ"
        for col in vectors:
            diff = float(np.abs(x[col].to_numpy() - y[col].to_numpy()).max())
            if diff > 1e-6:
                return f"{name}.{col}: vectors differ by {diff:.2e}"
    return "identical"


def cpu_seconds() -> float:
    """User + system CPU seconds of this process's finished children and their waited-for
    descendants (a build's process, its Dask workers, its Prefect server). On a shared
    machine the wall time depends on how many runnable threads a runner competes with;
    the CPU time it spent does much less."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def stage_line(summary: dict) -> str:
    """Sections, the shard layout (its manifest's extra.shards), each stage's seconds (first
    submit to last finish) and the encode seconds summed over the embed shards, from a
    build's summary: the inputs of docs/scale-out.md."""
    from packs.manifest import read_manifest

    stages = ", ".join(f"{k} {v:.1f}" for k, v in (summary.get("durations") or {}).items())
    embed = summary.get("embed_stats") or {}
    sections = (summary.get("counts") or {}).get("sections", "?")
    layout = read_manifest(Path(summary["build_dir"])).extra.get("shards", {})
    return (f"{sections} sections in {layout.get('count', '?')} shards "
            f"({layout.get('slots', 0)} cluster task slots); stage seconds: {stages}; "
            f"encode s summed over shards: {embed.get('seconds', '?')}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared/data/kubernetes-docs")
    ap.add_argument("--out", type=Path, default=common.DEFAULT_WORK / "k8s-runners")
    ap.add_argument("--runners", nargs="+", default=["threads", "dask:2"])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--shard-pages", type=int, default=None,
                    help="pack.toml shard_pages (default: the product's)")
    ap.add_argument("--results", type=Path, default=RESULTS, help="the file results are "
                    "appended to (default benchmarks/results/k8s_runners.md)")
    args = ap.parse_args(argv)
    if not (args.data / "MANIFEST.jsonl").is_file():
        print(f"skipped: no Kubernetes docs at {args.data} (pass --data DIR)")
        return 0
    print(common.machine_line(), flush=True)
    paths = prose_paths(args.data, args.limit)
    order = []
    for r in range(args.rounds):
        order += args.runners if r % 2 == 0 else list(reversed(args.runners))
    times: dict[str, list[float]] = {r: [] for r in args.runners}
    cpu: dict[str, list[float]] = {r: [] for r in args.runners}
    builds: dict[str, Path] = {}
    details: list[str] = []
    with common.serve_handler(partial(_Quiet, directory=str(args.data))) as base:
        source = args.out / "sources" / "k8s-docs"
        source.mkdir(parents=True, exist_ok=True)
        (source / "urls.txt").write_text("\n".join(f"{base}/{p}" for p in paths) + "\n")
        (source / "pack.toml").write_text(
            'allow_private_hosts = true\nextractor = "offline"\n'
            f'embedding_model = "{common.MODEL}"\n'
            + (f"shard_pages = {args.shard_pages}\n" if args.shard_pages else ""))
        for i, runner in enumerate(order):
            tag = f"{runner.replace(':', '-')}-{i}"
            out, work = args.out / f"out-{tag}", args.out / f"work-{tag}"
            for folder in (out, work):
                shutil.rmtree(folder, ignore_errors=True)
            print(f"build {i + 1}/{len(order)}: {len(paths)} pages on {runner}", flush=True)
            load_before = os.getloadavg()[0]
            used = cpu_seconds()
            result = _run_child(["--child", str(source), str(out), str(work), runner],
                                args.out / f"build-{tag}.log")
            times[runner].append(result["seconds"])
            cpu[runner].append(cpu_seconds() - used)
            builds[runner] = Path(result["summary"]["build_dir"])
            print(f"  {result['seconds']:.1f} s wall, {cpu[runner][-1]:.1f} CPU s, "
                  f"{result['summary']['task_runs']} task runs, peak RSS "
                  f"{result['peak_rss_mb']:.0f} MB", flush=True)
            # the machine may be shared: the 1-minute load average says how much it was
            load = f"load average {load_before:.1f} at start, {os.getloadavg()[0]:.1f} at end"
            details.append(f"- build {i + 1} ({runner}): {stage_line(result['summary'])}; "
                           f"{load}")
            print(f"  {stage_line(result['summary'])}", flush=True)
    base_runner, other = args.runners[0], args.runners[-1]
    ratio = statistics.mean(times[other]) / statistics.mean(times[base_runner])
    same = same_tables(builds[base_runner], builds[other])
    cpu_ratio = statistics.mean(cpu[other]) / statistics.mean(cpu[base_runner])
    lines = ["| runner | builds | wall s (each) | mean wall s | CPU s (each) | mean CPU s |",
             "|---|---:|---|---:|---|---:|"]
    for runner in args.runners:
        lines.append(f"| {runner} | {len(times[runner])} | "
                     f"{', '.join(f'{t:.1f}' for t in times[runner])} | "
                     f"{statistics.mean(times[runner]):.1f} | "
                     f"{', '.join(f'{t:.1f}' for t in cpu[runner])} | "
                     f"{statistics.mean(cpu[runner]):.1f} |")
    text = ("\n".join(lines) + f"\n\n{other} / {base_runner} wall-time ratio: {ratio:.3f} "
            f"(goal <= 1.10); CPU-time ratio: {cpu_ratio:.3f}; tables: {same}\n\n"
            "per build (stage seconds overlap: extract and embed run side by side):\n\n"
            + "\n".join(details) + "\n")
    print(text)
    common.append_run(args.results, f"python benchmarks/k8s_runners.py --rounds {args.rounds} "
                      f"--data {args.data}"
                      + (f" --shard-pages {args.shard_pages}" if args.shard_pages else ""),
                      text, note=f" ({len(paths)} pages)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
