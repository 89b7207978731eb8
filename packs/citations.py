"""Citations of an answer: one for every `[n]` marker, each a checked span of its section.

A citation is a dict with the fields of `CITATION_FIELDS`:
  n             the number in the marker: the [n] of an excerpt in the context
  pack          the pack the section comes from (its label in results of several packs)
  url, section_id, heading_path
                the cited section, `section_id` as stored in the pack's sections table
                (all three None when n names no excerpt of the context)
  quote         the supporting passage. When verified it is `content[start:end]`, the
                passage as the section writes it; otherwise the quote as it was given
  start, end    character offsets of the quote in the section's stored text (end
                exclusive); None when not verified
  verified      True when the quote, after whitespace normalisation (runs of spaces, tabs
                and newlines are one space, ends trimmed), occurs in the section's text

Markers: `[n]`, `[n, pack]` (answers from several packs), `[n, m]` and `[n; m]` (several
at once), outside code spans and fences; an escaped `\\[n]`, an index such as `items[0]`
(a word character before the bracket) and a Markdown link `[1](url)` are not markers.
Markers are matched to quotes in order: the k-th marker of n takes the k-th quote given for
n. A marker left without a quote, a quote that does not occur in the section, and a number
that names no excerpt are all kept as citations with `verified: False`, and
`unverified_note` says so in the answer: an unchecked citation is never passed off as one.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Protocol

from packs.markdown import CODE_SPAN, replace_fences

CITATION_FIELDS = ("n", "pack", "url", "section_id", "heading_path", "quote", "start", "end",
                   "verified")

_BRACKET = re.compile(r"(?<![\\\w])\[([^\[\]\n]{1,120})\](?!\()")
_NUMBER = re.compile(r"\d{1,6}")
# A "[" that would open a marker: before a digit, after no word character or backslash.
_MARKER_START = re.compile(r"(?<![\\\w])\[(?=\d)")


class CitedSection(Protocol):
    """What a citation needs of a section (RankedSection has it)."""

    id: str
    url: str
    heading_path: str
    content: str
    pack: str | None


def _blank(match: re.Match[str]) -> str:
    return " " * len(match.group(0))


def markers(answer: str) -> list[int]:
    """The citation numbers of `answer`'s markers, in order of appearance (see the module
    docstring for what counts as a marker)."""
    text = CODE_SPAN.sub(_blank, replace_fences(answer))
    out: list[int] = []
    for m in _BRACKET.finditer(text):
        parts = [p.strip() for p in re.split(r"[,;]", m.group(1))]
        if not _NUMBER.fullmatch(parts[0]):
            continue
        out.extend(int(p) for p in parts if _NUMBER.fullmatch(p))
    return out


def no_marker(text: str) -> str:
    """`text` (a page's own words, quoted in an answer) with each "[" that would read as a
    citation marker escaped ("\\[0]"): the item `&"hi"[0]`, a footnote "[1]" of the page."""
    return _MARKER_START.sub(r"\\[", text)


def normalise(text: str) -> str:
    """Whitespace runs as one space, ends trimmed."""
    return " ".join(text.split())


def locate(quote: str, text: str) -> tuple[int, int] | None:
    """(start, end) of the first occurrence of `quote` in `text` after whitespace
    normalisation of both, as offsets in `text`; None when it does not occur or is blank."""
    q = normalise(quote)
    if not q:
        return None
    norm, starts, spans = _words(text)
    found = norm.find(q)
    if found < 0:
        return None
    last = found + len(q) - 1  # neither end is a space: `q` is trimmed
    k, j = bisect_right(starts, found) - 1, bisect_right(starts, last) - 1
    return spans[k][0] + found - starts[k], spans[j][0] + last - starts[j] + 1


_NON_SPACE = re.compile(r"\S+")


@lru_cache(maxsize=256)  # an answer cites a section for several of its lines
def _words(text: str) -> tuple[str, list[int], list[tuple[int, int]]]:
    """`text` normalised (its words joined by one space), where each word starts in that,
    and each word's (start, end) in `text`."""
    spans = [m.span() for m in _NON_SPACE.finditer(text)]
    starts, at = [], 0
    for a, b in spans:
        starts.append(at)
        at += b - a + 1
    return " ".join(text[a:b] for a, b in spans), starts, spans


def citation(n: int, section: CitedSection | None, quote: str, pack: str | None) -> dict:
    """One citation dict for marker n, its section (None: n names no excerpt) and quote."""
    span = locate(quote, section.content) if section is not None else None
    if section is None:
        return dict(n=n, pack=None, url=None, section_id=None, heading_path=None,
                    quote=quote, start=None, end=None, verified=False)
    start, end = span if span else (None, None)
    return dict(n=n, pack=section.pack or pack, url=section.url, section_id=section.id,
                heading_path=section.heading_path,
                quote=section.content[start:end] if span else quote,
                start=start, end=end, verified=span is not None)


def cite(answer: str, sections: Mapping[int, CitedSection],
         quotes: Iterable[tuple[int, str]], pack: str | None = None) -> list[dict]:
    """One citation per marker of `answer`: `sections` maps [n] to its section, `quotes`
    gives (n, quote) in the order the markers use them; `pack` names the sections' pack
    when they carry no label of their own."""
    queues: dict[int, deque[str]] = defaultdict(deque)
    for n, quote in quotes:
        queues[n].append(quote if isinstance(quote, str) else "")
    out = []
    for n in markers(answer):
        quote = queues[n].popleft() if queues[n] else ""
        out.append(citation(n, sections.get(n), quote, pack))
    return out


def excerpt_citations(sections: Iterable[CitedSection], pack: str | None = None) -> list[dict]:
    """A citation for each [n] excerpt of a context (search results, no answer): its quote
    is the part of the section the context shows (`context_span`), checked like any other.
    `sections` are the cited ones in [n] order (SearchResult.cited())."""
    out = []
    for s in sections:
        start, end = getattr(s, "context_span", None) or (0, len(s.content))
        out.append(citation(int(getattr(s, "citation", 0) or 0), s,
                            s.content[start:end], pack))
    return out


def unverified_note(citations: Sequence[Mapping[str, object]]) -> str | None:
    """A line for the end of the answer naming the citations that could not be verified
    (written without brackets, so it adds no marker); None when all were verified."""
    bad = list(dict.fromkeys(int(c["n"]) for c in citations if not c["verified"]))  # type: ignore[arg-type]
    if not bad:
        return None
    listed = ", ".join(str(n) for n in bad)
    word = "citation" if len(bad) == 1 else "citations"
    return (f"Unverified {word} {listed}: the supporting passage was not found in the cited "
            "section, so check it against the sources before relying on it.")


def precision(citations: Iterable[Mapping[str, object]]) -> tuple[int, int]:
    """(verified, total) over `citations`."""
    total = verified = 0
    for c in citations:
        total += 1
        verified += bool(c.get("verified"))
    return verified, total
