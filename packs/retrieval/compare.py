"""A question that asks how two things differ: each thing's answer opens with what it is.

"What's the difference between a PersistentVolume and a PersistentVolumeClaim?" is answered
by the page's sentence for each ("A _PersistentVolume_ (PV) is a piece of storage ...", "A
_PersistentVolumeClaim_ (PVC) is a request for storage by a user."), which the reader ranks
below sentences that only mention the term ("For dynamically provisioned PersistentVolumes,
the default reclaim policy is ..."): its features score a unit for the question's words,
not for having the thing as its subject. `things(question)` reads the two things;
`says_what(thing, other, text)` whether a unit opens by saying what `thing` is: its subject
holds the words that tell `thing` from `other` and the kind of thing it is (its last word:
"Liveness is a necessary ... condition" does not say what a liveness probe is), followed by
"is a", "are the", "means a" ..., or it is a label (the words that tell it) with its
description ("`NodePort`: Exposes the Service on each Node's IP ..."). Without such a unit,
one near the top of the thing's ranking that says what it does leads (`says_what_it_does`:
the thing is its subject, a verb follows, "Liveness probes determine when to restart a
container."), not one about both ("Liveness probes do not wait for readiness probes to
succeed." matches more of the question's words). packs/retrieval/extractive.py `select`
lets `leader` pick the unit that leads each thing's units (reader.choose `first`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from packs import text as text_rules
from packs.retrieval import asks
from packs.retrieval.unit_facts import plain
from packs.retrieval.units import Unit

__all__ = ["leader", "says_what", "says_what_it_does", "things"]

# Where the second thing's words end and what both share begins ("... policies | for a Pod").
_CONTEXT = re.compile(r"\s+(?=(?:in|for|of|on|at|inside|within|under|when|and)\s)", re.I)
_MARKUP = re.compile(r"[`*\[\]]")  # code, bold and link marks (plain keeps the link text)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.I)
_MARKER = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_ASIDE = re.compile(r"\s*\([^()]{1,40}\)")  # "(PV)", "(also called ...)"
# What follows a subject that says what it is: a copula and a determiner ("is a piece of
# storage", "are the secondary containers"), not a passive ("is used to mount").
_COPULA = re.compile(r"^(?:is|are|means|represents|refers to)\s+(?:a|an|the|one|another)\b",
                     re.I)
# "NodePort: Exposes the Service ...", "`Metadata` - log request metadata ..." (a dash
# sets a label off from its description in a list of terms: any letter may follow it).
_LABEL = re.compile(r"^([^:;.]{1,60}?)(?:\s?:\s+[A-Z]|\s+[-–—]\s+[A-Za-z])")
SUBJECT_WORDS = 5  # the most words a subject may have before what it is
DOES_DEPTH = 3  # how far down a thing's ranking a unit that says what it does may lead
# Words after a subject that start no statement of what it does: auxiliaries, negations,
# joins ("Liveness probes do not wait", "... are configured", "... and readiness probes").
_NOT_A_VERB = frozenset("""is are was were be been being am do does did not no can could may
might must shall should will would has have had and or but nor also only just then that which
who whose where when while if than as""".split())
LABEL_WORDS = 4  # ... and a label before its description
_PREPOSITIONS = frozenset("of in for with on at by from to as about into like than".split())


def things(question: str) -> tuple[str, str] | None:
    """The two things a question asks how they differ (asks.py `pair`: "the difference
    between A and B", "How is A different from B?", "A vs B", "compare A and B"), without
    their articles and the context they share; None for a question of another kind."""
    question = " ".join(question.split())
    paired = asks.pair(question)
    if paired is None:
        return None
    a, b = paired
    b = _CONTEXT.split(b, maxsplit=1)[0]
    # "A and B" and "A vs B" may write B's kind once for both ("A and B": all of it),
    # "How is A different from B?" does not (asks.shares_kind)
    if asks.shares_kind(question):
        a = asks.with_kind(a, b, whole=f" and {paired[1]}" in question)
    a, b = (_ARTICLE.sub("", x.strip(" ,;:")) for x in (a, b))
    return (a, b) if a and b else None


def _own_terms(thing: str, other: str) -> set[str]:
    """The terms that tell `thing` from `other` ("NodePort Service" from "LoadBalancer
    Service": nodeport); all its terms when it has none of its own."""
    mine = set(text_rules.terms(thing))
    return (mine - set(text_rules.terms(other))) or mine


def _words(text: str) -> list[str]:
    """The words of a unit's opening that can be a subject's: no flags, paths or settings
    with their values ("--nodeport-addresses", "a=b")."""
    return [w for w in text.split() if not w.startswith("-") and not any(c in w for c in "/=")]


def _prose(unit: Unit) -> str | None:
    """A unit's text without its list marker, code, bold and link marks; None for code."""
    if unit.kind == "code" or (unit.inner == "code" and unit.kind != "leadin"):
        return None
    return _MARKER.sub("", _MARKUP.sub("", plain(unit.display)), count=1).strip()


def _after_subject(text: str, thing: str, want: set[str]) -> list[str] | None:
    """The words of `text` after its subject when that subject (at most SUBJECT_WORDS,
    articles and asides left out) names `thing`: the words `want` that tell it from the
    other thing and the kind of thing it is (its last word); None: it is not the subject."""
    named = want | set(text_rules.terms(thing.split()[-1]))
    words = _ASIDE.sub("", _ARTICLE.sub("", text)).split()
    k = next((k for k in range(1, min(len(words), SUBJECT_WORDS) + 1)
              if _subject(" ".join(words[:k]), named)), None)
    return None if k is None else words[k:]


def says_what(thing: str, other: str, unit: Unit) -> bool:
    """Whether a unit of prose opens by saying what `thing` is (see the module docstring)."""
    text, want = _prose(unit), _own_terms(thing, other)
    if text is None or not want:
        return False
    label = _LABEL.match(text)
    if (label and len(label.group(1).split()) <= LABEL_WORDS
            and not any(c in label.group(1) for c in "()[]{}<>#")
            and _subject(label.group(1), want)):
        return True
    rest = _after_subject(text, thing, want)
    return rest is not None and _COPULA.match(" ".join(rest)) is not None


def says_what_it_does(thing: str, other: str, unit: Unit) -> bool:
    """Whether a unit of prose opens with `thing` as its subject followed by a verb, and
    does not name `other` (see the module docstring)."""
    text, want = _prose(unit), _own_terms(thing, other)
    if text is None or not want or _own_terms(other, thing) & set(text_rules.terms(text)):
        return False
    rest = _after_subject(text, thing, want)
    if not rest:  # not the subject, or nothing follows it
        return False
    verb = rest[0].strip(",;:").lower()
    return verb.isalpha() and verb not in _NOT_A_VERB and verb not in _PREPOSITIONS


def leader(thing: str, other: str, ranked: Sequence[Unit]) -> int | None:
    """Which of `thing`'s units (its part's ranking, best first) leads its part of a
    difference answer: the best that says what it is, else the best of the first
    DOES_DEPTH that says what it does; None: the ranking's own first."""
    found = next((k for k, u in enumerate(ranked) if says_what(thing, other, u)), None)
    if found is None:
        found = next((k for k, u in enumerate(ranked[:DOES_DEPTH])
                      if says_what_it_does(thing, other, u)), None)
    return found


def _subject(words: str, want: set[str]) -> bool:
    """Whether `words` name the thing whose terms are `want` as a subject does: all of
    them, no preposition before the last ("An example of a function-like macro" is an
    example)."""
    kept = _words(words)
    if not want <= set(text_rules.terms(" ".join(kept))):
        return False
    return not any(w.lower() in _PREPOSITIONS for w in kept[:-1])
