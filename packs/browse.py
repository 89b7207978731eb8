"""Read-only lookups for looking inside a pack (the explorer, `kpack explore`): a section by
id with its page, entities, facts and linked pages; an entity with the sections that
mention it and its neighbourhood in the graph, page by page.

`KnowledgePack.browse` returns a `Browse` over the pack's database. Every statement is a
constant with `$parameters` (user text never becomes Cypher) and runs through
`PackDB.read`. Lists that can be long (an entity's mentions and neighbours, a section's
linked pages) come in pages of at most MAX_PAGE rows with their total count, so the most
connected entity of a large pack costs about what the least connected one does.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packs.rows import Entity, SectionFields

if TYPE_CHECKING:
    from packs.db import PackDB

MAX_PAGE = 100

SECTION = (
    "MATCH (s:Section {id: $id}) RETURN s.id, s.article_id, s.url, s.title, "
    "s.heading_path, s.content, s.word_count, s.position, s.chunk"
)
PAGE_SECTIONS = (
    "MATCH (a:Article {id: $id})-[:HAS_SECTION]->(s:Section) "
    "RETURN s.id, s.heading_path, s.position, s.chunk ORDER BY s.position, s.chunk"
)
# Pages linked from ("out") or to ("in") a page, each with its sections' ids and positions
# (the explorer links a page through its first section).
LINKED_PAGES = {
    "out": ("MATCH (a:Article {id: $id})-[:LINKS_TO]->(b:Article)-[:HAS_SECTION]->(s:Section) "
            "RETURN b.id, b.url, b.title, s.id, s.position, s.chunk"),
    "in": ("MATCH (a:Article {id: $id})<-[:LINKS_TO]-(b:Article)-[:HAS_SECTION]->(s:Section) "
           "RETURN b.id, b.url, b.title, s.id, s.position, s.chunk"),
}
SECTION_ENTITIES = (
    "MATCH (s:Section {id: $id})-[:MENTIONS]->(e:Entity) "
    "RETURN e.id, e.name, e.type ORDER BY e.name"
)
SECTION_FACTS = (
    "MATCH (e:Entity)-[:HAS_FACT]->(f:Fact) WHERE f.section_id = $id "
    "RETURN f.text, e.id, e.name ORDER BY f.text"
)
_ENTITY_COLS = "e.id, e.name, e.type, e.description, e.aliases"
ENTITY = f"MATCH (e:Entity {{id: $id}}) RETURN {_ENTITY_COLS}"
ENTITIES_NAMED = (
    f"MATCH (e:Entity) WHERE lower(e.name) = $name OR list_contains(e.aliases, $raw) "
    f"RETURN {_ENTITY_COLS} ORDER BY e.name, e.type"
)
ENTITIES_LIKE = (
    f"MATCH (e:Entity) WHERE contains(lower(e.name), $text) "
    f"RETURN {_ENTITY_COLS} ORDER BY size(e.name), e.name LIMIT $limit"
)
MENTIONS = (
    "MATCH (s:Section)-[:MENTIONS]->(e:Entity {id: $id}) "
    "RETURN s.id, s.url, s.title, s.heading_path "
    "ORDER BY s.url, s.position, s.chunk SKIP $skip LIMIT $limit"
)
MENTION_COUNT = "MATCH (s:Section)-[:MENTIONS]->(e:Entity {id: $id}) RETURN count(*)"
ENTITY_FACTS = (
    "MATCH (e:Entity {id: $id})-[:HAS_FACT]->(f:Fact) "
    "RETURN f.text, f.section_id ORDER BY f.text LIMIT $limit"
)
ENTITY_FACT_COUNT = "MATCH (e:Entity {id: $id})-[:HAS_FACT]->(f:Fact) RETURN count(*)"
# Neighbours in either direction, the most strongly tied first (the number of relations
# between the two, then the name), so that a page of them is the most telling part.
NEIGHBOURS = (
    "MATCH (e:Entity {id: $id})-[r:RELATED_TO]-(o:Entity) WHERE o.id <> $id "
    "WITH o, count(*) AS weight, min(r.relation) AS relation "
    "RETURN o.id, o.name, o.type, weight, relation "
    "ORDER BY weight DESC, o.name, o.id SKIP $skip LIMIT $limit"
)
NEIGHBOUR_COUNT = (
    "MATCH (e:Entity {id: $id})-[:RELATED_TO]-(o:Entity) WHERE o.id <> $id "
    "RETURN count(DISTINCT o.id)"
)
DEGREES = (
    "MATCH (e:Entity)-[:RELATED_TO]-(o:Entity) WHERE o.id <> e.id "
    "RETURN e.id, e.name, e.type, count(DISTINCT o.id) AS d ORDER BY d DESC, e.name"
)
EDGES_AMONG = (
    "MATCH (a:Entity)-[r:RELATED_TO]->(b:Entity) WHERE a.id IN $ids AND b.id IN $ids "
    "AND a.id <> b.id RETURN DISTINCT a.id, b.id, r.relation LIMIT $limit"
)
FACTS_BY_TEXT = (
    "MATCH (e:Entity)-[:HAS_FACT]->(f:Fact) WHERE f.text IN $texts "
    "RETURN f.text, f.section_id, e.id, e.name"
)


@dataclass
class Section(SectionFields):
    word_count: int
    position: int
    chunk: int


@dataclass
class Page:
    """One page of a long list: `items`, and `total` items in all from `offset`."""

    items: list
    total: int
    offset: int
    limit: int

    @property
    def next_offset(self) -> int | None:
        end = self.offset + len(self.items)
        return end if end < self.total else None


def _entity(row: list) -> Entity:
    return Entity(id=row[0], name=row[1] or "", type=row[2] or "",
                  description=row[3] or "", aliases=list(row[4] or []))


def _bounds(offset: int, limit: int) -> tuple[int, int]:
    return max(int(offset), 0), min(max(int(limit), 1), MAX_PAGE)


def chunk_labels(rows: list) -> list[tuple[str, str]]:
    """(id, label) of (id, heading path, position, chunk) rows in document order: the
    heading path, with "(part 2 of 3)" for each chunk of a section cut in several (a page
    lists them, and three identical headings say nothing of which is which)."""
    parts = Counter((r[1] or "", r[2]) for r in rows)
    seen: Counter = Counter()
    out = []
    for sid, path, position, _ in rows:
        key = (path or "", position)
        seen[key] += 1
        out.append((sid, f"{key[0]} (part {seen[key]} of {parts[key]})" if parts[key] > 1
                    else key[0]))
    return out


class Browse:
    """The lookups of one open pack (thread-safe: PackDB serialises its statements)."""

    def __init__(self, db: PackDB) -> None:
        self.db = db
        self._lock = threading.Lock()
        self._degrees: list[tuple[str, str, str, int]] | None = None

    def section(self, section_id: str) -> Section | None:
        """The section with this id, or None."""
        rows = self.db.read(SECTION, {"id": section_id})
        if not rows:
            return None
        r = rows[0]
        return Section(id=r[0], article_id=r[1] or "", url=r[2] or "", title=r[3] or "",
                       heading_path=r[4] or "", content=r[5] or "", word_count=int(r[6] or 0),
                       position=int(r[7] or 0), chunk=int(r[8] or 0))

    def page_sections(self, article_id: str) -> list[tuple[str, str]]:
        """(id, heading path) of every section of a page, in document order; the chunks of
        a long section are told apart (`chunk_labels`)."""
        return chunk_labels(self.db.read(PAGE_SECTIONS, {"id": article_id}))

    def linked_pages(self, article_id: str, direction: str, limit: int = MAX_PAGE
                     ) -> Page:
        """Pages linked from (`direction="out"`) or to ("in") a page: items are dicts
        {article_id, url, title, section_id (its first section)}, ordered by title."""
        first: dict[str, tuple] = {}
        for aid, url, title, sid, pos, chunk in self.db.read(LINKED_PAGES[direction],
                                                             {"id": article_id}):
            key = (int(pos or 0), int(chunk or 0), sid)
            if aid not in first or key < first[aid][0]:
                first[aid] = (key, url or "", title or "")
        items = sorted(({"article_id": aid, "url": url, "title": title, "section_id": key[2]}
                        for aid, (key, url, title) in first.items()),
                       key=lambda p: (p["title"].lower(), p["url"]))
        _, limit = _bounds(0, limit)
        return Page(items=items[:limit], total=len(items), offset=0, limit=limit)

    def section_entities(self, section_id: str) -> list[Entity]:
        """The entities a section mentions, by name (without descriptions)."""
        return [Entity(id=r[0], name=r[1] or "", type=r[2] or "", description="")
                for r in self.db.read(SECTION_ENTITIES, {"id": section_id})]

    def section_facts(self, section_id: str) -> list[dict]:
        """Facts drawn from a section: {text, entity_id, entity}."""
        return [{"text": r[0], "entity_id": r[1], "entity": r[2]}
                for r in self.db.read(SECTION_FACTS, {"id": section_id})]

    def entity(self, entity_id: str) -> Entity | None:
        rows = self.db.read(ENTITY, {"id": entity_id})
        return _entity(rows[0]) if rows else None

    def entities_named(self, name: str) -> list[Entity]:
        """Entities whose name is `name` (any case) or that have it as an alias; one name
        can have several types, hence several entities."""
        return [_entity(r) for r in self.db.read(ENTITIES_NAMED, {"name": name.lower(),
                                                                   "raw": name})]

    def find_entities(self, text: str, limit: int = 50) -> list[Entity]:
        """Entities whose name contains `text` (any case), shortest names first."""
        text = text.strip().lower()
        if not text:
            return []
        _, limit = _bounds(0, limit)
        return [_entity(r) for r in self.db.read(ENTITIES_LIKE, {"text": text,
                                                                  "limit": limit})]

    def mentions(self, entity_id: str, offset: int = 0, limit: int = 20) -> Page:
        """The sections that mention an entity, a page at a time: items are dicts {id, url,
        title, heading_path}, ordered by URL and position."""
        offset, limit = _bounds(offset, limit)
        rows = self.db.read(MENTIONS, {"id": entity_id, "skip": offset, "limit": limit})
        total = self.db.read(MENTION_COUNT, {"id": entity_id})[0][0]
        items = [{"id": r[0], "url": r[1] or "", "title": r[2] or "",
                  "heading_path": r[3] or ""} for r in rows]
        return Page(items=items, total=int(total), offset=offset, limit=limit)

    def entity_facts(self, entity_id: str, limit: int = 50) -> Page:
        """An entity's facts ({text, section_id}), the first `limit` by text."""
        _, limit = _bounds(0, limit)
        rows = self.db.read(ENTITY_FACTS, {"id": entity_id, "limit": limit})
        total = self.db.read(ENTITY_FACT_COUNT, {"id": entity_id})[0][0]
        return Page(items=[{"text": r[0], "section_id": r[1]} for r in rows],
                    total=int(total), offset=0, limit=limit)

    def neighbours(self, entity_id: str, offset: int = 0, limit: int = 40) -> Page:
        """An entity's neighbours through RELATED_TO (either direction), a page at a time,
        the most strongly tied first: items are dicts {id, name, type, weight (relations
        between the two), relation (one of their labels)}."""
        offset, limit = _bounds(offset, limit)
        rows = self.db.read(NEIGHBOURS, {"id": entity_id, "skip": offset, "limit": limit})
        total = self.db.read(NEIGHBOUR_COUNT, {"id": entity_id})[0][0]
        items = [{"id": r[0], "name": r[1] or "", "type": r[2] or "", "weight": int(r[3]),
                  "relation": r[4] or ""} for r in rows]
        return Page(items=items, total=int(total), offset=offset, limit=limit)

    def edges_among(self, entity_ids: list[str], limit: int = 200) -> list[tuple[str, str, str]]:
        """(source id, target id, relation) of relations between the given entities, at
        most `limit` (a page of neighbours drawn as a graph, not a star)."""
        if not entity_ids:
            return []
        return [(r[0], r[1], r[2] or "") for r in
                self.db.read(EDGES_AMONG, {"ids": list(entity_ids), "limit": int(limit)})]

    def degrees(self) -> list[tuple[str, str, str, int]]:
        """(id, name, type, neighbours) of every entity with a neighbour, the most
        connected first (computed once per open pack)."""
        with self._lock:
            if self._degrees is None:
                self._degrees = [(r[0], r[1] or "", r[2] or "", int(r[3]))
                                 for r in self.db.read(DEGREES, {})]
            return self._degrees

    def fact_sources(self, texts: list[str], section_ids: list[str]) -> dict[str, dict]:
        """Fact text → {section_id} of the section among `section_ids` it was drawn from
        (the facts of a search result come from its sections). Format 3 packs read the
        sections' precomputed graphs (primary-key lookups); older packs search the facts
        by text (`facts_by_text`, which also names each fact's entity)."""
        if not texts:
            return {}
        if not self.db.has_graph:
            return self.facts_by_text(texts)
        wanted, out = set(texts), {}
        graphs = self.db.section_graphs(list(section_ids))
        for sid in section_ids:
            for text in graphs.get(sid, {}).get("facts", []):
                if text in wanted:
                    out.setdefault(text, {"section_id": sid})
        return out

    def facts_by_text(self, texts: list[str]) -> dict[str, dict]:
        """Fact text → {section_id, entity_id, entity} for the texts that are facts of the
        pack (the first one found when a text repeats)."""
        out: dict[str, dict] = {}
        if not texts:
            return out
        for text, sid, eid, name in self.db.read(FACTS_BY_TEXT, {"texts": list(texts)}):
            out.setdefault(text, {"section_id": sid, "entity_id": eid, "entity": name})
        return out
