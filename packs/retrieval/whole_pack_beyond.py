"""A list question's candidates from beyond the search's region: the names the pages write
beside the noun it asks for, anywhere in the pack ("the `kubernetes.io/change-cause`
annotation", "annotation `x`", "the Go language", "languages such as Ruby, Python, or
JavaScript"), and the sections that show the commands of a program it names.

    names = typed_names(pack, "Which well-known annotations do the docs use on objects?")
    # {"kubernetes.io/change-cause": ("kubernetes.io/change-cause", ["sec-3", "sec-9"]), ...}

The region (packs/retrieval/whole_pack_region.py) holds the pages near the search's first
sections, but the items of a kind that the docs name in passing (annotations, flags,
traits, crates, languages) are spread over the whole pack. The database picks the sections
that write the noun in one of its forms (`head_forms`: "annotation", "annotations"), and
these patterns read them:
- a code span just before or after the noun ("`--release` flag", "annotation `x`"), the
  noun also as a link's text ("`InPlacePodVerticalScaling` [feature gate](/docs/...)"),
  after the word before it in the question when the noun has two ("feature gates": "the
  `X` feature gate"; `modifier`);
- a capitalised name between "the" and the noun ("the Summary trait");
- a list after the noun and "such as", "like", "including", "e.g.".
Each such name is a candidate of packs/retrieval/whole_pack.py `candidates` (its item
model reads `typed`: whether a name was written so); one no other source gives is added
(`typed_candidates`) when two sections write it so, or one the search ranks high, or one
beside the whole noun of two words (benchmarks/results/issue48ae_whole_noun.md).
`program_sections`: the sections the full-text index ranks first for
a program the question names (its commands are often shown on pages the search does not
reach).
"""

from __future__ import annotations

import math
import re
from typing import Any

from packs import text as text_rules
from packs.db import fts_query_text
from packs.retrieval.whole_pack_items import Sec, names_subject, sec_of
from packs.retrieval.whole_pack_overview import SECTIONS_BY_ID
from packs.retrieval.whole_pack_questions import head_phrase, head_stem

COMMAND_SECTIONS = 20  # sections searched for the commands of a program the question names
MAX_NAME = 60  # characters of a name read as an item
MAX_SECTIONS = 2000  # sections read for one question (a pack writes "type" everywhere)
MIN_SECTIONS = 2  # sections that write a name so, unless the search ranks one high


def sections_writing(n: int) -> str:
    """The sections whose lower-cased text contains one of `n` words ($w0 ...): those that
    may write a form of the noun asked for, for `typed_names` to match as whole words here
    (Kuzu's regexp_matches on every section's text took 150 ms a question on the
    Kubernetes pack, this 60 ms with the same sections)."""
    return ("MATCH (s:Section) WHERE "
            + " OR ".join(f"lower(s.content) CONTAINS $w{i}" for i in range(n))
            + " RETURN s.id, s.content")


_CODE = r"`[^`\n]{1,60}`"
_CAP = r"[A-Z][\w+#-]*(?:\.[\w+#-]+)*"
_NAME = rf"(?:{_CODE}|\*\*[^*\n]{{1,40}}\*\*|{_CAP})"
_SEP = r"(?:,\s+and\s+|,\s+or\s+|,\s+|\s+and\s+|\s+or\s+)"
_CUE = r"(?i:such as|like|including|e\.g\.,?|for example,?)"


def head_forms(question: str) -> set[str]:
    """The singular and plural of the noun a list question asks for (`head_stem`), as the
    question writes it ("Which flags ..." → {"flag", "flags"}); empty when it asks for
    none."""
    stem = head_stem(question)
    if not stem:
        return set()
    for word in re.findall(r"[A-Za-z][\w-]*", question):
        low = word.lower()
        if text_rules.stem(low) != stem:
            continue
        if low.endswith("ies"):
            return {low, low[:-3] + "y"}
        if low.endswith("es"):
            return {low, low[:-2], low[:-1]}
        return {low, low[:-1]} if low.endswith("s") else {low, low + "s"}
    return set()


def modifier(question: str) -> str | None:
    """The word before the noun a list question asks for, when it is part of the noun
    ("feature" of "feature gates", "environment" of "environment variables"): the pages
    write "the `X` feature gate", not "the `X` gate"; None when there is none or it is a
    stop word."""
    words = [w.lower() for w in head_phrase(question)]
    return words[-2] if len(words) >= 2 and words[-2] not in text_rules.STOP_WORDS else None


def _patterns(forms: set[str], before_head: str | None = None, whole: bool = False
              ) -> list[re.Pattern]:
    """The patterns of a name written beside the noun (`forms`), after the word before it
    when there is one (`before_head`: "`X` [feature gate](...)", "the `X` environment
    variable"), which `whole` requires."""
    head = r"(?i:\b(?:" + "|".join(sorted(map(re.escape, forms), key=len, reverse=True)) + r")\b)"
    if before_head:
        head = rf"(?i:(?:\b{re.escape(before_head)}[ -]){'' if whole else '?'}){head}"
    before = rf"\[?{head}"  # the noun may be a link's text: "`X` [feature gate](/docs/...)"
    after = rf"{head}(?:\]\([^)\s]*\))?"  # "[annotation](/docs/...) `x`"
    return [re.compile(rf"(?P<n>{_CODE}) {before}"),
            re.compile(rf"\b(?i:the) (?P<n>{_CAP}|\*\*[^*\n]{{1,40}}\*\*) {before}"),
            re.compile(rf"{after}:? (?P<n>{_CODE})"),
            re.compile(rf"{after},? {_CUE} (?P<list>{_NAME}(?:{_SEP}{_NAME}){{0,8}})")]


