"""The benchmark book: BENCHMARKS.md as one page of current tables, from the results files
and the ledger of blind splits.

    python benchmarks/book.py              # make book: write BENCHMARKS.md from what is there
    python benchmarks/book.py run [--only ID ...] [--slow]
                                           # make bench: the standing dev suite, then the book

Per target (benchmarks/targets.py): the goal, each figure's newest table with the command,
date and machine that printed it (baselines are rows of the same run), and the target's
blind figure pooled over every blind split ever run for it in benchmarks/ledger.jsonl,
misses included ("no blind run yet" where none). `run` never runs a test split: blind runs
are their own commands, run once per change, and append to the ledger themselves. Results
files no target shows are listed at the end, and a newer file of a target's script that the
target does not name is flagged, so nothing measured is hidden. The history this page
replaced is benchmarks/results/history.md; what moved a figure, benchmarks/CHANGELOG.md.
"""

from __future__ import annotations

import argparse
import fnmatch
import math
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import ledger, results_md  # noqa: E402
from benchmarks.results_md import Result, Table  # noqa: E402
from benchmarks.targets import TARGETS, Figure, Target  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
BOOK = ROOT / "BENCHMARKS.md"
MAX_LINES = 400


def load_results(folder: Path) -> dict[str, Result]:
    """Every results file of `folder` (`*.md` but history.md), by file name."""
    return {p.name: results_md.load(p) for p in sorted(folder.glob("*.md"))
            if p.name != "history.md"}


def _matches(table: Table, fig: Figure) -> bool:
    return (re.search(fig.caption, "\n".join(table.context), re.M) is not None
            and re.search(fig.header, table.lines[0]) is not None
            and any(re.search(fig.rows, row[0]) for row in table.rows() if row))


def _found(res: Result, fig: Figure) -> tuple[Result, Table | None] | None:
    """`res` and its table matching `fig` (None for a figure of lines), or None."""
    if fig.lines:
        return (res, None) if re.search(fig.lines, res.text, re.M) else None
    tables = [t for t in res.tables if _matches(t, fig)]
    return (res, tables[-1] if fig.last else tables[0]) if tables else None


def pick(fig: Figure, results: dict[str, Result]) -> tuple[Result, Table | None] | None:
    """The newest results file named by `fig` (by printed date) with a matching table (or
    matching lines), and that table; None when no file matches."""
    best: tuple[Result, Table | None] | None = None
    for name, res in results.items():
        if "before" in name or not any(fnmatch.fnmatch(name, pat) for pat in fig.files):
            continue
        found = _found(res, fig)
        if found and (best is None or res.date > best[0].date):
            best = found
    return best


def _table_lines(table: Table, fig: Figure) -> list[str]:
    body = [ln for ln, row in zip(table.lines[2:], table.rows(), strict=True)
            if re.search(fig.rows, row[0] if row else "")]
    cut = body[:fig.max_rows]
    more = [f"({len(body) - len(cut)} more rows in the file)"] if len(body) > len(cut) else []
    return [table.lines[0], table.lines[1], *cut, *more]


def figure_lines(fig: Figure, results: dict[str, Result],
                 previous: Result | None = None) -> tuple[list[str], Result | None]:
    """The Markdown of one figure (its source line, then its table or lines) and the
    results file it came from; `previous`, the file of the figure before (named once)."""
    got = pick(fig, results)
    if got is None:
        return [f"*No results file yet for {', '.join(fig.files)}.*", ""], None
    res, table = got
    if res is previous:
        source = "same run"
    else:
        source = f"`results/{res.name}`, {res.date or 'date not printed'}"
        source += f", {res.machine}" if res.machine else ""
        source += f"; `{res.command}`" if res.command else ""
    caption = table.caption if table else ""
    caption = caption if len(caption) <= 90 else caption[:89] + "…"
    head = f"*{caption}* ({source}):" if caption else f"({source}):"
    if table:
        return [head, "", *_table_lines(table, fig), ""], res
    hits = [ln.strip() for ln in res.text.splitlines() if re.search(fig.lines, ln.strip())]
    hits = hits[-fig.max_rows:] if fig.last else hits[:fig.max_rows]
    return [head, "", "```", *hits, "```", ""], res


