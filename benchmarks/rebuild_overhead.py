"""What a no-change rebuild costs against a running Prefect server, beside a trivial flow.

    python benchmarks/rebuild_overhead.py [--rounds 3]

Starts a persistent server (`kpack server start`) in a temporary PREFECT_HOME, builds the
example pack (sources/example, offline model) once, then alternates, `--rounds` times:

- a trivial Prefect flow run (one flow, one task) in a new process against the server;
- `kpack build sources/example` in a new process, which finds nothing changed;

and reports the median wall time of each and their ratio (goal: rebuild <= 2x trivial).
Both pay a new interpreter and Prefect's imports, as a scheduler's command would.
Results go to stdout and benchmarks/results/rebuild_overhead.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "rebuild_overhead.md"
TRIVIAL = """
from prefect import flow, task

@task
def one():
    return 1

@flow
def trivial():
    return one()

trivial()
"""


def timed(args: list[str], env: dict) -> float:
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"{args[:4]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    print(common.machine_line(), flush=True)
    with tempfile.TemporaryDirectory(prefix="kpack-rebuild-") as tmp:
        env = {**os.environ, "PREFECT_HOME": f"{tmp}/home", "HF_HUB_OFFLINE": "1",
               "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
        env.pop("PREFECT_API_URL", None)
        kpack = [sys.executable, "-m", "packs.cli"]
        subprocess.run([*kpack, "server", "start", "--port", "4297"], cwd=ROOT, env=env,
                       check=True, capture_output=True)
        try:
            build = [*kpack, "build", "sources/example", "--out", f"{tmp}/out"]
            print("first build ...", flush=True)
            first = timed(build, env)
            times: dict[str, list[float]] = {"trivial flow": [], "no-change rebuild": []}
            state = json.loads(Path(f"{tmp}/home/kpack-server.json").read_text())
            trivial_env = {**env, "PREFECT_API_URL": state["url"]}  # the same server
            for r in range(args.rounds):
                times["trivial flow"].append(timed([sys.executable, "-c", TRIVIAL], trivial_env))
                times["no-change rebuild"].append(timed(build, env))
                print(f"round {r + 1}: trivial {times['trivial flow'][-1]:.1f} s, rebuild "
                      f"{times['no-change rebuild'][-1]:.1f} s", flush=True)
        finally:
            subprocess.run([*kpack, "server", "stop"], cwd=ROOT, env=env, check=False,
                           capture_output=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["no-change rebuild"] / med["trivial flow"]
    text = ("| run | wall s (each) | median s |\n|---|---|---:|\n" + "".join(
        f"| {k} | {', '.join(f'{t:.1f}' for t in v)} | {med[k]:.1f} |\n"
        for k, v in times.items())
        + f"\nfirst build of the example pack: {first:.1f} s. No-change rebuild / trivial flow "
          f"= {ratio:.2f} (goal <= 2.0)\n")
    print(text)
    common.append_run(RESULTS, f"python benchmarks/rebuild_overhead.py --rounds {args.rounds}",
                      text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
