"""How fast `kpack build` answers: bad input, and no-change rebuilds, beside their baselines.

    nice python benchmarks/cli_latency.py [--rounds 5] [--pages 40] [--burners 2]
                                          [--modes idle,load] [--no-write]

Each figure is measured beside its baseline in the same run, rounds interleaved, every
command a new process (what a user or a scheduler runs), in a temporary PREFECT_HOME with
no PREFECT_API_URL; once with the machine as it is ("idle": other jobs may run, the load
average is printed) and once with `--burners` CPU-bound processes of our own ("load"):

1. bad input (a urls.txt typo, an invalid pack.toml, a missing source folder, an absent
   model; in turn) vs `kpack inspect` of a built pack. Goal: <= 3x inspect.
2. first no-change rebuild with nothing started (no server, no warm build process) vs a
   trivial 4-task Prefect flow, which starts Prefect's own temporary server. Goal: <= 1.5x.
   Also, for reference, the rebuild with KPACK_SERVER_IDLE_S=0 (a temporary server per
   build: what every build paid before).
3. second no-change rebuild (the server and the warm build process of the previous build
   running) vs `kpack inspect`. Goal: <= 3x inspect + the conditional requests (the fetch
   stage's seconds, from `kpack build --json`).

The pack is `--pages` Markdown pages served over loopback HTTP with Last-Modified (the
rebuild's fetches are conditional requests answered 304), offline extractor, the packaged
all-MiniLM-L6-v2. Results: stdout and benchmarks/results/cli_latency.md (appended).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "cli_latency.md"
KPACK = str(Path(sys.executable).with_name("kpack"))
TRIVIAL = """
from prefect import flow, task

@task
def one(i):
    return i

@flow
def trivial():
    return [f.result() for f in [one.submit(i) for i in range(4)]]

trivial()
"""
TOPICS = ["kettles", "teapots", "cups", "leaves", "water", "brewing", "storage", "milk"]


class _Quiet(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".md": "text/markdown"}

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serve(folder: Path):
    import threading

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(folder)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


def write_site(site: Path, pages: int) -> list[str]:
    """`pages` small Markdown pages (two sections each); their file names."""
    site.mkdir(parents=True)
    names = []
    for i in range(pages):
        topic = TOPICS[i % len(TOPICS)]
        name = f"{topic}-{i}.md"
        (site / name).write_text(
            f"# {topic.title()} {i}\n\nNotes on {topic}, page {i}.\n\n## Basics\n\n"
            f"Keep the {topic} clean and dry; page {i} says why in two sentences. It also "
            f"links to [the next page]({TOPICS[(i + 1) % len(TOPICS)]}-{(i + 1) % pages}.md)."
            f"\n\n## Details\n\nSection two of page {i} about {topic} and its care.\n",
            encoding="utf-8")
        names.append(name)
    return names


def write_sources(tmp: Path, base: str, names: list[str]) -> tuple[Path, list[list[str]]]:
    """The benchmark pack's source folder, and the bad-input command lines."""
    toml = ('allow_private_hosts = true\nextractor = "offline"\n'
            'embedding_model = "all-MiniLM-L6-v2"\n')
    good = tmp / "sources" / "bench"
    good.mkdir(parents=True)
    (good / "urls.txt").write_text("".join(f"{base}/{n}\n" for n in names))
    (good / "pack.toml").write_text(toml)
    bad = []
    for label, urls, pack_toml in (("typo", "htp:/tea kettles\n", toml),
                                   ("toml", f"{base}/{names[0]}\n", toml + "keep_builds = \"3\"\n"),
                                   ("model", f"{base}/{names[0]}\n",
                                    toml.replace("all-MiniLM-L6-v2", "no-such/model"))):
        folder = tmp / "sources" / f"bad-{label}"
        folder.mkdir()
        (folder / "urls.txt").write_text(urls)
        (folder / "pack.toml").write_text(pack_toml)
        bad.append(["build", str(folder), "--out", str(tmp / "out")])
    bad.append(["build", str(tmp / "sources" / "missing"), "--out", str(tmp / "out")])
    return good, bad


def run(args: list[str], env: dict, expect: int = 0) -> tuple[float, str]:
    """Wall seconds of one command in a new process, and its stdout."""
    start = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != expect:
        raise RuntimeError(f"{args[:3]} exited {done.returncode}, not {expect}: "
                           f"{done.stderr[-2000:]}")
    return seconds, done.stdout


def stop_all(env: dict) -> None:
    """`kpack server stop`, then wait until the server and the warm process are gone."""
    home = Path(env["PREFECT_HOME"])
    pids = []
    for name in ("kpack-server.json", "kpack-builder.json"):
        try:
            pids.append(int(json.loads((home / name).read_text())["pid"]))
        except (OSError, ValueError, KeyError):
            pass
    subprocess.run([KPACK, "server", "stop"], cwd=ROOT, env=env, capture_output=True)
    deadline = time.monotonic() + 60
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)


def wait_warm(env: dict, timeout_s: float = 300) -> None:
    sock = Path(env["PREFECT_HOME"]) / "kpack-builder.sock"
    deadline = time.monotonic() + timeout_s
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(2)  # let it settle into its loop


def _burn() -> None:
    while True:
        pass


@contextmanager
def burners(count: int):
    procs = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(count)]
    for p in procs:
        p.start()
    try:
        time.sleep(5 if procs else 0)  # let the load average notice
        yield
    finally:
        for p in procs:
            p.terminate()
            p.join()


