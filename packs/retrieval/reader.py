"""The learned reader: which answer units of the retrieved sections answer the question.

Two small linear models, fitted on the dev questions of several corpora by
benchmarks/train_reader.py, whose weights ship as data beside this module
(reader_weights.json, read with the standard library and numpy):

1. every unit of the sections (packs/retrieval/units.py) gets the FEATURES of
   packs/retrieval/reader_features.py and, where the pack has its unit vectors
   (packs/retrieval/unit_vectors.py, made in the build), its similarity to the question
   (`with_units`; a pack without them is scored by the `plain` model), standardised, and
   a score: the weights' dot product (a conditional logit: the scores of one question's
   units are compared with each other only);
2. the `top_n` best are embedded with the pack's own encoder (`similarity`, when given:
   their cosine similarities to the question), and scored again with those added
   (SIM_FEATURES).

`pick` then takes the best (for a question about several things, the best `lead_depth`
units of each thing's own ranking first, in turn), and after it each unit whose score
(plus `cover` times the share of the question's term weight it adds to what is already
picked) is within `margin` of the best's, while they fit the limits: `max_units`,
`per_section`, `max_words` (`multi_units` and `multi_words` for a question about several
things; a first unit over the budget gives way to one that fits and
scores within `long_margin`), no unit overlapping another or repeating its text (one that
shows a picked unit's words and more, from another section, takes its place), and no bare
"Filename: src/main.rs" (the caption of a listing the page lacks). Units are
quoted whole, never cut. The version recorded with an answer (`Reader.version`) is the file's own
`version` and its sha256, so an answer says which weights chose its passages.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from packs import text as text_rules
from packs.retrieval import reader_features as rf
from packs.retrieval import unit_vectors
from packs.retrieval.units import LONG_WORDS, Unit

WEIGHTS_FILE = Path(__file__).with_name("reader_weights.json")
# A unit that only names a listing's file (mdBook's "Filename: src/main.rs" caption, its
# listing included from a file the page lacks) says nothing: never quoted.
_FILE_CAPTION = re.compile(r"^\s*Filename: \S+\s*$")
T = TypeVar("T")


class ReaderWeightsError(ValueError):
    """The reader's weights file is missing, unreadable or for other features."""


@dataclass(frozen=True)
class Model:
    """A linear score over named, standardised features."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray

    def score(self, x: np.ndarray) -> np.ndarray:
        if not len(x):
            return np.zeros(0, dtype=np.float64)
        return ((x - self.mean) / self.scale) @ self.weights

    def to_json(self) -> dict:
        return {"features": list(self.features), "mean": self.mean.round(6).tolist(),
                "scale": self.scale.round(6).tolist(),
                "weights": self.weights.round(6).tolist()}

    @classmethod
    def from_json(cls, d: dict) -> Model:
        arrays = [np.asarray(d[k], dtype=np.float64) for k in ("mean", "scale", "weights")]
        n = len(d["features"])
        if any(a.shape != (n,) for a in arrays):
            raise ReaderWeightsError(f"a model of {n} features has arrays of other lengths")
        return cls(tuple(d["features"]), *arrays)


@dataclass(frozen=True)
class Limits:
    """How many units an answer takes and how they are chosen (see the module docstring)."""

    top_n: int = 12
    margin: float = 2.0
    cover: float = 1.0
    lead_depth: int = 2  # units taken first from each part's ranking
    multi_units: int = 6  # a question about several things: at most this many units ...
    multi_words: int = 160  # ... within this many words
    long_margin: float = 0.5
    max_units: int = 5
    per_section: int = 4
    max_words: int = 120


@dataclass(frozen=True)
class Reader:
    version: str
    first: Model
    second: Model | None
    limits: Limits
    # the first model without the unit similarity features (unit_vectors.FEATURES), for a
    # pack without unit vectors; None when the first model has none
    plain: Model | None = None

    def to_json(self, name: str, trained: dict) -> dict:
        return {"version": name, "features_version": rf.READER_FEATURES_VERSION,
                "first": self.first.to_json(),
                "second": self.second.to_json() if self.second else None,
                "plain": self.plain.to_json() if self.plain else None,
                "limits": vars(self.limits), "trained": trained}

    @property
    def reads_units(self) -> bool:
        """Whether its first model reads every unit's similarity (unit_vectors.FEATURES)."""
        return self.first.features != rf.FEATURES


