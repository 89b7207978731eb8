"""HTML pages parsed by many fetch threads at once: does the process survive?

    python benchmarks/html_parse_threads.py [--pages DIR] [--runs 8] [--rounds 5] [--threads 16]

lxml and trafilatura, run on several threads at once, corrupted the heap now and then and
glibc aborted the whole build ("double free or corruption"). tasks/fetch/parse.py now
parses one page at a time under a lock. This runs `--runs` child processes per mode; each
parses every page of `--pages` (default: the Cargo book's HTML that rustup installs, see
benchmarks/corpora.py) `--rounds` times on `--threads` threads, as the fetch stage does
(`parse_document` in worker threads), and reports how many children the C library
aborted. Modes: `lock` (the product: html_to_markdown) and `no lock` (its body called
directly, as before).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, corpora  # noqa: E402

CHILD = """
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
sys.path.insert(0, {root!r})
from tasks.fetch import parse
if {no_lock}:
    parse.html_to_markdown = lambda html, url: parse._html_to_markdown(
        parse.decode(html, None, html=True) if isinstance(html, bytes) else html, url)
pages = [(p, p.read_bytes()) for p in sorted(Path({pages!r}).rglob("*.html"))
         if p.name not in ("print.html", "toc.html", "404.html")]
def one(page):
    path, raw = page
    return parse.parse_document(raw, "text/html; charset=utf-8", "http://127.0.0.1/x.html",
                                "/x.html").status
for _ in range({rounds}):
    with ThreadPoolExecutor({threads}) as pool:
        statuses = list(pool.map(one, pages))
print(len(pages) * {rounds})
"""


def run_mode(pages: Path, no_lock: bool, runs: int, rounds: int, threads: int, log) -> str:
    aborted, parsed, t0 = 0, 0, time.perf_counter()
    for k in range(runs):
        code = CHILD.format(root=str(ROOT), no_lock=no_lock, pages=str(pages), rounds=rounds,
                            threads=threads)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=1800)
        if done.returncode == 0:
            parsed += int(done.stdout.split()[-1])
        else:
            aborted += 1
            why = (done.stderr.strip().splitlines() or ["?"])[-1]
            log(f"    run {k + 1}: exit {done.returncode} ({why[:80]})")
    mode = "no lock" if no_lock else "lock"
    return (f"| {mode:7} | {runs} | {aborted} | {parsed} | "
            f"{time.perf_counter() - t0:.0f} s |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=Path, default=None, help="a folder of HTML pages")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=16)
    args = ap.parse_args(argv)
    pages = args.pages or corpora.cargo_docs()
    if pages is None:
        print("skipped: no HTML pages (pass --pages DIR, or install the Rust docs)")
        return 0

    def log(line: str) -> None:
        print(line, flush=True)

    log(common.machine_line())
    log(f"pages: {pages}; {args.runs} child processes per mode, each {args.rounds} rounds "
        f"over every page on {args.threads} threads")
    rows = []
    for no_lock in (True, False):
        log(f"  mode {'no lock' if no_lock else 'lock'} ...")
        rows.append(run_mode(pages, no_lock, args.runs, args.rounds, args.threads, log))
    log("| mode    | runs | aborted | pages parsed in runs that finished | time |")
    log("|---------|------|---------|------------------------------------|------|")
    for row in rows:
        log(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
