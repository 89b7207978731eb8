"""Answer units: the passages of a section's Markdown that an offline answer may quote.

`segment(text)` (packs/retrieval/segment.py) reads the text as blocks, then sentences,
keeping every unit as a (start, end) span of the text, so a quoted unit is also its own
citation quote.

`candidates(text)` are the units an answer chooses from, built on those:
- a list item of at most ITEM_WORDS words is one unit, whole (`item`);
- a paragraph of 2-4 sentences and at most PARAGRAPH_WORDS words is a unit too
  (`paragraph`: a definition and the sentence that completes it), beside its sentences;
  of a longer paragraph or list item, its opening sentences that fit PARAGRAPH_WORDS
  (at least two) are (`paragraph`, `item`);
- a sentence or item that ends with ":" (a sentence also with "," as "In particular,"
  does) and ends its paragraph is a lead-in: it is only ever quoted together with
  the list, table or code block it introduces, an item the items nested under it
  (`leadin`: the lead-in, with the rest of its paragraph when that is short or with the
  sentence before it when the lead-in is a bare connective (packs/text.py's
  CONNECTIVE_WORDS), and what
  follows, cut after the item, row or line that reaches LEADIN_WORDS words; its `brief` is
  the lead-in with each item's or row's head, what it names before ": " or its first
  ITEM_HEAD words, for a question that asks for the list). A listing's caption between a
  lead-in and its code block ('<span class="filename">Filename: src/main.rs</span>', as
  mdBook pages write them) is passed over: the lead-in introduces the code. A lead-in
  followed by a
  paragraph or a heading, or that ends the text, introduced something the text lacks (a
  listing a template directive included, a quote): it is an ordinary sentence (none at
  all when it has at most DANGLING_WORDS words: "That code is:" says nothing alone), and
  the paragraphs after it are no part of it;
- a code block of fewer than MAX_CODE_LINES lines, every sentence, row and longer item's
  sentence as `segment` gives them. Headings never;
- HTML the Markdown kept (a caption span, an anchor, an image) is shown as its text, the
  tags and images left out (`display` only: the unit's span stays the page's text), never
  inside a code span, whose text is code and is shown as written; a block that is only
  markup is no candidate.
"""

from __future__ import annotations

import dataclasses
import html
import re
from functools import lru_cache

from packs import text as text_rules
from packs.markdown import LISTING_CAPTION, outside_code_spans
from packs.retrieval.segment import Unit, one_line, segment

ITEM_WORDS = 60
PARAGRAPH_WORDS = 60
LEADIN_WORDS = 90
ITEM_HEAD = 10  # words of an item shown in a lead-in's `brief`
MAX_CODE_LINES = 5  # longer code blocks are never chosen whole (only after a lead-in)
DANGLING_WORDS = 8  # a lead-in this short that introduces nothing ("That code is:") is none
LONG_WORDS = 60  # a longer lead-in is read as its brief; a longer unit crowds out others

_INTRODUCED = ("item", "row", "code")  # what a lead-in is quoted with
# A lead-in ends in ":", or a sentence in "," ("In particular,", going on in the list);
# either only when it ends its paragraph and a list, table or code block follows.
_LEADIN_END = re.compile(r":[*_`\"')\]]*$")
_COMMA_END = re.compile(r",[*_`\"')\]]*$")
# A sentence that stops mid-clause, with no mark at all ("... with `runc`, set", "To list
# all events you can use"), goes on in the code block or list after it, as a lead-in does.
_OPEN_END = re.compile(r"[A-Za-z0-9`][*_\"')\]]*$")


# --- candidates --------------------------------------------------------------------------------


def _words(u: Unit) -> int:
    return len(u.display.split())


def _is_leadin(u: Unit) -> bool:
    return ((u.kind in ("sentence", "item") and _LEADIN_END.search(u.display) is not None)
            or (u.kind == "sentence" and _COMMA_END.search(u.display) is not None))


