"""Fitting the reader's two models on dev Items (benchmarks/reader_data.py), numpy only, and
the answers a fitted reader gives them (benchmarks/train_reader.py runs both).

Each model is a conditional logit: the scores of one question's units go through a
softmax, and the fit maximises the probability it gives the units whose bullet contains a
gold group (soft targets: a unit with two groups counts twice, and of the units that hold
the gold a shorter one counts more, as its words to the power -CONCISE: an answer has room
for more of them), with an L2 penalty, by
Newton's method with a backtracking line search. Features are standardised on the
training units first (their mean and spread ship with the weights). Each corpus weighs
the same in the fit, whatever its number of questions, so XQuAD's 600 do not drown the
documentation sets. A question about several things (packs/retrieval/asks.py `parts`)
whose gold groups follow its parts also teaches each part's ranking to find its group. The
second model is fitted on each question's `top_n` units by the first (what it will see at
query time), with their similarity to the question added.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import Counter
from collections.abc import Sequence

import numpy as np

from benchmarks import answer_eval
from packs.retrieval import asks, reader, unit_vectors
from packs.retrieval import reader_features as rf


def _stack(blocks: list[np.ndarray], targets: list[np.ndarray], weights: list[float]):
    x = np.vstack(blocks).astype(np.float64)
    t = np.concatenate(targets).astype(np.float64)
    sizes = np.asarray([len(b) for b in blocks])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    qid = np.repeat(np.arange(len(blocks)), sizes)
    return x, t, starts, qid, np.asarray(weights, dtype=np.float64)


def _softmax(s: np.ndarray, starts: np.ndarray, qid: np.ndarray) -> np.ndarray:
    top = np.maximum.reduceat(s, starts)
    e = np.exp(s - top[qid])
    return e / np.add.reduceat(e, starts)[qid]


def fit_logit(blocks: list[np.ndarray], targets: list[np.ndarray], weights: list[float],
              l2: float, names: Sequence[str], iters: int = 40) -> reader.Model:
    """A Model over `names` fitted on per-question feature blocks and targets (each target
    sums to 1) with per-question `weights`."""
    x, t, starts, qid, c = _stack(blocks, targets, weights)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = (x - mean) / scale
    w = np.zeros(z.shape[1])
    cq = c[qid]

    def loss(w: np.ndarray) -> float:
        p = _softmax(z @ w, starts, qid)
        return float(-(cq * t * np.log(np.clip(p, 1e-300, None))).sum() + 0.5 * l2 * w @ w)

    current = loss(w)
    for _ in range(iters):
        p = _softmax(z @ w, starts, qid)
        grad = z.T @ (cq * (p - t)) + l2 * w
        m = np.add.reduceat(p[:, None] * z, starts)  # per question: E_p[x]
        hess = (z * (cq * p)[:, None]).T @ z - (m * c[:, None]).T @ m + l2 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        size = 1.0
        while size > 1e-4:
            trial = loss(w - size * step)
            if trial <= current:
                break
            size /= 2
        else:
            break
        w, done = w - size * step, current - trial < 1e-7 * max(abs(current), 1.0)
        current = trial
        if done:
            break
    return reader.Model(tuple(names), mean, scale, w)


def _corpus_weights(items: Sequence) -> list[float]:
    n = Counter(it.corpus for it in items)
    k = len(n)
    return [len(items) / (k * n[it.corpus]) for it in items]


# Of two units that hold a gold group, one of n words is taught n^-CONCISE as much: chosen
# by 5-fold CV by page on the dev and spent rows (benchmarks/reader_concise.py, results/
# issue47_concise_and_budget.md: 0, 0.15-0.5 and 1 tried; 0.25 answers more in fewer
# words than 0 at each word budget tried).
CONCISE = 0.25


def _targets(labels: np.ndarray) -> np.ndarray:
    return labels / labels.sum()


def cases(items: Sequence, concise: float = CONCISE) -> list[tuple]:
    """(item, features, targets, weight) of each question a fit learns from, and of each
    part of a question about several things whose gold groups follow its parts (the part's
    own ranking must find its group); questions with no unit that holds a gold group teach
    nothing and are left out. A target is the unit's number of gold groups times its words
    to the power -`concise`. Each corpus weighs the same (`_corpus_weights`)."""
    usable = [it for it in items if it.labels.sum() > 0]
    out = []
    for it, wq in zip(usable, _corpus_weights(usable)):
        shorter = np.asarray([max(1, len(u.display.split())) for _, u in it.units],
                             dtype=np.float64) ** -concise
        out += [(it, x, labels * shorter, wq)
                for x, labels in [(it.x, it.labels), *zip(it.parts, it.part_labels())]
                if labels.sum() > 0]
    return out


def with_units(items: Sequence) -> list:
    """`items` with every unit's similarity to the question (their `usims`, from the
    pack's unit vectors) added to their features, as reader.with_units adds them."""
    if any(getattr(it, "usims", None) is None for it in items):
        raise ValueError("an item has no unit similarities: its pack has no unit vectors "
                         "(rebuild the benchmark packs)")
    out = []
    for it in items:
        x, parts = reader.add_units(it.x, it.parts, it.usims)
        out.append(dataclasses.replace(it, x=x, parts=parts))
    return out


def _first(taught: list[tuple], l2: float, features: tuple[str, ...]):
    """The first model fitted on `taught` (`cases`)."""
    return fit_logit([x for _, x, _, _ in taught], [_targets(lab) for _, _, lab, _ in taught],
                     [wq for *_, wq in taught], l2, features)


