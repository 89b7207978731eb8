"""A frozen copy of packs/retrieval/extractive.py as it was before issue 47 (main at b327fa3,
issue 34's final offline answer, "turn 3"), kept only as the "turn-3 product" baseline of
benchmarks/doc_answers.py and benchmarks/xquad_answers.py (benchmarks/answer_eval.py).
Not used by the product; do not change it (a changed baseline is no baseline).

The original docstring follows.

The offline answer: the passages of the pack that best answer the question.

Candidates (packs/retrieval/units.py) are the sentences, whole list items, table rows, short
paragraphs, small code blocks and lead-ins with the list, table or code they introduce, of
the cited sections and of the other sections of their pages whose similarity to the
question is within EXTRA_REACH of the best section's (`extra`: the page a question is about
is usually cited, the section that answers it not always). Each is scored by

    BM25     the question's terms (packs/text.py: stop words out, Porter stems) in the unit,
             k1 = K1, b = B over the candidates' lengths, each term weighted by its IDF in
             the pack (the section frequencies the gate keeps, `Vocabulary`) times its IDF
             among the candidates (a word every candidate has does not choose among them),
             over the total weight of the question's terms; a lead-in scores at least as
             its best part, plus PART_BONUS for each further part that matches
    + IDENTIFIER_WEIGHT  x the share of the question's identifiers, code spans and lone
             symbols (`--flag`, `maxSurge`, `pack.toml`, "!") the unit writes, each
             weighted by its rarity among the candidates (`_rarity`: 1 when one candidate
             writes it; "Cargo.toml" in half the Cargo book's passages counts little)
    + HEADING_WEIGHT     x the same BM25 share for the section's heading path (a sentence
             under "Restart policy" rarely repeats "restart policy" itself)
    + the section's prior (`priors`), the better of its place and its similarity to the
             question: SECTION_PRIOR / (rank + 1) for a cited section, SECTION_PRIOR x
             exp(-(best - similarity) / SIMILARITY_SCALE) for any section, `best` the
             highest similarity among them (search ranks by more than similarity, and
             reads only part of a page: the section that answers may be cited fifth, or
             not at all)
    + TYPE_BONUS[type] for each type of the question the unit answers: a code span or an
             identifier the question lacks (which / what setting, flag, command, field ...),
             a number the question lacks, in digits or words ("every two minutes": how
             many, how long, how often, what port ...), a name it lacks (who, where), a
             reason (why → because, so that ...), a list (what are the rules, which
             steps, which effects can a taint have ...), a default (if I leave X out,
             when not set ...), a term the unit introduces in italics or bold (what is X
             called)

and halved for a unit of fewer than SHORT_WORDS words. A lead-in whose list or table runs
over LONG_WORDS words is scored and shown as its `brief` (packs/retrieval/units.py): for a
question that asks for a list with the head of each item (their names), else with the
items that have a term of the question whole and the others by their heads. The best go in
best-first order: at most MAX_UNITS, at most PER_SECTION from one section, none
overlapping another or repeating its text (chunks overlap), none scoring under FLOOR x the
best, none longer than LONG_WORDS under LONG_FLOOR x the best, within MAX_WORDS words in
all (the first is always kept, unless it alone runs over MAX_WORDS and a passage that fits
scores at least LONG_FLOOR x it: a lead-in with a long list would fill the answer). Weights
were set on the dev splits of XQuAD and the two documentation answer sets
(benchmarks/xquad_answers.py, benchmarks/doc_answers.py) with the text rules of
packs/text.py at TUNED_ON, the third pass's rules on every row of the two documentation sets
and XQuAD dev; BENCHMARKS.md has the test splits.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from benchmarks.baseline_turn3 import asks
from benchmarks.baseline_turn3.asks import question_types
from benchmarks.baseline_turn3.units import Unit, candidates, first_sentence, segment
from packs import text as text_rules

if TYPE_CHECKING:
    from packs.result import RankedSection

__all__ = ["FIRST", "RULES", "Pick", "Rules", "Unit", "answer", "candidates", "first_sentence",
           "idf_of", "question_types", "segment", "select"]

TUNED_ON = "text-v1"
K1, B = 1.2, 0.75
IDENTIFIER_WEIGHT = 0.5
HEADING_WEIGHT = 0.25
SECTION_PRIOR = 0.5
TYPE_BONUS = {"number": 0.3, "name": 0.3, "person": 0.3, "place": 0.3, "why": 0.3,
              "list": 0.3, "default": 0.3, "term": 0.3}
PART_BONUS = 0.1
MAX_PART_BONUSES = 3
SHORT_WORDS = 4
FLOOR = 0.5
LONG_WORDS = 60
LONG_FLOOR = 0.8
SIMILARITY_SCALE = 0.1
EXTRA_REACH = 0.2  # an extra section is read when its prior is at least e^-2 of the best's
MAX_UNITS = 5
PER_SECTION = 4
MAX_WORDS = 120


@dataclass(frozen=True)
class Rules:
    """What issue 34b changed in the selection, switchable so that a benchmark scores the
    first version (`FIRST`) beside the current one (`RULES`) in one run: `link_definitions`
    quotes "[label]: url" lines as text (they are no part of the page as shown);
    `term_bonus` gives TYPE_BONUS["term"] to a unit that introduces a term in italics or
    bold when the question asks what something is called; `max_units`: at most this many
    passages (within MAX_WORDS either way). Later passes: `sections`, the first this many
    cited sections are read (None: all of them), `pages`: the other sections of the first
    this many cited pages (None: all; packs/answer.py `page_sections`), `similarity_prior`:
    a section's prior is the better of its rank's and its similarity's (`priors`), else its
    rank's alone, the extra sections ranked after the cited ones."""

    link_definitions: bool = False
    term_bonus: bool = True
    max_units: int = MAX_UNITS
    sections: int | None = None
    pages: int | None = None
    similarity_prior: bool = True