def with_units(reader: Reader, x: np.ndarray, parts: Sequence[np.ndarray],
               sims: np.ndarray | None) -> tuple[Reader, np.ndarray, list[np.ndarray]]:
    """The reader and the features it scores: with every unit's similarity to the question
    (`sims`, from the pack's unit vectors) added to `x` and to each part's, or, where there
    are none (`sims` None), the reader's plain first model on the features as they are."""
    if not reader.reads_units:
        return reader, x, list(parts)
    if sims is None:
        return dataclasses.replace(reader, first=reader.plain), x, list(parts)
    return reader, *add_units(x, parts, sims)


def add_units(x: np.ndarray, parts: Sequence[np.ndarray], sims: np.ndarray
              ) -> tuple[np.ndarray, list[np.ndarray]]:
    """`x` and each part's features with the units' similarity features
    (unit_vectors.features of `sims`) added."""
    extra = unit_vectors.features(sims)
    return np.hstack([x, extra]), [np.hstack([xp, extra]) for xp in parts]


def parse(raw: bytes) -> Reader:
    """A Reader from the bytes of a weights file; ReaderWeightsError when it does not fit
    this code's features."""
    try:
        d = json.loads(raw)
        if d.get("features_version") != rf.READER_FEATURES_VERSION:
            raise ReaderWeightsError(
                f"weights for {d.get('features_version')!r}, this code computes "
                f"{rf.READER_FEATURES_VERSION!r}: retrain (benchmarks/train_reader.py)")
        first = Model.from_json(d["first"])
        second = Model.from_json(d["second"]) if d.get("second") else None
        plain = Model.from_json(d["plain"]) if d.get("plain") else None
        limits = Limits(**d.get("limits", {}))
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ReaderWeightsError(f"unreadable reader weights: {exc}") from exc
    with_sims = (*rf.FEATURES, *unit_vectors.FEATURES)
    if first.features not in (rf.FEATURES, with_sims) or (
            second is not None and second.features != (*first.features, *rf.SIM_FEATURES)):
        raise ReaderWeightsError("the weights name other features than reader_features.py")
    if first.features == with_sims and (plain is None or plain.features != rf.FEATURES):
        raise ReaderWeightsError("weights that read unit vectors need a plain first model "
                                 "for packs without them")
    return Reader(f"{d['version']}/{hashlib.sha256(raw).hexdigest()[:12]}", first, second,
                  limits, plain)


@functools.lru_cache(maxsize=4)
def load(path: Path = WEIGHTS_FILE) -> Reader:
    """The reader of a weights file (the shipped one by default), read once."""
    return read_weights(path, parse, ReaderWeightsError)


