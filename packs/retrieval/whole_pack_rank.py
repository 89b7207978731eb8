"""Which of a list question's candidate items a whole-pack answer lists: a small learned
model, not the hand order.

    listed, more = pick(load(), candidates, question, kind, above, sims)

The graph and the region give a list or across question up to CANDIDATES items
(packs/retrieval/whole_pack.py `candidates`), in the hand order of their scores. Each gets
the FEATURES below, and a logistic model (fitted on dev questions of three corpora by
benchmarks/train_items.py; its weights ship beside this module as item_weights.json) gives
the probability that it names an item of the answer the passages above do not name yet.
`pick` takes the items best first, at most `Limits.max_items`, while their probability is
at least `Limits.alpha` times the best's: a question the passages already answer whole
("Which namespaces does a new cluster start with?") gets few items, not twenty. The next
`Limits.more` items, most probable first, the answer names on one line of less likely
items, each with its citation but no quote shown: on the dev questions they add item
recall (0.01 to 0.07) for about 20 words.

Features (the item's quote is the span of its section that names it):
- `lscore`, `lrank`: its hand score (log of its share of the best) and rank;
- `asked`, `asked_name`: the question's terms in its quote (less its name), in its name;
- `head_name`, `head_quote`: the noun asked for ("containers") in its name, in its quote;
- `wanted`, `code`, `row`: an entity of the type asked for, a code span, a table cell;
- `lpages`: the region's pages that name it (log);
- `name_above`, `quote_above`: its name, its quote already in the passages above;
- `qwords`: its quote's words (log); `across`: an across question;
- `ssim`: its section's similarity to the question (the pack's stored vectors);
- `typed`: a page names it beside the noun asked for ("the `x` annotation",
  "languages such as Ruby": packs/retrieval/whole_pack_beyond.py);
- `heading`: a section's heading under one that names the noun asked for (its quote the
  section's first passage: whole_pack_overview.py `heading_items`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from packs import text as text_rules
from packs.retrieval.reader import Model, read_weights
from packs.retrieval.whole_pack_items import Item
from packs.retrieval.whole_pack_questions import head_stem, wanted_types

WEIGHTS_FILE = Path(__file__).with_name("item_weights.json")
# Items the graph and region give the model, in hand order. The hand order cut at 60 left
# out items the model ranks high ("`net.core.somaxconn`", scored under sixty others of the
# region): at 120 the model, refitted, gains whole-pack recall on the dev sets it was not
# fitted on (benchmarks/results/issue48ac_candidates.md); at 200 it gained no more on the
# few dev sets of then. With the rounds spent since, 240 (the same model) lists more of the
# rarely named code spans a region writes once: mean item recall over 28 dev and spent
# sets 0.443 -> 0.453 (benchmarks/results/issue48ay_candidates.md).
CANDIDATES = 240
FEATURES = ("lscore", "lrank", "asked", "head_name", "head_quote", "wanted", "code", "row",
            "lpages", "name_above", "quote_above", "qwords", "across", "asked_name", "ssim",
            "typed", "heading")


class ItemWeightsError(ValueError):
    """The item model's weights file is missing, unreadable or for other features."""


@dataclass(frozen=True)
class Limits:
    max_items: int = 20
    alpha: float = 0.15  # an item under this share of the best's probability is left out
    more: int = 10  # the next items, named on one line (see the module docstring)


@dataclass(frozen=True)
class ItemModel:
    model: Model  # a linear score over FEATURES, standardised (packs/retrieval/reader.py)
    bias: float
    limits: Limits
    version: str

    def probability(self, x: np.ndarray) -> np.ndarray:
        if not len(x):
            return np.zeros(0)
        return 1.0 / (1.0 + np.exp(-(self.model.score(x) + self.bias)))

    def to_json(self, version: str, trained: dict) -> dict:
        limits = self.limits
        return {"version": version, **self.model.to_json(), "bias": round(self.bias, 6),
                "limits": {"max_items": limits.max_items, "alpha": limits.alpha,
                           "more": limits.more}, "trained": trained}


def parse(raw: bytes) -> ItemModel:
    try:
        d = json.loads(raw)
        features = d["features"]
    except (KeyError, TypeError, ValueError) as exc:
        raise ItemWeightsError(f"item weights unreadable: {exc}") from exc
    if features != list(FEATURES):
        raise ItemWeightsError(f"item weights are for features {features}, this code reads "
                               f"{list(FEATURES)}: refit them with benchmarks/train_items.py")
    try:
        model, bias, limits = Model.from_json(d), float(d["bias"]), Limits(**d["limits"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ItemWeightsError(f"item weights unreadable: {exc}") from exc
    return ItemModel(model, bias, limits, f"{d['version']}/{hashlib.sha256(raw).hexdigest()[:12]}")


@functools.cache
def load(path: Path = WEIGHTS_FILE) -> ItemModel:
    """The item model of a weights file (the shipped one by default), read once."""
    return read_weights(path, parse, ItemWeightsError)


def features(items: Sequence[Item], question: str, kind: str, above: str,
             sims: dict[str, float]) -> np.ndarray:
    """One row of FEATURES per item (hand order); `above`: the passages' text above the
    list; `sims`: section id → its similarity to the question."""
    asked = set(text_rules.terms(question))
    head, wanted = head_stem(question), wanted_types(question)
    fold = text_rules.fold
    shown = fold(above)
    top = max((i.score for i in items), default=1.0) or 1.0
    rows = []
    for k, it in enumerate(items):
        quote = it.section.content[it.start:it.end]
        qt, nt = set(text_rules.terms(quote)), set(text_rules.terms(it.name))
        rows.append([math.log(max(it.score, 1e-9) / top), math.log(1 + k),
                     len(asked & (qt - nt)) / max(1, len(asked)),
                     float(bool(head and head in nt)), float(bool(head and head in qt)),
                     float(bool(wanted) and it.etype in wanted), float(it.etype == "code"),
                     float(it.etype == "row"), math.log(max(it.pages, 1)),
                     float(fold(it.name) in shown), float(fold(quote) in shown),
                     math.log(1 + len(quote.split())), float(kind == "across"),
                     len(asked & nt) / max(1, len(asked)), sims.get(it.section.id, 0.0),
                     float(it.typed), float(it.etype == "heading")])
    return np.asarray(rows, dtype=np.float64).reshape(-1, len(FEATURES))


def pick(model: ItemModel, items: Sequence[Item], question: str, kind: str, above: str,
         sims: dict[str, float]) -> tuple[list[Item], list[Item]]:
    """(the items to list, the less likely items to name after them), each most probable
    first (see the module docstring)."""
    return select(model, items, model.probability(features(items, question, kind, above, sims)))


def select(model: ItemModel, items: Sequence[Item], p: np.ndarray
           ) -> tuple[list[Item], list[Item]]:
    """(listed, more): `items` by their probabilities `p`, best first, within the model's
    limits."""
    if not len(p):
        return [], []
    order = sorted(range(len(items)), key=lambda k: (-p[k], k))
    floor = model.limits.alpha * p[order[0]]
    listed = [k for k in order if p[k] >= floor][:model.limits.max_items]
    chosen = set(listed)
    rest = [k for k in order if k not in chosen][:model.limits.more]
    return [items[k] for k in listed], [items[k] for k in rest]
