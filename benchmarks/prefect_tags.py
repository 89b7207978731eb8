"""What a tag on a task run costs in Prefect 3.8.8: why the build's task runs carry none.

    python benchmarks/prefect_tags.py [--tasks 8] [--rounds 2]

Prefect acquires a concurrency slot for every tagged task run (`tag:<tag>` limits), through
one in-process service per set of tags that handles acquisitions one at a time. This runs
a flow of `--tasks` trivial tasks against a temporary Prefect server (the test harness,
SQLite), in this order per round: no tags, a new tag set, the same tag set again; and
reports each flow's wall time. Results go to stdout and benchmarks/results/prefect_tags.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "prefect_tags.md"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--results", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="kpack-tags-"))
    os.environ["PREFECT_LOGGING_TO_API_ENABLED"] = "false"

    from prefect import flow, task
    from prefect.testing.utilities import prefect_test_harness

    @task
    def work(i: int) -> int:
        return i

    @flow
    def tagged(tags: list[str], n: int) -> list[int]:
        futures = [work.with_options(tags=tags, task_run_name=f"work-{i}").submit(i)
                   for i in range(n)]
        return [f.result() for f in futures]

    print(common.machine_line(), flush=True)
    rows: list[tuple[str, float]] = []
    with prefect_test_harness(server_startup_timeout=120):
        tagged([], args.tasks)  # the first flow run pays the imports and registration
        for r in range(args.rounds):
            for label, tags in (("no tags", []),
                                ("a new tag set", [f"pack:p{r}", "stage:embed"]),
                                ("the same tag set again", [f"pack:p{r}", "stage:embed"])):
                start = time.perf_counter()
                tagged(tags, args.tasks)
                rows.append((f"round {r + 1}: {label}", time.perf_counter() - start))
                print(f"  {rows[-1][0]}: {rows[-1][1]:.2f} s", flush=True)
    text = (f"flow of {args.tasks} trivial tasks, wall seconds:\n\n| run | s |\n|---|---:|\n"
            + "".join(f"| {label} | {s:.2f} |\n" for label, s in rows))
    print(text)
    common.append_run(args.results, f"python benchmarks/prefect_tags.py --tasks {args.tasks} "
                      f"--rounds {args.rounds}", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