def measure(mode: str, rounds: int, env: dict, source: Path, bad: list[list[str]],
            pack: Path, say) -> dict[str, list[float]]:
    build = [KPACK, "build", str(source), "--out", str(pack.parent), "--json"]
    inspect = [KPACK, "inspect", str(pack)]
    t: dict[str, list[float]] = {k: [] for k in (
        "inspect (bad-input rounds)", "bad input", "trivial 4-task flow",
        "first no-change rebuild", "rebuild, temporary server", "inspect (rebuild rounds)",
        "second no-change rebuild", "its fetch stage")}
    loads = [os.getloadavg()[0]]
    for r in range(rounds):  # 1. bad input vs inspect
        t["inspect (bad-input rounds)"].append(run(inspect, env)[0])
        t["bad input"].append(run([KPACK, *bad[r % len(bad)]], env, expect=2)[0])
    for r in range(rounds):  # 2. nothing started: trivial flow vs first rebuild
        stop_all(env)
        loads.append(os.getloadavg()[0])
        t["trivial 4-task flow"].append(run([sys.executable, "-c", TRIVIAL], env)[0])
        t["first no-change rebuild"].append(run(build, env)[0])
        stop_all(env)
        t["rebuild, temporary server"].append(run(build, {**env, "KPACK_SERVER_IDLE_S": "0"})[0])
        say(f"{mode} round {r + 1}: trivial {t['trivial 4-task flow'][-1]:.1f} s, first "
            f"rebuild {t['first no-change rebuild'][-1]:.1f} s, temporary server "
            f"{t['rebuild, temporary server'][-1]:.1f} s")
    run(build, env)  # 3. the server and the warm process are up
    wait_warm(env)
    for _ in range(rounds):
        loads.append(os.getloadavg()[0])
        t["inspect (rebuild rounds)"].append(run(inspect, env)[0])
        seconds, out = run(build, env)
        summary = json.loads(out)
        assert summary["status"] == "no changes", summary.get("status")
        t["second no-change rebuild"].append(seconds)
        t["its fetch stage"].append(float(summary["durations"].get("fetch", 0.0)))
    stop_all(env)
    t["load average"] = loads
    return t


def table(mode: str, t: dict[str, list[float]], burners_count: int) -> str:
    med = {k: statistics.median(v) for k, v in t.items() if v}
    rows = "".join(f"| {k} | {', '.join(f'{x:.2f}' for x in v)} | {med[k]:.2f} |\n"
                   for k, v in t.items() if v and k != "load average")
    bad = med["bad input"] / med["inspect (bad-input rounds)"]
    first = med["first no-change rebuild"] / med["trivial 4-task flow"]
    budget = 3 * med["inspect (rebuild rounds)"] + med["its fetch stage"]
    second = med["second no-change rebuild"]
    verdict = lambda ok: "met" if ok else "MISSED"  # noqa: E731
    added = f", {burners_count} CPU burners of ours" if burners_count else ", none of ours"
    return (f"### {mode} (load average {min(t['load average']):.1f}-"
            f"{max(t['load average']):.1f} on {os.cpu_count()} cores{added})\n\n"
            "| command | wall s, each round | median s |\n|---|---|---:|\n" + rows +
            f"\n- bad input / inspect = {bad:.2f} (goal <= 3): {verdict(bad <= 3)}\n"
            f"- first no-change rebuild / trivial flow = {first:.2f} (goal <= 1.5): "
            f"{verdict(first <= 1.5)}\n"
            f"- second no-change rebuild = {second:.2f} s against 3 x inspect + fetch = "
            f"{budget:.2f} s ({second / med['inspect (rebuild rounds)']:.2f}x inspect): "
            f"{verdict(second <= budget)}\n"
            f"- for reference, a rebuild on a temporary server (KPACK_SERVER_IDLE_S=0, as "
            f"before) = {med['rebuild, temporary server']:.2f} s\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pages", type=int, default=40)
    ap.add_argument("--burners", type=int, default=2, help="CPU burners in the load mode")
    ap.add_argument("--modes", default="idle,load")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args(argv)
    say = partial(print, flush=True)
    say(common.machine_line())
    texts = []
    with tempfile.TemporaryDirectory(prefix="kpack-cli-latency-") as tmp_name:
        tmp = Path(tmp_name)
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        env.update({"PREFECT_HOME": str(tmp / "home"), "HF_HUB_OFFLINE": "1",
                    "KPACK_SERVER_IDLE_S": "600", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                    "DO_NOT_TRACK": "1", "KPACK_CACHE_DIR": str(tmp / "cache")})
        env.pop("KPACK_DEBUG", None)
        names = write_site(tmp / "site", args.pages)
        with serve(tmp / "site") as base:
            source, bad = write_sources(tmp, base, names)
            pack = tmp / "out" / "bench"
            seconds, _ = run([KPACK, "build", str(source), "--out", str(pack.parent)], env)
            say(f"first build of {args.pages} pages: {seconds:.1f} s")
            try:
                for mode in args.modes.split(","):
                    count = args.burners if mode == "load" else 0
                    with burners(count):
                        t = measure(mode, args.rounds, env, source, bad, pack, say)
                    texts.append(table(mode, t, count))
                    say(texts[-1])
            finally:
                stop_all(env)
    text = "\n".join(texts)
    if not args.no_write:
        args_text = " ".join(argv if argv is not None else sys.argv[1:])
        common.append_run(RESULTS, f"python benchmarks/cli_latency.py {args_text}", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
