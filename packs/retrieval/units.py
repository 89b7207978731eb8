"""Answer units: the passages of a section's Markdown that an offline answer may quote.

`segment(text)` reads the text as blocks, then sentences, keeping every unit as a
(start, end) span of the text, so a quoted unit is also its own citation quote:
- a fenced code block is one unit (`code`); a heading line is a unit never quoted;
- a table row is a unit (`row`; the header row and the `|---|` line are not), shown as
  "header: cell; ..." so it reads without the table;
- a list item (with its indented continuation lines) is split into sentences of its own,
  so items are never run together (`item`); so is a definition-list entry (a term line,
  then a line starting with ": ");
- a link reference definition line ("[label]: url") is no unit (the page does not show it);
- a paragraph is split at sentence ends (packs/text.py: never at a soft line break or an
  abbreviation, never inside `code`), and always at a hard break (two trailing spaces or a
  backslash).
Each unit carries the index of its block (a paragraph, an item, a code block, a row) and of
its group (a paragraph, a whole list, a table, a code block).

`candidates(text)` are the units an answer chooses from, built on those:
- a list item of at most ITEM_WORDS words is one unit, whole (`item`);
- a paragraph of 2-4 sentences and at most PARAGRAPH_WORDS words is a unit too
  (`paragraph`: a definition and the sentence that completes it), beside its sentences;
- a sentence or item that ends with ":" is a lead-in: it is only ever quoted together with
  the list, table or code block it introduces, an item the items nested under it
  (`leadin`: the lead-in, with the rest of its paragraph when that is short, and what
  follows, cut after the item, row or line that reaches LEADIN_WORDS words; its `brief` is
  the lead-in with each item's or row's head, what it names before ": " or its first
  ITEM_HEAD words, for a question that asks for the list). A lead-in followed by a
  paragraph or a heading, or that ends the text, introduced something the text lacks (a
  listing a template directive included, a quote): it is an ordinary sentence, and the
  paragraphs after it are no part of it;
- a code block of fewer than MAX_CODE_LINES lines, every sentence, row and longer item's
  sentence as `segment` gives them. Headings never;
- HTML the Markdown kept (a caption span, an anchor, an image) is shown as its text, the
  tags and images left out (`display` only: the unit's span stays the page's text); a
  block that is only markup is no candidate.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from packs import text as text_rules
from packs.markdown import heading, list_marker, opening_fence

ITEM_WORDS = 60
PARAGRAPH_WORDS = 60
LEADIN_WORDS = 90
ITEM_HEAD = 10  # words of an item shown in a lead-in's `brief`
MAX_CODE_LINES = 5  # longer code blocks are never chosen whole (only after a lead-in)

_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_QUOTE_MARK = re.compile(r"^\s*>\s?", re.M)
_DEFINITION = re.compile(r"^\s{0,3}:\s")
# A Markdown link reference definition ("[label]: url"): the page does not show it.
_LINK_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+(\s+[\"'(].*)?\s*$")
_INTRODUCED = ("item", "row", "code")  # what a lead-in is quoted with
_LEADIN_END = re.compile(r":[*_`\"')\]]*$")


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


def _lines(text: str) -> list[tuple[int, int]]:
    out, pos = [], 0
    for line in text.split("\n"):
        out.append((pos, pos + len(line)))
        pos += len(line) + 1
    return out


def one_line(text: str) -> str:
    """A unit's text as one line, blockquote markers dropped."""
    return text_rules.one_line(_QUOTE_MARK.sub("", text))


