"""What the learned reader (packs/retrieval/reader_features.py) reads of an answer unit
whatever the question: its terms and their pairs, its shape (kind, length, whether it is
a fragment, a caption, meta talk about the page, links, a number, code), the terms that
open it when it says what something is, and the terms of its condition.

`facts(unit, raw)` works them out once and keeps them: the same units are read for each
part of a question about several things (asks.py `parts`: the whole question and each
part score every unit) and again from question to question (the pack's sections recur),
so a question's features cost only what depends on the question.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from packs import text as text_rules
from packs.retrieval import code_units
from packs.retrieval.reader_question import pairs
from packs.retrieval.units import LONG_WORDS, Unit, unemphasised

SHORT_WORDS = 4  # a unit of 4 words or fewer is short
RARE_WORDS = 5  # the first words of a unit that say what it is about
KINDS = ("sentence", "item", "paragraph", "leadin", "code", "row")
# The question-independent features, in the order `Facts.shape` holds them.
SHAPE = (*(f"kind_{k}" for k in KINDS), "log_words", "short", "long", "meta", "links",
         "number", "code", "fragment", "caption", "asks", "dangling")

_META = re.compile(
    r"^\W*(this (page|task|document|tutorial|guide|section|chapter|example|exercise)|in this "
    r"(page|task|document|tutorial|guide|section|chapter|exercise)|see\b|for (more|further) "
    r"(information|details)|learn (how|about)|understand\b|before you begin|what's next|"
    r"you need to have|read (about|more)|refer to|the following (sections?|pages?)|"
    r"next,|now that)", re.I)
_LINK = re.compile(r"\[[^\]]*\]\([^)]*\)")
_DEFINES = re.compile(r"\b(is|are|means|refers to|describes|represents|lets you|allows|"
                      r"determines?|indicates?|decides?|controls?)\b")
_NUMBER = re.compile(r"(?<![\w.])\d")
# A unit's condition: from "if", "when" ... to the comma or "then" that ends it.
_CONDITION = re.compile(r"(?i)\b(if|when|whenever|once|unless|after)\b([^,;:.]*?)(,|\bthen\b|$)")
_CAPTION = re.compile(r"^\W*(listing|figure|table|example)\s+[\d-]+[a-z]?\b", re.I)
_CLOSED = re.compile(r"[.!?:;)\]\"'”’*_`]\s*$")
_URL = re.compile(r"\]\([^)\s]*\)|\bhttps?://\S+")
_DANGLING = re.compile(r":[*_`\"')\]]*$")


@lru_cache(maxsize=32768)  # the same units recur from question to question
def plain(display: str) -> str:
    """A unit's text as its words are counted: emphasis markers and link targets out
    (`kubectl apply -f https://k8s.io/.../memory-request-limit.yaml` is no sentence about
    memory limits; "A _PersistentVolume_ is ..." defines a PersistentVolume)."""
    return _URL.sub(" ", unemphasised(display))


@lru_cache(maxsize=65536)
def terms_of(display: str) -> tuple[str, ...]:
    """The terms of a unit's text (`display`) as the reader counts them (`plain`)."""
    if (found := _PRIMED_TERMS.pop(display, None)) is not None:
        return found
    return tuple(text_rules.terms(plain(display)))


# Terms read from a pack's stored analysis (`prime`), for `terms_of`'s first call.
_PRIMED_TERMS: dict[str, tuple[str, ...]] = {}


def opening(display: str) -> frozenset[str]:
    """The terms of the first six words of a unit that opens by saying what something is
    or does ("Liveness probes determine when to restart a container"), else none."""
    head = display.split()[:12]
    if len(head) < 3 or _DEFINES.search(" ".join(head).lower()) is None:
        return frozenset()
    return frozenset(text_rules.terms(" ".join(head[:6])))