def _goes_on(u: Unit) -> bool:
    return u.kind == "sentence" and _OPEN_END.search(u.display) is not None


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
    LEADIN_WORDS (`items`: their texts and heads), shown as a reader sees them (`untagged`,
    as `_visible` shows a whole unit)."""
    heads, words = [], _words(lead)
    for b in blocks:
        if heads and words >= LEADIN_WORDS:
            break
        full = untagged(" ".join(u.display for u in b))
        heads.append((_head(full, kind), b[-1].end, full))
        words += len(heads[-1][0].split())
    return Unit(lead.start, heads[-1][1], "leadin",
                "\n".join([untagged(lead.display), *("- " + h for h, _, _ in heads)]), lead.block,
                lead.group, kind, None, tuple((f, h) for h, _, f in heads))


def _indent(text: str, pos: int) -> int:
    """The indentation of the line that holds `pos`."""
    start = text.rfind("\n", 0, pos) + 1
    line = text[start:pos]
    return len(line) - len(line.lstrip())


def _nested(text: str, units: list[Unit], k: int, depth: int) -> list[Unit]:
    """The items nested under the item whose last unit is units[k] and whose marker is
    indented `depth` (its sub-list: "- **whenUnsatisfiable** indicates how to deal with
    ...:" then "  - `DoNotSchedule` ..."), up to the next item at its own depth or the end
    of the list."""
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
    first = None  # where the lead-in starts when it takes sentences before it
    if lead.kind == "sentence" and len(block) > 1:
        if sum(map(_words, block)) <= PARAGRAPH_WORDS:
            first = block[0]  # the whole short paragraph
        elif _words(lead) <= text_rules.CONNECTIVE_WORDS:
            first = block[-2]  # "... the indicated effects on the pod. In particular,"
    if first is not None:
        lead = Unit(first.start, lead.end, lead.kind, one_line(text[first.start:lead.end]),
                    lead.block, lead.group)
    nested = (_nested(text, units, k, _indent(text, block[0].start))
              if lead.kind == "item" else [])
    rest = nested or [u for u in units[k + 1:] if u.group != lead.group]
    while rest and rest[0].kind == "sentence" and LISTING_CAPTION.match(rest[0].display):
        rest = [u for u in rest if u.group != rest[0].group]  # the listing's caption
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
        # The span's lines, one per shown line (a quoted block shows its lines unmarked).
        end, body = code.start + len("\n".join(text[code.start:code.end].split("\n")[:n])), shown
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
_REFERENCE = re.compile(r"&(?:#\d{1,7}|#x[0-9a-f]{1,6}|[a-z][a-z0-9]{1,31});", re.I)
_IMG = re.compile(r"<img\b[^>]*(>|$)", re.I)  # "$": a sentence end inside its alt text
_TAG = re.compile(r"</?(a|abbr|b|br|code|dd|del|details|div|dl|dt|em|figcaption|figure|hr|i|"
                  r"kbd|li|mark|ol|p|pre|s|small|span|strong|sub|summary|sup|table|tbody|td|"
                  r"th|thead|tr|u|ul)\b(\s[^<>]*)?/?>", re.I)


# Markdown emphasis around words ("A _PersistentVolume_ (PV) is ..."): the words it marks,
# not one token "_persistentvolume_"; a code span (`__init__`) is left as written.
_EMPHASIS = re.compile(r"(?<![\w`])(_{1,2}|\*{1,2})(?=[^\s_*])([^`\n]+?)(?<=[^\s_*])\1(?![\w`])")


def unemphasised(text: str) -> str:
    """`text` without the Markdown emphasis markers around its words."""
    return _EMPHASIS.sub(r"\2", text)


def untagged(text: str) -> str:
    """`text` without its HTML tags and images, and with its character references as they
    show ("--address string&nbsp;&nbsp;Default: 0.0.0.0" in a Markdown page's raw HTML table
    is "--address string Default: 0.0.0.0"; "&lt;", "&gt;" and "&amp;" stay, so no tag is
    made), line by line; code spans are code, kept as written ("handles `<img src=x>`
    payloads" keeps its tag)."""
    if "<" not in text and "&" not in text:
        return text
    return "\n".join(" ".join(outside_code_spans(
        line, lambda part: _shown_references(_TAG.sub(" ", _IMG.sub(" ", part)))).split())
        for line in text.split("\n"))


def _shown_references(part: str) -> str:
    if "&" not in part:
        return part
    return _REFERENCE.sub(lambda m: m.group(0) if (c := html.unescape(m.group(0))) in "<>&"
                          else c, part)


def _visible(u: Unit) -> Unit | None:
    """Unit `u` as a reader sees it (HTML tags out; code as it is), or None when only
    markup is left."""
    if u.kind == "code" or "<" not in u.display:
        return u
    lead, nl, rest = u.display.partition("\n") if u.inner == "code" else (u.display, "", "")
    shown = untagged(lead)
    if not any(ch.isalnum() for ch in shown):
        return None
    return dataclasses.replace(u, display=shown + nl + rest)


def heading_only(text: str, heading_path: str) -> bool:
    """Whether a section's text is only its own heading: a heading followed at once by
    sub-headings keeps its title as its text, so the section can still be found
    (tasks/sections.py), but it says nothing an answer could quote."""
    last = text_rules.fold(heading_path.rsplit(" > ", 1)[-1])
    return bool(last) and text_rules.fold(text) == last


def candidates(text: str, links: bool = False) -> list[Unit]:
    """The units an answer may quote from a section's text (see the module docstring).
    Kept per text: the same sections are read for question after question (units are
    frozen)."""
    return list(_candidates(text, links))


# Units read from a pack's stored analysis (packs/retrieval/unit_store.py), handed to
# `_candidates` for the one call that caches them.
_PRIMED: dict[str, tuple[Unit, ...]] = {}


def candidates_primed(text: str, found: tuple[Unit, ...]) -> list[Unit]:
    """`candidates(text)`, taking `found` as its units unless they are already cached."""
    _PRIMED[text] = found
    try:
        return candidates(text)
    finally:
        _PRIMED.pop(text, None)


@lru_cache(maxsize=4096)
def _candidates(text: str, links: bool) -> tuple[Unit, ...]:
    if not links and (found := _PRIMED.pop(text, None)) is not None:
        return found
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
             if (_is_leadin(u) or _goes_on(u)) and by_block[u.block][-1] is u
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
        if u is parts[0] and len(parts) > 2 and (opening := _opening(text, parts, leads)):
            out.append(opening)
        if any(ch.isalnum() for ch in u.display) and not (
                _is_leadin(u) and _words(u) <= DANGLING_WORDS):
            out.append(u)
        if (u.kind == "sentence" and u is parts[0] and 2 <= len(parts) <= 4
                and sum(map(_words, parts)) <= PARAGRAPH_WORDS and parts[-1].start not in leads):
            out.append(_merged(text, parts, "paragraph"))
    # A block that is only markup (an image whose alt text has a sentence end) is none.
    markup = {b for b, parts in by_block.items() if parts[0].kind != "code"
              and not any(ch.isalnum() for ch in untagged(text[parts[0].start:parts[-1].end]))}
    return tuple(v for u in out if u.block not in markup and (v := _visible(u)) is not None)


def first_sentence(text: str) -> str:
    """The first unit of a section that is not a heading (a benchmark's baseline)."""
    for u in segment(text):
        if u.kind != "heading" and any(ch.isalnum() for ch in u.display):
            return u.display
    return text.strip()



def _opening(text: str, parts: list[Unit], leads: dict[int, Unit]) -> Unit | None:
    """The first sentences of a paragraph or list item too long to be one unit, as many as
    fit PARAGRAPH_WORDS (at least two, up to a lead-in): a statement with the sentence that
    completes it ("The memory limit defines a memory limit for that cgroup. If the container
    tries to allocate more memory than this limit, the Linux kernel out-of-memory subsystem
    activates ...", the opening of a list item of 62 words). None when the block is a unit
    whole already."""
    total = sum(map(_words, parts))
    if total <= ITEM_WORDS if parts[0].kind == "item" else (
            len(parts) <= 4 and total <= PARAGRAPH_WORDS):
        return None
    n, words = 0, 0
    for p in parts:
        if p.start in leads or words + _words(p) > PARAGRAPH_WORDS:
            break
        n, words = n + 1, words + _words(p)
    return _merged(text, parts[:n], "item" if parts[0].kind == "item" else "paragraph") \
        if n >= 2 else None
