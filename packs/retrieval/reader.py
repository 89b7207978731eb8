"""The learned reader: which answer units of the retrieved sections answer the question.

Two small linear models, fitted on the dev questions of several corpora by
benchmarks/train_reader.py, whose weights ship as data beside this module
(reader_weights.json, read with the standard library and numpy):

1. every unit of the sections (packs/retrieval/units.py) gets the FEATURES of
   packs/retrieval/reader_features.py, standardised, and a score: the weights' dot
   product (a conditional logit: the scores of one question's units are compared with
   each other only);
2. the `top_n` best are embedded with the pack's own encoder (`similarity`, when given:
   their cosine similarities to the question), and scored again with those added
   (SIM_FEATURES).

`pick` then takes the best, and after it each unit whose score (plus `cover` times the
share of the question's term weight it adds to what is already picked: a question about
two things gets a unit for each) is within `margin` of the best's, while they fit the
limits: `max_units`, `per_section`, `max_words` (a first unit over the budget gives way to
one that fits and scores within `long_margin`), no unit overlapping another or repeating
its text. The version recorded with an answer (`Reader.version`) is the file's own
`version` and its sha256, so an answer says which weights chose its passages.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from packs.retrieval import reader_features as rf
from packs.retrieval.units import LONG_WORDS, Unit

WEIGHTS_FILE = Path(__file__).with_name("reader_weights.json")


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

    def to_json(self, name: str, trained: dict) -> dict:
        return {"version": name, "features_version": rf.READER_FEATURES_VERSION,
                "first": self.first.to_json(),
                "second": self.second.to_json() if self.second else None,
                "limits": vars(self.limits), "trained": trained}


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
        limits = Limits(**d.get("limits", {}))
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ReaderWeightsError(f"unreadable reader weights: {exc}") from exc
    if first.features != rf.FEATURES or (
            second is not None and second.features != (*rf.FEATURES, *rf.SIM_FEATURES)):
        raise ReaderWeightsError("the weights name other features than reader_features.py")
    return Reader(f"{d['version']}/{hashlib.sha256(raw).hexdigest()[:12]}", first, second,
                  limits)


@functools.lru_cache(maxsize=4)
def load(path: Path = WEIGHTS_FILE) -> Reader:
    """The reader of a weights file (the shipped one by default), read once."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ReaderWeightsError(f"cannot read the reader's weights {path}: {exc}") from exc
    return parse(raw)


@dataclass(frozen=True)
class Scored:
    index: int  # into the units given to `rank`
    score: float


# (passage index of each text, the texts) → each text's cosine similarity to the question,
# embedded with the encoder of the pack the passage comes from.
Similarity = Callable[[Sequence[int], list[str]], np.ndarray]
EMBED_WORDS = 64  # a unit is embedded by its first words (a long list costs no more)


def embedded_text(u: Unit) -> str:
    """What of a unit is embedded for its similarity to the question."""
    return " ".join(u.display.split()[:EMBED_WORDS])


def rank(reader: Reader, q: rf.Question, passages: Sequence[rf.Passage],
         units: Sequence[tuple[int, Unit]], pack_idf: Callable[[str], float] | None = None,
         similarity: Similarity | None = None) -> list[Scored]:
    """The units best first: all of them by the first model, or (with `similarity`) the
    first model's `top_n` by the second. Ties go to the earlier section, then the earlier
    unit."""
    x = rf.features(q, passages, units, pack_idf)
    sims = None if similarity is None else (
        lambda ks: similarity([units[k][0] for k in ks], [embedded_text(units[k][1])
                                                          for k in ks]))
    return ranked(reader, x, units, sims)


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
         weights: dict[str, float], limits: Limits) -> list[Scored]:
    """The units an answer quotes, in order (see the module docstring). `weights`: the
    question's term weights (reader_features.term_weights), for the cover bonus."""
    if not ranked:
        return []
    total = sum(weights.values()) or 1.0
    pool = list(ranked[:max(limits.top_n, limits.max_units * 4)])
    terms = {s.index: set(rf.text_rules.terms(units[s.index][1].display)) & set(weights)
             for s in pool}
    best = pool[0].score
    out: list[Scored] = []
    covered: set[str] = set()
    per: dict[int, int] = {}
    words = 0
    while pool and len(out) < limits.max_units:
        # What a unit adds to the picked ones: its score, plus `cover` x the share of the
        # question's term weight it has that none of them has.
        value = {c.index: c.score + (limits.cover * sum(weights[t] for t in terms[c.index]
                                                         - covered) / total if out else 0.0)
                 for c in pool}
        eligible = [c for c in pool if value[c.index] >= best - limits.margin]
        if not eligible:
            break
        s = max(eligible, key=lambda c: value[c.index])
        pool.remove(s)
        i, u = units[s.index]
        n = len(u.display.split())
        if per.get(i, 0) >= limits.per_section or (out and words + n > limits.max_words):
            continue
        if not out and n > limits.max_words and any(
                o.score >= s.score - limits.long_margin
                and len(units[o.index][1].display.split()) <= limits.max_words for o in pool):
            continue  # the best alone is over the budget, and a passage that fits is close
        if out and n > LONG_WORDS and s.score < best - limits.long_margin:
            continue  # a long passage well below the best would crowd out the others
        if any(_overlaps(units[o.index], (i, u)) for o in out):
            continue
        out.append(s)
        covered |= terms[s.index]
        per[i] = per.get(i, 0) + 1
        words += n
    return out


def _overlaps(a: tuple[int, Unit], b: tuple[int, Unit]) -> bool:
    """The same text again (chunks of a section overlap), or overlapping spans."""
    (i, u), (j, v) = a, b
    return u.display == v.display or (i == j and u.start < v.end and v.start < u.end)
