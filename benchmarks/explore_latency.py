"""The explorer's two speed targets, each measured side by side with its baseline.

    python benchmarks/explore_latency.py [--data ../shared/data] [--work out/bench]
        [--pack PACK_DIR] [--questions 40] [--rounds 3] [--render-rounds 15] [--out FILE]

1. `/ask` against `KnowledgePack.ask()` in process, on the same questions: the explorer
   runs as `kpack explore` serves it (uvicorn on 127.0.0.1, in a thread of this process),
   asked over HTTP with a keep-alive client; the baseline asks the same open pack. Every
   call starts with the pack's result cache emptied (both sides pay a full search and
   answer), and the two are timed back to back in alternating order, round after round.
   Target: /ask p50 <= 1.3x ask() p50.
2. The entity page of the most connected entity (most neighbours) against the least
   connected one (one neighbour), rendered in Chromium (/usr/bin/chromium through
   Playwright): the time from the start of the navigation to the graph laid out
   (`data-ready-ms`, set by explore.js at cytoscape's layoutstop), alternating, after one
   warm-up visit each. Target: most <= 2x least.

The pack: the Kubernetes docs (benchmarks/corpora.py, built once and reused under --work),
or any pack given with --pack; the questions: the dev questions of
benchmarks/data/k8s_questions.jsonl (in-domain and absent alike, as users ask), the
first --questions. Needs no API key (answers are the offline extractive ones; with
ANTHROPIC_API_KEY set both sides would wait on Claude alike). Skips with a message when
there is neither data nor --pack.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks import common  # noqa: E402

ASK_TARGET, RENDER_TARGET = 1.3, 2.0
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(int(round(q * (len(values) - 1))), len(values) - 1)]


def questions(limit: int) -> list[str]:
    rows = [json.loads(line) for line in
            (ROOT / "benchmarks/data/k8s_questions.jsonl").read_text().splitlines() if line]
    return [r["question"] for r in rows if r["split"] == "dev"][:limit]


def serve(paths: list[Path]):
    """(base URL, packset, stop): the explorer as `kpack explore` runs it, in a thread."""
    from packs.explore.cli import bind, open_app, server, url_of

    app, packset = open_app(paths)
    sock = bind("127.0.0.1", 0)
    srv = server(app, sock)
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.01)

    def stop() -> None:
        srv.should_exit = True
        thread.join(timeout=30)
        sock.close()
        packset.close()

    return url_of(sock).rstrip("/"), packset, stop


def ask_latency(base: str, pack, label: str, qs: list[str], rounds: int) -> list[str]:
    """Time /ask and pack.ask() on every question, alternating; lines of the report."""
    import httpx

    http_ms, inproc_ms = [], []
    with httpx.Client(base_url=base, timeout=120) as client:
        for q in ("What is a Pod?", qs[0]):  # warm-up: encoder, vocabulary, titles
            pack.ask(q)
            client.get("/ask", params={"q": q, "pack": label}).raise_for_status()
        for r in range(rounds):
            for i, q in enumerate(qs):
                def over_http(q: str = q) -> None:
                    client.get("/ask", params={"q": q, "pack": label}).raise_for_status()

                def in_process(q: str = q) -> None:
                    pack.ask(q)

                order = [(over_http, http_ms), (in_process, inproc_ms)]
                for fn, sink in (order if (r + i) % 2 == 0 else order[::-1]):
                    pack.cache.clear()
                    t = time.perf_counter()
                    fn()
                    sink.append((time.perf_counter() - t) * 1000)
    ratio = statistics.median(http_ms) / statistics.median(inproc_ms)
    return [
        f"/ask over HTTP vs pack.ask() in process: {len(qs)} questions x {rounds} rounds, "
        "cache emptied before every call",
        f"  pack.ask()  p50 {statistics.median(inproc_ms):7.1f} ms   p90 "
        f"{pct(inproc_ms, 0.9):7.1f} ms",
        f"  GET /ask    p50 {statistics.median(http_ms):7.1f} ms   p90 {pct(http_ms, 0.9):7.1f} ms",
        f"  p50 ratio {ratio:.2f} (target <= {ASK_TARGET}): "
        f"{'met' if ratio <= ASK_TARGET else 'MISSED'}",
    ]


def render_times(base: str, label: str, entities: dict[str, str], rounds: int) -> dict:
    """Milliseconds from navigation start to the graph laid out, per entity id."""
    from playwright.sync_api import sync_playwright

    out: dict[str, list[float]] = {eid: [] for eid in entities.values()}
    ids = list(out)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})

        def visit(eid: str) -> float:
            page.goto(f"{base}/entity?pack={label}&id={eid}")
            page.wait_for_selector('#graph[data-graph-ready="true"]', timeout=60_000)
            return float(page.locator("#graph").get_attribute("data-ready-ms"))

        for eid in ids:  # warm-up: the browser's cache of the page's assets
            visit(eid)
        for r in range(rounds):
            for eid in (ids if r % 2 == 0 else ids[::-1]):
                out[eid].append(visit(eid))
        browser.close()
    return out


def render_report(base: str, pack, label: str, rounds: int) -> list[str]:
    degrees = pack.browse.degrees()
    most, least = degrees[0], min(degrees, key=lambda d: (d[3], d[1]))
    if not CHROMIUM.exists():
        return ["entity page render: skipped, no /usr/bin/chromium (apt-get install chromium)"]
    times = render_times(base, label, {"most": most[0], "least": least[0]}, rounds)
    lines = [f"entity page in Chromium, navigation start to graph laid out, {rounds} visits "
             "each, alternating:"]
    meds = {}
    for (eid, name, _, degree), what in ((most, "most connected"), (least, "least connected")):
        ms = times[eid]
        meds[what] = statistics.median(ms)
        mentions = pack.browse.mentions(eid, 0, 1).total
        lines.append(f"  {what:16} {name!r}: {degree} neighbours, {mentions} mentions; "
                     f"p50 {meds[what]:6.1f} ms, max {max(ms):6.1f} ms")
    ratio = meds["most connected"] / meds["least connected"]
    lines.append(f"  ratio most/least {ratio:.2f} (target < {RENDER_TARGET}): "
                 f"{'met' if ratio < RENDER_TARGET else 'MISSED'}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared/data")
    ap.add_argument("--work", type=Path, default=ROOT / "out/bench")
    ap.add_argument("--pack", type=Path, default=None,
                    help="a pack to measure instead of the Kubernetes corpus pack")
    ap.add_argument("--questions", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--render-rounds", type=int, default=15)
    ap.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = ap.parse_args(argv)
    machine = common.machine_line()
    print(machine)
    pack_dir = args.pack
    if pack_dir is None:
        from benchmarks import corpora

        if not corpora.available(args.data, "kubernetes"):
            print(f"skipped: no Kubernetes docs under {args.data} and no --pack")
            return 0
        from flows.settings import configure_prefect_env

        configure_prefect_env()
        pack_dir = corpora.load(args.data, "kubernetes", args.work).built.pack_dir
    base, packset, stop = serve([pack_dir])
    try:
        pack, label = packset.packs[0], packset.labels[0]
        m = pack.manifest
        lines = [machine, f"pack {label}: {m.counts.articles} pages, {m.counts.sections} sections, "
                 f"{m.counts.entities} entities, {m.counts.relationships} relations "
                 f"(build {m.build_id})"]
        lines += ask_latency(base, pack, label, questions(args.questions), args.rounds)
        lines += render_report(base, pack, label, args.render_rounds)
    finally:
        stop()
    common.print_report("\n".join(lines), args.out, "kpack explore latency",
                        "explore_latency.py", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
