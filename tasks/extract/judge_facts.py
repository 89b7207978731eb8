"""Which of the offline extractor's facts read on their own: a small logistic model, like
the entity model of tasks/extract/judge.py, over features of each fact sentence in its
section, fitted on the hand-labelled facts (benchmarks/graph_model.py) with its weights in
tasks/extract/graph_model.json ("fact").

The extractor's rule (offline_text.py `is_fact`) proposes whole declarative sentences that
do not open on a pronoun; what it cannot see is a sentence that leans on its neighbours
through a definite noun ("The operation updates an existing object."), a list item that
completes a lead-in, or a step of one example. The features say where the sentence sits
(first of its section or paragraph, in a list item, under a line that ends with ":"), how
much it shares with its heading, whether it names something (a code span, a CamelCase or
upper-case name, at its start), how many of its definite nouns are plain words of the
pack ("the list", "the error": `PackText.plain_share`) or were named earlier in its section
("The configuration is located ..." after a sentence about the configuration), and whether
it compares with something elsewhere ("the same Secret", "a similar rule"), sets up an
example ("Suppose ...") or opens as a bare step ("Annotate ...", "Learn how ..."); never
the words themselves.

Pure: `fact_features(text, heading, content, pack_text)`; `fact_scores` gives
probabilities. Never raises on odd text.
"""

from __future__ import annotations

import math
import re

from packs import text as text_rules
from tasks.extract.judge import PackText, probability

FACT_FEATURES_VERSION = "fact-features-3"
_SUBJECT = re.compile(r"^(?:The|A|An) ([a-z][a-z-]+)\b")
_DEFINITE = re.compile(r"\bthe ([a-z][a-z-]+)\b")
_CONDITION = re.compile(r"^(?:If|When|Once|After|Before|While|Unless|Because|Since|Although)\b")
_OTHER = re.compile(r"\b(?:both|either|neither|each of|the other|the remaining|the rest|"
                    r"the latter|the former|another)\b", re.I)
_SAME = re.compile(r"\b(?:the same|similar|such an?)\b|^Other\b", re.I)
_SETUP = re.compile(r"^(?:Suppose|Imagine|Hint|Please note|In this example|Let's|Let us)\b")
_IMPERATIVE = frozenset(
    "add annotate apply call check configure consider create define delete edit enable "
    "ensure follow go install keep learn look make map note open read refer remember "
    "replace run save see set specify stop try understand use visit write".split())
_CODE_SUBJECT = re.compile(r"^(?:\S+ ){0,2}`[^`]+`(?: [a-z]+)? (?:is|are|was|has|have|returns?|"
                           r"implements?|holds?|means|lets|allows|takes|creates?|provides?)\b")
_YOU = re.compile(r"\byour?\b", re.I)
_MODAL = re.compile(r"\b(?:can|cannot|must|should|may|might|will)\b")
_NAMED_START = re.compile(r"^(?:`|[A-Z][a-z]*[A-Z]|[A-Z]{2,})")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s")
_LONG_WORD = re.compile(r"[a-z]{4,}")


def _where(text: str, content: str) -> int:
    """Where the fact starts in its section's content (-1: not found as written, as when
    the sentence's links were rendered)."""
    for n in (40, 25, 15):
        at = content.find(text[:n])
        if at >= 0:
            return at
    return -1


def fact_features(text: str, heading: str, content: str, pack: PackText) -> dict[str, float]:
    """The fact model's features of the sentence `text` of a section (`heading` path,
    `content`) in the pack `pack`."""
    words = text.split()
    at = _where(text, content)
    before = content[:at] if at >= 0 else ""
    line_start = before.rfind("\n") + 1
    lines_before = [line for line in before[:line_start].splitlines() if line.strip()]
    subject = _SUBJECT.match(text)
    definite = _DEFINITE.findall(text)
    earlier = set(_LONG_WORD.findall(before.lower()))
    per_word = 10 / max(1, len(words))
    heading_words = set(_LONG_WORD.findall(heading.lower()))
    own_words = set(_LONG_WORD.findall(text.lower()))
    return {
        "first_in_section": float(at >= 0 and not before.strip()),
        "para_start": float(at >= 0 and not before[line_start:].strip(" -*+0123456789.")),
        "list_item": float(at >= 0 and bool(_ITEM.match(content[line_start:line_start + 6]))),
        "after_colon": float(bool(lines_before) and lines_before[-1].rstrip().endswith(":")),
        "generic_subject": pack.plain_share(subject.group(1)) if subject else 0.0,
        "def_plain": sum(pack.plain_share(d) for d in definite) * per_word,
        "n_defs": len(definite) * per_word,
        "has_code": float(bool(text_rules.CODE_SPAN.search(text))),
        "has_name": float(bool(text_rules.INNER_NAME.search(text))),
        "named_start": float(bool(_NAMED_START.match(text))),
        "condition": float(bool(_CONDITION.match(text))),
        "other": float(bool(_OTHER.search(text))),
        "same": float(bool(_SAME.search(text))),
        "setup": float(bool(_SETUP.match(text))),
        "imperative": float(bool(words) and words[0].lower() in _IMPERATIVE),
        "subject_back": float(bool(subject) and subject.group(1) in earlier),
        "def_back": sum(d in earlier for d in definite) * per_word,
        "code_subject": float(bool(_CODE_SUBJECT.match(text))),
        "you": float(bool(_YOU.search(text))),
        "modal": float(bool(_MODAL.search(text))),
        "log_words": math.log(max(1, len(words))),
        "heading_overlap": len(heading_words & own_words) / max(1, len(own_words)),
    }


def fact_scores(facts: list[tuple[str, str, str]], pack: PackText, model: dict) -> list[float]:
    """P(reads on its own) of each (text, heading path, section content) under the
    fitted fact `model`."""
    return [probability(fact_features(t, h, c, pack), model) for t, h, c in facts]