RULES = Rules()
FIRST = Rules(link_definitions=True, term_bonus=False, max_units=4, sections=7, pages=3,
              similarity_prior=False)

RETRIEVAL_ONLY_NOTE = (
    "Retrieval-only answer (no language model was used; set ANTHROPIC_API_KEY for a "
    "synthesised answer). The most relevant passages in the pack:"
)
_MARKER_LIKE = re.compile(r"(?<![\\\w])\[(?=\d)")


@dataclass(frozen=True)
class Pick:
    section: int  # index into the sections given to select()
    unit: Unit
    score: float


_SYMBOL = re.compile(r"(?<!\S)[^\w\s]{1,3}(?!\S)")
_PUNCTUATION = frozenset({"-", "--", ".", ",", ";", ":", "...", "(", ")", '"', "'"})


def idf_of(vocabulary) -> Callable[[str], float]:
    """A word → IDF function over a pack's sections (a gate `Vocabulary`, whose terms are
    the gate's word forms); a compound ("kube-proxy") takes its rarest part's."""
    return lambda word: max((vocabulary.idf(p) for p in text_rules.gate_terms(word)),
                            default=0.0)


def _weights(question: str, units: list[list[str]],
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


def _rarity(df: int, n: int) -> float:
    """The IDF of a string that `df` of `n` candidates contain, over that of one in a
    single candidate (1.0 then, less the more candidates share it)."""
    return math.log(1 + n / (max(df, 1) - 0.5)) / math.log(1 + n / 0.5)


def _bm25(tf: Counter, length: int, avg: float, weights: dict[str, float]) -> float:
    score = 0.0
    for t, w in weights.items():
        f = tf.get(t, 0)
        if f:
            score += w * f * (K1 + 1) / (f + K1 * (1 - B + B * length / avg))
    return score


def select(question: str, texts: Sequence[str], max_units: int | None = None,
           per_section: int | None = None, headings: Sequence[str] | None = None,
           pack_idf: Callable[[str], float] | None = None,
           max_words: int | None = None, rules: Rules = RULES,
           priors: Sequence[float] | None = None) -> list[Pick]:
    """The best units of `texts` (the cited sections' contents, best section first, with
    their `headings` paths when given) for `question`, best first; `pack_idf` maps a
    word to its IDF in the pack (see `idf_of`); `rules`: see `Rules`. The limits default
    to rules.max_units, PER_SECTION and MAX_WORDS. [] when no section has a candidate."""
    units = [(i, u) for i, t in enumerate(texts) for u in candidates(t, rules.link_definitions)]
    if not units:
        return []
    kinds = asks.question_types(question)
    asked_terms = set(text_rules.terms(question))
    units = [(i, _shortened(u, "list" in kinds, asked_terms)) for i, u in units]
    unit_terms = [text_rules.terms(u.display) for _, u in units]
    weights = _weights(question, unit_terms, pack_idf)
    total = sum(weights.values()) or 1.0
    avg = sum(map(len, unit_terms)) / len(unit_terms) or 1.0
    # Identifiers and code spans, and symbols written alone ("the ? operator"), which a
    # passage writes as code.
    idents = [x.lower() for x in text_rules.identifiers(question)]
    idents += [f"`{m}`" for m in _SYMBOL.findall(question) if m not in _PUNCTUATION]
    asked = {w.strip(".,;:?!\"'()").lower() for w in question.split()}
    # An identifier many candidates write ("Cargo.toml" in the Cargo book) tells little
    # about which one answers: each weighs its rarity among them (`_rarity`).
    lows = [texts[i][u.start:u.end].lower() for i, u in units] if idents else []
    ident_weight = {x: _rarity(sum(x in low for low in lows), len(units)) for x in idents}
    heads = [_bm25(Counter(text_rules.terms(h)), 1, 1.0, weights) / total
             for h in (headings or [""] * len(texts))]
    scored = []
    matched = [_bm25(Counter(ts), len(ts), avg, weights) / total for ts in unit_terms]
    for k, (i, u) in enumerate(units):
        raw = texts[i][u.start:u.end]
        score = (_composite(units, matched, k) + HEADING_WEIGHT * heads[i]
                 + (priors[i] if priors is not None else SECTION_PRIOR / (i + 1)))
        if idents:
            score += IDENTIFIER_WEIGHT * sum(ident_weight[x] for x in idents
                                             if x in lows[k]) / len(idents)
        score += sum(TYPE_BONUS[k] for k in kinds if asks.has(k, u, raw, asked, rules.term_bonus))
        if len(u.display.split()) < SHORT_WORDS:
            score /= 2
        scored.append(Pick(i, u, score))
    # Best first; ties go to the earlier section, then the earlier unit.
    scored.sort(key=lambda p: (-p.score, p.section, p.unit.start))
    return _pick(scored, max_units or rules.max_units, per_section or PER_SECTION,
                 max_words or MAX_WORDS)


def _shortened(u: Unit, listing: bool, asked: set[str]) -> Unit:
    """Unit `u`, or when it is a lead-in whose list or table runs over LONG_WORDS words
    (it would crowd out the other passages) its brief: with each item's head for a
    question that asks for the list (`listing`), else with the items that have a term of
    the question (`asked`) whole and the others by their heads."""
    if u.brief is None or len(u.display.split()) <= LONG_WORDS:
        return u
    if listing:
        return u.brief
    lead = u.brief.display.split("\n")[0]
    lines = [text if asked & set(text_rules.terms(text)) else head for text, head in u.brief.items]
    return dataclasses.replace(u.brief, display="\n".join([lead, *("- " + x for x in lines)]))


def _composite(units: list[tuple[int, Unit]], matched: list[float], k: int) -> float:
    """The term score of unit k; a lead-in scores at least as its best part (the lead-in
    sentence, an item, a row: its own BM25 is diluted by its length), plus PART_BONUS for
    every further part that has some of the question's terms (a list that answers a
    question about several things)."""
    i, u = units[k]
    if u.kind != "leadin":
        return matched[k]
    parts = sorted((matched[j] for j, (s, p) in enumerate(units)
                    if s == i and j != k and u.start <= p.start and p.end <= u.end), reverse=True)
    hits = sum(m > 0 for m in parts)
    return max([matched[k], *parts]) + PART_BONUS * min(max(hits - 1, 0), MAX_PART_BONUSES)


def _pick(scored: list[Pick], max_units: int, per_section: int, max_words: int) -> list[Pick]:
    out: list[Pick] = []
    per: Counter[int] = Counter()
    words = 0
    best = scored[0].score
    for p in scored:
        if len(out) == max_units or (out and p.score < FLOOR * best):
            break
        n = len(p.unit.display.split())
        if per[p.section] >= per_section or (out and words + n > max_words):
            continue
        if not out and n > max_words and any(
                q.score >= LONG_FLOOR * best and len(q.unit.display.split()) <= max_words
                for q in scored):
            continue  # the best alone is over the budget, and a passage that fits is close
        if out and n > LONG_WORDS and p.score < LONG_FLOOR * best:
            continue  # a long passage that scores well below the best would crowd out others
        if any(q.unit.display == p.unit.display or (q.section == p.section and q.unit.start
               < p.unit.end and p.unit.start < q.unit.end) for q in out):
            continue  # overlapping, or the same text again (chunks of a section overlap)
        out.append(p)
        per[p.section] += 1
        words += n
    return out


# --- the answer text ---------------------------------------------------------------------------


def _fenced(code: str) -> str:
    body = "\n".join("  " + line for line in code.splitlines())
    return f"\n  ```\n{body}\n  ```\n "


def shown(unit: Unit) -> str:
    """A unit as a bullet of the answer shows it: code fenced, a lead-in followed by its
    list items (indented) or code block; brackets of the page's own text escaped so they
    do not read as citation markers."""
    if unit.kind == "code":
        if "\n" not in unit.display and "`" not in unit.display:
            return f"`{unit.display}`"
        return _fenced(unit.display)
    if unit.kind == "leadin":
        lead, _, rest = unit.display.partition("\n")
        lead = _MARKER_LIKE.sub(r"\\[", lead)
        if unit.inner == "code":
            return lead + _fenced(rest)
        if unit.inner in ("item", "row"):
            items = _MARKER_LIKE.sub(r"\\[", rest)
            return lead + "\n" + "\n".join("  " + line for line in items.splitlines())
        return _MARKER_LIKE.sub(r"\\[", f"{lead} {rest}")
    return _MARKER_LIKE.sub(r"\\[", unit.display)


def priors(similarities: Sequence[float | None], ranked: int) -> list[float] | None:
    """Each section's prior for `select`: the first `ranked` (the cited sections, in their
    order) take SECTION_PRIOR / (rank + 1), every section with a similarity to the question
    SECTION_PRIOR x exp(-(best - similarity) / SIMILARITY_SCALE), and each the better of
    the two. None (rank alone) when no section has a similarity."""
    known = [x for x in similarities if x is not None]
    if not known:
        return None
    best = max(known)
    return [max(SECTION_PRIOR / (i + 1) if i < ranked else 0.0,
                0.0 if x is None else SECTION_PRIOR * math.exp((x - best) / SIMILARITY_SCALE))
            for i, x in enumerate(similarities)]


def answer(question: str, cited: Sequence[RankedSection], max_units: int | None = None,
           note: str = RETRIEVAL_ONLY_NOTE, pack_idf: Callable[[str], float] | None = None,
           extra: Sequence[RankedSection] = (), rules: Rules = RULES
           ) -> tuple[str, list[tuple[int, str]], list[RankedSection]]:
    """(answer, quotes, extra sections quoted): the units of the cited sections (the first
    rules.sections) and of the `extra` sections (the rest of their pages, not in the
    context) that best answer the question (`select`), best first, one bullet each with
    its [n] ([n, pack] with several packs), under the `note` line; each quote is the unit's
    span of its section, so packs/citations.py verifies it. An extra section the answer
    quotes is numbered after the cited ones and returned (a copy, `citation` set) so that
    the caller lists it among the sources."""
    shown_sections = list(cited[:rules.sections])
    if rules.similarity_prior:
        best = max((s.similarity for s in [*shown_sections, *extra] if s.similarity is not None),
                   default=None)
        extra = [s for s in extra if best is None or (s.similarity is not None
                                                      and s.similarity >= best - EXTRA_REACH)]
    sections = [*shown_sections, *extra]
    prior = (priors([s.similarity for s in sections], len(shown_sections))
             if rules.similarity_prior else None)
    picks = select(question, [s.content for s in sections], max_units,
                   headings=[s.heading_path or s.title or "" for s in sections],
                   pack_idf=pack_idf, rules=rules, priors=prior)
    if not picks:
        return "The pack has no passages relevant to this question.", [], []
    lines, quotes, used = [note, ""], [], []
    number = {i: int(s.citation or 0) for i, s in enumerate(shown_sections)}
    last = max((int(s.citation or 0) for s in cited), default=0)
    for p in picks:
        s = sections[p.section]
        if p.section not in number:  # an extra section: the next free number
            last += 1
            number[p.section] = last
            used.append(dataclasses.replace(s, citation=last, context_span=None))
        where = f", {s.pack}" if s.pack else ""  # several packs: [n, pack], as Claude writes
        lines.append(f"- {shown(p.unit)} [{number[p.section]}{where}]")
        quotes.append((number[p.section], s.content[p.unit.start:p.unit.end]))
    return "\n".join(lines), quotes, used
