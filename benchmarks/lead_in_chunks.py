"""Chunks that end with a lead-in while their section goes on, from the source pages.

    python benchmarks/lead_in_chunks.py [--data ../shared/data] [--words 140]

Splits every page of the documentation corpora as the build does (template directives
removed, sections at headings, chunks of `--words` words, all-MiniLM-L6-v2's window, with
the default 15% overlap) and counts the chunks that end with ":" (or "," as "In
particular," does) while their section goes on in the next chunk. Before split-v7 a lead-in ("... to express strategies such as:")
ended one chunk and the list it introduced opened the next, so that no chunk held both.
Those left are lead-ins before a paragraph (what they introduced is not in the source: a
listing a template directive included) or longer than a third of a chunk (since split-v10
only when their last sentence is: a long paragraph leaves that sentence to the list). It reads the
splitter on the import path: run it from an older checkout to count that one's.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, corpora  # noqa: E402

_ENDS_LEAD_IN = re.compile(r"[:,][\"'”’)\]*_`]*\s*$")


def count(pages: list[common.Page], words: int) -> tuple[int, int]:
    """(chunks, chunks that end with ":" or "," while their section goes on)."""
    from tasks import sections
    from tasks.clean import clean_markdown

    total = cut = 0
    for p in pages:
        title, text = sections.page_title(p.title, p.path, clean_markdown(p.markdown))
        chunks = sections.split_markdown(text, title, words, int(words * 0.15))
        total += len(chunks)
        cut += sum(a.position == b.position and _ENDS_LEAD_IN.search(a.content.rstrip())
                   is not None for a, b in zip(chunks, chunks[1:]))
    return total, cut


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--words", type=int, default=140, help="chunk size (MiniLM's window)")
    args = ap.parse_args(argv)
    names = [n for n in corpora.DOCS if corpora.available(args.data, n)]
    if not names:
        print(f"skipped: no documentation corpus under {args.data}")
        return 0
    from tasks.sections import SPLITTER_VERSION

    print(common.machine_line())
    print(f"splitter {SPLITTER_VERSION}, chunks of {args.words} words\n")
    print("| corpus | pages | chunks | end with \":\" or \",\" while the section goes on |")
    print("|---|---|---|---|")
    for name in names:
        pages = corpora.doc_pages(args.data, name)
        total, cut = count(pages, args.words)
        print(f"| {name} | {len(pages)} | {total} | {cut} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
