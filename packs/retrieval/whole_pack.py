"""Questions about the whole pack: list, across and overview questions answered as a list
of items, each with its own citation (a verbatim span of its section, checked by
packs/citations.py like any other).

    kind = question_kind("Which kubectl subcommands do the debugging pages use?")  # "list"
    text, quotes, sections = answer(pack, result, kind)

`question_kind` (packs/retrieval/question_kinds.py, a learned model over the question's
words and the hand rules' reading) reads the question: "overview", "across", "list", or
None for a question about one thing (the single-passage answer).

Candidates come through the graph, not only the search's top sections:
- the **region** (packs/retrieval/whole_pack_region.py): the pages of the search's first
  sections, the pages of one family beside them (a chapter `src/ch20-` or a folder
  `concepts/scheduling-eviction/`: the first page's, unless the question names another
  clearly better), and the pages the lead page links to; for a list or across question
  also up to SPREAD_SECTIONS sections of other pages that a deeper search ranks high
  (whole_pack_region.py `spread`: the items of such a question are spread over the pack);
- **list / across**: the entities those sections mention (MENTIONS), and the entities whose
  name starts with an identifier of the question (`kubectl`, `kubeadm`), each scored by
  the rank of the sections that mention it, its rarity in the pack (an entity every page
  names is no item; one the question names in a row is its subject, no item), whether
  its type is the kind asked for (subcommands: command; flags: flag; ...) and whether it
  appears in a list of a first section; for a list question also the first cells of
  table rows under a first header that names what is asked (`table_heads`), the headings
  under one that names it (`heading_items`: "Static token file" under "Authentication
  Mechanisms", quoted by its section's first passage) and the code
  spans of the region that no entity names (`code_span_items`) and the commands its code
  blocks run with a program the question names (`command_items`) and the names the whole
  pack writes beside the noun asked for ("the `x` annotation": whole_pack_beyond.py); what
  the question sets aside ("besides plain kubectl commands", `set_aside`) is no name to
  search, its items weigh ASIDE_WEIGHT and the region's search leaves it out
  (`searched_question`); each item is quoted by the sentence (or list item, table row) of
  its best section that names it; of these `candidates` (hand order), the learned item
  model (whole_pack_rank.py) picks which the answer lists, and the less likely ones it
  names after them (`list_items`);
- **overview**: the region's pages, each item the page's title with its lead sentence and
  the headings of its sections; for the pack itself ("what is this pack about"), its
  topic map (packs/topics.py): packs/retrieval/whole_pack_overview.py.

The pieces that need no database (sections and items, their quotes, `page_items`,
`table_heads`, `set_aside`) are packs/retrieval/whole_pack_items.py; the commands of the
region's code blocks, packs/retrieval/whole_pack_commands.py.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection
from typing import Any

from packs import text as text_rules
from packs.citations import locate, no_marker, normalise
from packs.markdown import fence_spans, list_marker
from packs.retrieval.question_kinds import question_kind
from packs.retrieval.segment import one_line
from packs.retrieval.units import untagged
from packs.retrieval.whole_pack_beyond import program_sections, typed_candidates
from packs.retrieval.whole_pack_commands import (
    command_items,
    programs_asked,
    prompted_programs,
    subcommands_first,
)
from packs.retrieval.whole_pack_items import (
    HEAD_WEIGHT,
    Item,
    Sec,
    code_span_items,
    config_key_items,
    key_line,
    names_subject,
    page_items,
    quote_of,
    sec_of,
    set_aside,
    shown_span,
    spans,
    table_heads,
)
from packs.retrieval.whole_pack_overview import SECTIONS_BY_ID, heading_items, overview_items
from packs.retrieval.whole_pack_questions import across_terms, head_stem, wanted_types
from packs.retrieval.whole_pack_rank import CANDIDATES, ItemModel, pick
from packs.retrieval.whole_pack_rank import load as load_items
from packs.retrieval.whole_pack_region import pack_idf, question_vector, region_sections

QUERY_TYPE = "whole_pack_retrieval_only"
COMMAND = text_rules.stem("commands")  # the head noun of a question about commands
OUTSIDE_WEIGHT = 0.3  # a section outside the region that names a question identifier
TABLE_WEIGHT = 3.0  # a table row's first cell under a header naming what is asked
ASIDE_WEIGHT = 0.25  # an item named after what the question sets aside ("besides kubectl")
QUOTED_ITEMS = 4  # a list answer quotes its first bullets and names the others with their [n]

SECTION_MENTIONS = ("MATCH (s:Section)-[:MENTIONS]->(e:Entity) WHERE s.id IN $ids "
                    "RETURN s.id, e.id, e.name, e.type")
ENTITY_DF = ("MATCH (e:Entity)<-[:MENTIONS]-(s:Section) WHERE e.id IN $ids "
             "RETURN e.id, count(*)")
NAMED_LIKE = ("MATCH (e:Entity)<-[:MENTIONS]-(s:Section) WHERE lower(e.name) STARTS WITH $p "
              "RETURN s.id, e.id, e.name, e.type LIMIT 400")
COUNT_SECTIONS = "MATCH (s:Section) RETURN count(*)"


def map_sections(pack: Any, result: Any, limit: int) -> list[Sec]:
    """The sections a model reads for a whole-pack question (packs/retrieval/
    whole_pack_claude.py): the region's, best weighted first, at most `limit`."""
    kind = question_kind(result.question) or "list"
    by_id = region_sections(pack, result, kind)
    return sorted(by_id.values(), key=lambda s: (-s.weight, s.article_id, s.position))[:limit]