def _row_cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


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
        self._next(kind)
        for s, e in text_rules.sentence_spans(text, a, b):
            self.add(s, e, kind, one_line(text[s:e]))
        self.para = []

    def row(self, i: int, lines: list[tuple[int, int]]) -> None:
        text = self.text
        a, b = lines[i]
        line = text[a:b]
        if _TABLE_RULE.match(line):
            return
        if self.header is None and i + 1 < len(lines) and _TABLE_RULE.match(
                text[lines[i + 1][0]:lines[i + 1][1]]):
            self.header = _row_cells(line)
            self.last_kind = ""  # a new table starts a new group
            return
        cells = _row_cells(line)
        shown = "; ".join(f"{h}: {c}" if h else c
                          for h, c in zip(self.header or [""] * len(cells), cells) if c)
        self._next("row")
        self.add(*text_rules.trim_span(text, a, b), "row", shown)


def segment(text: str, links: bool = False) -> list[Unit]:
    """The units of a section's Markdown text, in order (see the module docstring);
    `links`: keep link reference definitions as text (how issue 34's first version read
    them, for benchmarks that score it)."""
    seg = _Segmenter(text)
    lines = _lines(text)
    i = 0
    while i < len(lines):
        a, b = lines[i]
        line = text[a:b]
        fence = opening_fence(line)
        if fence:
            seg.flush()
            j = i + 1
            while j < len(lines) and not fence.closed_by(text[lines[j][0]:lines[j][1]]):
                j += 1
            body = lines[i + 1:j]
            if body:
                ca, cb = text_rules.trim_span(text, body[0][0], body[-1][1])
                if ca < cb:
                    seg._next("code")
                    seg.add(ca, cb, "code", text[ca:cb])
            i = j + 1
            continue
        if not line.strip():
            seg.flush()
            seg.header = None
            if seg.last_kind == "row":
                seg.last_kind = ""
        elif heading(line):
            seg.flush()
            seg._next("heading")
            seg.add(*text_rules.trim_span(text, a, b), "heading", line.strip("# \t"))
        elif not links and _LINK_DEFINITION.match(line):
            seg.flush()
        elif _TABLE_ROW.match(line):
            seg.flush()
            seg.row(i, lines)
        elif list_marker(line):
            seg.flush()
            seg.para_kind = "item"
            seg.para = [(a, b)]
        else:
            if not seg.para:
                seg.para_kind = "sentence"
            elif len(seg.para) == 1 and _DEFINITION.match(line):
                seg.para_kind = "item"  # "term" then ": definition": a definition list
            seg.para.append((a, b))
            if line.endswith(("  ", "\\")):  # a hard line break ends the unit
                seg.flush()
        i += 1
    seg.flush()
    return seg.units


# --- candidates --------------------------------------------------------------------------------


def _words(u: Unit) -> int:
    return len(u.display.split())


def _is_leadin(u: Unit) -> bool:
    return u.kind in ("sentence", "item") and _LEADIN_END.search(u.display) is not None


def _merged(text: str, parts: list[Unit], kind: str) -> Unit:
    start, end = parts[0].start, parts[-1].end
    return Unit(start, end, kind, one_line(text[start:end]), parts[0].block, parts[0].group)


def _introduced(units: list[Unit], group: int) -> list[list[Unit]]:
    """The blocks (items, rows, a code block) of `group`, the list, table or code block a
    lead-in introduces."""
    blocks: dict[int, list[Unit]] = {}
    for u in units:
        if u.group == group:
            blocks.setdefault(u.block, []).append(u)
        elif u.group > group:
            break
    return list(blocks.values())


def _budget(lead: Unit, blocks: list[list[Unit]], whole: bool) -> tuple[list[list[Unit]], int]:
    """The first blocks that fit LEADIN_WORDS (cut after the block that reaches it), and
    their words, counting whole blocks or only their first units."""
    kept, words = [], _words(lead)
    for b in blocks:
        if kept and words >= LEADIN_WORDS:
            break
        kept.append(b)
        words += sum(map(_words, b if whole else b[:1]))
    return kept, words


# An item's head: what it names before ": " or " - " ("`Forbid`: The CronJob does not
# ..."), else its first ITEM_HEAD words; a row's: its first cell.
_HEAD_END = re.compile(r"^(.{1,80}?)\s*(:\s|\s[-–—]\s)")


