"""ask()'s offline answer to a whole-pack question (packs/retrieval/whole_pack.py), for one
pack or for several (a PackSet): the single-passage answer first, then the list of items,
each citing its own section. A list or across question's passages are chosen with a
larger budget (`LIST_PASSAGES`, packs/answer.py `_offline`).

    text, quotes, query_type, result = offline_answer(pack, result, (passages, quotes))

With several packs, each pack that the search cited gives its own list, from its own
database and graph, in the order the fused search ranked the packs' first sections; where
more than one pack gives one, each list opens with the pack's label. A pack's items come
from the region of its own search, so they are the ones it lists alone. Every section a list
adds is numbered after all those cited so far, so no two packs' sources share an [n], and
carries its pack's label like the search's own. A name one pack's list gives, the lists after
it do not give again (the Rust book and the Cargo book both name `cargo build`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection
from typing import Any

from packs.citations import normalise
from packs.result import RankedSection
from packs.retrieval.extractive import NO_MODEL_NOTE
from packs.retrieval.question_kinds import question_kind
from packs.retrieval.whole_pack import QUERY_TYPE, answer
from packs.retrieval.whole_pack_above import counted_above, listed_above
from packs.retrieval.whole_pack_overview import about_itself, topic_items
from packs.retrieval.whole_pack_questions import searched_question

_BOLD = re.compile(r"\*\*([^*]+)\*\*")  # an item's name in a list (whole_pack `Item.bold`)
# A list or across question's passages, before its list: at most this many units in this
# many words (a question about one thing: the reader's 5 in 110). On the 32 whole-pack dev
# and spent sets item recall rose on 29 and fell on none (0.418 -> 0.446) for 150 words
# more (p50 340 -> 497); 8 units in 220 words: 0.436 (results/issue48ba_list_passages.md).
# Words spent here find more items than words spent quoting list items (whole_pack
# QUOTED_ITEMS): 16 units in 480 words with 4 quoted items rose on 97 of the 578 spent
# questions and fell on 10 (Kubernetes 0.397 -> 0.420, Rust book 0.339 -> 0.357) for 100
# words more (p50 523 -> 625 and 515 -> 627); 8 quoted items cost 47 words more for 0.003
# (results/issue48bd_list_budget.md).
LIST_PASSAGES = (16, 480)
# ... read from every section of the cited pages, not only those within extractive's
# EXTRA_REACH (0.2) of the best similarity: a list's items sit in other sections of the pages
# it cites (of the items of spent whole-pack rounds 19 to 21, 94 of 447 Kubernetes and 95 of
# 315 Rust book items were missed so; 60 and 40 sat in a cited section). Spent rounds 0.424
# -> 0.426 (17 up, 16 down) and 0.356 -> 0.358 (10 up, 5 down), dev 0.832 -> 0.835 and
# 0.581 -> 0.589; for a question about one thing the wider reach costs (spent answer rows
# 0.704 -> 0.701, 0.646 -> 0.644), so it stays there.
LIST_REACH = 1.0  # in effect every section of the page (cosine similarities)
NEXT_SECTION = ("MATCH (a:Article)-[:HAS_SECTION]->(s:Section), (a)-[:HAS_SECTION]->(t:Section) "
                "WHERE s.id = $id AND (t.position > s.position OR "
                "t.position = s.position AND t.chunk > s.chunk) "
                "RETURN t.content ORDER BY t.position, t.chunk LIMIT 1")


def passage_budget(question: str) -> dict[str, float]:
    """The limits of the passages that answer `question` before its list (`LIST_PASSAGES`
    and `LIST_REACH` for a list or across question; none for another: the reader's own)."""
    if question_kind(question) not in ("list", "across"):
        return {}
    return {**dict(zip(("max_units", "max_words"), LIST_PASSAGES)), "reach": LIST_REACH}


def offline_answer(pack: Any, result: Any, single: tuple[str, list] | None = None
                   ) -> tuple[str, list, str, Any] | None:
    """(answer, quotes, QUERY_TYPE, the result whose sources list every section cited) of
    a whole-pack question, or None when the question is about one thing, the search was
    gated or no pack gives a list (`member_answer`). `single`: the single-passage answer on
    the same result ((text, quotes), its sections among `result`'s): it comes first, so a
    question read as a list question still has the passages that answer it as one."""
    kind = question_kind(result.question)
    if kind is None or result.gated:
        return None
    above = single[1] if single is not None else None
    if hasattr(pack, "packs"):  # a PackSet
        found = _several(pack, result, kind, above)
    elif getattr(pack, "db", None) is not None:
        found = member_answer(pack, result, kind, above)
    else:
        return None
    if found is None:
        return None
    text, quotes, listed = found
    if single is not None:
        text, quotes = f"{single[0].rstrip()}\n\n{text}", [*single[1], *quotes]
    return text, quotes, QUERY_TYPE, dataclasses.replace(
        result, related=[*result.related, *listed])


def topic_maps(pack: Any, result: Any) -> tuple[str, list, str, Any] | None:
    """(answer, quotes, QUERY_TYPE, its result) of a question about the pack itself ("What
    is this pack about?"): its topic map alone, gated or not (the passages its words find,
    "bin packing", say nothing of it, and the gate reads them), for a PackSet each pack's
    that has one, the packs the search cited first; None for another question, or when no
    pack has a topic map (a pack built before them: its pages answer, `offline_answer`)."""
    if question_kind(result.question) != "overview" or not about_itself(result.question):
        return None
    if hasattr(pack, "packs"):  # a PackSet
        cited = [label for label, _ in cited_members(pack, result)]
        members = sorted(zip(pack.labels, pack.packs), key=lambda m: (
            cited.index(m[0]) if m[0] in cited else len(cited)))
    elif getattr(pack, "db", None) is not None:
        members = [(None, pack)]
    else:
        return None
    members = [(label, p) for label, p in members if topic_items(p)]
    blank = dataclasses.replace(result, sections=[], related=[], gated=False)
    blocks, quotes, listed, taken = [], [], [], 0
    for label, member in members:
        text, more, added = answer(member, blank, "overview", taken=taken,
                                   lead="The pack's topics")
        blocks.append((label, text))
        quotes += more
        listed += [_listed(s, n, label) for n, s in added]
        taken = max([taken, *(n for n, _ in added)])
    if not blocks:
        return None
    return (f"{NO_MODEL_NOTE}\n\n{_joined(blocks)}", quotes, QUERY_TYPE,
            dataclasses.replace(blank, related=listed))


def _joined(blocks: list[tuple[str | None, str]]) -> str:
    """The lists of several packs, each under "From the pack NAME:"; one list alone."""
    if len(blocks) == 1:
        return blocks[0][1]
    return "\n\n".join(f"From the pack {label}:\n\n{text}" for label, text in blocks)


def cited_members(packs: Any, result: Any) -> list[tuple[str, Any]]:
    """(label, pack) of each pack of a PackSet that `result` cites, in the order of its
    first cited section (the fused search's ranking of the packs)."""
    by_label = dict(zip(packs.labels, packs.packs))
    order = dict.fromkeys(s.pack for s in result.cited() if s.pack is not None)
    return [(label, by_label[label]) for label in order]


def _several(packs: Any, result: Any, kind: str, above: list | None
             ) -> tuple[str, list, list] | None:
    """`member_answer` of each pack of a PackSet that the search cited, best first, joined."""
    cited = result.cited()
    vectors = result.question_vector if isinstance(result.question_vector, dict) else {}
    taken = max((int(s.citation) for s in cited), default=0)
    blocks, quotes, listed = [], [], []
    names: set[str] = set()  # what the lists before gave: a name is listed by one pack
    for label, member in cited_members(packs, result):
        own = {int(s.citation) for s in cited if s.pack == label}
        sub = dataclasses.replace(
            result, sections=[s for s in result.sections if s.pack == label],
            related=[s for s in result.related if s.pack == label],
            question_vector=vectors.get(label))
        mine = None if above is None else [(n, q) for n, q in above if n in own]
        found = member_answer(member, sub, kind, mine, taken, label,
                              quoted=[q for _, q in above or ()], listed=names)
        if found is None:
            continue
        text, more_quotes, added = found
        names |= {normalise(m.strip("`")) for m in _BOLD.findall(text)}
        blocks.append((label, text))
        quotes += more_quotes
        listed += added
        taken = max([taken, *(int(s.citation) for s in added)])
    if not blocks:
        return None
    return _joined(blocks), quotes, listed


def member_answer(pack: Any, result: Any, kind: str, above: list | None, taken: int = 0,
                  label: str | None = None, quoted: list[str] | None = None,
                  listed: Collection[str] = ()) -> tuple[str, list, list] | None:
    """(the list's text, its quotes, the sections it adds as `result`'s related ones) of a
    whole-pack question of `kind` on one pack, whose sections in `result` are those cited
    so far; None when the pack gives no item, or when the passages above already quote the
    whole list a list question asks for (`listed_above`). `above`: the quotes (n, text) of
    the passages before the list from this pack's sections (None: no passages); `quoted`:
    the texts of all of them (default: `above`'s); `taken`: the highest [n] cited so far
    (new sections are numbered after it); `label`: the pack's label in a PackSet;
    `listed`: the names another pack's list gave (whole_pack.answer)."""
    if kind == "list" and above is not None:
        shown = {int(s.citation): s for s in [*result.cited(), *result.related]
                 if s.citation is not None}

        def following(n: int) -> str:  # the page's text after [n]'s section
            rows = pack.db.read(NEXT_SECTION, {"id": shown[n].id}) if n in shown else []
            return rows[0][0] if rows else ""
        if listed_above(result.question, above,
                        {n: s.content for n, s in shown.items()}, following) or \
                counted_above(result.question, above):
            return None  # the passages quote the whole list asked for: they answer it
    numbers = {s.id: int(s.citation) for s in result.cited() if s.citation is not None}
    # The region is read from the pack's own search (as with one pack, where the fused
    # ranking of several would move it), less what the question sets aside.
    searched = searched_question(result.question)
    region_of = (result if searched == result.question and label is None else
                 dataclasses.replace(pack.search(searched, **result.filters),
                                     question=result.question))
    if quoted is None:
        quoted = [q for _, q in above or ()]
    text, quotes, added = answer(pack, region_of, kind, numbers, quoted, taken=taken,
                                 listed=listed)
    if not text:
        return None
    return text, quotes, [_listed(s, n, label) for n, s in added]


def _listed(s: Any, n: int, label: str | None) -> RankedSection:
    """A section a list adds, as the answer's source [n] (of the pack `label`)."""
    return RankedSection(id=s.id, article_id=s.article_id, url=s.url, title=s.title,
                         heading_path=s.heading_path, content=s.content, score=0.0, citation=n,
                         relation="whole_pack", stages=["whole_pack"], pack=label)