def _named_mentions(pack: Any, ident: str, by_id: dict[str, Sec],
                    mentions: dict[str, list[tuple[str, str, str]]]) -> None:
    """Add to `mentions` the entities named like `ident` ("flag" → "flag --x ...") and
    their sections, those outside the region to `by_id` (weighted OUTSIDE_WEIGHT), read
    at once (one scan each cost 143 ms a list question on the Kubernetes pack)."""
    named = pack.db.read(NAMED_LIKE, {"p": ident.lower() + " "})
    missing = list(dict.fromkeys(sid for sid, *_ in named if sid not in by_id))
    outside = ({r[1]: r for r in pack.db.read(SECTIONS_BY_ID, {"ids": missing})}
               if missing else {})
    for sid, eid, name, etype in named:
        if sid not in by_id:
            if sid not in outside:
                continue
            by_id[sid] = sec_of(outside[sid])
            by_id[sid].weight = OUTSIDE_WEIGHT
        mentions[eid].append((sid, name, etype))


def candidates(pack: Any, result: Any, kind: str) -> tuple[list[Item], list[Item]]:
    """(page items, candidate items) of a list or across question (see the module
    docstring): for an across question each page's best passage (`page_items`; [] for a
    list question), and the graph's and region's items in the hand order of their scores,
    at most whole_pack_rank.CANDIDATES, each with its quote."""
    by_id = region_sections(pack, result, kind)
    cited = {s.id for s in result.cited()}
    per_page = (page_items(by_id, result.question, scaffold=across_terms(result.question),
                           idf=pack_idf(pack)) if kind == "across" else [])
    mentions: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for sid, eid, name, etype in pack.db.read(SECTION_MENTIONS, {"ids": list(by_id)}):
        mentions[eid].append((sid, name, etype))
    words = [w for w in text_rules.words(result.question) if w not in text_rules.STOP_WORDS]
    head = head_stem(result.question)
    aside = set_aside(result.question, head)
    # The words items are searched by, less what the question sets aside ("besides kubectl").
    seeds = [x for x in list(dict.fromkeys([*text_rules.identifiers(result.question),
                                            *words]))[:8]
             if not set(text_rules.terms(x)) & aside]
    for ident in seeds:
        _named_mentions(pack, ident, by_id, mentions)
    if not mentions:
        return per_page, []
    total = pack.db.read(COUNT_SECTIONS, {})[0][0] or 1
    df = dict(pack.db.read(ENTITY_DF, {"ids": list(mentions)}))
    wanted, asked = wanted_types(result.question), text_rules.terms(result.question)
    scored, typed = [], set()
    for eid, places in mentions.items():
        name, etype = places[0][1], places[0][2]
        named = text_rules.terms(name)
        if names_subject(named, asked) or len(name) > 60:
            continue  # the question's own subject is no item of it
        sids = list(dict.fromkeys(p[0] for p in places))
        pages = {by_id[s].article_id for s in sids}
        score = sum(by_id[s].weight for s in sids)
        score *= math.log(1 + total / (1 + df.get(eid, 1)))
        if wanted and etype in wanted:
            score *= 2.0
        if head and head in named:
            score *= HEAD_WEIGHT  # "init containers" for "what kinds of containers"
        if kind == "across":
            score *= 1 + 0.5 * (len(pages) - 1)
        if named and named[0] in aside:
            score *= ASIDE_WEIGHT
        order = sorted(sids, key=lambda s: (-by_id[s].weight, s not in cited))
        scored.append((score, name, [by_id[s] for s in order], etype, len(pages)))
    if kind == "list":  # code spans, table rows, headings: items the graph may lack
        programs = programs_asked(by_id, result.question, aside)
        scored += _unnamed(pack, by_id, result.question, {x[1].lower() for x in scored},
                           asked, head, programs, aside, total)
        known = {x[1].lower() for x in scored}
        typed, beside = typed_candidates(pack, by_id, result.question, known, asked, total,
                                         OUTSIDE_WEIGHT)
        scored = subcommands_first(scored + beside, programs)
    scored.sort(key=lambda x: (-x[0], x[1].lower()))
    if sum(x[3] in wanted for x in scored) >= 3:  # the kind asked for is there: it first
        scored.sort(key=lambda x: x[3] not in wanted and x[3] not in ("row", "typed", "heading"))
    items: list[Item] = []
    seen: set[str] = set()
    for score, name, secs, etype, n_pages in scored:
        if len(items) >= CANDIDATES:
            break
        if name.lower() in seen:
            continue
        sec, span = (secs[0], spans(secs[0])[0]) if etype == "heading" else quote_of(secs, name)
        if span is None and etype == "code":  # a key ("capacity:"): its line, however short
            sec, span = secs[0], key_line(secs[0], name)
        if span is None:
            continue
        seen.add(name.lower())
        items.append(Item(name, sec, span[0], span[1], score, etype=etype, pages=n_pages,
                          typed=name.lower() in typed))
    return per_page, items


