"""The query runtime install (`pip install knowledge-packs`, no extras), measured.

    python benchmarks/runtime_install.py [--pack out/bench/k8s/packs/k8s-docs]
                                         [--venv out/bench/runtime-venv] [--reuse]
                                         [--out benchmarks/results/runtime_install.md]

1. Makes a fresh venv with the Python that runs this script and installs the project into
   it with the venv's own pip, pinned by requirements.lock (`pip install -c
   requirements.lock .`), timed; its size on disk beside this (full, [dev]) venv's.
2. Cold start: a new runtime process that imports `packs`, opens the pack and prints its
   first search result, timed from spawn (5 runs, different questions); beside it, warm
   searches in that same process (the next questions, result cache off), and the same
   two figures for a process of the full install.
3. Rankings on the Kubernetes questions (benchmarks/data/k8s_questions.jsonl, default
   search options): top-5 sections of the runtime install against the full install
   (both on the pack's shipped encoder), and against the full install loading the model
   with sentence-transformers (KPACK_EMBED_BACKEND=torch), the pre-encoder query path.
Needs a pack built by the full install, e.g. `python benchmarks/k8s_build.py --out
out/bench/k8s`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402

QUESTIONS = ROOT / "benchmarks" / "data" / "k8s_questions.jsonl"
COLD_RUNS = 5
WARM_RUNS = 10
TOP = 5

# Run in the measured interpreter: prints {"first_ms", "warm_ms", "top"} as JSON.
PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
from packs import KnowledgePack
questions = json.loads(sys.argv[2])
with KnowledgePack.open(sys.argv[1]) as pack:
    first = pack.search(questions[0], use_cache=False)
    print("FIRST", flush=True)
    first_ms = 1000 * (time.perf_counter() - t0)
    warm = []
    for q in questions[1:]:
        t = time.perf_counter()
        pack.search(q, use_cache=False)
        warm.append(1000 * (time.perf_counter() - t))
print(json.dumps({"first_ms": first_ms, "warm_ms": warm,
                  "top": [s.id for s in first.sections[:5]], "backend": pack.embedder.backend}))
"""

RANKS = r"""
import json, sys
from packs import KnowledgePack
with KnowledgePack.open(sys.argv[1]) as pack:
    out = {q: [s.id for s in pack.search(q).sections[:5]] for q in json.loads(sys.argv[2])}
    out["__backend__"] = [pack.embedder.backend]
print(json.dumps(out))
"""


def du(path: Path) -> int:
    """Bytes of the regular files under `path`, hard links counted once."""
    seen, total = set(), 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KPACK_", "ANTHROPIC_"))}
    return {**base, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **extra}


def make_venv(venv: Path, reuse: bool) -> float | None:
    if reuse and (venv / "bin" / "python").is_file():
        return None
    shutil.rmtree(venv, ignore_errors=True)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "-c",
                    str(ROOT / "requirements.lock"), str(ROOT)], check=True, cwd=venv.parent)
    return time.perf_counter() - t


def probe(python: Path, pack: Path, questions: list[str], cwd: Path, **extra: str) -> dict:
    """Spawn `python` on PROBE; the first result's wall time is taken from spawn."""
    t = time.perf_counter()
    proc = subprocess.Popen([str(python), "-c", PROBE, str(pack), json.dumps(questions)],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env(**extra))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    spawn_ms = 1000 * (time.perf_counter() - t)
    rest, err = proc.communicate(timeout=600)
    if proc.returncode != 0 or line.strip() != "FIRST":
        raise SystemExit(f"{python} failed: {err[-2000:]}")
    return {**json.loads(rest), "spawn_ms": spawn_ms}


