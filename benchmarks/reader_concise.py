"""Study: how much should the reader's fit prefer the shorter of two units that hold the
gold? (reader_fit.CONCISE; issue 47, results/issue47_concise_targets.md)

    python benchmarks/reader_concise.py [--data ../shared/data] [--work out/bench]
        [--concise 0 --concise 0.25 ...] [--words 100 --words 110 ...]

Reads the dev and spent questions of the four corpora as benchmarks/train_reader.py
--with-spent --no-similarity does (benchmarks/reader_data.py, cached), then, on the same 5
folds by page, with the shipped penalty and limits, the first model alone: for each
--concise (a gold-holding unit of n words taught n^-concise as much; 0 teaches them all
alike, the fit before) and each --words (the answer's word budget, `max_words`), prints
each corpus's containment (gate off) and mean words, over all the rows and over the spent
rows. An answer may contain more gold by quoting more words, so a setting is better only
where it contains more at no more words: the --words column of concise 0 is that curve.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, reader_data, reader_fit, train_reader  # noqa: E402
from packs.retrieval import reader  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--concise", type=float, action="append")
    ap.add_argument("--words", type=int, action="append")
    args = ap.parse_args(argv)
    log, _ = common.printing_log()
    log(common.machine_line())
    t0 = time.perf_counter()
    items = reader_data.load_all(args.data, args.work, log)
    spent = reader_data.spent_ids()
    folds = reader_fit.folds_by_page(items, 5)
    l2, limits, _ = train_reader.kept_limits(reader.WEIGHTS_FILE)
    log(f"{len(items)} questions ({sum(it.id in spent for it in items)} spent rows); "
        f"5-fold CV by page, first model, l2 {l2:g}, {limits}")
    for concise in args.concise or [0.0, reader_fit.CONCISE]:
        for words in args.words or [limits.max_words]:
            answers = reader_fit.cross_validate(
                items, folds, l2, dataclasses.replace(limits, max_words=words), second=False,
                concise=concise)
            label = f"concise {concise:g}, {words} words"
            reader_fit.report(log, label, items, answers, width=26)
            idx = [k for k, it in enumerate(items) if it.id in spent]
            reader_fit.report(log, "  spent rows alone", [items[k] for k in idx],
                              [answers[k] for k in idx], width=26)
    log(f"done in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
