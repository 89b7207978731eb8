"""What the learned reader (packs/retrieval/reader.py) knows of a question and of each
answer unit: one row of numbers per unit, named by FEATURES (and SIM_FEATURES once the
best units are embedded), the same code for training (benchmarks/train_reader.py) and at
query time, so a weight meets the number it was fitted on; READER_FEATURES_VERSION names them.

A question (`Question`, read by packs/retrieval/reader_question.py) is read for its content
terms (packs/text.py stems, stop words out), its identifiers and code spans with their
split forms (`NAME=value` also matches `NAME`, `pkg.Func` also `Func`, `a::b()` also `b`),
what it asks for (packs/retrieval/asks.py: a number, a name, a reason, a list ...) and
whether it asks how to do something. A unit's features:

    bm25, parts        BM25 of the question's terms in the unit, each term weighted by its
                       IDF in the pack times its IDF among the candidates, over the total
                       weight (a lead-in scores at least as its best part; `parts`: how
                       many more of its parts match)
    coverage, weighted_coverage   share of the question's terms the unit has (plain; weighted)
    ident, ident_part  share of the question's identifiers the unit writes as asked, or only
                       in a split form; each weighted by its rarity among the candidates
    heading, title, heading_ident   the same BM25 share for the section's heading path and
                       own title (a name in words or as one: `name_terms`); identifiers there
    sec_sim, sec_sim_rel, sec_rank, extra, prior   the section's similarity to the
                       question, less the best section's; 1 / (rank + 1) among the cited
                       sections (0 for another section of a cited page, `extra`); issue
                       34's prior (the better of the rank's and the similarity's)
    sec_cov, sec_cov_rel   the share of the question's term weight the unit's whole section
                       has (its units' terms together), and that less the best section's:
                       which of a cited page's other sections is about the question, where
                       the heading and the section's similarity do not say (of the gold
                       strings the reader missed, ranked below 10th, 6 in 10 sat in such a
                       section; benchmarks/results/issue47_session12.md)
    position, first    the unit's place among its section's candidates
    kind_*             sentence, item, paragraph, leadin, code, row
    log_words, short, long   its length
    type_*             the question asks for a number, name, person, place, reason, list,
                       default or term, and the unit has one the question does not write
    howto_code         a how-to question and a unit with code or a command
    defines, defines_asked   the unit opens by saying what a term of the question is or
                       does ("Liveness probes determine when to restart a container"; and
                       the question asks what something is or means, or how two differ)
    condition, condition_asked   the weight share of the question's terms in the unit's
                       condition ("If a container allocates more memory than its limit,
                       ..."; and the question asks what happens when or if)
    meta               the unit talks about the page ("This page shows", "See ...")
    links              the share of the unit that is link syntax
    novelty            the share of the unit's terms the question does not have
    number, code       the unit writes a number; code
    bigrams            the share of the question's pairs of successive terms the unit has
                       in a row
    rare_first         the question's rarest term among the unit's first words (what the
                       unit is about)
    fragment, caption, asks   no closing punctuation (a title-like line); "Listing 8-6:
                       ..."; a unit that is itself a question ("what happened?")
    dangling           a sentence that ends with ":" but introduces nothing the section
                       holds (a listing the page included from a file)
    output             code that a program printed ("The output is similar to this:"
                       before it), not a command or a configuration (code_units.py)
    elsewhere          for one part of a question about several things (asks.py `parts`):
                       the share of the other parts' own terms the unit has
    howto_command      a how-to question and code that is a command line ("kubectl
                       rollout undo ...", not the output it prints)
    howto_output       a how-to question and program output ("deployment.apps/nginx-
                       deployment rolled back" echoes "roll back a Deployment")
    noun_code          a noun the question asks for ("Which finalizer ...?") in a code span
                       or command line the unit writes (`...service-cidr-finalizer`) or
                       beside a code span ("a file named `zoo.cfg`"); noun_shape: code of
                       the form the noun asks for (a flag `--x`, a path `a/b`, a file
                       `x.cfg`, a port, a version, a label `a/b=c`, a field `spec.x`, a
                       type `CamelCase`, a macro `x!` ...). A block of configuration or
                       output has neither (its keys and columns name every field).
and, for the units embedded with the pack's encoder (SIM_FEATURES): their cosine
similarity to the question, that less the best unit's, and whether it is the best. A unit's
words are counted without emphasis markers and link targets (`plain`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from packs import text as text_rules
from packs.retrieval import asks, code_units
from packs.retrieval.reader_question import Question as Question  # re-exported, as are
from packs.retrieval.reader_question import analyse as analyse  # analyse and forms: callers
from packs.retrieval.reader_question import forms as forms  # read the question through here
from packs.retrieval.reader_question import singular
from packs.retrieval.unit_facts import KINDS, SHAPE, facts, opening, terms_of
from packs.retrieval.unit_facts import plain as plain  # re-exported: callers read it here
from packs.retrieval.units import Unit

READER_FEATURES_VERSION = "reader-features-v11"
K1, B = 1.2, 0.75  # BM25's constants
TYPES = ("number", "name", "person", "place", "why", "list", "default", "term")
FEATURES = (
    "bm25", "parts", "coverage", "weighted_coverage", "ident", "ident_part", "heading",
    "title", "heading_ident", "sec_sim", "sec_sim_rel", "sec_rank", "extra", "prior",
    "position", "first", *(f"kind_{k}" for k in KINDS), "log_words", "short", "long",
    *(f"type_{t}" for t in TYPES), "howto_code", "defines", "defines_asked", "meta",
    "links", "novelty", "number", "code", "bigrams", "rare_first", "fragment", "caption",
    "dangling", "output", "elsewhere", "howto_command", "condition", "condition_asked",
    "howto_output", "noun_code", "noun_shape", "asks", "sec_cov", "sec_cov_rel")
SIM_FEATURES = ("unit_sim", "unit_sim_rel", "unit_sim_best")
SECTION_PRIOR, SIMILARITY_SCALE = 0.5, 0.1  # issue 34's prior, kept as one feature
NO_SIMILARITY = -0.5  # sec_sim_rel of a section whose similarity is unknown

# The form of the name a question's noun asks for, matched against one token of code at a
# time (anchored: a classifier of a token, not a search of running text).
_SHAPES = {
    ("flag", "option", "argument", "switch", "parameter"): r"^--?[a-z][\w-]*(?:=\S*)?$",
    ("path", "url", "endpoint", "directory", "folder", "route", "uri", "location"):
        r"^\S*\w/\S*$",
    ("file", "filename", "manifest"): r"^[\w./~-]*\w\.[a-z]{1,5}$",
    ("port",): r"^:?\d{2,5}(?:/\w+)?$",
    ("variable", "env"): r"^\$?[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?:=\S*)?$",
    ("version", "release"): r"^v?\d+(?:\.\d+)+\S*$",
    ("label", "annotation", "key", "finalizer", "taint", "selector"):
        r"^[\w.-]+/[\w.-]+(?:=\S*)?$|^[\w.-]+=[\w.-]*$",
    ("field", "property", "attribute", "setting", "sysctl"):
        r"^\.?[a-z]+[A-Z]\w*:?$|^\.?[a-z]\w*(?:\.[a-z]\w*)+(?:=\S*)?$|^[a-z]\w*:$",
    ("trait", "type", "struct", "enum", "kind", "resource", "object", "class", "gate"):
        r"^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)*(?:<.*>)?$",
    ("method", "function", "macro", "fn"): r"^[\w:.]*\w(?:\(\)|!)$",
    ("image",): r"^[\w.-]+(?:/[\w.-]+)*:[\w.-]+$",
    ("error",): r"^E\d{4}$",
}
SHAPES = {noun: re.compile(shape) for nouns, shape in _SHAPES.items() for noun in nouns}
_SPAN_MARK = "\x00"
_CODE_TOKENS = 300  # the tokens of a code block read for the nouns and shapes asked


@dataclass(frozen=True)
class Passage:
    """A section as the reader sees it: its text, heading path and own title, its
    similarity to the question and its place among the cited sections (None: another
    section of a cited page)."""

    content: str
    heading: str = ""
    title: str = ""
    similarity: float | None = None
    rank: int | None = None


def unit_terms_of(u: Unit) -> list[str]:
    """The terms of a unit as the reader counts them (unit_facts.py `plain`)."""
    return list(terms_of(u.display))


def term_weights(question: str, units: list[list[str]],
                 pack_idf: Callable[[str], float] | None) -> dict[str, float]:
    """Weight of each of the question's terms: IDF among the candidates, times its IDF in
    the pack when known."""
    df = Counter(t for ts in units for t in set(ts))
    n = len(units)
    weights: dict[str, float] = {}
    for w in text_rules.words(question):
        if w in text_rules.STOP_WORDS:
            continue
        t = text_rules.stem(w)
        local = math.log(1 + n / (df.get(t, 0) + 0.5))
        weights[t] = max(weights.get(t, 0.0), local * (pack_idf(w) if pack_idf else 1.0))
    return weights


def rarity(df: int, n: int) -> float:
    """The IDF of a string that `df` of `n` candidates contain, over that of one in a
    single candidate (1.0 then, less the more candidates share it)."""
    return math.log(1 + n / (max(df, 1) - 0.5)) / math.log(1 + n / 0.5)


def bm25(tf: Counter, length: int, avg: float, weights: dict[str, float]) -> float:
    score = 0.0
    for t, w in weights.items():
        f = tf.get(t, 0)
        if f:
            score += w * f * (K1 + 1) / (f + K1 * (1 - B + B * length / avg))
    return score


def _priors(passages: Sequence[Passage]) -> list[float]:
    known = [p.similarity for p in passages if p.similarity is not None]
    best = max(known, default=None)
    return [max(SECTION_PRIOR / (p.rank + 1) if p.rank is not None else 0.0,
                0.0 if p.similarity is None or best is None
                else SECTION_PRIOR * math.exp((p.similarity - best) / SIMILARITY_SCALE))
            for p in passages]


def _contains(low: str, x: str) -> bool:
    """Whether lower-cased text `low` writes `x` as a whole word (or code)."""
    i = low.find(x)
    while i >= 0:
        before = low[i - 1] if i else " "
        after = low[i + len(x)] if i + len(x) < len(low) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        i = low.find(x, i + 1)
    return False


def _ident_shares(q: Question, lows: list[str]) -> tuple[list[float], list[float]]:
    """Per unit, the rarity-weighted share of the question's identifiers it writes as
    asked, and of those it writes only in a split form."""
    if not q.idents:
        return [0.0] * len(lows), [0.0] * len(lows)
    n = len(lows)
    full_hit = [[x in low for low in lows] for x, _ in q.idents]
    part_hit = [[not f and any(_contains(low, p) for p in parts) for f, low in zip(fh, lows)]
                for (_, parts), fh in zip(q.idents, full_hit)]
    full_w = [rarity(sum(h), n) for h in full_hit]
    part_w = [rarity(sum(h), n) for h in part_hit]
    k = len(q.idents)
    full = [sum(w for w, h in zip(full_w, full_hit) if h[j]) / k for j in range(n)]
    part = [sum(w for w, h in zip(part_w, part_hit) if h[j]) / k for j in range(n)]
    return full, part


def _defines(q: Question, display: str) -> bool:
    return bool(q.terms & opening(display))


def features(q: Question, passages: Sequence[Passage], units: Sequence[tuple[int, Unit]],
             pack_idf: Callable[[str], float] | None = None) -> np.ndarray:
    """One row of FEATURES per unit of `units` ((passage index, unit), in passage order),
    built a column at a time (a question reads a few hundred units, once for each of its
    parts too)."""
    if not units:
        return np.zeros((0, len(FEATURES)), dtype=np.float32)
    raws = [passages[i].content[u.start:u.end] for i, u in units]
    known = [facts(u, raw) for (_, u), raw in zip(units, raws)]
    weights = term_weights(q.text, [f.terms for f in known], pack_idf)
    total = sum(weights.values()) or 1.0
    avg = sum(len(f.terms) for f in known) / len(known) or 1.0
    matched = [bm25(f.tf, len(f.terms), avg, weights) / total for f in known]
    full, part = _ident_shares(q, [f.low for f in known])
    sec = _section_features(q, passages, weights, total)
    present = set().union(*(f.term_set for f in known))
    # the rarest term written; of equally rare ones the question's first (a set's order
    # changes with the process's hash seed, and the same question got other answers)
    rare = max((t for t in weights if t in present), key=weights.__getitem__, default=None)
    count = Counter(i for i, _ in units)
    children = _children(units)
    asked = set(q.asked)
    seen: Counter[int] = Counter()
    places = []
    for i, _ in units:
        places.append(seen[i])
        seen[i] += 1
    n, zeros = len(units), [0.0] * len(units)
    scored = [_composite(units, matched, k, children) for k in range(n)]
    said = list(weights.items())
    col: dict[str, list[float]] = {
        "bm25": [top for top, _ in scored],
        "parts": [min(max(hits - 1, 0), 3) / 3 for _, hits in scored],
        "coverage": [len(q.terms & f.term_set) / max(len(q.terms), 1) for f in known],
        "weighted_coverage": [sum(w for t, w in said if t in f.term_set) / total
                              for f in known],
        "ident": full, "ident_part": part,
        "position": [place / max(count[i] - 1, 1) for place, (i, _) in zip(places, units)],
        "first": [float(place == 0) for place in places],
        "howto_code": [float(q.howto and f.has_code) for f in known],
        "defines": (defines := [float(bool(q.terms & f.opening)) for f in known]),
        "defines_asked": defines if q.what_is else zeros,
        "novelty": [len(f.term_set - q.terms) / max(len(f.term_set), 1) for f in known],
        "bigrams": ([len(q.pairs & f.pairs) / len(q.pairs) for f in known] if q.pairs
                    else zeros),
        "rare_first": [float(rare is not None and rare in f.first) for f in known],
        "output": (output := [float(code_units.is_output(passages[i].content, u))
                              for i, u in units]),
        "howto_output": output if q.howto else zeros,
        "howto_command": [float(q.howto and f.command) for f in known],
        "elsewhere": ([len(q.elsewhere & f.term_set) / len(q.elsewhere) for f in known]
                      if q.elsewhere else zeros),
        "condition": (condition := [sum(w for t, w in said if t in f.condition) / total
                                    for f in known]),
        "condition_asked": condition if q.happens else zeros,
    }
    for name in sec[units[0][0]]:  # the section's features, as `_section_features` names them
        col[name] = [sec[i][name] for i, _ in units]
    col["sec_cov"], col["sec_cov_rel"] = _section_coverage(units, known, weights, total)
    for j, name in enumerate(SHAPE):
        col[name] = [f.shape[j] for f in known]
    for t in TYPES:
        col[f"type_{t}"] = ([float(asks.has(t, u, raw, asked)) for (_, u), raw in zip(units, raws)]
                            if t in q.kinds else zeros)
    nouns = [_noun_features(q.nouns, u, raw) for (_, u), raw in zip(units, raws)]
    col["noun_code"] = [code for code, _ in nouns]
    col["noun_shape"] = [shape for _, shape in nouns]
    return np.asarray([col[name] for name in FEATURES], dtype=np.float32).T.copy()


def _section_coverage(units: Sequence[tuple[int, Unit]], known: Sequence, weights: dict[str, float],
                      total: float) -> tuple[list[float], list[float]]:
    """Per unit, (sec_cov, sec_cov_rel): the share of the question's term weight among the
    terms of all its section's units, and that less the best section's."""
    terms: dict[int, set[str]] = {}
    for (i, _), f in zip(units, known):
        terms.setdefault(i, set()).update(f.term_set)
    cov = {i: sum(w for t, w in weights.items() if t in ts) / total for i, ts in terms.items()}
    best = max(cov.values())
    return [cov[i] for i, _ in units], [cov[i] - best for i, _ in units]


def _noun_features(nouns: frozenset[str], u: Unit, raw: str) -> tuple[float, float]:
    """(noun_code, noun_shape) of unit `u` (Markdown `raw`); of code, a command line only."""
    code = u.kind == "code"
    if not nouns or (code and not code_units.is_command(u)):
        return 0.0, 0.0
    inside, beside, tokens = _code_of(raw, code)
    shapes = [SHAPES[n] for n in nouns if n in SHAPES]
    return (float(bool(nouns & (inside | beside))),
            float(any(s.match(t) for s in shapes for t in tokens)))


@lru_cache(maxsize=32768)
def _code_of(raw: str, code: bool) -> tuple[frozenset[str], frozenset[str], tuple[str, ...]]:
    """(the words inside a unit's code, singular; the words beside its code spans; its
    code's tokens) for `_noun_features`; `code`: the whole unit is code."""
    spans = [raw] if code else text_rules.code_spans(raw)
    tokens = tuple(t for t in dict.fromkeys(t.strip(".,;:()[]{}'\"") for span in spans
                                            for t in span.split()[:_CODE_TOKENS]) if t)
    inside = frozenset(singular(w) for t in tokens for w in re.split(r"[^A-Za-z0-9]+", t) if w)
    beside: set[str] = set()
    if not code and spans:
        words = [w.strip(".,;:()").lower()
                 for w in text_rules.CODE_SPAN.sub(f" {_SPAN_MARK} ", raw).split()]
        for j, w in enumerate(words):
            if w == _SPAN_MARK:
                beside.update(singular(x) for x in words[max(j - 2, 0):j + 3] if x != w)
    return inside, frozenset(beside), tokens


def _section_features(q: Question, passages: Sequence[Passage], weights: dict[str, float],
                      total: float) -> list[dict[str, float]]:
    known = [p.similarity for p in passages if p.similarity is not None]
    best = max(known, default=None)
    priors = _priors(passages)
    out = []
    for p, prior in zip(passages, priors):
        heading = p.heading
        if p.title and heading.startswith(p.title):
            heading = heading[len(p.title):].lstrip(" >")
        where = f"{p.heading}\n{p.title}".lower()
        hits = sum(x in where or any(_contains(where, f) for f in parts)
                   for x, parts in q.idents)
        rel = (NO_SIMILARITY if p.similarity is None or best is None
               else max(p.similarity - best, NO_SIMILARITY))
        out.append({
            "heading": bm25(Counter(text_rules.name_terms(heading)), 1, 1.0, weights) / total,
            "title": bm25(Counter(text_rules.name_terms(p.title)), 1, 1.0, weights) / total,
            "heading_ident": hits / max(len(q.idents), 1),
            "sec_sim": p.similarity if p.similarity is not None else 0.0,
            "sec_sim_rel": rel,
            "sec_rank": 1 / (p.rank + 1) if p.rank is not None else 0.0,
            "extra": float(p.rank is None), "prior": prior})
    return out



def _children(units: Sequence[tuple[int, Unit]]) -> dict[int, list[int]]:
    """Each lead-in's parts (the lead-in sentence, its items or rows): the units of its
    section inside it, by index."""
    by_section: dict[int, list[int]] = {}
    for j, (i, _) in enumerate(units):
        by_section.setdefault(i, []).append(j)
    return {k: [j for j in by_section[i] if j != k and u.start <= units[j][1].start
                and units[j][1].end <= u.end]
            for k, (i, u) in enumerate(units) if u.kind == "leadin"}


def _composite(units: Sequence[tuple[int, Unit]], matched: list[float], k: int,
               children: dict[int, list[int]]) -> tuple[float, int]:
    """(the term score of unit k, how many of its parts match): a lead-in scores at least
    as its best part (the lead-in sentence, an item, a row; `children`), whose BM25 its
    length dilutes."""
    if units[k][1].kind != "leadin":
        return matched[k], int(matched[k] > 0)
    parts = [matched[j] for j in children[k]]
    return max([matched[k], *parts]), sum(m > 0 for m in parts)


def similarity_features(sims: np.ndarray) -> np.ndarray:
    """SIM_FEATURES of units whose cosine similarities to the question are `sims`."""
    if not len(sims):
        return np.zeros((0, len(SIM_FEATURES)), dtype=np.float32)
    best = float(sims.max())
    return np.stack([sims, sims - best, (sims >= best).astype(np.float32)],
                    axis=1).astype(np.float32)
