"""A frozen copy of packs/retrieval/asks.py as it was before issue 47 (main at b327fa3,
issue 34's final offline answer, "turn 3"), kept only as the "turn-3 product" baseline of
benchmarks/doc_answers.py and benchmarks/xquad_answers.py (benchmarks/answer_eval.py).
Not used by the product; do not change it (a changed baseline is no baseline).

The original docstring follows.

What a question asks for, and whether an answer unit has it.

`question_types(question)` reads the question's types from its wording ("how many" → a
number, "which flag" → a name, "why" → a reason, "what are the rules" → a list ...);
`has(kind, unit, ...)` says whether a unit holds a thing of that type that the question does
not write itself. packs/retrieval/extractive.py gives a unit TYPE_BONUS for each.
"""

from __future__ import annotations

import re

from benchmarks.baseline_turn3.segment import Unit
from packs import text as text_rules

__all__ = ["has", "question_types"]

_TYPES: dict[str, re.Pattern[str]] = {
    "person": re.compile(r"\b(who|whom|whose)\b", re.I),
    "place": re.compile(r"\bwhere\b", re.I),
    "number": re.compile(
        r"^\s*when\b|\b(how (many|much|long|old|often|far|large|big|fast|soon|frequently)|"
        r"what (year|date|time|percentage|percent|number|port|version|size|age|amount)|"
        r"which (year|date|port|version)|at what)\b", re.I),
    "name": re.compile(
        r"\b(which|what|name of)\b[\w\s-]{0,30}?\b(settings?|flags?|options?|fields?|"
        r"commands?|parameters?|arguments?|annotations?|labels?|keys?|variables?|"
        r"functions?|methods?|macros?|traits?|types?|keywords?|attributes?|files?|"
        r"subcommands?|plugins?|modes?|polic(y|ies)|values?|names?|crates?|tools?|"
        r"resources?|objects?|kinds?|fields?|operators?|syntax|extensions?|"
        r"controllers?|endpoints?|headers?|directories|directory|paths?)\b", re.I),
    "default": re.compile(
        r"\b(default|defaults|by default|unless|otherwise|without (any|a|an|setting)|"
        r"(if|when) (i |you )?(leave|don't set|do not set|omit|skip)|"
        r"not (set|given|specified|configured)|omitted|left out|unset|unspecified|"
        r"when nothing)", re.I),
    "term": re.compile(r"\b(called|what do (we|you|they|people) call|known as|(term|word) for)\b",
                       re.I),
    "why": re.compile(r"^\s*why\b|\b(what is the (reason|purpose)|for what purpose)\b", re.I),
    "list": re.compile(
        r"\b(what|which) are (the|some)\b|^\s*list\b|\blist (of|all|the|every)\b|"
        r"\b(what|which) (\w+ ){0,2}"
        r"(rules|steps|kinds|types|ways|phases|stages|states|conditions|requirements|"
        r"components|categories|levels|classes)\b", re.I),
}
_DEFAULT = re.compile(r"\bdefault", re.I)
_REASON = re.compile(r"\b(because|so that|since|in order to|to avoid|to prevent|otherwise|"
                     r"this means|that way|the reason|due to|so it|so the)\b", re.I)
_CAPITAL = re.compile(r"(?<=[\s(\"'“‘])[A-Z][\w'’.-]*[A-Za-z0-9]")
# A term the page introduces in italics or bold ("are called _consuming adapters_").
_EMPHASIS = re.compile(r"(?<![\w*_])[_*]{1,2}([^_*\s][^_*]{0,60}?)[_*]{1,2}(?![\w*_])")
_NUMBER = re.compile(r"(?<![\w.])\d[\d,.:/%-]*")
# A number written as a word ("every two minutes", "twice"); "one" is too often a pronoun.
_NUMBER_WORD = re.compile(
    r"\b(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|"
    r"thirty|forty|fifty|sixty|hundred|thousand|million|billion|once|twice|dozen|half)\b",
    re.I)


# "Which effects can a taint have?": several things of one kind, asked by a plural noun.
_PLURAL_ASK = re.compile(r"\b(which|what) ([\w-]+ ){0,2}[\w-]*[^\Wsiu]s (are|can|could|do|"
                         r"does|may|might|must|should|will)\b", re.I)


def question_types(question: str) -> set[str]:
    """What the question asks for: "number", "name", "person", "place", "why", "list",
    "default" (none, one or more)."""
    kinds = {name for name, pattern in _TYPES.items() if pattern.search(question)}
    if _PLURAL_ASK.search(question):
        kinds.add("list")
    return kinds


def _novel(found: list[str], asked: set[str]) -> bool:
    """Whether `found` (names, numbers, identifiers of a unit) has one the question does
    not write itself: the answer to "who ..." is a name the question lacks."""
    return any(w not in asked and w not in text_rules.STOP_WORDS
               for w in (f.lower().strip(".,") for f in found))


def has(kind: str, u: Unit, raw: str, asked: set[str], term_bonus: bool = True) -> bool:
    """Whether unit `u` (`raw`: its Markdown) has what a question of `kind` asks for;
    `asked`: the question's words as written, lower-cased; `term_bonus`: whether a term
    the unit introduces in italics or bold answers "what is X called"."""
    if kind == "number":
        return _novel(_NUMBER.findall(u.display) + _NUMBER_WORD.findall(u.display), asked)
    if kind == "name":
        return u.kind == "code" or _novel(text_rules.identifiers(raw), asked)
    if kind in ("person", "place"):
        return _novel(_CAPITAL.findall(" " + u.display), asked)
    if kind == "term":
        return term_bonus and _novel(_EMPHASIS.findall(raw), asked)
    if kind == "why":
        return _REASON.search(u.display) is not None
    if kind == "default":
        return _DEFAULT.search(u.display) is not None
    return u.kind == "leadin" and "\n- " in u.display
