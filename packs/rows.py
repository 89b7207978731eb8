"""The rows the query side reads from a pack's database: the fields every view of a
section starts with (`SectionFields`: a search row, a ranked result, a browsed section),
one section as a `Row`, an entity as the pack stores it (`Entity`), and the primary-key
lookup statement (`by_key`) that fetches a few sections (packs/db.py runs it)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SectionFields:
    """What names a section and holds its text, in the order every section view has it."""

    id: str
    article_id: str
    url: str
    title: str
    heading_path: str
    content: str


@dataclass
class Entity:
    """An entity as the pack's entities table holds it (the build resolves them, the
    browser reads them back)."""

    id: str
    name: str
    type: str
    description: str
    aliases: list[str] = field(default_factory=list)


@dataclass
class Row(SectionFields):
    """One section as the query side sees it."""

    word_count: int
    position: int
    similarity: float | None = None  # cosine similarity to the question
    keyword_similarity: float | None = None  # of the keyword vector, when searched
    bm25: float | None = None
    via: str | None = None  # the article/section this row was reached from (graph queries)
    vscore: float | None = None  # vector score: similarity, or the content/keyword blend


def row_of(values: list, start: int = 0) -> Row:
    """The Row of the 8 columns of SECTION_COLS at `start` of a result row."""
    v = values[start:start + 8]
    return Row(id=v[0], article_id=v[1], url=v[2] or "", title=v[3] or "",
               heading_path=v[4] or "", content=v[5] or "", word_count=int(v[6] or 0),
               position=int(v[7] or 0))


def blend(row: Row, w: float) -> float:
    """The row's vector score: its similarity, or with keyword vectors searched the mix
    (1 - w) * content + w * keyword similarity."""
    if w <= 0 or row.keyword_similarity is None:
        return row.similarity or 0.0
    return (1.0 - w) * (row.similarity or 0.0) + w * row.keyword_similarity


def by_key(returns: str, n: int) -> str:
    """The statement that looks up n sections by primary key ($k0..$k{n-1}) and returns
    `returns` for each one found, as UNION ALL of n lookups."""
    return " UNION ALL ".join(f"MATCH (s:Section {{id: $k{i}}}) RETURN {returns}"
                              for i in range(n))