def fit(items: Sequence, l2: float, limits: reader.Limits, second: bool = True,
        concise: float = CONCISE, units: bool = False) -> reader.Reader:
    """The reader fitted on `items` (their `cases`); with `units`, a first model that reads
    every unit's similarity from the pack's unit vectors (and a plain one for packs without
    them), and no second."""
    taught = cases(items, concise)
    if units:
        return reader.Reader("fit", _first(cases(with_units(items), concise), l2,
                                           (*rf.FEATURES, *unit_vectors.FEATURES)),
                             None, limits, _first(taught, l2, rf.FEATURES))
    first = _first(taught, l2, rf.FEATURES)
    model = reader.Reader("fit", first, None, limits)
    if not second:
        return model
    blocks, targets, weights = [], [], []
    for it, x, labels, wq in taught:
        top = [s.index for s in reader.ranked(model, x, it.units)[:limits.top_n]]
        if labels[top].sum() == 0:
            continue
        blocks.append(np.hstack([x[top], rf.similarity_features(it.sims[top])]))
        targets.append(_targets(labels[top]))
        weights.append(wq)
    two = fit_logit(blocks, targets, weights, l2, (*rf.FEATURES, *rf.SIM_FEATURES))
    return reader.Reader("fit", first, two, limits)


def picks_of(model: reader.Reader, it) -> tuple[reader.Reader, np.ndarray, list, list]:
    """(the reader as it scores Item `it`, its features, its parts' features, the units
    its answer quotes)."""
    model, x, parts = reader.with_units(model, it.x, it.parts, getattr(it, "usims", None))
    return model, x, parts, reader.choose(model, x, it.units, it.weights,
                                          lambda ks: it.sims[ks], parts,
                                          listing="list" in asks.question_types(it.question))


def answer_of(model: reader.Reader, it) -> str:
    """The answer the reader gives Item `it` (its bullets, each with a marker)."""
    return "\n".join(f"- {it.texts[s.index]} [1]" for s in picks_of(model, it)[3])


def scores(answers: Sequence[str], items: Sequence) -> dict[str, list[float]]:
    """Per question: containment with the gate off and on, and words."""
    off = [float(answer_eval.contains(a, it.golds)) for a, it in zip(answers, items)]
    return {"gate off": off, "gate on": [h * (not it.gated) for h, it in zip(off, items)],
            "words": [float(len(a.split())) for a in answers]}


def summary(values: dict[str, list[float]]) -> dict[str, str]:
    return {"gate on": answer_eval.cell(values["gate on"]),
            "gate off": answer_eval.cell(values["gate off"]),
            "words": f"{statistics.fmean(values['words']):.1f}" if values["words"] else "-"}


def report(log, label: str, items: Sequence, answers: Sequence[str], width: int = 12) -> None:
    """One line: each corpus's containment (gate off) and mean words of `answers`."""
    cells = []
    for corpus in sorted({it.corpus for it in items}):
        idx = [k for k, it in enumerate(items) if it.corpus == corpus]
        s = scores([answers[k] for k in idx], [items[k] for k in idx])
        cells.append(f"{corpus} {statistics.fmean(s['gate off']):.3f} "
                     f"({statistics.fmean(s['words']):.1f} words, {len(idx)} q)")
    log(f"{label:{width}s} " + " | ".join(cells))


def folds_by_page(items: Sequence, k: int, seed: int = 0) -> list[int]:
    """A fold (0..k-1) per item: the pages (groups) of each corpus dealt to the folds in a
    seeded random order, so no page has questions on both sides."""
    rng = np.random.default_rng(seed)
    fold_of: dict[tuple[str, str], int] = {}
    for corpus in sorted({it.corpus for it in items}):
        pages = sorted({it.group for it in items if it.corpus == corpus})
        for j, page in enumerate(rng.permutation(pages)):
            fold_of[(corpus, str(page))] = j % k
    return [fold_of[(it.corpus, it.group)] for it in items]


def cross_validate(items: Sequence, split: list, l2: float, limits: reader.Limits,
                   second: bool = True, places: Counter | None = None,
                   concise: float = CONCISE, units: bool = False) -> list[str]:
    """Each item's answer by a reader fitted on the items of the other parts of `split`
    (a part label per item); `places`, when given, counts where the gold groups the
    answers miss were, by (corpus, `missed_places`)."""
    out: list[str | None] = [None] * len(items)
    for part in sorted(set(split)):
        train = [it for it, s in zip(items, split) if s != part]
        model = fit(train, l2, limits, second, concise, units)
        for j, (it, s) in enumerate(zip(items, split)):
            if s == part:
                out[j] = answer_of(model, it)
                if places is not None:
                    places.update((it.corpus, w) for w in missed_places(model, it, out[j]))
    return [a or "" for a in out]


PLACES = ("ranked 1-3", "ranked 4-10", "ranked below 10", "in no unit read")


def missed_places(model: reader.Reader, it, answer: str) -> list[str]:
    """For each gold group of Item `it` that `answer` lacks, where it was (PLACES): in no
    unit the reader read, or in units whose best the first model's ranking put where it
    says (what to mend: the reading, the ranking, or the picking from a good ranking)."""
    model, x, _ = reader.with_units(model, it.x, [], getattr(it, "usims", None))
    order = [s.index for s in reader.ranked(model, x, it.units)]
    out = []
    for g, group in enumerate(it.golds):
        if answer_eval.contains(answer, [group]):
            continue
        held = {k for k, h in enumerate(it.hits) if g in h}
        at = next((n for n, k in enumerate(order) if k in held), None)
        out.append(PLACES[3] if at is None else PLACES[0] if at < 3 else
                   PLACES[1] if at < 10 else PLACES[2])
    return out