def read_weights(path: Path, parse: Callable[[bytes], T], error: type[Exception]) -> T:
    """`parse` of a weights file's bytes; `error` saying which file could not be read."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise error(f"cannot read the weights {path}: {exc}") from exc
    return parse(raw)


@dataclass(frozen=True)
class Scored:
    index: int  # into the units given to `rank`
    score: float


# (passage index of each text, the texts) → each text's cosine similarity to the question,
# embedded with the encoder of the pack the passage comes from.
Similarity = Callable[[Sequence[int], list[str]], np.ndarray]


def rank(reader: Reader, q: rf.Question, passages: Sequence[rf.Passage],
         units: Sequence[tuple[int, Unit]], pack_idf: Callable[[str], float] | None = None,
         similarity: Similarity | None = None,
         unit_sims: np.ndarray | None = None) -> list[Scored]:
    """The units best first: all of them by the first model (with the units' similarities
    `unit_sims`, see `with_units`), or (with `similarity`) the first model's `top_n` by the
    second. Ties go to the earlier section, then the earlier unit."""
    reader, x, _ = with_units(reader, rf.features(q, passages, units, pack_idf), [], unit_sims)
    return ranked(reader, x, units, memo(similarity, units))


def memo(similarity: Similarity | None, units: Sequence[tuple[int, Unit]]
         ) -> Callable[[list[int]], np.ndarray] | None:
    """`similarity` on unit indices, each unit embedded once however often it is asked."""
    if similarity is None:
        return None
    known: dict[int, float] = {}

    def sims(ks: list[int]) -> np.ndarray:
        todo = [k for k in dict.fromkeys(ks) if k not in known]
        if todo:
            found = similarity([units[k][0] for k in todo],
                               [unit_vectors.embedded_text(units[k][1]) for k in todo])
            known.update(zip(todo, (float(v) for v in found)))
        return np.asarray([known[k] for k in ks], dtype=np.float32)
    return sims


def choose(reader: Reader, x: np.ndarray, units: Sequence[tuple[int, Unit]],
           weights: dict[str, float], sims: Callable[[list[int]], np.ndarray] | None = None,
           parts: Sequence[np.ndarray] = (), limits: Limits | None = None,
           listing: bool = False,
           first: Sequence[Callable[[list[Unit]], int | None]] = ()) -> list[Scored]:
    """The units an answer quotes, in order: with `parts` (the FEATURES of the units for
    each thing the question asks about, packs/retrieval/asks.py `parts`), the best unit
    for each part first, then the best for the whole question (`pick`). `first`: for each
    part, given its ranked units, the position of the one that leads that part's units
    (packs/retrieval/compare.py `leader`; None: the best ranked)."""
    limits = budget(limits or reader.limits, several=bool(parts))
    leads = [ranked(reader, xp, units, sims) for xp in parts]
    for lead, leader in zip(leads, first):
        k = leader([units[s.index][1] for s in lead])
        if k:
            lead.insert(0, lead.pop(k))
    return pick(ranked(reader, x, units, sims), units, weights, limits, leads, listing)


def budget(limits: Limits, several: bool) -> Limits:
    """The limits an answer is chosen within: for a question about `several` things, at
    least `multi_units` units in `multi_words` words. The one place that decides it, so
    that what fills the answer after the choice (extractive.select's quotes that lean on
    the sentence before) counts the same words."""
    if not several:
        return limits
    return dataclasses.replace(limits, max_units=max(limits.max_units, limits.multi_units),
                               max_words=max(limits.max_words, limits.multi_words))


def ranked(reader: Reader, x: np.ndarray, units: Sequence[tuple[int, Unit]],
           sims: Callable[[list[int]], np.ndarray] | None = None) -> list[Scored]:
    """`rank` on the units' FEATURES `x`; `sims(indices)`: the cosine similarities of those
    units to the question."""
    def order(idx: Sequence[int], s: np.ndarray) -> list[Scored]:
        keyed = sorted(zip(idx, s), key=lambda t: (-t[1], units[t[0]][0], units[t[0]][1].start))
        return [Scored(int(k), float(v)) for k, v in keyed]

    first = order(range(len(units)), reader.first.score(x))
    if reader.second is None or sims is None or not first:
        return first
    top = [s.index for s in first[:reader.limits.top_n]]
    found = np.asarray(sims(top), dtype=np.float32)
    x2 = np.hstack([x[top], rf.similarity_features(found)])
    return order(top, reader.second.score(x2))


def pick(ranked: Sequence[Scored], units: Sequence[tuple[int, Unit]],
         weights: dict[str, float], limits: Limits,
         leads: Sequence[Sequence[Scored]] = (), listing: bool = False) -> list[Scored]:
    """The units an answer quotes, in order (see the module docstring). `weights`: the
    question's term weights (reader_features.term_weights), for the cover bonus; `leads`:
    a ranking per thing the question asks about, whose best `lead_depth` units that fit go
    first, one part after the other; `listing`: the question asks for a list, so a lead-in
    whose list holds units already picked takes their place (the list, not one item),
    where its brief shows their values (`_values`)."""
    if not ranked:
        return []
    total = sum(weights.values()) or 1.0
    def says_something(s: Scored) -> bool:
        return not _FILE_CAPTION.match(units[s.index][1].display)

    pool = [s for s in ranked[:max(limits.top_n, limits.max_units * 4)] if says_something(s)]
    if not pool:
        return []
    terms = {s.index: set(rf.unit_terms_of(units[s.index][1])) & set(weights)
             for s in [*pool, *(s for lead in leads for s in lead)]}
    best = pool[0].score
    out: list[Scored] = []

    def words(picked: list[Scored]) -> int:
        return sum(len(units[o.index][1].display.split()) for o in picked)

    def fits(s: Scored, picked: list[Scored]) -> bool:
        i, u = units[s.index]
        return (sum(units[o.index][0] == i for o in picked) < limits.per_section
                and words(picked) + len(u.display.split()) <= limits.max_words
                and not any(_overlaps(units[o.index], (i, u)) for o in picked))

    for _ in range(limits.lead_depth):  # the best units for each part that still fit, in turn
        for lead in leads:
            s = next((s for s in lead[:limits.top_n]
                      if fits(s, out) and all(o.index != s.index for o in out)
                      and says_something(s)), None)
            if s is not None and len(out) < limits.max_units:
                out.append(s)
    pool = [s for s in pool if all(o.index != s.index for o in out)]
    while pool and len(out) < limits.max_units:
        # What a unit adds to the picked ones: its score, plus `cover` x the share of the
        # question's term weight it has that none of them has.
        covered = set().union(*(terms[o.index] for o in out))
        value = {c.index: c.score + (limits.cover * sum(weights[t] for t in terms[c.index]
                                                         - covered) / total if out else 0.0)
                 for c in pool}
        eligible = [c for c in pool if value[c.index] >= best - limits.margin]
        if not eligible:
            break
        s = max(eligible, key=lambda c: value[c.index])
        pool.remove(s)
        n = len(units[s.index][1].display.split())
        if not out and n > limits.max_words and any(
                o.score >= s.score - limits.long_margin
                and len(units[o.index][1].display.split()) <= limits.max_words for o in pool):
            continue  # the best alone is over the budget, and a passage that fits is close
        if out and n > LONG_WORDS and s.score < best - limits.long_margin:
            continue  # a long passage well below the best would crowd out the others
        inner = [o for o in out if _within(units[o.index], units[s.index])]
        if listing and inner and units[s.index][1].kind == "leadin":
            # The list in place of its first item picked, where its brief shows the values
            # of the items picked: a brief cuts an item to its head, the value with it.
            brief = units[s.index][1].display
            kept = all(v in brief for o in inner for v in _values(units[o.index][1].display))
            if kept and fits(s, [o for o in out if o not in inner]):
                _in_place_of(out, inner, s)
            continue
        gist = _gist(units[s.index][1])
        shown = [o for o in out if units[o.index][0] != units[s.index][0]
                 and _shows(_gist(units[o.index][1]), gist, strictly=True)]
        if shown and fits(s, [o for o in out if o not in shown]):
            # It says what a picked unit says and more (the same sentence with the one
            # after it, from another section): it takes that unit's place.
            _in_place_of(out, shown, s)
            continue
        if not out or fits(s, out):
            out.append(s)
    return out


def _in_place_of(out: list[Scored], old: list[Scored], new: Scored) -> None:
    """`new` in `out` where the first of `old` was, every one of `old` gone."""
    out.insert(out.index(old[0]), new)
    out[:] = [o for o in out if o not in old]


def _within(a: tuple[int, Unit], b: tuple[int, Unit]) -> bool:
    """Whether unit a lies inside unit b (the same section)."""
    (i, u), (j, v) = a, b
    return i == j and v.start <= u.start and u.end <= v.end and u != v


def _overlaps(a: tuple[int, Unit], b: tuple[int, Unit]) -> bool:
    """The same text again, whole or inside the other (chunks of a section overlap: a code
    block alone in one chunk and with its lead-in in the next; the same command on several
    pages, its comments aside), or overlapping spans."""
    (i, u), (j, v) = a, b
    if i == j and u.start < v.end and v.start < u.end:
        return True
    g, h = _gist(u), _gist(v)
    return _shows(g, h) or _shows(h, g)


def _shows(part: str, whole: str, strictly: bool = False) -> bool:
    """Whether gist `whole` has all of gist `part`, as whole words (`strictly`: and more)."""
    return bool(part) and (len(part) < len(whole) if strictly else len(part) <= len(whole)) \
        and f" {part} " in f" {whole} "


def _values(text: str) -> list[str]:
    """What a unit's text says that a shortened form may cut: its code spans and numbers."""
    return [*text_rules.CODE_SPAN.findall(text), *text_rules.NUMBER.findall(text)]


def _gist(u: Unit) -> str:
    """A unit's text for telling repeats apart: code without its comment lines, words
    only."""
    text = u.display
    if u.kind == "code" or u.inner == "code":
        text = "\n".join(line for line in text.split("\n")
                         if not line.strip().startswith(("#", "//")))
    return " ".join(text.split())
