"""The offline answer's time in a fresh process (cold) beside the same questions asked
again (warm): what one `kpack ask` pays, and what a long-lived process (MCP, the explorer)
pays once the sections it reads are analysed.

    python benchmarks/cold_answers.py [--data ../shared/data] [--work out/bench]
        [--corpus kubernetes] [--round N] [--without-stored-units] [--out FILE]

The questions are one spent test round of the answer set (--round: questions that share
few pages) or, by default, its first 40 dev questions; one set per process, since what the
first pass analyses stays in the process. Each is searched first
(cache off, not timed), then `ask()` without an API key is timed for every question in
turn, twice: the first pass reads every section for the first time in this process (its
units, their terms and stems, unless the pack's tables/units.jsonl holds them), the second
finds them analysed. --without-stored-units leaves that file unread (the units are worked
out as for a pack built before it). Prints p50 and mean of both passes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, corpora  # noqa: E402
from benchmarks.doc_answers import load_questions  # noqa: E402


def timed_passes(pack, questions: list[str]) -> dict[str, list[float]]:
    """ms of the offline `ask()` per question: a cold pass, then a warm one."""
    from packs.answer import ask
    from packs.options import SearchOptions

    results = [pack.search(q, use_cache=False) for q in questions]
    out: dict[str, list[float]] = {}
    for label in ("cold", "warm"):
        out[label] = []
        for result in results:
            start = time.perf_counter()
            ask(pack, result, SearchOptions())
            out[label].append(1000 * (time.perf_counter() - start))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--corpus", default="kubernetes")
    ap.add_argument("--round", type=int, default=None,
                    help="a spent test round of the answer set")
    ap.add_argument("--without-stored-units", action="store_true",
                    help="do not read the pack's tables/units.jsonl")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if not corpora.available(args.data, args.corpus):
        print(f"skipped: no {args.corpus} corpus under {args.data}")
        return 0
    os.environ.pop("ANTHROPIC_API_KEY", None)  # the offline answer is what is timed
    from packs import KnowledgePack

    rows = load_questions(args.corpus)
    lines = [common.machine_line()]
    label, questions = ((f"test round {args.round}",
                         [r["question"] for r in rows if r.get("test_round") == args.round])
                        if args.round is not None else
                        ("first 40 dev", [r["question"] for r in rows if r["split"] == "dev"][:40]))
    if not questions:
        print(f"no questions: {args.corpus} has no test round {args.round}")
        return 2
    built = corpora.load(args.data, args.corpus, args.work).built
    with KnowledgePack.open(built.pack_dir) as pack:
        if args.without_stored_units:
            from packs import format as fmt
            from packs.retrieval import unit_store

            unit_store.unregister(pack.path / fmt.TABLES_DIR / fmt.UNITS_FILE)
            label += ", without stored units"
        times = timed_passes(pack, questions)
    lines.append(f"{args.corpus} {label} ({len(questions)} q): " + "; ".join(
        f"{k} p50 {statistics.median(v):.0f} ms, mean {statistics.mean(v):.0f} ms"
        for k, v in times.items()))
    print(lines[-1], flush=True)
    if args.out:
        common.append_run(args.out, "python benchmarks/cold_answers.py "
                          + " ".join(argv if argv is not None else sys.argv[1:]),
                          "\n".join(lines[1:]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