def _head(item: str, kind: str = "item") -> str:
    if kind == "row":
        return item.split("; ")[0]
    m = _HEAD_END.match(item)
    if m:
        return m.group(1)
    w = item.split()
    return item if len(w) <= ITEM_HEAD else " ".join(w[:ITEM_HEAD]) + " …"


def _brief(lead: Unit, blocks: list[list[Unit]], kind: str) -> Unit:
    """Lead-in `lead` with the heads of the items or rows `blocks`, as many as reach
    LEADIN_WORDS (`items`: their texts and heads)."""
    heads, words = [], _words(lead)
    for b in blocks:
        if heads and words >= LEADIN_WORDS:
            break
        full = " ".join(u.display for u in b)
        heads.append((_head(full, kind), b[-1].end, full))
        words += len(heads[-1][0].split())
    return Unit(lead.start, heads[-1][1], "leadin",
                "\n".join([lead.display, *("- " + h for h, _, _ in heads)]), lead.block,
                lead.group, kind, None, tuple((f, h) for h, _, f in heads))


def _indent(text: str, pos: int) -> int:
    """The indentation of the line that holds `pos`."""
    start = text.rfind("\n", 0, pos) + 1
    line = text[start:pos]
    return len(line) - len(line.lstrip())


def _nested(text: str, units: list[Unit], k: int) -> list[Unit]:
    """The items nested under the item whose last unit is units[k] (its sub-list:
    "- **whenUnsatisfiable** indicates how to deal with ...:" then "  - `DoNotSchedule`
    ..."), up to the next item at its own depth or the end of the list."""
    first = next(u for u in units if u.block == units[k].block)
    depth = _indent(text, first.start)
    out = []
    for u in units[k + 1:]:
        if u.kind != "item" or u.group != units[k].group:
            break
        if u.block != (out[-1].block if out else None) and _indent(text, u.start) <= depth:
            break
        out.append(u)
    return out


def _leadin(text: str, units: list[Unit], k: int, block: list[Unit]) -> Unit | None:
    """The lead-in units[k] with the list, table or code block it introduces, or None when
    none follows it (a paragraph, a heading or the end of the text follows). A short
    paragraph comes whole ("First, a look at the rules. Keep them in mind:"), its first
    sentence often being the one that names the subject; `block`: its sentences. Items
    and rows are shown whole when they all fit, else by their first sentences."""
    lead = units[k]
    if lead.kind == "sentence" and len(block) > 1 and sum(map(_words, block)) <= PARAGRAPH_WORDS:
        lead = Unit(block[0].start, lead.end, lead.kind,
                    one_line(text[block[0].start:lead.end]), lead.block, lead.group)
    nested = _nested(text, units, k) if lead.kind == "item" else []
    rest = nested or [u for u in units[k + 1:] if u.group != lead.group]
    if not rest or rest[0].kind not in _INTRODUCED:
        return None
    kind = rest[0].kind
    blocks = _introduced(rest, rest[0].group)
    if kind == "code":
        code = blocks[0][0]
        lines = code.display.split("\n")
        budget = max(LEADIN_WORDS - _words(lead), 10)
        n = next((j for j in range(len(lines)) if len(" ".join(lines[:j + 1]).split())
                  >= budget), len(lines) - 1) + 1
        shown = "\n".join(lines[:n])
        end, body = code.start + len(shown), shown
    else:
        kept, _ = _budget(lead, blocks, whole=True)
        whole = len(kept) == len(blocks)
        if not whole:
            kept, _ = _budget(lead, blocks, whole=False)
        end = kept[-1][-1].end
        lines = [" ".join(u.display for u in (b if whole else b[:1])) for b in kept]
        body = "\n".join("- " + line for line in lines)
        return Unit(lead.start, end, "leadin", f"{lead.display}\n{body}", lead.block,
                    lead.group, kind, _brief(lead, blocks, kind))
    return Unit(lead.start, end, "leadin", f"{lead.display}\n{body}", lead.block, lead.group,
                kind)


