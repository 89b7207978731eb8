"""The ledger of blind test splits: every split is frozen (its hash recorded) before the change
it judges is tried, and every run of it is appended, misses included.

    python benchmarks/ledger.py freeze --file benchmarks/data/k8s_answers.jsonl \
        --where test_round=6 --target answers-kubernetes --note "..."
    python benchmarks/ledger.py verify          # every frozen split still hashes the same
    python benchmarks/ledger.py show            # the frozen splits and their runs

`benchmarks/ledger.jsonl` holds one JSON object per line, appended only:
- `{"event": "freeze", "date", "commit", "target", "split", "file", "where", "questions",
  "sha256"}`: a split frozen before the work (its rows' canonical hash);
- `{"event": "run", "date", "commit", "target", "split", "sha256", "questions", "figure",
  "interval", "baseline", "command", "note"}`: one blind run of a frozen split
  (`record_run`); a split is run once per change, and its figure stands when it misses.

Runs made before the ledger existed (issue 34's answer targets) are transcribed from the old
BENCHMARKS.md with `"historic": true`: their times are the blocks' (to the hour), they have
no hash, and `"blind": false` marks a second or later look at a split already reported.

A split is the rows of a JSON Lines file whose fields equal the `--where` pairs; its hash is
the sha256 of those rows, each as canonical JSON (sorted keys), sorted by id: editing,
adding or dropping one of its questions after the freeze changes the hash, and `verify`
(also run by the tests) says so.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEDGER = ROOT / "benchmarks" / "ledger.jsonl"


def parse_where(pairs: list[str]) -> dict[str, object]:
    """`["test_round=6", "split=test"]` → {"test_round": 6, "split": "test"} (JSON values
    where they parse, else strings)."""
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"error: --where {pair!r}: write FIELD=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def split_rows(file: Path, where: dict[str, object]) -> list[dict]:
    """The rows of JSON Lines `file` whose fields equal every pair of `where`."""
    rows = [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines()
            if line.strip()]
    return [r for r in rows if all(r.get(k) == v for k, v in where.items())]


def split_file_name(file: Path) -> str:
    """How a split's file is named in the ledger: its name, with its folder when it lies in
    a folder of benchmarks/data (label folders hold files of the same names)."""
    data = ROOT / "benchmarks" / "data"
    try:
        rel = file.resolve().relative_to(data)
    except ValueError:
        return file.name
    return rel.as_posix() if len(rel.parts) > 1 else file.name


def split_hash(rows: list[dict]) -> str:
    """sha256 of the rows as canonical JSON lines, sorted by id."""
    lines = sorted(json.dumps(r, sort_keys=True, ensure_ascii=False) for r in rows)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def entries(ledger: Path = LEDGER) -> list[dict]:
    if not ledger.is_file():
        return []
    return [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def ran_splits(entries_: list[dict] | None = None) -> set[str]:
    """The splits the ledger records a blind run of (spent: their figures stand there);
    `entries_` when already read."""
    return {e["split"] for e in (entries() if entries_ is None else entries_)
            if e["event"] == "run"}


def _commit() -> str:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown"


def _append(entry: dict, ledger: Path) -> None:
    with ledger.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, ensure_ascii=False) + "\n")


def freeze(file: Path, where: dict[str, object], target: str, note: str = "",
           ledger: Path = LEDGER) -> dict:
    """Record the split of `file` selected by `where` as frozen for `target`. Raises
    ValueError when it is empty or already frozen with another hash."""
    rows = split_rows(file, where)
    if not rows:
        raise ValueError(f"{file}: no rows where {where}")
    name = f"{split_file_name(file)}:" + ",".join(f"{k}={v}" for k, v in sorted(where.items()))
    digest = split_hash(rows)
    for e in entries(ledger):
        if e["event"] == "freeze" and e["split"] == name:
            if e["sha256"] != digest:
                raise ValueError(f"{name} is already frozen with another hash")
            return e
    entry = {"event": "freeze", "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
             "commit": _commit(), "target": target, "split": name,
             "file": str(file.relative_to(ROOT)) if file.is_relative_to(ROOT) else str(file),
             "where": where, "questions": len(rows), "sha256": digest, "note": note}
    _append(entry, ledger)
    return entry


def frozen(split: str, ledger: Path = LEDGER) -> dict | None:
    """The freeze entry of `split` (as named in the ledger), or None."""
    return next((e for e in entries(ledger) if e["event"] == "freeze" and e["split"] == split),
                None)


def record_run(split: str, target: str, figure: float, questions: int, *,
               interval: tuple[float, float] | None = None, baseline: dict | None = None,
               command: str = "", note: str = "", ledger: Path = LEDGER) -> dict:
    """Append one blind run of frozen `split`. Raises ValueError when the split was never
    frozen, or when its rows no longer hash as frozen."""
    entry = frozen(split, ledger)
    if entry is None:
        raise ValueError(f"{split}: not frozen in {ledger.name}; freeze it before the change")
    problems = verify(ledger, only=split)
    if problems:
        raise ValueError("; ".join(problems))
    run = {"event": "run", "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
           "commit": _commit(), "target": target, "split": split, "sha256": entry["sha256"],
           "questions": questions, "figure": round(figure, 4),
           "interval": [round(x, 4) for x in interval] if interval else None,
           "baseline": baseline or {}, "command": command, "note": note}
    _append(run, ledger)
    return run


def first_blind_runs(runs: list[dict]) -> dict[str, dict]:
    """The first blind run of each split among `runs` (ledger run entries), by split, in
    ledger order; later looks at a split already reported are not blind and are left out."""
    seen: dict[str, dict] = {}
    for e in runs:
        if e.get("blind", True):
            seen.setdefault(e["split"], e)
    return seen


def pooled_runs(runs: list[dict]) -> tuple[float, int, int] | None:
    """(figure, questions, splits) pooled over `first_blind_runs(runs)`, misses included:
    the question-weighted mean. None when there is no blind run."""
    firsts = first_blind_runs(runs)
    if not firsts:
        return None
    n = sum(e["questions"] for e in firsts.values())
    return sum(e["figure"] * e["questions"] for e in firsts.values()) / n, n, len(firsts)


def pooled(target: str, ledger: Path = LEDGER) -> tuple[float, int, int] | None:
    """(figure, questions, splits) of `target` pooled over the first (blind) run of every
    split ever run for it (`pooled_runs`). None before any run."""
    return pooled_runs([e for e in entries(ledger)
                        if e["event"] == "run" and e["target"] == target])


def verify(ledger: Path = LEDGER, only: str | None = None) -> list[str]:
    """One line per frozen split whose rows no longer hash as frozen (empty: all intact)."""
    problems = []
    for e in entries(ledger):
        if e["event"] != "freeze" or (only and e["split"] != only) or e.get("historic"):
            continue
        file = ROOT / e["file"]
        if not file.is_file():
            problems.append(f"{e['split']}: {e['file']} is missing")
            continue
        if split_hash(split_rows(file, e["where"])) != e["sha256"]:
            problems.append(f"{e['split']}: its rows changed after the freeze of {e['date']}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("freeze")
    f.add_argument("--file", type=Path, required=True)
    f.add_argument("--where", action="append", default=[], required=True)
    f.add_argument("--target", required=True)
    f.add_argument("--note", default="")
    sub.add_parser("verify")
    sub.add_parser("show")
    args = ap.parse_args(argv)
    if args.cmd == "freeze":
        try:
            e = freeze(args.file.resolve(), parse_where(args.where), args.target, args.note)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"frozen {e['split']}: {e['questions']} questions, sha256 {e['sha256'][:16]}…")
        return 0
    if args.cmd == "verify":
        problems = verify()
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        print(f"{sum(e['event'] == 'freeze' for e in entries())} frozen splits, "
              f"{len(problems)} changed")
        return 1 if problems else 0
    for target in sorted({e["target"] for e in entries() if e["event"] == "run"}):
        figure, n, splits = pooled(target)
        print(f"pooled {target}: {figure:.3f} over {splits} blind splits ({n} questions)")
    for e in entries():
        if e["event"] == "freeze":
            print(f"{e['date'][:10]} freeze {e['split']} ({e['questions']} q) for {e['target']}")
        else:
            print(f"{e['date'][:10]} run    {e['split']}: {e['figure']} ({e['commit']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
