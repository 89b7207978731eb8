"""Which questions are about the whole pack: a small learned model over the question's
words and the hand rules' reading.

    kind = question_kind("Give me the storage API kinds the docs name.")  # "list"

The hand rules (packs/retrieval/whole_pack_questions.py `rule_kind`) read a question's form
with patterns; they miss a question asked in a way no pattern foresaw ("The docs roll out
a new image in several ways depending on the page. What are those ways?"). A multinomial
logistic model (fitted by benchmarks/train_kinds.py on every labelled question of
benchmarks/data: the whole-pack sets give "list", "across" and "overview", the
single-passage answer, retrieval, out-of-domain and XQuAD sets give "none") reads the
FEATURES below; its weights ship beside this module as kind_weights.json, read with the
standard library alone. `question_kind` is its most probable class (None for "none"), but
a question the hand rules read as a list, across or overview question stays one unless the
model gives "none" at least RULE_TRUST: their patterns for release notes ("from release to
release", "what changed") and the like were written for corpora the labelled sets lack (on
the sets, read by models fitted without them: whole-pack questions read as such 0.955 ->
0.957, single-passage ones 0.981 -> 0.980); and a question about the pack itself ("What is
this pack about?", whole_pack_overview.py `about_itself`) is always an overview: the sets
have few such questions, and the pack's topic map answers them.

Features of the asking sentence (packs/retrieval/asks.py `asking`, an aside in parentheses
left out), lower case, a code span or identifier read as "<code>" and a number as "<num>":
- `w:` each word, `b:` each pair of words in a row;
- `p0:`, `p1:`, `p2:` the first three words, `p01:`, `p012:` the opening two and three;
- `last:` the last word;
- `ctx`: the question sets a scene in a sentence of its own first;
- `plurals`: how many plural words it has (at most 4, over 4);
- `head:` whether the noun a which/what sentence asks for is plural, singular or absent
  (whole_pack_questions.py `head_number`): "Which guide does the book point me to for those
  implementation details?" asks for one thing, though it names details;
- `rule:` the hand rules' kind ("rule:none" for a question about one thing).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from packs.retrieval import compare
from packs.retrieval.asks import asking, parts
from packs.retrieval.reader import read_weights
from packs.retrieval.whole_pack_overview import about_itself
from packs.retrieval.whole_pack_questions import (
    form_kind,
    head_number,
    head_phrase,
    outright,
    requested,
    rule_kind,
)

WEIGHTS_FILE = Path(__file__).with_name("kind_weights.json")
FEATURES_VERSION = "kinds-2"
NONE = "none"  # the class of a question about one thing
RULE_TRUST = 0.6  # "none" must be this probable to overrule the hand rules' whole-pack reading
# A list of documents ("Which guides does the Troubleshooting Applications part offer?") is
# an overview of the part named: its items are its pages. Not "sections" or "topics",
# which as often name things ("Cargo.toml sections", "rule sections").
DOCUMENTS = frozenset("guides tutorials pages articles walkthroughs chapters".split())

_ASIDE = re.compile(r"\s*\([^()]*\)")
_TOKEN = re.compile(r"`[^`]*`|[\w'.:<>/-]*[\w>]|[?,;]")
# An identifier: two capitals inside a word (PodDisruptionBudget, not Kubernetes), "::",
# "--", "_", a dot inside a word, "<".
_CODE = re.compile(r"[A-Z].*[A-Z]|::|--|_|\.\w|<")
_PLURAL = re.compile(r"[a-z][\w-]*[^su\W]s|[a-z]+ies")


class KindWeightsError(ValueError):
    """The question-kind model's weights file is missing, unreadable or for other features."""


def tokens(question: str) -> list[str]:
    """The asking sentence's words as the model reads them (see the module docstring)."""
    return _words(asking(question))


def _words(sentence: str) -> list[str]:
    out = []
    for word in _TOKEN.findall(_ASIDE.sub("", sentence)):
        inner = word[1:] if word[:1].isupper() else word
        if word.startswith("`") or _CODE.search(inner):
            out.append("<code>")
        elif word.isdigit():
            out.append("<num>")
        else:
            out.append(word.lower())
    return out


