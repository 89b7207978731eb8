"""The items of an overview question's whole-pack answer (packs/retrieval/whole_pack.py):
one per page of the question's region (its title, lead sentence and the headings of its
sections), or for a question about the pack itself ("what is this documentation about?")
its topics (packs/topics.py).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from packs import text as text_rules
from packs.retrieval.whole_pack_items import Item, Sec, sec_of, spans
from packs.retrieval.whole_pack_region import SECTIONS_OF, region

MAX_ITEMS = 20  # overview items (a list question's: whole_pack_rank.Limits)

SECTIONS_BY_ID = ("MATCH (s:Section) WHERE s.id IN $ids RETURN s.article_id, s.id, s.url, "
                  "s.title, s.heading_path, s.content, s.position")

_PACK_ITSELF = re.compile(r"\b(?:this|the) (?:pack|documentation|docs|site|corpus|book)\b"
                          r"(?: (?:about|cover|covers))?\s*\??\s*$|\b(?:main )?topics of "
                          r"(?:this|the) (?:pack|documentation|docs|site|corpus|book)\b", re.I)


def about_itself(question: str) -> bool:
    """Whether a question asks what the pack itself is about ("What is this pack about?",
    "What are the main topics of the docs?")."""
    return _PACK_ITSELF.search(question) is not None


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


def topic_sections(pack: Any, limit: int) -> list[Sec]:
    """The sections of the pack's topics, at most `limit`: each topic's best section, then
    each one's second, ... (topics largest first); [] for a pack built before topics. What
    a model reads to say what the pack is about (packs/retrieval/whole_pack_claude.py)."""
    from packs.topics import has_topics, pack_topics

    if not has_topics(pack.db):
        return []
    lists = [[s.id for s in t.sections] for t in pack_topics(pack)]
    ids = list(dict.fromkeys(sid for k in range(max(map(len, lists), default=0))
                             for ids in lists if k < len(ids) for sid in [ids[k]]))[:limit]
    by_id = {r[1]: sec_of(r) for r in pack.db.read(SECTIONS_BY_ID, {"ids": ids})} if ids else {}
    return [by_id[i] for i in ids if i in by_id]


HEADINGS = 12  # the headings an overview names of a page ...
FIRST_HEADINGS = 16  # ... and of its first page, often the one the question is about


def overview_items(pack: Any, result: Any) -> list[Item]:
    """One item per page of the question's region: its title, lead sentence and headings;
    for a question about the pack itself ("what is this documentation about?"), its
    topics (`topic_items`)."""
    if about_itself(result.question):
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
                          1.0 / (1 + k), heads[:FIRST_HEADINGS if k == 0 else HEADINGS]))
    return items


# Headings that frame a page rather than name one of its things.
_FRAME = re.compile(r"^(?:before you begin|what's next|what is next|next steps|cleaning up|"
                    r"clean ?up|objectives|summary|overview|introduction|examples?|see also|"
                    r"further reading|prerequisites|conclusion)\b", re.I)

# A heading that says what to do: the sections under it are its steps, not things of the
# kind it names ("Define Environment Variables for a Container" > "Using environment
# variables inside of your config"). Verbs that often open a noun phrase instead ("Update
# strategies", "Test Organization", "Access Modes") are not here.
_TASK = re.compile(
    r"^(?:define|create|configure|install|enable|disable|understand|deploy|verify|specify|"
    r"expose|troubleshoot|debug|manage|migrate|modify|implement|assign|distribute|inject|"
    r"declare|communicate|connect|translate|add|remove|delete|apply|choose|handle|extract|"
    r"get|make|how|why|when|using|creating|configuring|adding|running|installing|enabling|"
    r"understanding|deploying|checking|verifying|writing|removing|deleting|updating|"
    r"specifying|accessing|exposing|viewing|getting|making|handling|choosing|applying|"
    r"building|testing|debugging|troubleshooting|managing|migrating|changing|modifying|"
    r"implementing|storing|reading|starting|stopping|passing|calling|returning|sharing|"
    r"sending|trying|extracting)\b", re.I)


def heading_items(by_id: dict[str, Sec], head: str | None) -> list[tuple[float, str, Sec]]:
    """(section weight, heading, section) of each region section whose own heading sits
    under one that names the noun a list question asks for (`head`, its stem): under
    "Hardening Guide - Authentication Mechanisms", "Static token file" and "Bootstrap
    tokens" are authentication mechanisms; under "Advanced Types", "The Never Type That
    Never Returns" is a type. One per heading (its best-weighted section), none that frames
    its page ("What's next", `_FRAME`), none under a heading that says what to do
    (`_TASK`), none whose section has no quotable span."""
    if not head:
        return []
    best: dict[tuple[str, str], Sec] = {}
    for sec in by_id.values():
        parts = [p.strip() for p in sec.heading_path.split(" > ")]
        if len(parts) < 2 or not parts[-1] or _FRAME.match(parts[-1]):
            continue
        if (head not in {text_rules.stem(w) for w in text_rules.words(parts[-2])}
                or _TASK.match(parts[-2])):
            continue
        key = (sec.article_id, parts[-1])
        if (key not in best or sec.weight > best[key].weight) and spans(sec):
            best[key] = sec
    return [(sec.weight, name, sec) for (_, name), sec in best.items()]
