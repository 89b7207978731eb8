"""Read a benchmark's results file: its command, date, machine and the Markdown tables it
printed, so the book (benchmarks/book.py) can show current tables without copying them.

A results file is `benchmarks/results/<name>.md` as the benchmarks write it (a title, a
`Command:` line, the output as printed, which starts with `common.machine_line()`), or the
machine-readable summary beside it, `<name>.json`, written by `common.print_report` from the
same text (`summary`). `load` prefers the JSON and falls back to parsing the Markdown, so a
results file written by hand or by an older script still reads.

This module imports nothing of the project: the book and its test run without Prefect or
a model.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

_COMMAND = re.compile(r"`((?:nice (?:-n \d+ )?)?python3? benchmarks/[^`]+)`")
_MACHINE = re.compile(r"machine: (?P<machine>[^;\n]+); date (?P<date>\d{4}-\d\d-\d\d \d\d:\d\d)")
_DATE = re.compile(r"(\d{4}-\d\d-\d\d)(?:[ T,]+(?:at )?(\d\d:\d\d))?")
_PROGRESS = re.compile(r"^\s*\d+/\d+ (questions|pages|claims)\b")


@dataclass
class Table:
    """One Markdown table as printed: `context` is the text just above it (its paragraph,
    progress lines left out), `lines` the table's own lines, header first."""

    context: list[str]
    lines: list[str]

    @property
    def caption(self) -> str:
        """The headings above the table and the first line of its paragraph."""
        heads = [c.lstrip("# ").strip() for c in self.context if c.startswith("#")]
        para = [c.strip() for c in self.context if not c.startswith("#")][:1]
        return " — ".join(heads + para)

    def header(self) -> list[str]:
        return cells(self.lines[0])

    def rows(self) -> list[list[str]]:
        return [cells(line) for line in self.lines[2:]]


@dataclass
class Result:
    """What the book needs of one results file."""

    name: str
    title: str
    command: str
    date: str  # "YYYY-MM-DD HH:MM" (UTC as printed), "YYYY-MM-DD", or "" when none printed
    machine: str
    tables: list[Table] = field(default_factory=list)
    text: str = ""  # the Markdown (or the printed output) itself, for lines without a table


def cells(line: str) -> list[str]:
    """The cells of one Markdown table line, stripped."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def summary(name: str, text: str) -> Result:
    """Parse a results file's Markdown (or a benchmark's printed output) into a Result.
    Never fails: what it cannot find is left empty."""
    lines = text.splitlines()
    title = next((ln[2:].strip() for ln in lines if ln.startswith("# ")), name)
    cmd = _COMMAND.search(text)
    # The last run's: some benchmarks append each run to the same file.
    machine = ([*_MACHINE.finditer(text)] or [None])[-1]
    if machine:
        date, where = machine["date"], machine["machine"].strip()
    else:
        found = _DATE.search(text)
        date = " ".join(g for g in found.groups() if g) if found else ""
        where = ""
    return Result(name=name, title=title, command=cmd.group(1) if cmd else "", date=date,
                  machine=where, tables=_tables(lines), text=text)


def _tables(lines: list[str]) -> list[Table]:
    out: list[Table] = []
    heads: list[str] = []  # the "## " and "### " headings the table sits under
    para: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        is_table = (line.lstrip().startswith("|") and i + 1 < len(lines)
                    and re.match(r"^\s*\|[\s:|-]+\|\s*$", lines[i + 1]))
        if is_table:
            j = i
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            out.append(Table(context=[*heads, *para], lines=[ln.strip() for ln in lines[i:j]]))
            para, i = [], j
            continue
        if line.startswith(("## ", "### ")):
            level = line.index(" ")
            heads = [h for h in heads if h.index(" ") < level] + [line.strip()]
            para = []
        elif not line.strip() or line.startswith("```"):
            para = []
        elif not _PROGRESS.match(line):
            para = [*para, line]
        i += 1
    return out


def write_json(md_path: Path) -> Path:
    """Write `<name>.json` beside the results file `md_path` (its `summary`, without the
    text) and return its path."""
    result = summary(md_path.name, md_path.read_text(encoding="utf-8"))
    data = asdict(result)
    data.pop("text")
    out = md_path.with_suffix(".json")
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def load(md_path: Path) -> Result:
    """The Result of a results file: from `<name>.json` when it is there and not older
    than the Markdown, else parsed from the Markdown."""
    js = md_path.with_suffix(".json")
    text = md_path.read_text(encoding="utf-8") if md_path.is_file() else ""
    if js.is_file() and (not md_path.is_file() or js.stat().st_mtime >= md_path.stat().st_mtime):
        data = json.loads(js.read_text(encoding="utf-8"))
        tables = [Table(**t) for t in data.pop("tables", [])]
        return Result(**data, tables=tables, text=text)
    return summary(md_path.name, text)
