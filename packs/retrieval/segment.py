"""Segments of a section's Markdown: the units an offline answer is built from
(packs/retrieval/units.py chooses among them).

`segment(text)` reads the text as blocks, then sentences, keeping every unit as a
(start, end) span of the text, so a quoted unit is also its own citation quote:
- a fenced code block is one unit (`code`); a heading line is a unit never quoted;
- a table row is a unit (`row`; the header row and the `|---|` line are not), shown as
  "header: cell; ..." so it reads without the table;
- a list item (with its indented continuation lines) is split into sentences of its own,
  so items are never run together (`item`); so is a definition-list entry (a term line,
  then a line starting with ": "). A paragraph indented under an item after a blank line
  (CommonMark's second paragraph of the item: "1. Run a specialized operating system ..."
  then "   Container-specific operating systems help to ...") is the same item's, and the
  list goes on after it;
- a link reference definition line ("[label]: url") is no unit (the page does not show it);
- a paragraph is split at sentence ends (packs/text.py: never at a soft line break or an
  abbreviation, never inside `code`), and at a hard break (two trailing spaces or a
  backslash) unless the sentence runs on into a line in lower case (`_runs_on`);
- inside a blockquote ("> Note: ... add this:" then "> ```toml"), each line is read without
  its "> " marker, so a quoted fence, list or table is one as well, and a ">" line alone
  ends a paragraph as a blank line does.
Each unit carries the index of its block (a paragraph, an item, a code block, a row) and of
its group (a paragraph, a whole list, a table, a code block).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packs import text as text_rules
from packs.markdown import heading, list_marker, opening_fence

TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_QUOTE_MARK = re.compile(r"^\s*>\s?", re.M)
_DEFINITION = re.compile(r"^\s{0,3}:\s")
# A Markdown link reference definition ("[label]: url"): the page does not show it.
_LINK_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+(\s+[\"'(].*)?\s*$")


@dataclass(frozen=True)
class Unit:
    start: int
    end: int
    kind: str  # sentence | item | row | code | heading | paragraph | leadin
    display: str  # the text as the answer shows it (one line; code keeps its lines)
    block: int = 0  # the paragraph, item, code block or row it belongs to
    group: int = 0  # the paragraph, list, table or code block it belongs to
    inner: str = ""  # a lead-in: the kind of what it introduces (item, row, code, sentence)
    # A lead-in with a list or table: the same with each item's or row's head only, and
    # (on that brief) each item's or row's (text, head).
    brief: Unit | None = None
    items: tuple[tuple[str, str], ...] = ()


def _lines(text: str) -> list[tuple[int, int, bool]]:
    """(start, end, quoted) of each line, its start after a blockquote marker ("> ")."""
    out, pos = [], 0
    for line in text.split("\n"):
        m = _QUOTE_MARK.match(line)
        out.append((pos + (m.end() if m else 0), pos + len(line), m is not None))
        pos += len(line) + 1
    return out


def one_line(text: str) -> str:
    """A unit's text as one line, blockquote markers dropped."""
    return text_rules.one_line(_QUOTE_MARK.sub("", text))


def row_cells(line: str) -> list[str]:
    """The cells of a table row line, stripped."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def row_display(header: list[str] | None, cells: list[str]) -> str:
    """How an answer shows a table row: "header: cell; ..." (a cell without a header, as
    in a table whose header row is not in the section, shown alone); empty cells left out.
    packs/retrieval/verbatim.py checks a shown row with this rule against the page's cells."""
    return "; ".join(f"{h}: {c}" if h else c
                     for h, c in zip(header or [""] * len(cells), cells) if c)