def _names(match: re.Match) -> list[str]:
    written = match.groupdict().get("list")
    out = []
    for name in (re.split(_SEP, written) if written else [match.group("n")]):
        name = name.strip()
        if name[:1] in "`*":
            name = name.strip("`* ")
        elif name.lower() in text_rules.STOP_WORDS:
            continue  # "The" of a list's sentence, not a name
        if name and len(name) <= MAX_NAME:
            out.append(name)
    return out


def typed_names(pack: Any, question: str) -> dict[str, tuple[str, list[str], bool]]:
    """Lower-cased name → (the name as first written, the ids of the sections that write
    it beside the noun the question asks for, whether one writes it beside the whole noun
    of two words: "the `X` feature gate" for "Which feature gates ..."), for a list
    question; {} for another."""
    forms = head_forms(question)
    if not forms:
        return {}
    words = sorted(forms)
    written = re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")\b", re.ASCII)
    rows = [(sid, content) for sid, content in pack.db.read(
        sections_writing(len(words)), {f"w{i}": w for i, w in enumerate(words)})
        if written.search((content or "").lower())][:MAX_SECTIONS]
    found: dict[str, tuple[str, list[str], bool]] = {}
    before = modifier(question)
    wholly = _patterns(forms, before, whole=True) if before else []
    for k, pattern in enumerate(_patterns(forms, before)):
        for sid, content in rows:
            for match in pattern.finditer(content or ""):
                whole = bool(wholly) and wholly[k].match(content, match.start()) is not None
                for name in _names(match):
                    first, name_sids, was = found.get(name.lower(), (name, [], False))
                    if sid not in name_sids:
                        name_sids.append(sid)
                    found[name.lower()] = (first, name_sids, was or whole)
    return found


def typed_candidates(pack: Any, by_id: dict[str, Sec], question: str, known: set[str],
                     asked: list[str], total: int, outside: float
                     ) -> tuple[set[str], list[tuple]]:
    """(the lower-cased names written beside the noun asked for, the candidates among them
    no other source gives (`known`: lower-cased names), each as (score, name, sections,
    "typed", pages)). A candidate is written so in MIN_SECTIONS sections, or in one the
    search ranks high (in `by_id`, weighted over `outside`), or beside the whole noun of
    two words (`typed_names`: "the `NodeSwap` feature gate"); its score is the weight of
    those sections (a region section's own, `outside` for another, which joins `by_id`)
    times its rarity among the pack's `total` sections. The question's own subject is none.
    On the whole-pack dev2 and dev3 sets (benchmarks/results/issue48t_typed.md), names
    written so once elsewhere cost Kubernetes questions more items than they gave."""
    found = typed_names(pack, question)
    kept = {}
    for low, (name, sids, whole) in found.items():
        if low in known or names_subject(text_rules.terms(name), asked):
            continue
        # written so once, in a section the search ranks lower, beside a one-word noun:
        # more often noise than an item; beside the whole noun of two ("the `X` feature
        # gate") it is one
        if whole or len(sids) >= MIN_SECTIONS or any(s in by_id and by_id[s].weight > outside
                                                     for s in sids):
            kept[name] = sids
    missing = sorted({sid for sids in kept.values() for sid in sids if sid not in by_id})
    for row in pack.db.read(SECTIONS_BY_ID, {"ids": missing}) if missing else []:
        by_id[row[1]] = sec_of(row)
        by_id[row[1]].weight = outside
    out = []
    for name, sids in kept.items():
        secs = sorted((by_id[s] for s in sids if s in by_id), key=lambda s: -s.weight)
        if secs:
            score = sum(s.weight for s in secs) * math.log(1 + total / (1 + len(secs)))
            out.append((score, name, secs, "typed", len({s.article_id for s in secs})))
    return set(found), out


def program_sections(pack: Any, by_id: dict[str, Sec], programs: set[str], outside: float
                     ) -> dict[str, Sec]:
    """The region's sections and, for each command a question asks about (at most two:
    `programs_asked`), the COMMAND_SECTIONS sections the full-text index ranks first for
    its words ("kubectl config"), those outside the region weighted `outside`: a program's
    commands are often shown on pages the question's search does not reach (the Rust
    book's nightly appendix)."""
    out = dict(by_id)
    for program in sorted(programs)[:2]:
        for sid, art, url, title, heading, content, _, pos, *_ in pack.db.fts_raw(
                fts_query_text([program]), COMMAND_SECTIONS):
            if sid not in out:
                out[sid] = sec_of([art, sid, url, title, heading, content, pos])
                out[sid].weight = outside
    return out
