"""The items of an overview question's whole-pack answer (packs/retrieval/whole_pack.py):
one per page of the question's region (its title, lead sentence and the headings of its
sections), or for a question about the pack itself ("what is this documentation about?")
its topics (packs/topics.py).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from packs.retrieval.whole_pack_items import Item, Sec, sec_of, spans
from packs.retrieval.whole_pack_region import region

MAX_ITEMS = 20  # overview items (a list question's: whole_pack_rank.Limits)

SECTIONS_OF = ("MATCH (a:Article)-[:HAS_SECTION]->(s:Section) WHERE a.id IN $ids "
               "RETURN a.id, s.id, s.url, s.title, s.heading_path, s.content, s.position "
               "ORDER BY a.id, s.position, s.chunk")
SECTIONS_BY_ID = ("MATCH (s:Section) WHERE s.id IN $ids RETURN s.article_id, s.id, s.url, "
                  "s.title, s.heading_path, s.content, s.position")

_PACK_ITSELF = re.compile(r"\b(?:this|the) (?:pack|documentation|docs|site|corpus|book)\b"
                          r"(?: (?:about|cover|covers))?\s*\??\s*$|\b(?:main )?topics of "
                          r"(?:this|the) (?:pack|documentation|docs|site|corpus|book)\b", re.I)


def topic_items(pack: Any) -> list[Item]:
    """The pack's topic map as items (packs/topics.py): each topic's title with the first
    quote of its digest ([] for a pack built before topics)."""
    from packs.topics import has_topics, pack_topics

    if not has_topics(pack.db):
        return []
    items = []
    for t in pack_topics(pack, MAX_ITEMS):
        c = next((c for c in t.citations if c["verified"]), None)
        rows = pack.db.read(SECTIONS_BY_ID, {"ids": [c["section_id"]]}) if c else []
        if rows:
            extra = [e.name for e in t.entities[:6]]
            items.append(Item(t.title, sec_of(rows[0]), c["start"], c["end"], 1.0, extra))
    return items


def overview_items(pack: Any, result: Any) -> list[Item]:
    """One item per page of the question's region: its title, lead sentence and headings;
    for a question about the pack itself ("what is this documentation about?"), its
    topics (`topic_items`)."""
    if _PACK_ITSELF.search(result.question):
        found = topic_items(pack)
        if found:
            return found
    arts, _ = region(pack, result, family_only=True)
    pages: dict[str, list[Sec]] = defaultdict(list)
    for row in pack.db.read(SECTIONS_OF, {"ids": arts}) if arts else []:
        pages[row[0]].append(sec_of(row))
    items = []
    for k, art in enumerate(arts):
        secs = pages.get(art) or []
        lead = next(((s, sp) for s in secs for sp in spans(s)
                     if len(s.content[sp[0]:sp[1]].split()) >= 6), None)
        if lead is None:
            continue
        sec, (start, end) = lead
        heads = list(dict.fromkeys(h.split(" > ")[-1] for h in (s.heading_path for s in secs)
                                   if " > " in h))
        items.append(Item(sec.title or sec.heading_path.split(" > ")[0], sec, start, end,
                          1.0 / (1 + k), heads[:8]))
    return items
