"""What the learned reader (packs/retrieval/reader_features.py) reads in a question: its
content terms (packs/text.py stems, stop words out), its identifiers and code spans with
their split forms (`NAME=value` also matches `NAME`, `pkg.Func` also `Func`, `a::b()` also
`b`), what it asks for (packs/retrieval/asks.py: a number, a name, a reason, a list ...),
whether it asks how to do something, what something is, or what happens when, and the
nouns it asks for ("Which sysctl setting ...": sysctl, setting; `asked_nouns`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packs import text as text_rules
from packs.retrieval import asks

_SYMBOL = re.compile(r"(?<!\S)[^\w\s]{1,3}(?!\S)")
_PUNCTUATION = frozenset({"-", "--", ".", ",", ";", ":", "...", "(", ")", '"', "'"})
_FILE_EXTENSIONS = frozenset("md toml yaml yml json rs go py txt html js ts lock cfg ini conf sh"
                             .split())
# "What happens when ...?" asks for a consequence: "If that happens, ..." answers nothing.
_HAPPENING = frozenset(text_rules.terms("happens occurs"))
# A name written with its value ("GODEBUG=http2client=0", "FOO_BAR=x=1"): the page may
# write the name alone (packs/text.py's identifiers take neither the whole nor the name).
_ASSIGNMENT = re.compile(r"(?<![\w`=-])[A-Za-z_][\w.-]*=[^\s,;?!)`]+")
# "Which finalizer is ...", "what URL path do I ...", "What is the minimum kernel version":
# the words after the asking word, up to the verb or preposition that ends the noun phrase.
_ASKING_NOUN = re.compile(r"\b(?:which|what)\s+(?:(?:is|are|was|were)\s+the\s+)?"
                          r"((?:[\w-]+\s+){0,3}[\w-]+)", re.I)
_NOUN_END = frozenset("""is are was were be do does did can could must should will would may
might has have had of to in for on from that which the a an i you we my your our it its this
these those when if with by as at into so then than and or not gets get makes make between
difference differences""".split())  # "What is the difference between ...": no noun asked


@dataclass(frozen=True)
class Question:
    """What the reader reads in a question (`analyse`)."""

    text: str
    kinds: frozenset[str]  # packs/retrieval/asks.py question types
    asked: frozenset[str]  # its words as written, lower-cased
    terms: frozenset[str]  # its content stems
    idents: tuple[tuple[str, tuple[str, ...]], ...]  # (identifier, its split forms)
    howto: bool
    what_is: bool  # asks what something is or means, or how two things differ
    pairs: frozenset[tuple[str, str]]  # its successive content stems
    happens: bool = False  # asks what happens when or if
    elsewhere: frozenset[str] = frozenset()  # a part's: the terms only the other parts have
    nouns: frozenset[str] = frozenset()  # the nouns it asks for, singular (`asked_nouns`)


def singular(word: str) -> str:
    """A lower-cased word without its plural ending ("directories" → "directory")."""
    w = word.lower()
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def asked_nouns(question: str) -> frozenset[str]:
    """The words of the noun phrases a question asks for, singular: "Which sysctl setting
    must be applied ...?" → {sysctl, setting}; "What is the minimum kernel version ...?" →
    {minimum, kernel, version}; none for "What happens ...?"."""
    found = set()
    for m in _ASKING_NOUN.finditer(question):
        for w in m.group(1).split():
            if w.lower() in _NOUN_END:
                break
            found.add(singular(w))
    return frozenset(found - {"happen"})  # "What happens ...": singular of "happens"


def forms(identifier: str) -> tuple[str, ...]:
    """The shorter forms of an identifier a page may write instead (lower-cased):
    `NAME=value` → `name`; `pkg.Func`, `a::b()` → `func`, `b`; a file name keeps its
    extension ("pack.toml" gives no "toml")."""
    x = identifier.strip("`").lower()
    out = []
    if "=" in x.lstrip("-"):
        out.append(x.split("=", 1)[0])
    for sep in ("::", ".", "/"):
        if sep in x:
            last = x.rstrip("()").rsplit(sep, 1)[-1]
            if len(last) >= 3 and last not in _FILE_EXTENSIONS and last.strip("-_"):
                out.append(last)
    if x.endswith("()"):
        out.append(x[:-2])
    return tuple(dict.fromkeys(f for f in out if f and f != x))


def analyse(question: str, whole: str | None = None) -> Question:
    """The reader's reading of `question` (no I/O); `whole`: the question it is a part of
    (packs/retrieval/asks.py `parts`), whose asking what things are, how they differ or
    what happens the part shares."""
    idents = [m.group(0).lower() for m in _ASSIGNMENT.finditer(question)]
    idents += [x.lower() for x in text_rules.identifiers(question)
               if not any(a.startswith(x.lower() + "=") for a in idents)]
    idents += [f"`{m}`" for m in _SYMBOL.findall(question) if m not in _PUNCTUATION]
    happens = asks.what_happens(whole or question)
    terms = [t for t in text_rules.terms(question)
             if not (happens and t in _HAPPENING)]  # the asking, not what it asks about
    return Question(
        text=question, kinds=frozenset(asks.question_types(question)),
        asked=frozenset(w.strip(".,;:?!\"'()").lower() for w in question.split()),
        terms=frozenset(terms),
        idents=tuple((x, forms(x)) for x in dict.fromkeys(idents)),
        howto=asks.how_to(question),
        what_is=asks.what_is(whole or question),
        pairs=frozenset(pairs(terms)),
        happens=happens,
        elsewhere=frozenset(set(text_rules.terms(whole)) - set(text_rules.terms(question))
                            if whole else ()),
        nouns=asked_nouns(question))


def pairs(terms: list[str]) -> list[tuple[str, str]]:
    return list(zip(terms, terms[1:]))