def features(question: str, rule: str | None) -> dict[str, float]:
    """The question's FEATURES (the module docstring), `rule` the hand rules' kind."""
    sentence = asking(question)
    t = _words(sentence)
    words = [w for w in t if w not in "?,;"]
    f: dict[str, float] = {}
    for w in t:
        f["w:" + w] = 1.0
    for a, b in zip(t, t[1:]):
        f[f"b:{a} {b}"] = 1.0
    for i, w in enumerate(t[:3]):
        f[f"p{i}:{w}"] = 1.0
    if len(t) > 1:
        f["p01:" + " ".join(t[:2])] = 1.0
    if len(t) > 2:
        f["p012:" + " ".join(t[:3])] = 1.0
    if words:
        f["last:" + words[-1]] = 1.0
    f["ctx"] = 1.0 if sentence.strip() != question.strip() else 0.0
    f["plurals"] = min(4, sum(1 for w in words if _PLURAL.fullmatch(w))) / 4
    f["rule:" + (rule or NONE)] = 1.0
    f["head:" + head_number(_ASIDE.sub("", sentence))] = 1.0
    return f


@dataclass(frozen=True)
class KindModel:
    classes: tuple[str, ...]
    intercept: tuple[float, ...]
    weights: dict[str, tuple[float, ...]]  # feature → one weight per class
    version: str

    def probabilities(self, question: str, rule: str | None = "") -> dict[str, float]:
        """Each class's probability for the question (a softmax of the linear scores);
        `rule`: the hand rules' kind when already read ("" to read it here)."""
        scores = list(self.intercept)
        rule = rule_kind(question) if rule == "" else rule
        for name, value in features(question, rule).items():
            for i, w in enumerate(self.weights.get(name, ())):
                scores[i] += w * value
        top = max(scores)
        exp = [math.exp(s - top) for s in scores]
        total = sum(exp)
        return {c: e / total for c, e in zip(self.classes, exp)}

    def kind(self, question: str) -> str:
        """Its class: the most probable, but the hand rules' whole-pack reading unless "none"
        is at least RULE_TRUST probable, "overview" for a question about the pack itself (the
        module docstring) and for a list of DOCUMENTS, "across" for a question that asks to
        gather what the pages say, the kind a sentence of its own asks for where it would be
        "none" (whole_pack_questions.py `requested`; by its form, only while "none" is less
        than RULE_TRUST probable), "none" for how two things differ
        (`two_things`) read as across the pack (or a list, asked "Compare A and B" or "...
        in each case") and for a question that opens with "why" (`_one_answer`)."""
        asked = requested(question)  # rule_kind, its request read once
        rule = asked if asked is not None else form_kind(question)
        if rule == "overview" and about_itself(question):
            return "overview"
        if asked == "across":  # "... Gather what the pages say about X."
            return "across"
        probs = self.probabilities(question, rule)
        best = max(probs, key=probs.__getitem__)
        if (best == NONE and rule is not None and probs[NONE] < RULE_TRUST
                and not _one_answer(rule, question)):
            return rule
        if best == "list" and (head_phrase(question) or [""])[-1].lower() in DOCUMENTS:
            return "overview"
        kind = NONE if _one_answer(best, question) else best
        if kind != NONE or asked is None:
            return kind
        # "..., or how it is configured? List the settings.": a list asked for in so many
        # words stays one, whatever the model reads in the question before it; one asked
        # by the form of a question sentence of its own ("I want to grow a PVC. Which
        # StorageClass field has to be true, and which file systems can be resized?")
        # only where the model does not read the whole question as about one thing, at
        # least RULE_TRUST probable, as for the hand rules' reading above.
        return asked if outright(question) or probs[NONE] < RULE_TRUST else NONE


# How two things differ, asked "in each case" or "compare A and B": the hand rules read
# "compare" and "in each case" as across the pack's pages, but two named things are one
# answer's two parts (packs/retrieval/compare.py), not a whole-pack list.
_COMPARE = re.compile(r"^\s*compare\b", re.I)
_TWO = re.compile(r"\bthe two (?:[\w-]+ ){0,3}?(?:differ|compare)|"
                  r"\b(?:vs\.?|versus|compared (?:with|to))\s[^?]*\bin each case\b|"
                  r"\b(?:or|and)\s+`?[\w.-]+`?\.\s+(?:how|what|which)\b[^?]*\bin each case\b|"
                  # "break or continue: what happens in each case?"
                  r"\b(?:or|and)\s+[^.:;?]{1,40}:\s+(?:how|what|which)\b[^?]*\bin each case\b",
                  re.I)