def _unnamed(pack: Any, by_id: dict[str, Sec], question: str, known: set[str],
             asked: list[str], head: str | None, programs: set[str], aside: set[str],
             total: int) -> list[tuple]:
    """A list question's candidates that no entity of the graph names (`known`): the
    region's code spans, the commands it asks about (`programs`: `programs_asked`; for a
    question about commands that names no program, those of every program its code blocks
    run after a shell prompt: `prompted_programs`), the
    first cells of its tables' rows and its headings under one naming `head` (weighed as
    rows), each as (score, name, sections, type, pages); `head`: the question's head noun
    (`head_stem`); `aside`: what the question sets aside (`set_aside`)."""
    out: list[tuple] = []
    idf = pack_idf(pack)
    if idf is not None:
        for score, name, secs in code_span_items(by_id, known, asked, head, idf):
            out.append((score, name, secs, "code", len({s.article_id for s in secs})))
        if "setting" in wanted_types(question):  # fields, settings, keys: a manifest's keys
            spanned = known | {x[1].lower() for x in out}
            for score, name, secs in config_key_items(by_id, spanned, asked, head, idf):
                out.append((score, name, secs, "code", len({s.article_id for s in secs})))
        shown = by_id
        if programs:
            shown = program_sections(pack, by_id, programs, OUTSIDE_WEIGHT)
        elif head == COMMAND:  # "What other terminal commands ...": every program it runs
            programs = prompted_programs(by_id, aside)
        for score, name, secs in (command_items(shown, known, programs, asked, head, idf)
                                  if programs else []):
            out.append((score, name, secs, "command", len({s.article_id for s in secs})))
    rare = math.log(1 + total / 2)
    for weight, name, sec in table_heads(by_id, question, head):
        out.append((weight * rare * TABLE_WEIGHT, name, [sec], "row", 1))
    for weight, name, sec in heading_items(by_id, head):
        if name.lower() not in known:
            out.append((weight * rare * TABLE_WEIGHT, name, [sec], "heading", 1))
    return out


def list_items(pack: Any, result: Any, kind: str, above: str = "",
               model: ItemModel | None = None) -> tuple[list[Item], list[Item]]:
    """(the items a list or across question's answer lists, the less likely ones it names
    after them): its page items, then the candidates the learned item model (`model`, the
    shipped one by default) picks (packs/retrieval/whole_pack_rank.py); `above`: the text
    of the passages the answer quotes before the list."""
    per_page, found = candidates(pack, result, kind)
    if not found:
        return per_page, []
    sims = section_sims(pack, result, found)
    listed, more = pick(model or load_items(), found, result.question, kind, above, sims)
    return [*per_page, *listed], more


def section_sims(pack: Any, result: Any, items: list[Item]) -> dict[str, float]:
    """Section id → the similarity of the items' sections to the question (the pack's
    stored vectors: nothing is embedded but the question, when the search did not)."""
    return {r.id: float(r.similarity or 0.0) for r in pack.db.sections_by_id(
        list(dict.fromkeys(i.section.id for i in items)), question_vector(pack, result))}


