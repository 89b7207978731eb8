"""The offline answer: the passages of the pack that best answer the question, best first.

Candidates (packs/retrieval/units.py) are the sentences, whole list items, table rows, short
paragraphs, small code blocks and lead-ins with the list, table or code they introduce, of
the cited sections and of the other sections of their pages whose similarity to the
question is within EXTRA_REACH of the best section's (`extra`: the page a question is about
is usually cited, the section that answers it not always). A lead-in whose list or table
runs over LONG_WORDS words is read and shown as its `brief`: for a question that asks for
a list with the head of each item, else with the items that have a term of the question
whole and the others by their heads.

The learned reader (packs/retrieval/reader.py) scores them, with the pack's encoder for the
best few when it is given (`similarity`), and picks the units the answer quotes: for a
question that asks about two things (packs/retrieval/asks.py `parts`: "..., and which
...?", "the difference between A and B") the best unit for each first, then the best for
the whole question; whole units only, within the word budget. For a why question, a
picked sentence whose reason is the next sentence of its paragraph ("... This is because
...") is quoted with it, and the answer's first quote with the short sentence after it,
whatever it opens with (`with_reason`). Whatever the question, a picked sentence that opens
with a pronoun or a demonstrative ("This setting is for your safety ...") is quoted with the
sentence before it, so that it says what it points at (`with_antecedent`), while the
answer stays within the word budget.
Each is one bullet with its [n] ([n, pack] with several packs); a bullet whose value lives
in its section's heading or page title (a release, a version, a name the unit does not
write) opens with that heading. Each quote is the unit's span of its section, so
packs/citations.py verifies it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packs import text as text_rules
from packs.citations import no_marker
from packs.retrieval import asks, compare, reader, unit_store, unit_vectors
from packs.retrieval import reader_features as rf
from packs.retrieval.asks import question_types
from packs.retrieval.units import (
    LONG_WORDS,
    Unit,
    candidates,
    first_sentence,
    heading_only,
    segment,
)

if TYPE_CHECKING:
    import numpy as np

    from packs.result import RankedSection

__all__ = ["Pick", "Unit", "answer", "candidates", "first_sentence", "idf_of",
           "question_types", "segment", "select", "shown"]

EXTRA_REACH = 0.2  # another section of a cited page is read within this of the best similarity
HEADING_TYPES = ("number", "name", "person", "place")  # values a heading may hold for a unit

NO_MODEL_NOTE = ("Retrieval-only answer (no language model was used; set ANTHROPIC_API_KEY "
                 "for a synthesised answer).")
RETRIEVAL_ONLY_NOTE = f"{NO_MODEL_NOTE} The most relevant passages in the pack:"


@dataclass(frozen=True)
class Pick:
    section: int  # index into the sections given to select()
    unit: Unit
    score: float


def idf_of(vocabulary) -> Callable[[str], float]:
    """A word → IDF function over a pack's sections (a gate `Vocabulary`, whose terms are
    the gate's word forms); a compound ("kube-proxy") takes its rarest part's."""
    return lambda word: max((vocabulary.idf(p) for p in text_rules.gate_terms(word)),
                            default=0.0)


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


def units_of(question: str, passages: Sequence[rf.Passage]) -> list[tuple[int, Unit]]:
    """(passage index, unit) of every candidate of `passages`, long lead-ins shortened."""
    listing = "list" in question_types(question)
    asked = set(text_rules.terms(question))
    return [(i, _shortened(u, listing, asked)) for i, p in enumerate(passages)
            if not heading_only(p.content, p.heading)
            for u in unit_store.candidates(p.content)]


def part_passages(passages: Sequence[rf.Passage], similarities: Sequence[float | None]
                  ) -> list[rf.Passage]:
    """`passages` as one part of the question sees them: each with its similarity to that
    part, the cited ones ranked by it (a question about two things is searched as a whole,
    and its sections' ranks and similarities favour the thing it asks first)."""
    cited = sorted((i for i, p in enumerate(passages) if p.rank is not None),
                   key=lambda i: -(similarities[i] if similarities[i] is not None else -2.0))
    rank = {i: r for r, i in enumerate(cited)}
    return [dataclasses.replace(p, similarity=sim, rank=rank.get(i))
            for i, (p, sim) in enumerate(zip(passages, similarities))]


def select(question: str, texts: Sequence[str] | Sequence[rf.Passage],
           max_units: int | None = None, per_section: int | None = None,
           headings: Sequence[str] | None = None,
           pack_idf: Callable[[str], float] | None = None, max_words: int | None = None,
           similarity: reader.Similarity | None = None,
           weights: reader.Reader | None = None,
           part_similarity: Callable[[list[str]], Sequence[Sequence[float | None]]] | None = None,
           unit_similarity: Callable[[int], np.ndarray | None] | None = None
           ) -> list[Pick]:
    """The units that answer `question` best, in answer order, from `texts` (the
    sections' contents, best section first, with their `headings` paths when given; or
    `Passage`s, which carry headings, titles, similarities and ranks). `pack_idf` maps a
    word to its IDF in the pack (see `idf_of`); `similarity`: see reader.rank; `weights`:
    the reader (the shipped one by default); `part_similarity(parts)`: for each part of a
    question about several things (asks.py `parts`), each passage's similarity to it,
    else the parts read the passages as the whole question does; `unit_similarity(i)`:
    passage i's units' similarities to the question (unit_vectors.similarity; None, or a
    passage without them: the reader's plain model). The limits default to the
    reader's. [] when no section has a candidate."""
    passages = [t if isinstance(t, rf.Passage) else
                rf.Passage(t, heading=(headings[i] if headings else ""), rank=i)
                for i, t in enumerate(texts)]
    model = weights or reader.load()
    units = units_of(question, passages)
    if not units:
        return []
    x = rf.features(rf.analyse(question), passages, units, pack_idf)
    asked = asks.parts(question)
    part_sims = part_similarity(asked) if part_similarity and asked else [None] * len(asked)
    parts = [rf.features(rf.analyse(p, question),
                         part_passages(passages, sims) if sims is not None else passages,
                         units, pack_idf)
             for p, sims in zip(asked, part_sims)]
    model, x, parts = reader.with_units(model, x, parts, None if unit_similarity is None
                                        else unit_vectors.aligned(units, unit_similarity))
    limits = reader.budget(dataclasses.replace(
        model.limits, **{k: v for k, v in (("max_units", max_units), ("per_section", per_section),
                                           ("max_words", max_words)) if v is not None}),
        several=bool(parts))
    term_w = rf.term_weights(question, [rf.unit_terms_of(u) for _, u in units], pack_idf)
    paired = compare.things(question) if len(parts) == 2 else None
    first = [] if paired is None else [
        lambda us, a=a, b=b: compare.leader(a, b, us) for a, b in (paired, paired[::-1])]
    types = question_types(question)
    chosen = reader.choose(model, x, units, term_w, reader.memo(similarity, units), parts, limits,
                           listing="list" in types, first=first)
    picks = [Pick(units[s.index][0], units[s.index][1], s.score) for s in chosen]
    taken = {(p.section, p.unit.start) for p in picks}  # a joined quote keeps its start
    if "why" in types:
        picks = [with_reason(p, units, passages, taken, lead=k == 0)
                 for k, p in enumerate(picks)]
    room = limits.max_words - sum(len(p.unit.display.split()) for p in picks)
    out = []
    for p in picks:  # within the answer's word budget, best quote first
        q = with_antecedent(p, units, passages, taken)
        extra = len(q.unit.display.split()) - len(p.unit.display.split())
        if extra <= room:
            room -= extra
            p = q
        out.append(p)
    return out


# A sentence that leans on the one before it: it opens with a pronoun or a demonstrative
# ("This setting is for your safety because ...", "It then ...").
_POINTS_BACK = re.compile(r"^(?:this|that|these|those|it|its|they|their|such|then|so)\b", re.I)
ANTECEDENT_WORDS = 35  # the most words of the sentence a leaning quote is shown with


def with_antecedent(pick: Pick, units: Sequence[tuple[int, Unit]],
                    passages: Sequence[rf.Passage], taken: set[tuple[int, int]]) -> Pick:
    """A picked sentence that opens with a pronoun or a demonstrative, quoted with the
    sentence before it in its paragraph (of ANTECEDENT_WORDS words at most, and not picked
    itself), so that the quote says what "this" is: "Deleting or scaling a StatefulSet down
    does not delete the volumes associated with the StatefulSet. This setting is for your
    safety ..." `taken`: the picks' (section, start)."""
    i, u = pick.section, pick.unit
    if u.kind != "sentence" or not _POINTS_BACK.match(u.display):
        return pick
    before = [v for j, v in units if j == i and v.kind == "sentence" and v.end <= u.start]
    if not before:
        return pick
    prev = max(before, key=lambda v: v.end)
    if (not _one_paragraph(passages[i].content[prev.end:u.start]) or (i, prev.start) in taken
            or len(prev.display.split()) > ANTECEDENT_WORDS):
        return pick
    return dataclasses.replace(pick, unit=_joined(prev, u, picked=u))


# A sentence that gives the reason for the one before it: "This is because ...", "This is
# to ensure ...", "That's why ...", "The reason is ...".
_REASON_NEXT = re.compile(r"^(?:this|that|it)(?: is|'s|’s| was) (?:because|so|to|done|"
                          r"required|needed|necessary|why|due)\b|^(?:because|the reason)\b",
                          re.I)
LEAD_NEXT_WORDS = 40  # the most words of the sentence after a why answer's first quote


def with_reason(pick: Pick, units: Sequence[tuple[int, Unit]], passages: Sequence[rf.Passage],
                taken: set[tuple[int, int]], lead: bool = False) -> Pick:
    """For a why question, a picked sentence that gives no reason itself, followed in its
    paragraph by one that gives the reason for it ("... the CronJob may not be scheduled.
    This is because the CronJob controller checks things every 10 seconds."), quoted with
    that sentence: the answer says the why whole. The `lead` pick (the answer's first) is
    quoted with the next sentence of its paragraph whatever that opens with, when it runs
    to LEAD_NEXT_WORDS words at most: a book gives its reasons without saying so ("... we
    want to borrow the struct rather than take ownership of it. This way, `main` retains
    its ownership"). `taken`: the picks' (section, start), a sentence already picked is not
    quoted twice."""
    i, u = pick.section, pick.unit
    content = passages[i].content
    if u.kind != "sentence" or asks.has("why", u, content[u.start:u.end], set()):
        return pick
    after = [v for j, v in units if j == i and v.kind == "sentence" and v.start >= u.end]
    if not after:
        return pick
    nxt = min(after, key=lambda v: v.start)
    if (not _one_paragraph(content[u.end:nxt.start]) or (i, nxt.start) in taken
            or not (_REASON_NEXT.match(nxt.display)
                    or (lead and len(nxt.display.split()) <= LEAD_NEXT_WORDS))):
        return pick
    return dataclasses.replace(pick, unit=_joined(u, nxt, picked=u))


def _one_paragraph(gap: str) -> bool:
    """Whether the text between two sentences keeps them in one paragraph: white space
    with no blank line (a blank line ends a paragraph, as in Markdown)."""
    return not gap.strip() and _BLANK_LINE.search(gap) is None


_BLANK_LINE = re.compile(r"\n[ \t]*\n")


def _joined(first: Unit, second: Unit, picked: Unit) -> Unit:
    """Two sentences of a paragraph, one after the other, as one sentence unit, in the
    block and group of the one `picked`."""
    return Unit(first.start, second.end, "sentence", f"{first.display} {second.display}",
                block=picked.block, group=picked.group)


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
        lead = no_marker(lead)
        if unit.inner == "code":
            return lead + _fenced(rest)
        if unit.inner in ("item", "row"):
            items = no_marker(rest)
            return lead + "\n" + "\n".join("  " + line for line in items.splitlines())
        return no_marker(f"{lead} {rest}")
    return no_marker(unit.display)


# A version or release as headings write them ("Kubernetes v1.31", "Go 1.22", "2024.1").
_VERSION = re.compile(r"(?<![\w.])v?\d+(?:\.\d+)+")


def heading_value(question: str, unit: Unit, raw: str, passage: rf.Passage) -> str | None:
    """The section's heading path (or page title) when it holds the value the question asks
    for and the unit does not (a release in the page title, a setting's name in its
    heading), else None."""
    kinds = [k for k in HEADING_TYPES if k in question_types(question)]
    where = passage.heading or passage.title
    if not kinds or not where:
        return None
    asked = {w.strip(".,;:?!\"'()").lower() for w in question.split()}
    head = Unit(0, len(where), "sentence", where)
    if _title_case(where):  # every word capitalised: no name stands out as a person's or place's
        kinds = [k for k in kinds if k not in ("person", "place")]
    for k in kinds:
        if k == "number" and _novel_version(where, asked) and not _novel_version(raw, asked):
            return where
        if asks.has(k, head, where, asked) and not asks.has(k, unit, raw, asked):
            return where
    return None


def _title_case(heading: str) -> bool:
    """Whether a heading path capitalises most of its words that are not stop words, the
    first of each heading aside ("Futures and the Async Syntax > Our First Async Program";
    not "Later years in Paris")."""
    words = [w for part in heading.split(">") for w in part.split()[1:]
             if w[:1].isalpha() and w.lower() not in text_rules.STOP_WORDS]
    return len(words) >= 2 and sum(w[0].isupper() for w in words) >= 0.6 * len(words)


def _novel_version(text: str, asked: set[str]) -> bool:
    return any(v.lower() not in asked for v in _VERSION.findall(text))


def bullet(question: str, unit: Unit, raw: str, passage: rf.Passage) -> str:
    """A unit as its bullet shows it, without the "- " and the [n]: opened by its
    section's heading when the value the question asks for lives there (`heading_value`);
    `raw`: the unit's span of the section."""
    head = heading_value(question, unit, raw, passage)
    return ("*" + no_marker(head) + "*: " if head else "") + shown(unit)


def passages_of(cited: Sequence[RankedSection], extra: Sequence[RankedSection] = (),
                reach: float = EXTRA_REACH) -> tuple[list[RankedSection], list[rf.Passage]]:
    """(the sections read, as passages): every cited section, then the `extra` sections
    whose similarity is within `reach` of the best one's."""
    best = max((s.similarity for s in [*cited, *extra] if s.similarity is not None),
               default=None)
    extra = [s for s in extra if best is None or (s.similarity is not None
                                                  and s.similarity >= best - reach)]
    sections = [*cited, *extra]
    return sections, [rf.Passage(s.content, s.heading_path or "", getattr(s, "title", "") or "",
                                 None if s.similarity is None or math.isnan(s.similarity)
                                 else float(s.similarity), i if i < len(cited) else None)
                      for i, s in enumerate(sections)]


def answer(question: str, cited: Sequence[RankedSection], max_units: int | None = None,
           note: str = RETRIEVAL_ONLY_NOTE, pack_idf: Callable[[str], float] | None = None,
           extra: Sequence[RankedSection] = (), similarity=None,
           weights: reader.Reader | None = None, part_similarity=None,
           max_words: int | None = None, reach: float = EXTRA_REACH, unit_similarity=None
           ) -> tuple[str, list[tuple[int, str]], list[RankedSection]]:
    """(answer, quotes, extra sections quoted): the units of the cited sections and of the
    `extra` sections (the rest of their pages, not in the context) that best answer the
    question (`select`: at most `max_units` units in `max_words` words, the reader's limits
    by default), in answer order, one bullet each with its [n] ([n, pack] with several
    packs), under the `note` line. `similarity(sections, texts)`: the cosine
    similarities of unit texts to the question, each embedded with the encoder of its
    section's pack (None: the reader's first model alone); `part_similarity(sections,
    parts)`: each section's similarity to each part of a question about several things;
    `reach`: an extra section is read within this of the best similarity;
    `unit_similarity(section)`: its units' similarities (unit_vectors.similarity). An extra
    section the answer quotes is numbered after the cited ones and returned (a copy,
    `citation` set) so that the caller lists it among the sources."""
    sections, passages = passages_of(cited, extra, reach)
    sims = None
    if similarity is not None:
        def sims(indices, texts):
            return similarity([sections[i] for i in indices], texts)
    per_part = None
    if part_similarity is not None:
        def per_part(parts):
            return part_similarity(sections, parts)
    picks = select(question, passages, max_units, pack_idf=pack_idf, similarity=sims,
                   weights=weights, part_similarity=per_part, max_words=max_words,
                   unit_similarity=unit_similarity and (lambda i: unit_similarity(sections[i])))
    if not picks:
        return "The pack has no passages relevant to this question.", [], []
    lines, quotes, used = [note, ""], [], []
    number = {i: int(s.citation or 0) for i, s in enumerate(cited)}
    last = max((int(s.citation or 0) for s in cited), default=0)
    for p in picks:
        s = sections[p.section]
        if p.section not in number:  # an extra section: the next free number
            last += 1
            number[p.section] = last
            used.append(dataclasses.replace(s, citation=last, context_span=None))
        where = f", {s.pack}" if s.pack else ""  # several packs: [n, pack], as Claude writes
        raw = s.content[p.unit.start:p.unit.end]
        lines.append(f"- {bullet(question, p.unit, raw, passages[p.section])} "
                     f"[{number[p.section]}{where}]")
        quotes.append((number[p.section], raw))
    return "\n".join(lines), quotes, used