def condition_terms(display: str) -> frozenset[str]:
    """The terms of the conditions ("If the container tries to allocate more memory than
    this limit, ...") of a unit's first sentence or line."""
    if _CONDITION.search(display) is None:  # no condition anywhere: none to split
        return frozenset()
    first = (text_rules.sentences(display.split("\n", 1)[0]) or [""])[0]
    return frozenset(t for m in _CONDITION.finditer(first) for t in text_rules.terms(m.group(2)))


@dataclass(frozen=True, eq=False)
class Facts:
    """What the reader reads of one unit whatever the question."""

    terms: tuple[str, ...]  # `terms_of`, in order
    tf: Counter[str]  # their counts (read only)
    term_set: frozenset[str]
    pairs: frozenset[tuple[str, str]]  # successive terms
    low: str  # the unit's Markdown, lower-cased
    shape: tuple[float, ...]  # SHAPE's values
    opening: frozenset[str]  # `opening` of its plain text
    first: frozenset[str]  # the terms of its first RARE_WORDS words
    condition: frozenset[str]  # `condition_terms`
    has_code: bool  # code, a lead-in to code, or a code span
    command: bool  # code that is a command line (code_units.is_command)


# Facts read from a pack's stored analysis (packs/retrieval/unit_store.py) that `facts`
# has not cached yet; at most PRIMED_LIMIT, the oldest dropped all at once.
_PRIMED: dict[tuple[Unit, str], Facts] = {}
PRIMED_LIMIT = 8192


def prime(found: list[tuple[Unit, str, Facts]]) -> None:
    """Let `facts(u, raw)` answer `f`, and `terms_of(u.display)` its terms, for each (u,
    raw, f) the first time each is asked."""
    if len(_PRIMED) + len(found) > PRIMED_LIMIT:
        _PRIMED.clear()
        _PRIMED_TERMS.clear()
    for u, raw, f in found:
        _PRIMED[(u, raw)] = f
        _PRIMED_TERMS[u.display] = f.terms


def stored(u: Unit, raw: str, terms: tuple[str, ...], shape: tuple[float, ...],
           opening: frozenset[str], first: frozenset[str], condition: frozenset[str],
           has_code: bool, command: bool) -> Facts:
    """The Facts of unit `u` (Markdown `raw`) from what is worked out of it (`facts`) or
    what a pack stored of that; the counts, sets, pairs and lower-cased text are derived
    here, for both."""
    return Facts(terms=terms, tf=Counter(terms), term_set=frozenset(terms),
                 pairs=frozenset(pairs(list(terms))), low=raw.lower(), shape=shape,
                 opening=opening, first=first, condition=condition, has_code=has_code,
                 command=command)


@lru_cache(maxsize=32768)
def facts(u: Unit, raw: str) -> Facts:
    """The Facts of unit `u` (`raw`: its Markdown in its section)."""
    if (found := _PRIMED.pop((u, raw), None)) is not None:
        return found
    terms = terms_of(u.display)
    words = len(u.display.split())
    code = u.kind == "code" or "`" in raw
    shape = (*(float(u.kind == k) for k in KINDS), math.log1p(words),
             float(words < SHORT_WORDS), float(words > LONG_WORDS),
             float(_META.search(u.display) is not None),
             sum(len(m) for m in _LINK.findall(raw)) / max(len(raw), 1),
             float(_NUMBER.search(u.display) is not None), float(code),
             float(u.kind in ("sentence", "item", "paragraph")
                   and _CLOSED.search(u.display) is None),
             float(_CAPTION.search(u.display) is not None),
             float(u.kind != "code" and u.display.rstrip("*_ ").endswith("?")),
             float(u.kind != "leadin" and _DANGLING.search(u.display) is not None))
    return stored(u, raw, terms, shape, opening(plain(u.display)),
                  frozenset(text_rules.terms(" ".join(u.display.split()[:RARE_WORDS]))),
                  condition_terms(u.display), code or u.inner == "code",
                  code_units.is_command(u))