def answer(pack: Any, result: Any, kind: str, numbers: dict[str, int] | None = None,
           quoted: Collection[str] = (), model: ItemModel | None = None, taken: int = 0,
           lead: str | None = None, listed: Collection[str] = ()
           ) -> tuple[str, list[tuple[int, str]], list[tuple[int, Sec]]]:
    """(answer text, quotes as (n, quote), the sections it adds with their [n]) of a
    whole-pack question; `numbers`: the [n] of sections already cited (others are numbered
    after them and after `taken`, the highest [n] another pack's sections took); `quoted`:
    what the answer already quotes above the list (the passages).
    Items that quote the same passage share one bullet ("**A**, **B**: ..."), which shows
    the clause that names them ("… " or " …" where the sentence goes on); an item whose
    passage is quoted above is named on one closing line with its [n], its passage not
    shown twice; a list question's bullets after its first QUOTED_ITEMS on one line, named
    with their [n] (a list of twenty quoted items ran to 500 words); the less likely items
    (whole_pack_rank's `more`) on a last line, named with their [n]; `model`: the item
    model (`list_items`); `lead`: what the list's first line says it is (by default, what
    `kind` lists); `listed`: the names (`normalise`d) another pack's list gave, not given
    again. ("", [], []) when the pack gives no item."""
    items, more = ((overview_items(pack, result), []) if kind == "overview"
                   else list_items(pack, result, kind, "\n".join(quoted), model))
    if not items:
        return "", [], []
    numbers = dict(numbers or {})
    added: list[tuple[int, Sec]] = []

    def number(sec: Sec) -> int:  # its [n]: a section not cited yet is numbered after all
        if sec.id not in numbers:
            numbers[sec.id] = max([taken, *numbers.values()]) + 1
            added.append((numbers[sec.id], sec))
        return numbers[sec.id]
    above = {normalise(q) for q in quoted}
    bullets: dict[tuple[str, int, int], list[Item]] = {}
    named: list[str] = []
    named_quotes = []
    for item in items:
        sec = item.section
        quote = sec.content[item.start:item.end]
        if normalise(item.name) in listed or locate(quote, sec.content) is None:
            continue
        n = number(sec)
        folded = normalise(quote)
        if kind != "overview" and any(folded in q for q in above):  # an overview's page
            named.append(f"{item.bold()} [{n}]")  # keeps its bullet: what it covers
            named_quotes.append((n, quote))
        else:
            bullets.setdefault((sec.id, item.start, item.end), []).append(item)
    if not bullets and not named:
        return "", [], []
    lead = lead or {"overview": "What the pack covers on this, page by page",
                    "across": "Across the pack's pages", "list": "The items the pack names"}[kind]
    lines = [f"{lead}, each quoting the section it comes from:", ""]
    quotes = []
    groups = list(bullets.values())
    shown_groups = groups[:QUOTED_ITEMS] if kind == "list" else groups
    for group in shown_groups:
        n = numbers[group[0].section.id]
        line, quote = _bullet(group, n)
        lines.append(line)
        quotes.append((n, quote))
    if len(groups) > len(shown_groups):  # the later items: named, each with its citation
        later = [(item, numbers[item.section.id]) for g in groups[len(shown_groups):]
                 for item in g]
        lines += ["", "More items: " + ", ".join(f"{i.bold()} [{n}]" for i, n in later)]
        quotes += [(n, i.section.content[slice(*shown_span([i]))]) for i, n in later]
    if named:  # a paragraph of its own, not a continuation of the last bullet
        lines += ["", f"Also named in the passages above: {', '.join(named)}"]
    said = normalise("\n".join([*quoted, *lines]))
    less, less_quotes = [], []
    for item in more:  # the less likely items: named, each with its citation
        sec = item.section
        if normalise(item.name) in said or normalise(item.name) in listed or locate(
                sec.content[item.start:item.end], sec.content) is None:
            continue
        n = number(sec)
        less.append(f"{item.bold()} [{n}]")
        a, b = shown_span([item])
        less_quotes.append((n, sec.content[a:b]))
    if less:
        lines += ["", f"Less likely items, named in the same sections: {', '.join(less)}"]
    return "\n".join(lines), [*quotes, *named_quotes, *less_quotes], added


def _bullet(group: list[Item], n: int) -> tuple[str, str]:
    """(the bullet, its quote) of items that quote the same passage, cited as [n]: their
    names, then the clause that names them (`shown_span`)."""
    sec, first = group[0].section, group[0]
    a, b = shown_span(group)
    quote = sec.content[a:b]
    # The quote as a reader sees it (one line, no blockquote markers, no tags outside
    # code: as an answer unit shows it), without its list marker ("**Pods** are ...").
    shown = untagged(one_line(quote))
    marker = list_marker(shown)
    shown = shown[marker.end():] if marker else shown
    if any(x <= first.start and first.end <= y for x, y in fence_spans(sec.content)):
        shown = f"`{shown}`" if "`" not in shown else shown  # a line of a code block
    shown = no_marker(shown)
    shown = f"{'… ' if a > first.start else ''}{shown}{' …' if b < first.end else ''}"
    extras = [e for item in group for e in item.extra]
    extra = f" (covers: {'; '.join(extras)})" if extras else ""
    label = ", ".join(item.bold() for item in group)
    return f"- {label}{extra}: {shown} [{n}]", quote
