"""Build generated sites of growing size and watch what must not grow: the driver's memory,
the task-run count and Prefect's event sizes.

    python benchmarks/scale_build.py                         # 2,000 then 20,000 pages
    python benchmarks/scale_build.py --pages 500 --runner dask:2

Each site has N small pages (a title and one short section each), written to disk and
served by `python -m http.server` in a process of its own, so the server's memory is not
counted. Each build runs in a fresh process (`--child`): the offline extractor, the
packaged all-MiniLM-L6-v2, its own ephemeral Prefect server (a separate process too).
The child reports its own peak RSS (getrusage: the driver, and with the threads runner
the tasks it runs). Prefect's "Refusing to publish event" warnings in the build's output
are counted. The raw-encode baseline encodes the same section texts in one call, in a
process of its own, so that the orchestration overhead per page is (build wall time -
raw encode time) / pages.

No ../shared data is needed; results go to stdout and benchmarks/results/scale_build.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "scale_build.md"
WORDS = ("widget", "gadget", "sprocket", "flange", "gizmo", "lever", "spindle", "valve")


def page_text(i: int) -> str:
    a, b = WORDS[i % len(WORDS)], WORDS[(i // len(WORDS)) % len(WORDS)]
    return (f"# Page {i}\n\n## Using the {a} {i}\n\nThe `{a.title()}{i}` part connects to "
            f"the {b} in assembly {i // 10}. Tighten it to {i % 40 + 5} newton metres.\n")


def write_site(root: Path, pages: int) -> None:
    marker = root / f".complete-{pages}"
    if marker.is_file():
        return
    root.mkdir(parents=True, exist_ok=True)
    for i in range(pages):
        (root / f"p{i}.md").write_text(page_text(i), encoding="utf-8")
    marker.write_text("ok")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the page server on port {port} did not start")


def child(source: str, out: str, work: str, runner: str) -> None:
    """Run one build in this process; print its summary and this process's peak RSS."""
    from flows.build import run_build

    start = time.perf_counter()
    summary = run_build(source, out, work_dir=work, task_runner_setting=runner)
    seconds = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("RESULT " + json.dumps({"seconds": seconds, "peak_rss_mb": peak_kb / 1024,
                                  "summary": summary}, default=str), flush=True)


def raw_encode(build_dir: str) -> None:
    """Encode the pack's section texts in one call (the baseline); print the seconds."""
    import polars as pl

    from packs.embedding import Embedder
    from tasks.vectors import embedding_text

    sections = pl.read_parquet(Path(build_dir) / "tables" / "sections.parquet",
                               columns=["heading_path", "content"])
    texts = [embedding_text(h, c) for h, c in sections.iter_rows()]
    embedder = Embedder(common.MODEL)
    embedder.encode_documents(texts[:64], batch_size=64)  # warm
    start = time.perf_counter()
    embedder.encode_documents(texts, batch_size=64)
    print("RESULT " + json.dumps({"seconds": time.perf_counter() - start, "texts": len(texts)}))


def _run_child(args: list[str], log: Path) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}  # Prefect settings: benchmarks.common
    with log.open("w") as fh:
        proc = subprocess.run([sys.executable, __file__, *args], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=fh, text=True, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{args[0]} failed (exit {proc.returncode}); see {log}")
    return json.loads(lines[-1][len("RESULT "):])


def run_one(pages: int, runner: str, base_dir: Path) -> dict:
    folder = base_dir / f"scale-{pages}"
    site, source = folder / "site", folder / "source"
    out, work = folder / f"out-{runner.replace(':', '-')}", folder / f"work-{runner.replace(':', '-')}"
    for path in (out, work):
        subprocess.run(["rm", "-rf", str(path)], check=True)
    print(f"{pages} pages: writing the site", flush=True)
    write_site(site, pages)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                               "127.0.0.1", "--directory", str(site)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        source.mkdir(parents=True, exist_ok=True)
        (source / "urls.txt").write_text("".join(
            f"http://127.0.0.1:{port}/p{i}.md\n" for i in range(pages)))
        (source / "pack.toml").write_text(
            f'name = "scale"\nallow_private_hosts = true\nembedding_model = "{common.MODEL}"\n'
            'extractor = "offline"\nfetch_concurrency = 16\nper_host_concurrency = 8\n')
        print(f"{pages} pages: building ({runner})", flush=True)
        log = folder / f"build-{runner.replace(':', '-')}.log"
        built = _run_child(["--child", str(source), str(out), str(work), runner], log)
    finally:
        server.terminate()
        server.wait(timeout=10)
    refusals = log.read_text(errors="replace").count("Refusing to publish event")
    print(f"{pages} pages: raw encode baseline", flush=True)
    raw = _run_child(["--raw-encode", built["summary"]["build_dir"]], folder / "raw.log")
    summary = built["summary"]
    manifest = json.loads((Path(summary["build_dir"]) / "manifest.json").read_text())
    return {
        "pages": pages, "runner": runner, "articles": summary["counts"]["articles"],
        "sections": summary["counts"]["sections"],
        "shards": manifest["extra"]["shards"]["non_empty"], "task_runs": summary["task_runs"],
        "wall_s": built["seconds"], "raw_encode_s": raw["seconds"],
        "overhead_ms_per_page": 1000 * (built["seconds"] - raw["seconds"]) / pages,
        "peak_rss_mb": built["peak_rss_mb"], "refusals": refusals,
        "stage_peaks": summary.get("driver_peak_rss_mb") or {},
    }


def table(rows: list[dict]) -> str:
    head = ("| pages | runner | articles | shards | task runs | build wall s | raw encode s "
            "| overhead ms/page | driver peak RSS MB | event refusals |\n"
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    return head + "".join(
        f"| {r['pages']:,} | {r['runner']} | {r['articles']:,} | {r['shards']} | "
        f"{r['task_runs']:,} | {r['wall_s']:.1f} | {r['raw_encode_s']:.1f} | "
        f"{r['overhead_ms_per_page']:.1f} | {r['peak_rss_mb']:.0f} | {r['refusals']} |\n"
        for r in rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--runner", default="threads")
    parser.add_argument("--out", type=Path, default=common.DEFAULT_WORK)
    parser.add_argument("--child", nargs=4, metavar=("SOURCE", "OUT", "WORK", "RUNNER"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--raw-encode", metavar="BUILD_DIR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return
    if args.raw_encode:
        raw_encode(args.raw_encode)
        return
    print(common.machine_line(), flush=True)
    rows = [run_one(n, args.runner, args.out) for n in args.pages]
    text = table(rows)
    text += "\ndriver peak RSS (MB) when each stage had finished:\n\n" + "".join(
        f"- {r['pages']:,} pages: " + ", ".join(f"{k} {v:.0f}" for k, v in r["stage_peaks"].items())
        + "\n" for r in rows)
    print(text)
    if len(rows) >= 2:
        ratio = rows[-1]["peak_rss_mb"] / rows[0]["peak_rss_mb"]
        text += (f"\ndriver peak RSS at {rows[-1]['pages']:,} pages = {ratio:.2f}x its peak at "
                 f"{rows[0]['pages']:,} (goal <= 1.3x)\n")
        print(text.splitlines()[-1])
    common.append_run(RESULTS, f"python benchmarks/scale_build.py --pages "
                      f"{' '.join(map(str, args.pages))} --runner {args.runner}", text)


if __name__ == "__main__":
    main()