class _Segmenter:
    """The state of one pass of `segment` over a text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.units: list[Unit] = []
        self.para: list[tuple[int, int]] = []  # lines of the open paragraph or list item
        self.para_kind = "sentence"
        self.block = self.group = 0
        self.header: list[str] | None = None
        self.last_kind = ""
        # The column where the last list item's text starts, while a paragraph indented to
        # it after a blank line would still be that item's (None: no item open).
        self.item_indent: int | None = None
        self.continued = False  # the open paragraph continues the last item

    def _next(self, kind: str) -> None:
        """A new block; a new group unless it continues a list or a table."""
        self.block += 1
        if not (kind == self.last_kind and kind in ("item", "row")):
            self.group += 1
        self.last_kind = kind

    def add(self, start: int, end: int, kind: str, display: str) -> None:
        self.units.append(Unit(start, end, kind, display, self.block, self.group))

    def flush(self) -> None:
        if not self.para:
            return
        text, kind = self.text, self.para_kind
        a, b = self.para[0][0], self.para[-1][1]
        if kind == "item":
            marker = list_marker(text[a:self.para[0][1]])
            a += marker.end() if marker else 0
        if text[a:b].endswith("\\"):  # a hard line break, not part of the text
            b -= 1
        if not self.continued:
            self._next(kind)
        for s, e in text_rules.sentence_spans(text, a, b):
            self.add(s, e, kind, one_line(text[s:e]))
        self.para = []
        self.continued = False

    def start_paragraph(self, line: str) -> None:
        """The open paragraph's kind, from its first line `line`: the last item's own when
        indented under it after a blank line (`item_indent`), else a paragraph."""
        indent = len(line) - len(line.lstrip())
        if self.item_indent is not None and indent >= self.item_indent:
            self.para_kind, self.continued = "item", True
        else:
            self.para_kind, self.item_indent = "sentence", None

    def row(self, i: int, lines: list[tuple[int, int, bool]]) -> None:
        text = self.text
        a, b, _ = lines[i]
        line = text[a:b]
        if TABLE_RULE.match(line):
            return
        if self.header is None and i + 1 < len(lines) and TABLE_RULE.match(
                text[lines[i + 1][0]:lines[i + 1][1]]):
            self.header = row_cells(line)
            self.last_kind = ""  # a new table starts a new group
            return
        cells = row_cells(line)
        shown = row_display(self.header, cells)
        self._next("row")
        self.add(*text_rules.trim_span(text, a, b), "row", shown)


def _runs_on(line: str, lines: list, i: int, text: str) -> bool:
    """Whether a line ending in a hard break (two trailing spaces) runs on into the next:
    the sentence is not over ("... compatible control plane␣␣" then "components
    automatically use ..."): the line ends with no sentence end and the next line goes on
    in lower case or with "(". Only a lowercase continuation is read so, so a poem or an
    address (each line opening with a capital) keeps a unit per line."""
    if line.endswith("\\") or line.rstrip().endswith((".", "!", "?", ":", ";")):
        return False
    if i + 1 >= len(lines):
        return False
    after = text[lines[i + 1][0]:lines[i + 1][1]].lstrip()
    return bool(after) and (after[0].islower() or after[0] == "(")


def segment(text: str, links: bool = False) -> list[Unit]:
    """The units of a section's Markdown text, in order (see the module docstring);
    `links`: keep link reference definitions as text (how issue 34's first version read
    them, for benchmarks that score it)."""
    seg = _Segmenter(text)
    lines = _lines(text)
    i = 0
    while i < len(lines):
        a, b, quoted = lines[i]
        line = text[a:b]
        fence = opening_fence(line)
        if fence:
            seg.flush()
            seg.item_indent = None
            j = i + 1
            while j < len(lines) and not fence.closed_by(text[lines[j][0]:lines[j][1]]):
                j += 1
            body = lines[i + 1:j]
            if body:
                ca, cb = text_rules.trim_span(text, body[0][0], body[-1][1])
                if ca < cb:
                    seg._next("code")
                    shown = text[ca:cb]
                    if quoted:  # the code without the quote's markers
                        shown = "\n".join(text[max(x, ca):min(y, cb)] for x, y, _ in body
                                          if y >= ca and x <= cb)
                    seg.add(ca, cb, "code", shown)
            i = j + 1
            continue
        if not line.strip():
            seg.flush()
            seg.header = None
            if seg.last_kind == "row":
                seg.last_kind = ""
        elif heading(line):
            seg.flush()
            seg.item_indent = None
            seg._next("heading")
            seg.add(*text_rules.trim_span(text, a, b), "heading", line.strip("# \t"))
        elif not links and _LINK_DEFINITION.match(line):
            seg.flush()
        elif TABLE_ROW.match(line):
            seg.flush()
            seg.item_indent = None
            seg.row(i, lines)
        elif marker := list_marker(line):
            seg.flush()
            seg.para_kind = "item"
            seg.item_indent = marker.end()
            seg.para = [(a, b)]
        else:
            if not seg.para:
                seg.start_paragraph(line)
            elif len(seg.para) == 1 and _DEFINITION.match(line):
                seg.para_kind = "item"  # "term" then ": definition": a definition list
            seg.para.append((a, b))
            if line.endswith(("  ", "\\")) and not _runs_on(line, lines, i, text):
                seg.flush()  # a hard line break ends the unit
        i += 1
    seg.flush()
    return seg.units
