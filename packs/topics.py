"""The map of a pack's topics, as the query side reads it (`kpack topics`, the explorer's
Topics page, the MCP `topics` tool, overview answers).

    for t in pack_topics(pack):            # largest topic first
        print(t.title, [e.name for e in t.entities], [c["quote"] for c in t.citations])

A topic is a community of the pack's entity graph computed by the build (tasks/topics.py):
a title, its top entities and sections, and a digest whose every line cites a span of a
section. Each citation is re-checked here against the section's stored text with the
answer's rules (packs/citations.py), so `verified` means what it means in an answer.
Packs built before topics have none (`[]`; `has_topics` says so). Every statement is a
constant with `$parameters`, run through `PackDB.read`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from packs import citations as cite_mod

HAS_TOPICS = "CALL show_tables() WHERE name = 'Topic' RETURN count(*)"
TOPICS = ("MATCH (t:Topic) RETURN t.id, t.title, t.rank, t.size, t.sections, t.entity_names, "
          "t.digest, t.digest_kind, t.citations ORDER BY t.rank LIMIT $limit")
TOPIC = ("MATCH (t:Topic {id: $id}) RETURN t.id, t.title, t.rank, t.size, t.sections, "
         "t.entity_names, t.digest, t.digest_kind, t.citations")
TOPIC_ENTITIES = ("MATCH (e:Entity)-[r:IN_TOPIC]->(t:Topic) WHERE t.id IN $ids AND r.rank < $k "
                  "RETURN t.id, e.id, e.name, e.type, r.rank ORDER BY t.id, r.rank")
TOPIC_SECTIONS = ("MATCH (t:Topic)-[r:COVERS]->(s:Section) WHERE t.id IN $ids AND r.rank < $k "
                  "RETURN t.id, s.id, s.url, s.heading_path, r.rank ORDER BY t.id, r.rank")
CITED_SECTIONS = ("MATCH (s:Section) WHERE s.id IN $ids "
                  "RETURN s.id, s.url, s.heading_path, s.content")
TOP_K = 8


@dataclass
class TopicEntity:
    id: str
    name: str
    type: str


@dataclass
class TopicSection:
    id: str
    url: str
    heading_path: str


@dataclass
class Topic:
    """One topic: `citations` are dicts of packs/citations.py's fields (n, url, section_id,
    heading_path, quote, start, end, verified)."""

    id: str
    title: str
    rank: int
    size: int
    sections_total: int
    digest: str
    digest_kind: str
    entities: list[TopicEntity] = field(default_factory=list)
    sections: list[TopicSection] = field(default_factory=list)
    citations: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def has_topics(db: Any) -> bool:
    """Whether the pack's database holds a topic map (packs built before it do not)."""
    rows = db.read(HAS_TOPICS, {})
    return bool(rows and rows[0][0])


def _topic(row: list) -> Topic:
    tid, title, rank, size, sections, _names, digest, kind, cites = row
    t = Topic(tid, title or "", int(rank or 0), int(size or 0), int(sections or 0),
              digest or "", kind or "")
    t.citations = json.loads(cites or "[]")
    return t


def _fill(db: Any, found: list[Topic], k: int, pack_name: str | None) -> list[Topic]:
    if not found:
        return found
    by_id = {t.id: t for t in found}
    ids = list(by_id)
    for tid, eid, name, etype, _ in db.read(TOPIC_ENTITIES, {"ids": ids, "k": k}):
        by_id[tid].entities.append(TopicEntity(eid, name, etype))
    for tid, sid, url, heading, _ in db.read(TOPIC_SECTIONS, {"ids": ids, "k": k}):
        by_id[tid].sections.append(TopicSection(sid, url, heading))
    wanted = sorted({c["section_id"] for t in found for c in t.citations})
    texts = {r[0]: r for r in db.read(CITED_SECTIONS, {"ids": wanted})} if wanted else {}
    for t in found:
        checked = []
        for c in t.citations:
            row = texts.get(c["section_id"])
            content = row[3] or "" if row else ""
            quote = content[c["start"]:c["end"]] if row else c.get("quote", "")
            span = cite_mod.locate(quote, content) if row else None
            checked.append({"n": c["n"], "pack": pack_name, "url": row[1] if row else None,
                            "section_id": c["section_id"],
                            "heading_path": row[2] if row else None, "quote": quote,
                            "start": span[0] if span else None,
                            "end": span[1] if span else None, "verified": span is not None})
        t.citations = checked
    return found


def pack_topics(pack: Any, limit: int = 100, k: int = TOP_K) -> list[Topic]:
    """The pack's topics, largest first (at most `limit`), each with its top `k` entities
    and sections and its digest's citations checked; [] for a pack built before topics."""
    if not has_topics(pack.db):
        return []
    found = [_topic(r) for r in pack.db.read(TOPICS, {"limit": int(limit)})]
    return _fill(pack.db, found, k, getattr(pack.manifest, "name", None))


def topic(pack: Any, topic_id: str, k: int = 50) -> Topic | None:
    """One topic by id with its top `k` entities and sections, or None."""
    if not has_topics(pack.db):
        return None
    rows = pack.db.read(TOPIC, {"id": topic_id})
    return _fill(pack.db, [_topic(rows[0])], k, pack.manifest.name)[0] if rows else None
