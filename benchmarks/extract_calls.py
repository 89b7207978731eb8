"""Claude calls and dollars of building the Kubernetes docs against the loopback Messages API.

    python benchmarks/extract_calls.py [--data ../shared/data/kubernetes-docs] [--limit N]
                                       [--out DIR] [--results benchmarks/results/extract_calls.md]

Serves the `concepts/ tasks/ tutorials/ setup/` pages (a copy, so one can be edited) on
127.0.0.1, points the real build flow and the real `anthropic` SDK at the project's
loopback API (tests/anthropic_fake.py: answers made by the offline extractor, usage
counted like a tokenizer, the prompt prefix cached from 4,096 tokens as Claude Haiku 4.5
does) and measures, build by build:

  a. one request per section (batch_token_budget = 0);
  b. batching (the default budget);
  c. b rebuilt with nothing changed (goal: 0 calls);
  d. b rebuilt after one section of one page changed (goal: that page's changed sections);
  e. a strictly schema-following API (boundary values: empty strings, long strings,
     empty arrays, extra keys), batching on: every section must be extracted with no
     repair round;
  f. the Message Batches API (extract_mode = "batch");
  g. a dead API (a port nobody listens on): how long until the build stops.

For each: calls, calls per extracted section, repairs, failures, dropped items, the
`kpack build --estimate` price before the build (a and b), the estimate each extract
shard makes before its first call, the actual spend (ledger), and $ per 100 pages. Runs a-f use different aliases of claude-haiku-4-5
("claude-haiku-4-5-a", ...: priced and cached as claude-haiku-4-5) so their extraction
caches stay apart while the embeddings of the first build are reused.
Skips with a message when the data folder is absent.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.k8s_build import _Quiet, build_arguments, prose_paths  # noqa: E402

MODEL = "claude-haiku-4-5"
CACHE_MIN_TOKENS = 4096  # Claude Haiku 4.5 (packs.llm.costs.MIN_CACHEABLE_TOKENS)
COLUMNS = ("sections", "calls", "calls/section", "repairs", "failed", "dropped",
           "est $ (--estimate)", "est $ (build)", "actual $", "$/100p est", "$/100p actual",
           "extract s")


def _write_toml(source: Path, embedding_model: str, **settings: object) -> None:
    lines = ['description = "Kubernetes docs (concepts, tasks, tutorials, setup)"',
             "allow_private_hosts = true", f'embedding_model = "{embedding_model}"',
             'extractor = "claude"']
    for key, value in settings.items():
        lines.append(f"{key} = {value!r}".replace("'", '"'))
    (source / "pack.toml").write_text("\n".join(lines) + "\n")


def _edit_one_page(site: Path, paths: list[str]) -> str:
    """Append a sentence to the first paragraph under the first `## ` heading of the first
    page that has one; returns its path."""
    for rel in paths:
        page = site / rel
        lines = page.read_text(encoding="utf-8").split("\n")
        for i, line in enumerate(lines):
            if line.startswith("## "):
                j = i + 1
                while j < len(lines) and not lines[j].strip():
                    j += 1
                if j < len(lines) and lines[j][:1].isalpha():
                    lines[j] += " This sentence was added by the benchmark."
                    page.write_text("\n".join(lines), encoding="utf-8")
                    later = time.time() + 5  # Last-Modified has one-second resolution
                    os.utime(page, (later, later))
                    return rel
    raise RuntimeError("no page with a paragraph under a ## heading")


def _row(summary: dict, estimate: dict | None) -> dict:
    from packs.manifest import read_manifest

    stats = read_manifest(Path(summary["build_dir"])).extra.get("extract_stats") or {} \
        if summary.get("status") != "no changes" else {}
    misses = stats.get("cache_misses", 0)
    calls = stats.get("calls", 0)
    return {
        "sections": summary["counts"]["sections"], "calls": calls,
        "calls/section": f"{calls / misses:.3f}" if misses else "-",
        "repairs": stats.get("repairs", 0), "failed": stats.get("failed", 0),
        "dropped": stats.get("held_dropped_items", 0),
        "est $ (--estimate)": f"{estimate['cost_usd']:.4f}" if estimate else "-",
        "est $ (build)": f"{stats.get('estimate_usd', 0.0):.4f}",
        "actual $": f"{stats.get('cost_usd', 0.0):.4f}",
        "$/100p est": f"{stats.get('usd_per_100_pages_estimate', 0.0):.4f}",
        "$/100p actual": f"{stats.get('usd_per_100_pages', 0.0):.4f}",
        "extract s": f"{summary.get('durations', {}).get('extract', 0.0):.1f}",
    }


def _table(rows: list[tuple[str, dict]]) -> str:
    head = "| run | " + " | ".join(COLUMNS) + " |"
    lines = [head, "|---|" + "---|" * len(COLUMNS)]
    for label, row in rows:
        lines.append(f"| {label} | " + " | ".join(str(row.get(c, "")) for c in COLUMNS) + " |")
    return "\n".join(lines)


def measure(args: argparse.Namespace) -> str:
    from benchmarks import common
    from flows import build_api
    from flows.build import BuildError, run_build
    from flows.estimate import run_estimate
    from tests.anthropic_fake import FakeAnthropic

    out = args.out or Path(tempfile.mkdtemp(prefix="kpack-extract-calls-"))
    paths = prose_paths(args.data, args.limit)
    site = out / "site"
    for rel in paths:
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(args.data / rel, site / rel)
    source = out / "sources" / "k8s-docs"
    source.mkdir(parents=True, exist_ok=True)
    packs, work = out / "packs", out / "work"
    lines = [common.machine_line()]
    rows: list[tuple[str, dict]] = []
    say = print

    def build(label: str, fake, folder: str, estimate_first: bool = False,
              **settings) -> dict:
        # One output folder per extractor setting: each is its own pack, so the publish
        # guard compares a rebuild with its own first build only. One work folder: the
        # embeddings of the first build serve them all.
        target = packs / folder
        os.environ["ANTHROPIC_BASE_URL"] = fake.base_url
        _write_toml(source, args.model, **settings)
        estimate = run_estimate(source, target, work_dir=work) if estimate_first else None
        requests, items = fake.stats.requests, fake.stats.batch_items
        t = time.perf_counter()
        summary = run_build(source, target, work_dir=work)
        row = _row(summary, estimate)
        row["http"] = fake.stats.requests - requests + fake.stats.batch_items - items
        rows.append((label, row))
        say(f"{label}: {time.perf_counter() - t:.1f} s wall; {row}")
        return summary

    os.environ["ANTHROPIC_API_KEY"] = "benchmark-key"
    # One Prefect server for every build of this process: a build that starts its own
    # temporary server stops it at its end, while Prefect's in-process services keep
    # the first server's address.
    with build_api.api_for_build(log=say), \
            common.serve_handler(partial(_Quiet, directory=str(site))) as base, \
            FakeAnthropic(api_key="benchmark-key", cache_min_tokens=CACHE_MIN_TOKENS) as fake, \
            FakeAnthropic(api_key="benchmark-key", cache_min_tokens=CACHE_MIN_TOKENS,
                          schema_mode="boundary") as strict:
        (source / "urls.txt").write_text("".join(f"{base}/{p}\n" for p in paths))
        lines.append(f"{len(paths)} pages served from {base}; loopback API {fake.base_url}")
        say(lines[-1])
        build("a. one request per section", fake, "a", estimate_first=True,
              extractor_model=f"{MODEL}-a", batch_token_budget=0)
        build("b. batching (budget 2000)", fake, "b", estimate_first=True,
              extractor_model=f"{MODEL}-b")
        build("c. b rebuilt, no change", fake, "b", extractor_model=f"{MODEL}-b")
        edited = _edit_one_page(site, paths)
        summary = build(f"d. b rebuilt, one section of {edited} changed", fake, "b",
                        extractor_model=f"{MODEL}-b")
        lines.append(f"d changed: {summary.get('changes', {}).get('sections')}")
        build("e. strict schema API, batching", strict, "e", extractor_model=f"{MODEL}-e")
        build("f. Message Batches API", fake, "f", extractor_model=f"{MODEL}-f",
              extract_mode="batch")

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))  # a port nobody listens on
            os.environ["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{s.getsockname()[1]}"
            _write_toml(source, args.model, extractor_model=f"{MODEL}-g")
            t = time.perf_counter()
            try:
                run_build(source, packs / "g", work_dir=work)
                dead = "the build did not fail"
            except BuildError as exc:
                dead = str(exc)
            lines.append(f"g. dead API: the build stopped after {time.perf_counter() - t:.1f} s "
                         f"wall: {dead}")
            say(lines[-1])

    text = "\n".join(lines[:2]) + "\n\n" + _table(rows) + "\n\n" + "\n".join(lines[2:]) + "\n"
    text += ("\nhttp = requests the loopback API answered for the build (Messages calls plus "
             "Message Batches items): " + ", ".join(f"{label[:2]} {row['http']}"
                                                    for label, row in rows) + "\n")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = build_arguments(__doc__)
    ap.add_argument("--results", type=Path, default=None,
                    help="also write the table to this markdown file")
    args = ap.parse_args(argv)
    if not (args.data / "MANIFEST.jsonl").is_file():
        print(f"skipped: no Kubernetes docs at {args.data} (pass --data DIR)")
        return 0
    text = measure(args)
    print("\n" + text)
    if args.results:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        command = " ".join(["python benchmarks/extract_calls.py", *(argv or sys.argv[1:])])
        args.results.write_text(f"# Claude calls and cost — `{command}`\n\n"
                                "```\n" + text + "```\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