def wilson(p: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson interval of a share `p` over `n` questions."""
    if n == 0:
        return (0.0, 1.0)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def blind_lines(name: str, entries: list[dict]) -> tuple[list[str], str]:
    """Markdown lines on ledger target `name` (every run, each split's first blind run
    pooled, frozen splits not yet run) and its one-cell summary."""
    runs = [e for e in entries if e["event"] == "run" and e["target"] == name]
    frozen = [e for e in entries if e["event"] == "freeze" and e["target"] == name]
    pending = [e for e in frozen if not any(r["split"] == e["split"] for r in runs)]
    out = []
    pooled = ledger.pooled_runs(runs)
    if pooled is None:
        cell = "no blind run yet"
        out.append(f"- `{name}`: no blind run yet.")
    else:
        figure, n, splits = pooled
        lo, hi = wilson(figure, n)
        cell = (f"{figure:.3f} [{lo:.3f}, {hi:.3f}], {splits} split{'s' * (splits > 1)}, "
                f"{n} q")
        firsts = ledger.first_blind_runs(runs)
        each = "; ".join(f"{r['split']} {r['figure']:.3f} ({r['questions']} q, {r['date'][:10]})"
                         for r in firsts.values())
        later = len(runs) - len(firsts)
        out.append(f"- `{name}`: **pooled {cell}** (Wilson 95 % interval over the questions). "
                   f"First blind run of each split: {each}."
                   + (f" {later} later looks at a split already reported are not counted."
                      if later else ""))
    for e in pending:
        out.append(f"  Frozen, not run yet: `{e['split']}` ({e['questions']} q, frozen "
                   f"{e['date'][:10]}).")
    if pending:
        cell += f" (+{len(pending)} frozen, unrun)"
    return out, cell


def render(results: dict[str, Result], entries: list[dict],
           targets: tuple[Target, ...] = TARGETS) -> str:
    """The book's Markdown."""
    summary, body, used = [], [], set()
    for t in targets:
        sec = [f"## {t.title}", "", f"Goal: {t.goal}. "
               + (f"Dev run (`make bench`): `{t.command}`." if t.command else
                  "No standing command (run by hand; see the script's docstring).")
               + (" Long: only with `make bench SLOW=1`." if t.slow else ""), ""]
        dates, res = [], None
        for fig in t.figures:
            lines, res = figure_lines(fig, results, res)
            sec += lines
            if res is not None:
                used.add(res.name)
                dates.append(res.date[:10])
                note = _newer_note(res, t, results)
                if note and note[0] not in sec:  # said once per target
                    sec += note
        cells = []
        if t.blind:
            sec.append("**Blind test splits** (benchmarks/ledger.jsonl): "
                       + (f"`{t.blind_command}`, once per change." if t.blind_command else ""))
            for name in t.blind:
                lines, cell = blind_lines(name, entries)
                sec += lines
                cells.append(f"{name.split('-', 1)[-1]}: {cell}")
            sec.append("")
        body += sec
        summary.append(f"| [{t.title}](#{_anchor(t.title)}) | {max(dates, default='none')} | "
                       + ("<br>".join(cells) or "no blind split") + " |")
    others = sorted((r for n, r in results.items() if n not in used),
                    key=lambda r: r.date, reverse=True)
    index = ", ".join(f"`{r.name}` ({r.date[:10] or '?'})" for r in others)
    runs = sum(e["event"] == "run" for e in entries)
    head = [
        "# Benchmarks", "",
        "Generated by `make book` (`python benchmarks/book.py`) from the results files in "
        f"`benchmarks/results/` ({len(results)} files) and `benchmarks/ledger.jsonl` "
        f"({runs} blind runs); `make bench` reruns the standing dev suite first. Do not edit "
        "by hand. Each table is the newest one a benchmark printed, with its command, date and "
        "machine; baselines are rows of the same run, intervals are 95 % bootstrap intervals "
        "over the questions unless the table says otherwise. Dev splits are for tuning; a "
        "blind split is frozen in the ledger before the change it judges, run once, and "
        "pooled with every earlier blind split of its target, misses included.", "",
        "The lab notebook this page replaced: `benchmarks/results/history.md`; what moved a "
        "figure, and when: `benchmarks/CHANGELOG.md`.", "",
        "| target | newest run | blind, pooled over every split run |", "|---|---|---|",
        *summary, "", *body,
        "## Other results files", "",
        "Not shown above (older runs, baselines of the code before a change, one-off "
        f"studies), newest first: {index or 'none'}.", ""]
    return "\n".join(head) + "\n"


def _newer_note(res: Result, t: Target, results: dict[str, Result]) -> list[str]:
    """A line naming results files of the same script, newer than `res`, that the target
    does not list (a branch's new run: add it to benchmarks/targets.py)."""
    script = re.search(r"benchmarks/\w+\.py", res.command)
    if not script:
        return []
    named = {p for f in t.figures for p in f.files}
    newer = [n for n, r in results.items()
             if script.group(0) in r.command and r.date > res.date and "before" not in n
             and not any(fnmatch.fnmatch(n, p) for p in named)
             and any(_found(r, f) for f in t.figures)]
    return [f"Newer runs of `{script.group(0)}` not in this table: "
            + ", ".join(f"`{n}`" for n in sorted(newer)) + ".", ""] if newer else []


def _anchor(title: str) -> str:
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def write_book(results_dir: Path = RESULTS, ledger_file: Path = ledger.LEDGER,
               out: Path = BOOK, targets: tuple[Target, ...] = TARGETS) -> int:
    """Write the book; its line count. Raises ValueError past MAX_LINES (nothing written)."""
    text = render(load_results(results_dir), ledger.entries(ledger_file), targets)
    n = text.count("\n")
    if n > MAX_LINES:
        raise ValueError(f"the book is {n} lines, over {MAX_LINES}: show fewer rows "
                         "(max_rows, rows) in benchmarks/targets.py")
    out.write_text(text, encoding="utf-8")
    return n


# --- make bench: the standing dev suite ------------------------------------------------------


def _argv(command: str) -> list[str]:
    """A target's command with `python` as this interpreter."""
    return [sys.executable if a in ("python", "python3") else a for a in shlex.split(command)]


def run_one(t: Target, results_dir: Path) -> tuple[str, float]:
    """Run `t.command`, streaming its output, and write it as results/<id>.md (and .json).
    ("ok" | "skipped" | "failed (rc N)", seconds)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(_argv(t.command), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    out = []
    for line in proc.stdout:
        print(f"  {line}", end="", flush=True)
        out.append(line)
    rc = proc.wait()
    seconds = time.perf_counter() - t0
    text = "".join(out).rstrip()
    if rc != 0:
        return f"failed (rc {rc})", seconds
    if "skipped" in text[:300].lower() and "|" not in text:
        return "skipped", seconds
    path = results_dir / f"{t.id}.md"
    path.write_text(f"# {t.title}\n\n- Command: `{t.command}` (dev splits, `make bench`)\n\n"
                    f"```\n{text}\n```\n", encoding="utf-8")
    results_md.write_json(path)
    return "ok", seconds


def run_suite(only: list[str], slow: bool, results_dir: Path = RESULTS) -> list[str]:
    """Run the targets' standing commands; one summary line per target."""
    chosen = [t for t in TARGETS if t.command and (t.id in only if only else slow or not t.slow)]
    unknown = set(only) - {t.id for t in TARGETS}
    if unknown:
        raise SystemExit(f"error: no target {', '.join(sorted(unknown))}; "
                         f"targets: {', '.join(t.id for t in TARGETS)}")
    lines = []
    for i, t in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] {t.id}: {t.command}", flush=True)
        status, seconds = run_one(t, results_dir)
        print(f"[{i}/{len(chosen)}] {t.id}: {status}, {seconds:.0f} s", flush=True)
        lines.append(f"{t.id}: {status}, {seconds:.0f} s")
    left = [t.id for t in TARGETS if t.command and t not in chosen]
    if left:
        lines.append(f"not run: {', '.join(left)} (slow ones: make bench SLOW=1)")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--ledger", type=Path, default=ledger.LEDGER)
    ap.add_argument("--out", type=Path, default=BOOK)
    sub = ap.add_subparsers(dest="cmd")
    r = sub.add_parser("run", help="run the standing dev suite, then write the book")
    r.add_argument("--only", action="append", default=[], metavar="ID",
                   help="run only this target (repeatable)")
    r.add_argument("--slow", action="store_true", help="also the long builds")
    args = ap.parse_args(argv)
    summary = run_suite(args.only, args.slow, args.results) if args.cmd == "run" else []
    try:
        n = write_book(args.results, args.ledger, args.out)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for line in summary:
        print(line)
    print(f"wrote {args.out.name}: {n} lines from {len(load_results(args.results))} results "
          f"files and {len(ledger.entries(args.ledger))} ledger entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