_EACH = re.compile(r"\bin each case\b", re.I)
# A question that opens by asking why asks for a reason: one answer, whatever it names
# ("Why do the Kubernetes docs discourage keeping ... inside custom resources?").
_WHY = re.compile(r"^\s*why\b", re.I)


def _one_answer(kind: str, question: str) -> bool:
    """Whether `kind`, read for `question`, is a whole-pack reading of a question one
    answer answers: how two things differ read as across the pack (or as a list, asked
    "Compare A and B" or "... in each case"), a question that opens with "why", or one
    read as across the pack whose two parts open alike (`parallel_parts`; read as a list,
    "Which flags does A take, and which flags does B take?" may ask for two lists)."""
    if kind in ("across", "list") and _WHY.match(question):
        return True
    if kind == "across" and parallel_parts(question):
        return True
    return (kind == "across" or (kind == "list" and (_COMPARE.match(question) is not None
                                                     or _EACH.search(question) is not None))
            ) and two_things(question)


def parallel_parts(question: str) -> bool:
    """Whether `question` falls into two parts (packs/retrieval/asks.py `parts`) that open
    with the same three words: "When do you use the dot, and when do you use the arrow?",
    "Compare A with B" (its parts "What is A?" and "What is B?"). Two things side by side
    are one answer's two parts: of the labelled questions, 48 single-passage ones read so
    and no whole-pack one (benchmarks/results/issue47zx_parallel_parts.md)."""
    found = parts(question)
    if len(found) != 2:
        return False
    first, second = (p.lower().split()[:3] for p in found)
    return len(first) == 3 and first == second


def two_things(question: str) -> bool:
    """Whether `question` asks about two named things ("Compare static dispatch and
    dynamic dispatch.", "Local vs Cluster: ... in each case?", "How do the two versions
    differ ...?"), not about the pack's pages ("across the docs")."""
    if re.search(r"\bacross\b", question, re.I):
        return False
    pair = compare.things(question)
    if pair and all(len(x.split()) <= 4 and "," not in x for x in pair):
        return True
    return _TWO.search(question) is not None


def parse(raw: bytes) -> KindModel:
    """A KindModel from the bytes of a weights file; KindWeightsError when it does not fit
    this code's features."""
    try:
        d = json.loads(raw)
        version = d.get("features_version")
    except (AttributeError, json.JSONDecodeError) as exc:
        raise KindWeightsError(f"unreadable question-kind weights: {exc}") from exc
    if version != FEATURES_VERSION:
        raise KindWeightsError(f"weights for {version!r}, this code computes "
                               f"{FEATURES_VERSION!r}: retrain (benchmarks/train_kinds.py)")
    try:
        classes = tuple(d["classes"])
        intercept = tuple(float(v) for v in d["intercept"])
        weights = {k: tuple(float(v) for v in ws) for k, ws in d["weights"].items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise KindWeightsError(f"unreadable question-kind weights: {exc}") from exc
    if NONE not in classes or len(intercept) != len(classes) or any(
            len(ws) != len(classes) for ws in weights.values()):
        raise KindWeightsError("the question-kind weights do not give one weight per class")
    return KindModel(classes, intercept, weights,
                     f"{d.get('version', 'kinds')}/{hashlib.sha256(raw).hexdigest()[:12]}")


@functools.lru_cache(maxsize=4)
def load(path: Path = WEIGHTS_FILE) -> KindModel:
    """The model of a weights file (the shipped one by default), read once."""
    return read_weights(path, parse, KindWeightsError)


@functools.lru_cache(maxsize=512)
def question_kind(question: str) -> str | None:
    """"list", "across", "overview" or None (a question about one thing): the shipped
    model's `KindModel.kind`. One ask reads it several times (the gate, the answer): cached."""
    kind = load().kind(question)
    return None if kind == NONE else kind
