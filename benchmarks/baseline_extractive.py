"""A frozen copy of the offline answer's selection as it was before issue 34
(packs/retrieval/extractive.py at commit 2b14e78), kept only as the "today's answer"
baseline of benchmarks/doc_answers.py and benchmarks/xquad_answers.py. Not used by the
product; do not change it (a changed baseline is no baseline).

The original docstring follows.

The offline answer: the sentences of the cited sections that best answer the question.

Segmentation (`segment`) reads a section's Markdown as blocks, then sentences, and keeps
every unit as a (start, end) span of the section's text, so a chosen sentence is also its
own citation quote:
- a fenced code block is one unit (`code`); a heading line is a unit that is never chosen;
- a table row is a unit (`row`; the header row and the `|---|` line are not), shown as
  "header: cell; ..." so it reads without the table;
- a list item (with its indented continuation lines) is split into sentences of its own,
  so items are never run together (`item`);
- a paragraph is split at sentence ends (., ?, ! before a capital, a digit, a quote or a
  code span),
  never at a soft line break, always at a hard one (two trailing spaces or a backslash),
  and never after an abbreviation (e.g., i.e., etc., vs., an initial) or inside `code`.

Selection (`select`): every sentence, item and row of the first `max_sections` cited
sections is scored by the question's keywords it contains, each weighted by its inverse
frequency among those units (so a rare word counts for more than one in every sentence),
plus a share of that score for the section's heading path, plus a small prior for the
section's rank, plus a bonus for a number when the question asks
for one (how many, when, what year). The best `max_sentences` go in best-first order, at
most `per_section` from one section. Weights were set on the XQuAD dev split
(benchmarks/xquad_answers.py); see BENCHMARKS.md for the test split.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from packs.markdown import heading, list_marker, opening_fence
from packs.retrieval.quality import STOP_WORDS

SECTION_PRIOR = 0.3  # added for the top section, divided by rank below it
HEADING_WEIGHT = 0.25  # times the question-keyword score of the section's heading path
NUMBER_BONUS = 0.15
SHORT_WORDS = 4  # units with fewer words score half
MAX_CODE_LINES = 5  # longer code blocks are never chosen whole

_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_QUOTE_MARK = re.compile(r"^\s*>\s?", re.M)
_END = re.compile(r"[.!?][\"'”’)\]*_]*(?=\s+(?:[\"'“‘(\[*_]*[A-Z0-9]|`))")
_ABBREV = frozenset("""e.g i.e etc vs cf al approx fig figs no nos eq eqs mr mrs ms dr st
jr sr prof inc ltd co corp dept est vol ch sec p pp""".split())
_NUMBER_QUESTION = re.compile(
    r"\b(how (many|much|long|old|often|far|large|big|fast)|when|what (year|date|time|"
    r"percentage|number|port|version)|which (year|date))\b", re.I)
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Unit:
    start: int
    end: int
    kind: str  # sentence | item | row | code | heading
    display: str  # the text as the answer shows it (one line; a code unit keeps its lines)


@dataclass(frozen=True)
class Pick:
    section: int  # index into the sections given to select()
    unit: Unit
    score: float


# --- segmentation --------------------------------------------------------------------------


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line, the newline excluded."""
    out, pos = [], 0
    for line in text.split("\n"):
        out.append((pos, pos + len(line)))
        pos += len(line) + 1
    return out


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _one_line(text: str) -> str:
    return " ".join(_QUOTE_MARK.sub("", text).split())


def _in_code(text: str, start: int, pos: int) -> bool:
    return text.count("`", start, pos) % 2 == 1


def _abbreviation(text: str, start: int, pos: int) -> bool:
    """Whether the '.' at `pos` ends an abbreviation or an initial, not a sentence."""
    if text[pos] != ".":
        return False
    word = re.search(r"([\w.]+)$", text[start:pos])
    if not word:
        return False
    w = word.group(1).lower()
    return (w.rstrip(".") in _ABBREV or (len(w) == 1 and w.isalpha())
            or re.fullmatch(r"([a-z]\.)+[a-z]", w) is not None)


def sentences(text: str, start: int, end: int, kind: str = "sentence") -> list[Unit]:
    """The sentences of text[start:end] (a paragraph or a list item's text)."""
    out, s = [], start
    for m in _END.finditer(text, start, end):
        cut = m.end()
        if _in_code(text, s, m.start()) or _abbreviation(text, s, m.start()):
            continue
        a, b = _trim(text, s, cut)
        if a < b:
            out.append(Unit(a, b, kind, _one_line(text[a:b])))
        s = cut
    a, b = _trim(text, s, end)
    if a < b:
        out.append(Unit(a, b, kind, _one_line(text[a:b])))
    return out


