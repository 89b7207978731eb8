"""The pieces an over-long block of a section is cut into (tasks/sections.py `chunk_text`):
prose at sentence ends, never at a hard wrap inside a sentence (a quote's included); code at
line ends. These are the splitter's size rules: a change here re-splits every pack, so it
is a new sections.SPLITTER_VERSION."""

from __future__ import annotations

import re

from packs import text as text_rules

# The splitter's size rules: words are whitespace runs, and an over-long line is cut at
# packs/text.py's sentence ends; changing either re-splits every pack (SPLITTER_VERSION).
WORD = re.compile(r"\S+")
# A line that starts a block of its own inside a paragraph: a list item, table row, quote.
ITEM_LINE = re.compile(r"\s*([-*+]\s|\d{1,3}[.)]\s|\||>)")
QUOTE = re.compile(r"\s*(>\s?)+")  # a quote line's markers: its wraps run on as any other
# The end of a line that ends its sentence: . ! ? or :, then closing quotes or marks.
CLOSED = re.compile(r"[.!?:][\"'”’)\]*_`]*$")


def word_count(text: str) -> int:
    return len(WORD.findall(text))


def sentences(line: str) -> list[str]:
    """A line of prose cut at its sentence ends (packs/text.py's `sentence_spans`)."""
    line = line.strip()
    return [line[a:b] for a, b in text_rules.sentence_spans(line)]


def split_big_block(text: str, max_words: int, is_code: bool) -> list[tuple[str, str]]:
    """Cut one block longer than max_words into pieces. Prose: one piece per sentence
    (`wrapped_sentences`: a hard-wrapped sentence stays whole, so a chunk never ends in
    the middle of one; a sentence still longer than max_words is cut at words), so that
    chunks end at sentence ends and can overlap by whole sentences. Code: runs of lines.
    Returns (piece, separator that joins it to the piece before it)."""
    if is_code:
        return line_runs(text, max_words)
    pieces: list[tuple[str, str]] = []
    for sentence, sep in wrapped_sentences(text):
        if word_count(sentence) <= max_words:
            pieces.append((sentence, sep))
            continue
        cut = word_runs(sentence, max_words)
        pieces += [(cut[0], sep)] + [(run, " ") for run in cut[1:]]
    return pieces


def word_runs(text: str, max_words: int) -> list[str]:
    """`text` cut into runs of max_words words (whitespace joined as one space)."""
    words = text.split()
    return [" ".join(words[i : i + max_words]) for i in range(0, len(words), max_words)]


def wrapped_sentences(text: str) -> list[tuple[str, str]]:
    """The sentences of a prose block as (text, separator before it): a line break inside
    a sentence (a hard wrap) is kept inside it, in a quote too; a list item, table row or
    the first line of a quote starts a new one, and a line ending in . ! ? or : ends one."""
    out: list[list[str]] = []  # [text, separator]
    open_ = False  # the last sentence runs on to the next line
    quoted = False  # ... inside a quote, whose lines all open with ">"
    for line in text.splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        parts = sentences(line)
        if not parts:
            continue
        quote = QUOTE.match(line)
        rest = line[quote.end():] if quote else ""
        runs_on = open_ and (not ITEM_LINE.match(line) or quoted and quote is not None
                             and rest.strip() != "" and not ITEM_LINE.match(rest))
        # a bare ">" ends a quote's paragraph, and a heading in a quote is a line of its own
        quoted = quote is not None and rest.strip() != "" and not rest.lstrip().startswith("#")
        for k, part in enumerate(parts):
            if k == 0 and runs_on:
                out[-1][0] += "\n" + indent + part
            else:
                out.append([indent + part if k == 0 else part, "\n" if k == 0 else " "])
        open_ = not CLOSED.search(parts[-1])
    return [(t, sep) for t, sep in out]


def line_runs(text: str, max_words: int) -> list[tuple[str, str]]:
    """Runs of whole lines of ≤ max_words words (a longer line is cut at words)."""
    pieces: list[tuple[str, str]] = []
    current: list[str] = []
    count = 0
    for line in text.splitlines():
        n = word_count(line)
        if current and count + n > max_words:
            pieces.append(("\n".join(current), "\n"))
            current, count = [], 0
        if n > max_words:
            pieces += [(run, "\n") for run in word_runs(line, max_words)]
            continue
        current.append(line)
        count += n
    if current:
        pieces.append(("\n".join(current), "\n"))
    return pieces
