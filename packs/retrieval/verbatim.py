"""Does an offline answer show its sections' own text? The check behind issue 51's rule that
an answer unit's text is the section's text.

Each bullet of an extractive answer (packs/retrieval/extractive.py) quotes one unit of the
section its [n] cites, and packs/citations.py verifies the quote. This module checks what
the bullet *shows*: every piece of text on its lines must occur in that quote, character
for character after whitespace folding, once the answer's own display syntax is taken off
(the "- " bullet and its [n], the lines of a fence and their indentation, the "- " of a
lead-in's items, the backticks around a one-line code block, the "\\" the answer sets
before a "[" and a digit so it reads as no citation marker (a page's own "\\[" kept), the " …"
that cuts an item to its head and the "… " that opens a clause cut from its sentence (a
whole-pack item's quote), a heading the bullet opens with, which is checked against
the citation's heading path instead, and the bold label of a whole-pack item, "**name**
(covers: ...): ", an entity's or page's name that says what the quote after it is about:
packs/retrieval/whole_pack.py). Then, on both sides, only what a reader never sees is
taken off: blockquote markers and the HTML tags and images the unit display leaves out
(packs/retrieval/units.py `untagged`, never inside a code span). Anything else a bullet
shows that the quote does not hold (a rewritten code span, a word that is not the page's)
is a line that does not verify.

One display is read back with the section's text beside it: a table row, which an answer
shows as "header: cell; ..." (packs/retrieval/segment.py `row_display`) so it reads without
its table. Given the cited sections' texts (`sections`), a piece that is not in its quote
verifies when it is (the start of) the display of a row its quote spans, the cells read
from that row's line and the headers from the header row of the same table in the section:
every character shown is still the page's, only the pipes between cells and the header
above them are set out on one line. Without the section's text such a line does not verify.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from packs.citations import normalise
from packs.retrieval.segment import TABLE_ROW, TABLE_RULE, row_cells, row_display
from packs.retrieval.units import untagged

_MARKER = re.compile(r"\s*\[\d+(?:,[^\]\n]*)?\]\s*$")
_HEADING = re.compile(r"^\*(.+?)\*: ")
_LABEL = re.compile(r"^\*\*[^\n]+?\*\*(?: \(covers: [^\n]*?\))?: ")  # a name may hold "*"
_QUOTE_MARK = re.compile(r"^[ \t]*>[ \t]?", re.M)
_FENCE = re.compile(r"^\s*(```|~~~)")
_CUT = " …"
_OPEN_CUT = "… "
# The answer's escape of a "[" that would read as a citation marker (packs/citations.py
# `no_marker`): "\\[" before a digit.
_ESCAPED = re.compile(r"\\\[(?=\d)")


def bullets(answer: str) -> list[str]:
    """The bullets of an offline answer, each with its continuation lines, in order; the
    label line, a whole-pack list's lead line and a closing note are no bullets."""
    out: list[str] = []
    open_ = False
    for line in answer.split("\n"):
        if line.startswith("- "):
            out.append(line)
            open_ = True
        elif open_ and (line.startswith((" ", "\t")) or not line.strip()):
            out[-1] += "\n" + line
        else:
            open_ = False  # a lead line, the unverified note
    return [b.rstrip() for b in out]


def page_view(text: str) -> str:
    """`text` as a reader sees it, whitespace folded: no blockquote markers, no HTML tags
    or images outside code spans."""
    return normalise(untagged(_QUOTE_MARK.sub("", text)))


def _pieces(bullet: str, heading: str) -> list[str]:
    """The text pieces `bullet` shows of its quote (see the module docstring)."""
    body = _MARKER.sub("", bullet)[2:]
    m = _HEADING.match(body)
    if m and normalise(_ESCAPED.sub("[", m.group(1))) in normalise(heading):
        body = body[m.end():]
    body = _LABEL.sub("", body, count=1)
    pieces = []
    for line in body.split("\n"):
        line = line.strip()
        if not line or _FENCE.match(line):
            continue
        if line.startswith("- "):
            line = line[2:]
        if line.endswith(_CUT):
            line = line[:-len(_CUT)]
        if line.startswith(_OPEN_CUT):
            line = line[len(_OPEN_CUT):]
        pieces.append(line)
    return pieces


def rows_shown(content: str, start: int, end: int) -> list[str]:
    """The table rows of `content` that the span [start, end) touches, each as an answer
    shows it (`row_display`, page view): its cells from its own line, its headers from the
    header row that opens its table (the first line of the run of table lines it is in,
    when a `|---|` rule follows it; none when the section starts inside the table)."""
    lines, pos = [], 0
    for line in content.split("\n"):
        lines.append((pos, pos + len(line), _QUOTE_MARK.sub("", line, count=1)))
        pos += len(line) + 1
    shown = []
    for i, (a, b, line) in enumerate(lines):
        if b <= start or a >= end or not TABLE_ROW.match(line) or TABLE_RULE.match(line):
            continue
        top = i
        while top > 0 and TABLE_ROW.match(lines[top - 1][2]):
            top -= 1
        header = None
        if top + 1 < len(lines) and TABLE_RULE.match(lines[top + 1][2]):
            if top == i:
                continue  # the header row itself is no row of the table
            header = row_cells(lines[top][2])
        shown.append(page_view(row_display(header, row_cells(line))))
    return shown


def unverified_lines(answer: str, citations: Sequence[Mapping[str, object]],
                     sections: Mapping[str, str] | None = None) -> list[str]:
    """The pieces of `answer`'s bullets that are not their citation's text (see the module
    docstring); [] when every line verifies. Bullets and citations pair in order (one
    marker per bullet, as the extractive answer writes them); a bullet whose citation is
    unverified is reported whole. `sections`: the cited sections' texts by section id, to
    read a table row's display back (without them a row shown with its headers does not
    verify)."""
    bad: list[str] = []
    for bullet, cite in zip(bullets(answer), citations):
        if not cite.get("verified"):
            bad.append(bullet)
            continue
        quote = page_view(str(cite.get("quote") or ""))
        rows: list[str] | None = None
        for piece in _pieces(bullet, str(cite.get("heading_path") or "")):
            # as shown, and with the answer's escapes taken off (a page's "\[1" stays)
            shown = {page_view(piece), page_view(_ESCAPED.sub("[", piece))} - {""}
            plain = {f[1:-1] for f in shown if len(f) > 2 and f[0] == f[-1] == "`"}
            if not shown or any(f in quote for f in shown | plain):
                continue
            if rows is None:
                content = (sections or {}).get(str(cite.get("section_id")))
                start, end = cite.get("start"), cite.get("end")
                rows = (rows_shown(content, start, end) if content is not None
                        and isinstance(start, int) and isinstance(end, int) else [])
            if not any(r.startswith(f) for r in rows for f in shown):
                bad.append(piece)
    return bad
