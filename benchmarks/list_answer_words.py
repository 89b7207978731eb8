"""Study (issues 47 and 48, session 16): where a list answer's words go, and what each part
of it buys. Nothing here ships.

    python benchmarks/list_answer_words.py --data ../shared/data --work W --corpus C

The offline answers average 110-117 words on the passage path, but the questions read as
whole-pack lists (about 3 in 100 of the answer sets' rows) run to 400-700 words and carry
the issue-47 mean over 120. Two sets of rows, all of them dev, spent or already run (none
frozen and unrun):

- **whole-pack rows** (the corpus's *_whole_pack*.jsonl: dev rows, and the test rows of
  every file whose test split the ledger has run): item recall (whole_pack.recall)
  and words of the product's list answer, of the same answer with a part cut (the "Less
  likely items" line, the "More items" line, the passage bullets above the list after the
  first N), of the passages alone (packs.answer.passages), and of a pack-wide unit search
  (every unit of the pack ranked by its unit vector's cosine to the question, the best
  PER of each page taken in turn up to the product's words; also appended to the product
  answer, 150 or 300 words of it);
- **answer-set rows routed to a list** (the dev and spent rows of the corpus's answer set,
  reader_data.dev_rows, whose `ask()` takes the whole-pack path): containment and words of
  the list answer and of the passages alone.

Printed: the mean item recall and words per variant on dev and spent whole-pack rows, and
the answer-set rows' containment and words each way, with the rule "answer with the
passages alone where they already quote a list of at least N items" tried on both sets.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import answer_eval, common, corpora, reader_data  # noqa: E402
from benchmarks import whole_pack as wp  # noqa: E402
from benchmarks.unit_neighbours import PackUnits  # noqa: E402

LIST_PATH = "whole_pack_retrieval_only"
CUTS = {"product": {}, "no less-likely line": {"less": True},
        "no more-items line": {"more": True}, "neither line": {"less": True, "more": True},
        "passage bullets 8": {"bullets": 8}, "passage bullets 6": {"bullets": 6},
        "passage bullets 4": {"bullets": 4}}
RULE_ITEMS = (2, 3, 4, 5, 8)


def cut(text: str, less: bool = False, more: bool = False, bullets: int | None = None) -> str:
    """A list answer without its "Less likely items" line, its "More items" line, or its
    passage bullets (the quotes above "The items the pack names") after the first
    `bullets`."""
    lines = text.split("\n")
    k = next((i for i, line in enumerate(lines) if line.startswith("The items the pack")),
             len(lines))
    above, below = lines[:k], lines[k:]
    if bullets is not None:
        starts = [i for i, line in enumerate(above) if line.startswith("- ")]
        above = above[:starts[bullets]] if len(starts) > bullets else above
    below = [line for line in below
             if not (less and line.startswith("Less likely items"))
             and not (more and line.startswith("More items:"))]
    return "\n".join(above + below)


def listed_items(text: str) -> int:
    """How many nested list items the passages quote ("  - " under a lead-in)."""
    return len(re.findall(r"(?m)^  - ", text))


def whole_pack_rows(name: str) -> list[dict]:
    """The dev rows of corpus `name`'s whole-pack files, and the test rows of the files
    whose test split the ledger records a run of ("spent"); never a frozen, unrun split."""
    from benchmarks import ledger

    ran = ledger.ran_splits()
    rows = []  # k8s_whole_pack.jsonl and its rounds and dev sets, k8s_whole_pack_*.jsonl
    for path in sorted(corpora.DATA_DIR.glob(f"{Path(wp.FILES[name]).stem}*.jsonl")):
        spent = f"{path.name}:split=test" in ran
        for r in corpora.load_rows(path):
            if r["split"] == "dev" or (spent and r["split"] == "test"):
                rows.append({**r, "set": "dev" if r["split"] == "dev" else "spent"})
    return rows


def study(name: str, data: Path, work: Path, log) -> None:
    from packs import KnowledgePack
    from packs import answer as ans

    recall: dict[str, dict[str, list[tuple[float, int]]]] = {}
    rule: list[tuple[str, float, float, int, int, int]] = []
    routed: list[tuple[bool, bool, int, int, int]] = []

    def note(variant: str, split: str, text: str, items: list[dict]) -> None:
        recall.setdefault(variant, {}).setdefault(split, []).append(
            (wp.recall(text, items)[0], len(text.split())))

    built = corpora.load(data, name, work).built
    with KnowledgePack.open(built.pack_dir) as pack:
        units = PackUnits(pack)
        rows = whole_pack_rows(name)
        for k, r in enumerate(rows, start=1):
            # the gate off: the passages alone are read whatever it says (the product's
            # ask() searches with it, as a user's question is)
            result = pack.search(r["question"], use_cache=False, gate_threshold=-1.0)
            product = pack.ask(r["question"], use_cache=False)
            text, words = product["answer"], len(product["answer"].split())
            listed = product["query_type"] == LIST_PATH
            for variant, kw in CUTS.items():
                note(variant, r["set"], cut(text, **kw) if listed else text, r["items"])
            for per in (1, 2, 3):
                note(f"pack-wide units, {per} a page", r["set"],
                     units.per_page(result.question_vector, per, words), r["items"])
            for extra in (150, 300):
                note(f"product + pack-wide units ({extra} words)", r["set"],
                     text + "\n" + units.per_page(result.question_vector, 1, extra), r["items"])
            if listed:
                alone = ans.passages(pack, result)[0]
                rule.append((r["set"], wp.recall(text, r["items"])[0],
                             wp.recall(alone, r["items"])[0], words, len(alone.split()),
                             listed_items(alone)))
            if k % 50 == 0:
                log(f"  whole-pack rows: {k}/{len(rows)}")
        answer_rows = reader_data.dev_rows(name, spent=True)
        for k, r in enumerate(answer_rows, start=1):
            product = pack.ask(r["question"], use_cache=False)
            if product["query_type"] == LIST_PATH:
                result = pack.search(r["question"], use_cache=False, gate_threshold=-1.0)
                alone = ans.passages(pack, result)[0]
                routed.append((answer_eval.contains(product["answer"], r["golds"]),
                               answer_eval.contains(alone, r["golds"]),
                               len(product["answer"].split()), len(alone.split()),
                               listed_items(alone)))
            if k % 200 == 0:
                log(f"  answer-set rows: {k}/{len(answer_rows)}")
    log(f"\n{name}: whole-pack rows, item recall (mean words)")
    for variant, by_split in recall.items():
        log(f"  {variant:42s} " + " | ".join(
            f"{split} {statistics.fmean(g for g, _ in v):.3f} "
            f"({statistics.fmean(w for _, w in v):.0f} w, {len(v)} q)"
            for split, v in sorted(by_split.items())))
    log(f"{name}: answer-set rows answered as a list: {len(routed)} of {len(answer_rows)}; "
        "contain "
        f"the gold: list {sum(a for a, *_ in routed)}, passages alone "
        f"{sum(b for _, b, *_ in routed)}; words: list "
        f"{statistics.fmean(c for *_, c, _, _ in routed):.0f}, passages alone "
        f"{statistics.fmean(d for *_, d, _ in routed):.0f}")
    for n in RULE_ITEMS:
        line = (f"  passages alone where they quote >= {n} listed items: answer-set rows "
                f"switched {sum(x[4] >= n for x in routed)}, contain "
                f"{sum(b if x >= n else a for a, b, _, _, x in routed)}, words "
                f"{statistics.fmean(d if x >= n else c for _, _, c, d, x in routed):.0f}")
        for split in ("dev", "spent"):
            sub = [x for x in rule if x[0] == split]
            line += (f" | whole-pack {split}: switched {sum(x[5] >= n for x in sub)} of "
                     f"{len(sub)}, recall "
                     f"{statistics.fmean(p if x >= n else q for _, q, p, _, _, x in sub):.3f} "
                     f"(list {statistics.fmean(q for _, q, *_ in sub):.3f})")
        log(line)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--corpus", action="append", choices=("kubernetes", "rust-book"))
    args = ap.parse_args(argv)
    log, _ = common.printing_log()
    log(common.machine_line())
    for name in args.corpus or ("kubernetes", "rust-book"):
        if corpora.available(args.data, name):
            study(name, args.data, args.work, log)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