def rankings(python: Path, pack: Path, questions: list[str], cwd: Path, **extra: str) -> dict:
    done = subprocess.run([str(python), "-c", RANKS, str(pack), json.dumps(questions)],
                          cwd=cwd, capture_output=True, text=True, env=env(**extra), timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"{python} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pack", type=Path, default=ROOT / "out/bench/k8s/packs/k8s-docs")
    ap.add_argument("--venv", type=Path, default=common.DEFAULT_WORK / "runtime-venv")
    ap.add_argument("--reuse", action="store_true", help="keep an existing runtime venv")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/runtime_install.md")
    args = ap.parse_args(argv)
    if not (args.pack / "current").is_file():
        print(f"skipped: no pack at {args.pack} (python benchmarks/k8s_build.py --out out/bench/k8s)")
        return 0
    pack = args.pack.resolve()
    venv = args.venv.resolve()
    venv.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# The query runtime install — `python benchmarks/runtime_install.py`\n",
             common.machine_line(), f"load average at start: {os.getloadavg()[0]:.1f}; "
             f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}",
             f"pack: {pack}\n"]
    print("\n".join(lines), flush=True)
    questions = [json.loads(x)["question"] for x in QUESTIONS.open(encoding="utf-8")]
    runtime, full = venv / "bin" / "python", Path(sys.executable)
    # Run outside the repository, so that `packs` comes from the installed package.
    cwd = venv.parent

    install_s = make_venv(venv, args.reuse)
    size_installed = du(venv)
    lines.append("## Install and size\n")
    if install_s is not None:
        lines.append(f"runtime install (new venv + `pip install -c requirements.lock .`, "
                     f"pip {pip_version(runtime)}, wheels from pip's cache): {install_s:.0f} s")
    print(lines[-1], flush=True)

    lines.append("\n## Cold start and warm search (ms)\n")
    lines.append("| install | runs | spawn → first result (median) | min | max | inside the "
                 f"process | warm search (median of {COLD_RUNS * WARM_RUNS}) |")
    lines.append("|---|---|---|---|---|---|---|")
    for label, python, extra in (("runtime", runtime, {}), ("full [dev]", full, {})):
        runs = []
        for i in range(COLD_RUNS):
            qs = questions[i * (WARM_RUNS + 1):(i + 1) * (WARM_RUNS + 1)]
            runs.append(probe(python, pack, qs, cwd, **extra))
        spawn = [r["spawn_ms"] for r in runs]
        warm = [w for r in runs for w in r["warm_ms"]]
        lines.append(f"| {label} ({runs[0]['backend']}) | {COLD_RUNS} | "
                     f"{statistics.median(spawn):.0f} | {min(spawn):.0f} | {max(spawn):.0f} | "
                     f"{statistics.median(r['first_ms'] for r in runs):.0f} | "
                     f"{statistics.median(warm):.0f} |")
        print(lines[-1], flush=True)

    size_used = du(venv)
    full_size = du(Path(sys.prefix))
    lines.append("\n| venv | MB on disk |\n|---|---|")
    lines.append(f"| runtime, after install | {size_installed / 1e6:.0f} |")
    lines.append(f"| runtime, after the runs above (bytecode of what was imported) | "
                 f"{size_used / 1e6:.0f} |")
    lines.append(f"| full install with the dev extras ({sys.prefix}) | {full_size / 1e6:.0f} |")
    print("\n".join(lines[-4:]), flush=True)

    lines.append(f"\n## Rankings: top-{TOP} sections, {len(questions)} Kubernetes questions, "
                 "default options\n")
    t = time.perf_counter()
    got = rankings(runtime, pack, questions, cwd)
    full_onnx = rankings(full, pack, questions, cwd)
    full_torch = rankings(full, pack, questions, cwd, KPACK_EMBED_BACKEND="torch")
    lines.append("| runtime install vs | backends | identical top-5 | share |")
    lines.append("|---|---|---|---|")
    for label, other in (("full install (shipped encoder)", full_onnx),
                         ("full install, model via sentence-transformers", full_torch)):
        same = sum(got[q] == other[q] for q in questions)
        lines.append(f"| {label} | {got['__backend__'][0]} / {other['__backend__'][0]} | "
                     f"{same}/{len(questions)} | {same / len(questions):.1%} |")
        print(lines[-1], flush=True)
    lines.append(f"\n({time.perf_counter() - t:.0f} s for the three ranking runs; load average "
                 f"at the end: {os.getloadavg()[0]:.1f})")
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"\nwritten to {args.out}")
    return 0


def pip_version(python: Path) -> str:
    out = subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, text=True)
    return out.stdout.split()[1] if out.returncode == 0 else "?"


if __name__ == "__main__":
    raise SystemExit(main())