# HTML a page's Markdown keeps (caption spans, images, anchors, tables written as HTML):
# a reader sees the text, not the tags, and an image by its picture, not its alt text. Only
# these tag names, so that `Vec<T>` and "<message>" placeholders stay.
_IMG = re.compile(r"<img\b[^>]*(>|$)", re.I)  # "$": a sentence end inside its alt text
_TAG = re.compile(r"</?(a|abbr|b|br|code|dd|del|details|div|dl|dt|em|figcaption|figure|hr|i|"
                  r"kbd|li|mark|ol|p|pre|s|small|span|strong|sub|summary|sup|table|tbody|td|"
                  r"th|thead|tr|u|ul)\b(\s[^<>]*)?/?>", re.I)


def _untagged(text: str) -> str:
    """`text` without its HTML tags and images, line by line."""
    if "<" not in text:
        return text
    return "\n".join(" ".join(_TAG.sub(" ", _IMG.sub(" ", line)).split())
                     for line in text.split("\n"))


def _visible(u: Unit) -> Unit | None:
    """Unit `u` as a reader sees it (HTML tags out; code as it is), or None when only
    markup is left."""
    if u.kind == "code" or "<" not in u.display:
        return u
    lead, nl, rest = u.display.partition("\n") if u.inner == "code" else (u.display, "", "")
    shown = _untagged(lead)
    if not any(ch.isalnum() for ch in shown):
        return None
    return dataclasses.replace(u, display=shown + nl + rest)


def candidates(text: str, links: bool = False) -> list[Unit]:
    """The units an answer may quote from a section's text (see the module docstring)."""
    units = segment(text, links)
    out: list[Unit] = []
    by_block: dict[int, list[Unit]] = {}
    for u in units:
        by_block.setdefault(u.block, []).append(u)
    # Lead-ins quoted with what they introduce, by the start of their last sentence. One
    # that introduces no list, table or code block reads as any other sentence: what it
    # introduced is not in the text, and the paragraphs after it would only fill the
    # answer ('in his article "X", published in 1937, he stated:' still says something).
    leads = {u.start: lead for k, u in enumerate(units)
             if _is_leadin(u) and by_block[u.block][-1] is u
             and (lead := _leadin(text, units, k, by_block[u.block])) is not None}
    done: set[int] = set()
    for u in units:
        if u.start in leads:
            out.append(leads[u.start])
            continue
        if u.kind == "heading":
            continue
        if u.kind == "code":
            if text.count("\n", u.start, u.end) < MAX_CODE_LINES:
                out.append(u)
            continue
        parts = by_block[u.block]
        if u.kind == "item" and len(parts) > 1 and sum(map(_words, parts)) <= ITEM_WORDS:
            if u.block not in done:  # the whole item, once
                done.add(u.block)
                whole = parts[:-1] if parts[-1].start in leads else parts
                if whole:
                    out.append(_merged(text, whole, "item"))
            continue
        if any(ch.isalnum() for ch in u.display):
            out.append(u)
        if (u.kind == "sentence" and u is parts[0] and 2 <= len(parts) <= 4
                and sum(map(_words, parts)) <= PARAGRAPH_WORDS and parts[-1].start not in leads):
            out.append(_merged(text, parts, "paragraph"))
    # A block that is only markup (an image whose alt text has a sentence end) is none.
    markup = {b for b, parts in by_block.items() if parts[0].kind != "code"
              and not any(ch.isalnum() for ch in _untagged(text[parts[0].start:parts[-1].end]))}
    return [v for u in out if u.block not in markup and (v := _visible(u)) is not None]


def first_sentence(text: str) -> str:
    """The first unit of a section that is not a heading (a benchmark's baseline)."""
    for u in segment(text):
        if u.kind != "heading" and any(ch.isalnum() for ch in u.display):
            return u.display
    return text.strip()
