"""Whether the passages above a list question's answer already give the whole list it asks
for (packs/retrieval/whole_pack_offline.py then keeps the single-passage answer):
`listed_above`, a lead-in with its whole list; `counted_above`, a sentence that counts the
things asked for and names as many.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from packs import text as text_rules
from packs.markdown import list_marker
from packs.retrieval.whole_pack_items import ASIDE_FIRST, EXCEPT
from packs.retrieval.whole_pack_questions import asks_several, head_stem

LEAD_END_WORDS = 4  # a lead-in's words that say what its list lists ("the following X:")
# A question that asks for the others of a kind: no list of the pages is all of them.
_OTHERS = re.compile(r"\b(?:which|what) other\b", re.I)


def asks_others(question: str) -> bool:
    """Whether a list question asks for the things of a kind but some ("Apart from cargo,
    rustc and rustup, what other terminal commands ...?", "Besides CPU and memory, which
    ..."): a list or a count the passages quote is then not the whole answer."""
    return bool(_OTHERS.search(question) or ASIDE_FIRST.match(question)
                or EXCEPT.search(question))


def _item_line(line: str) -> bool:
    """A line of a list with its text ("- `Allow`", "* Forbid", "1. Replace")."""
    m = list_marker(line)
    return m is not None and bool(line[m.end():].strip())


def listed_above(question: str, quotes: Sequence[tuple[int, str]],
                 texts: dict[int, str], following: Callable[[int], str] | None = None
                 ) -> bool:
    """Whether the passages above quote a lead-in with the whole list a list question asks
    for: its last LEAD_END_WORDS words name the question's head noun ("The spec may specify
    only one of the following concurrency policies:" for "Which concurrency policies can a
    CronJob use?"; not "A parameter is identified as a manifest-command if it has one of:"
    for "Which manifest commands ...?"), at least two items follow it, and its section
    (`texts`: by [n]) goes on after the list with something else (a list cut by the
    answer's budget, or by the end of a chunk, may go on). Where the list ends its section,
    `following(n)` gives the text of the page after that section ("" where the page ends):
    a list the next chunk does not go on with is whole. Emphasis marks around the lead-in's
    words ("three _release channels_ for Rust:") are not part of them. Such a question is
    answered by the passages, as one about one thing is (packs/retrieval/whole_pack_offline.py
    `member_answer`); the graph's items would only bury the list under what else the
    pages name. A question that asks for several kinds of thing (`asks_several`) is not
    answered by one list."""
    head = head_stem(question)
    if head is None or asks_several(question) or asks_others(question):
        return False
    for n, quote in quotes:
        lines = quote.split("\n")
        k = next((i for i, line in enumerate(lines) if _item_line(line)), None)
        if k is None:
            continue
        lead = "\n".join(lines[:k]).rstrip()
        if not (lead.endswith((":", ",")) and head in text_rules.terms(
                text_rules.EMPHASIS_MARK.sub("", " ".join(lead.split()[-LEAD_END_WORDS:])))
                and sum(map(_item_line, lines[k:])) >= 2):
            continue
        text = texts.get(n, "")
        at = text.find(quote)
        if at < 0:
            continue
        after = text[at + len(quote):].strip()
        if not after and following is not None:  # the list ends its section (a chunk)
            after = following(n).strip()
            if not after:
                return True  # and its page
        first, *rest = after.split("\n")[:2]
        if first and not _item_line(first) and not (rest and rest[0].startswith(": ")):
            return True
    return False


# A count before the noun asked for ("four Rust editions", "all three of the closure
# traits"), and the things it counts named after it, in the same sentence ("Rust 2015,
# Rust 2018, Rust 2021, and Rust 2024"; "(`Fn`, `FnMut`, and `FnOnce`)").
_NUMBERS = {w: n for n, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())}
_COUNT = re.compile(r"\b(" + "|".join(_NUMBERS) + r"|\d{1,2})\b", re.I)
COUNT_REACH = 4  # the noun counted is at most this many words after its count
# A run of things named ("A, B, and C", "A and B"), each at most a few words.
_NAMED = re.compile(r"[^,;:()]{1,60}?(?:,\s*[^,;:()]{1,60}?)*,?\s+(?:and|or)\s+[^,;:().]{1,60}")


def counted_above(question: str, quotes: Sequence[tuple[int, str]]) -> bool:
    """Whether a sentence the passages above quote counts the things a list question asks
    for and names as many after them ("At the time of this writing, four Rust editions are
    available: Rust 2015, Rust 2018, Rust 2021, and Rust 2024." for "Which Rust editions
    are available?"; "all three of the closure traits (`Fn`, `FnMut`, and `FnOnce`)"): the
    page says that is all of them, as a lead-in with its list does (`listed_above`)."""
    head = head_stem(question)
    if head is None or asks_several(question) or asks_others(question):
        return False
    asked = set(text_rules.terms(question))
    for _, quote in quotes:
        for sentence in text_rules.sentences(" ".join(quote.split())):
            for m in _COUNT.finditer(sentence):
                if re.search(r"\b(?:these|those)\s+$", sentence[:m.start()], re.I):
                    continue  # "These two commands ...": two named before, not all of them
                word = m.group(1).lower()
                count = int(word) if word.isdigit() else _NUMBERS[word]
                rest = _after_noun(sentence[m.end():], head, asked)
                if count >= 2 and rest is not None and _names(rest, count):
                    return True
    return False


def _after_noun(text: str, head: str, asked: set[str]) -> str | None:
    """`text` after its word of stem `head` within COUNT_REACH words, or None; None too
    when a word before it narrows what is counted to a kind the question does not ask
    for ("two tuple structs" counts no more than tuple structs)."""
    for k, w in enumerate(re.finditer(r"\S+", text)):
        if k >= COUNT_REACH:
            return None
        words = text_rules.terms(w.group(0))
        if head in words:
            return text[w.end():]
        if any(t not in asked for t in words):
            return None
    return None


def _names(text: str, count: int) -> bool:
    """Whether `text` (what follows a counted noun) names `count` things in a run, the last
    after "and" or "or" ("are custom `derive`, attribute-like, and function-like, and all
    work ..." names three)."""
    for part in [text, *re.split(r"[:(]", text)[1:]]:
        run = _NAMED.search(part)
        if run is None:
            continue
        seps = re.findall(r",\s*(?:(?:and|or)\s+)?|\s+(?:and|or)\s+", run.group(0))
        if len(seps) >= count - 1 and re.search(r"\b(?:and|or)\b", seps[count - 2]):
            return True
    return False
