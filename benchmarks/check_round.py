"""Check a drafted blind round of a documentation answer set before it is frozen.

    python benchmarks/check_round.py --data ../shared/data --corpus kubernetes \
        --round 49 --first 5101 DRAFT.jsonl

A round is 20 test rows written from the pages alone (issue 47): ROUND_MIX of the classes,
ids from --first in order, every gold string verbatim in its gold pages' Markdown as
written (case and whitespace folded, as benchmarks/answer_eval.py scores: the offline
answer quotes the sections' Markdown, links and backticks included, so a string that
leaves out a page's `code` marks or link syntax can never be in an answer; doc_answers.py
check_golds says the same of the built pack), none inside its question, and
fact-disjoint from the rows already in the answer set (no gold string that an earlier row
on the same page has, no question asked before; the draft's own ids, when already
appended, aside): tests/test_benchmarks_tiny.py checks the frozen rounds the same way
against the dev rows. The pages are the corpus's as the benchmark pack is built from them
(corpora.doc_pages). Prints one line per row (OK, or what to fix) and a summary; the exit
status is 1 when any row has a problem. Then append the rows to the answer set and freeze
them (benchmarks/ledger.py freeze) before the change they judge is tried.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import answer_eval, common, corpora  # noqa: E402

ROUND_MIX = {"paraphrase": 8, "identifier": 5, "two-page": 4, "compare": 3}
ANSWER_SETS = {"kubernetes": ("k8s_answers.jsonl", "k8s-ans-"),
               "rust-book": ("rust_answers.jsonl", "rust-ans-")}


def problems(row: dict, pages: dict[str, str], earlier: dict[str, set[str]],
             asked: set[str]) -> list[str]:
    """What is wrong with one drafted row: `pages` maps each gold page to its Markdown
    (absent: no such page), `earlier` each page to the folded gold strings of the rows
    already written on it, `asked` the folded questions already asked."""
    fold = answer_eval.fold
    out = []
    cls, gold, groups = row.get("class"), row.get("gold") or [], row.get("answers") or []
    if cls not in ROUND_MIX:
        out.append(f"class {cls!r} (one of {', '.join(ROUND_MIX)})")
    question = fold(row.get("question", ""))
    if not question or question in asked:
        out.append("question empty or asked before")
    texts = []
    for page in gold:
        if page not in pages:
            out.append(f"no page {page}")
        else:
            texts.append(fold(pages[page]))
    if cls == "two-page" and len(gold) != 2:
        out.append("a two-page row has 2 gold pages")
    if cls in ("paraphrase", "identifier") and len(gold) != 1:
        out.append(f"a {cls} row has 1 gold page")
    if cls == "compare" and len(groups) != 2:
        out.append("a compare row has 2 answer groups, one per thing")
    if not groups or not all(groups):
        out.append("an empty answer group")
    for alt in (a for g in groups for a in g):
        a = fold(alt)
        if len(a) < 3:
            out.append(f"too short: {alt!r}")
        if not any(a in t for t in texts):
            out.append(f"not verbatim in its gold pages: {alt!r}")
        if a in question:
            out.append(f"in the question: {alt!r}")
        if any(a in earlier.get(p, ()) for p in gold):
            out.append(f"an earlier row on that page has it: {alt!r}")
    if cls == "two-page" and len(texts) == 2:  # each page carries a group the other lacks
        held = [[any(fold(a) in t for a in g) for t in texts] for g in groups]
        if not (any(h[0] and not h[1] for h in held) and any(h[1] and not h[0] for h in held)):
            out.append("each of the two pages should carry a group the other lacks")
    return out


def check(rows: list[dict], pages: dict[str, str], written: list[dict], round_no: int,
          prefix: str, first: int) -> list[tuple[str, list[str]]]:
    """(id, problems) of each drafted row, against the rows already `written`."""
    fold = answer_eval.fold
    earlier: dict[str, set[str]] = {}
    for r in written:
        for page in r["gold"]:
            earlier.setdefault(page, set()).update(fold(a) for g in r["answers"] for a in g)
    asked = {fold(r["question"]) for r in written}
    out = []
    for k, row in enumerate(rows):
        found = problems(row, pages, earlier, asked)
        if row.get("id") != f"{prefix}{first + k}":
            found.insert(0, f"id should be {prefix}{first + k}")
        if row.get("split") != "test" or row.get("test_round") != round_no:
            found.insert(0, f'split should be "test" and test_round {round_no}')
        asked.add(fold(row.get("question", "")))
        out.append((str(row.get("id")), found))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("draft", type=Path, help="the drafted rows (JSON Lines)")
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--corpus", choices=tuple(ANSWER_SETS), required=True)
    ap.add_argument("--round", type=int, required=True, help="the rows' test_round")
    ap.add_argument("--first", type=int, required=True, help="the number of the first id")
    args = ap.parse_args(argv)
    if not corpora.available(args.data, args.corpus):
        raise SystemExit(f"no {corpora.DOCS[args.corpus][0]}/MANIFEST.jsonl under {args.data}: "
                         "pass --data DIR holding it")
    pages = {p.path.removeprefix("/"): p.markdown
             for p in corpora.doc_pages(args.data, args.corpus)}
    file, prefix = ANSWER_SETS[args.corpus]
    rows = corpora.load_rows(args.draft)
    drafted = {r.get("id") for r in rows}  # a round already appended is checked again
    written = [r for r in corpora.load_rows(corpora.DATA_DIR / file) if r["id"] not in drafted]
    results = check(rows, pages, written, args.round, prefix, args.first)
    for rid, found in results:
        print(f"{rid}: {'OK' if not found else '; '.join(found)}")
    mix = Counter(r.get("class") for r in rows)
    bad = sum(bool(found) for _, found in results)
    print(f"{len(rows)} rows, classes {dict(mix)} (a round: {ROUND_MIX}); {bad} with problems")
    return int(bool(bad) or dict(mix) != ROUND_MIX)


if __name__ == "__main__":
    raise SystemExit(main())