def _row_cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def segment(text: str) -> list[Unit]:
    """The units of a section's Markdown text, in order (see the module docstring)."""
    lines = _lines(text)
    units: list[Unit] = []
    para: list[tuple[int, int]] = []  # lines of the open paragraph or list item
    para_kind = "sentence"
    header: list[str] | None = None

    def flush() -> None:
        nonlocal para
        if para:
            a, b = para[0][0], para[-1][1]
            if para_kind == "item":
                marker = list_marker(text[a:para[0][1]])
                a += marker.end() if marker else 0
            if text[a:b].endswith("\\"):  # a hard line break, not part of the text
                b -= 1
            units.extend(sentences(text, a, b, para_kind))
        para = []

    i = 0
    while i < len(lines):
        a, b = lines[i]
        line = text[a:b]
        fence = opening_fence(line)
        if fence:
            flush()
            j = i + 1
            while j < len(lines) and not fence.closed_by(text[lines[j][0]:lines[j][1]]):
                j += 1
            body = lines[i + 1:j]
            if body:
                ca, cb = _trim(text, body[0][0], body[-1][1])
                if ca < cb:
                    units.append(Unit(ca, cb, "code", text[ca:cb]))
            i = j + 1
            continue
        if not line.strip():
            flush()
            header = None
        elif heading(line):
            flush()
            ha, hb = _trim(text, a, b)
            units.append(Unit(ha, hb, "heading", line.strip("# \t")))
        elif _TABLE_ROW.match(line):
            flush()
            if _TABLE_RULE.match(line):
                pass
            elif header is None and i + 1 < len(lines) and _TABLE_RULE.match(
                    text[lines[i + 1][0]:lines[i + 1][1]]):
                header = _row_cells(line)
            else:
                cells = _row_cells(line)
                shown = "; ".join(f"{h}: {c}" if h else c
                                  for h, c in zip(header or [""] * len(cells), cells) if c)
                ra, rb = _trim(text, a, b)
                units.append(Unit(ra, rb, "row", shown))
        elif list_marker(line):
            flush()
            para_kind = "item"
            para = [(a, b)]
        else:
            if not para:
                para_kind = "sentence"
            para.append((a, b))
            if line.endswith(("  ", "\\")):  # a hard line break ends the unit
                flush()
        i += 1
    flush()
    return units


# --- selection -----------------------------------------------------------------------------


def _stem(token: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(token) > len(suffix) + 3 and token.endswith(suffix):
            return token[: -len(suffix)]
    return token


# Dotted and dashed names stay one word: "pack.toml" does not match a question about a pack.
_WORD = re.compile(r"[a-z0-9_]+(?:[.\-/][a-z0-9_]+)*")


def terms(text: str) -> set[str]:
    """Stemmed keywords (stop words left out)."""
    return {_stem(t) for t in _WORD.findall(text.lower()) if t not in STOP_WORDS}


def _candidate(u: Unit, text: str) -> bool:
    if u.kind == "heading":
        return False
    if u.kind == "code":
        return text.count("\n", u.start, u.end) < MAX_CODE_LINES
    return any(ch.isalnum() for ch in u.display)


def select(question: str, texts: Sequence[str], max_sentences: int = 3,
           per_section: int = 2, headings: Sequence[str] | None = None) -> list[Pick]:
    """The best units of `texts` (the cited sections' contents, best section first, with
    their `headings` paths when given) for `question`, best first; [] when no section has
    a unit."""
    units = [(i, u) for i, t in enumerate(texts) for u in segment(t) if _candidate(u, t)]
    if not units:
        return []
    unit_terms = [terms(u.display) for _, u in units]
    df = Counter(t for ts in unit_terms for t in ts)
    n = len(units)
    q = terms(question)
    idf = {t: math.log(1 + n / (df.get(t, 0) + 0.5)) for t in q}
    total = sum(idf.values()) or 1.0
    wants_number = _NUMBER_QUESTION.search(question) is not None
    # A sentence under a heading that names the question's subject ("What is inside a
    # pack" for "what is inside a pack?") rarely repeats those words itself.
    head = [HEADING_WEIGHT * sum(idf[t] for t in q & terms(h)) / total
            for h in (headings or [""] * len(texts))]
    scored = []
    for (i, u), ts in zip(units, unit_terms):
        score = sum(idf[t] for t in q & ts) / total + SECTION_PRIOR / (i + 1) + head[i]
        if wants_number and _DIGIT.search(u.display):
            score += NUMBER_BONUS
        if len(u.display.split()) < SHORT_WORDS:
            score /= 2
        scored.append(Pick(i, u, score))
    # Best first; ties go to the earlier section, then the earlier unit.
    scored.sort(key=lambda p: (-p.score, p.section, p.unit.start))
    out: list[Pick] = []
    per: Counter[int] = Counter()
    for p in scored:
        if per[p.section] >= per_section:
            continue
        out.append(p)
        per[p.section] += 1
        if len(out) == max_sentences:
            break
    return out


def first_sentence(text: str) -> str:
    """The first unit of a section that is not a heading (the benchmark's baseline)."""
    for u in segment(text):
        if _candidate(u, text):
            return u.display
    return text.strip()


def answer_text(question: str, cited) -> str:
    """The answer's bullets as the product wrote them before issue 34 (without its label
    line): up to 3 units of the first 5 cited sections, `- text [n]` each."""
    sections = list(cited[:5])
    picks = select(question, [s.content for s in sections], 3,
                   headings=[s.heading_path or s.title or "" for s in sections])
    lines = []
    for p in picks:
        u, s = p.unit, sections[p.section]
        shown = u.display if u.kind != "code" else f"`{u.display}`"
        lines.append(f"- {shown} [{s.citation}]")
    return "\n".join(lines)
