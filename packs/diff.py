"""What changed between two builds of a pack: pages, sections and entities.

Reads only the Parquet tables, so it works on any two build folders (or pack folders,
which resolve to their current build) without opening their databases. The tables are
read with Kuzu's `LOAD FROM` in an in-memory database, so the query runtime (no polars,
no pyarrow) can diff builds too: `kpack diff` and the explorer's /diff page.

Pages are compared by URL and content hash. Sections and entities by their
content-derived ids; an id that is gone while its place is taken is a change, not a
removal plus an addition: a section whose (URL, heading path, chunk) is in both builds
with another id was edited, an entity whose id (name and type) is in both with another
description or aliases was re-described.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from packs import format as fmt
from packs.cypher import file_literal

if TYPE_CHECKING:
    import polars as pl

# The columns each table is compared on; `diff_tables` accepts frames with fewer (a
# column that is absent compares as None).
COLUMNS: dict[str, tuple[str, ...]] = {
    fmt.ARTICLES: ("url", "content_hash"),
    fmt.SECTIONS: ("id", "url", "heading_path", "chunk"),
    fmt.ENTITIES: ("id", "name", "type", "description", "aliases"),
}
LISTED = 50  # names listed per kind of change (the counts are complete)

Rows = dict[str, list[dict]]


def _place(row: dict) -> tuple:
    return (row.get("url"), row.get("heading_path"), row.get("chunk"))


def _by_place(sections: dict[str, dict], ids: set[str]) -> dict[tuple, list[str]]:
    """The ids grouped by place, each group in id order; sections without a heading path
    (frames that lack the column) have no place and never pair up."""
    out: dict[tuple, list[str]] = {}
    for i in sorted(ids):
        place = _place(sections[i])
        out.setdefault(place if place[1] is not None else ("", i, None), []).append(i)
    return out


def _place_key(place: tuple) -> tuple:
    return tuple(str(x) for x in place)


def _entity_text(row: dict) -> tuple:
    return (row.get("description") or "", tuple(sorted(row.get("aliases") or ())))


def diff_rows(old: Rows, new: Rows) -> dict:
    """The pure core: `old`/`new` map "articles", "sections" and "entities" to rows (dicts
    with the COLUMNS of their table). Returns the counts and the lists behind them."""
    old_pages = {r["url"]: r.get("content_hash") for r in old[fmt.ARTICLES]}
    new_pages = {r["url"]: r.get("content_hash") for r in new[fmt.ARTICLES]}
    added = sorted(set(new_pages) - set(old_pages))
    removed = sorted(set(old_pages) - set(new_pages))
    changed = sorted(u for u in set(old_pages) & set(new_pages) if old_pages[u] != new_pages[u])

    old_sec = {r["id"]: r for r in old[fmt.SECTIONS]}
    new_sec = {r["id"]: r for r in new[fmt.SECTIONS]}
    gone = _by_place(old_sec, set(old_sec) - set(new_sec))
    came = _by_place(new_sec, set(new_sec) - set(old_sec))
    # A page may repeat a heading path: the removed and added sections of one place pair
    # up in id order, the rest stay removals or additions.
    edited = [(place, a, b) for place in sorted(set(gone) & set(came), key=_place_key)
              for a, b in zip(gone[place], came[place])]
    n_gone, n_came = sum(map(len, gone.values())), sum(map(len, came.values()))

    old_ent = {r["id"]: r for r in old[fmt.ENTITIES]}
    new_ent = {r["id"]: r for r in new[fmt.ENTITIES]}
    ent_added = set(new_ent) - set(old_ent)
    ent_removed = set(old_ent) - set(new_ent)
    ent_changed = {i for i in set(new_ent) & set(old_ent)
                   if _entity_text(new_ent[i]) != _entity_text(old_ent[i])}
    return {
        "pages": {"added": len(added), "changed": len(changed), "removed": len(removed),
                  "unchanged": len(new_pages) - len(added) - len(changed)},
        "sections": {"added": n_came - len(edited), "changed": len(edited),
                     "removed": n_gone - len(edited),
                     "unchanged": len(set(new_sec) & set(old_sec))},
        "entities": {"added": len(ent_added), "changed": len(ent_changed),
                     "removed": len(ent_removed)},
        "pages_added": added, "pages_changed": changed, "pages_removed": removed,
        "sections_changed": [{"url": p[0], "heading_path": p[1], "old_id": a, "new_id": b}
                             for p, a, b in edited[:LISTED]],
        "entities_added": sorted(new_ent[i]["name"] for i in ent_added)[:LISTED],
        "entities_changed": sorted(new_ent[i]["name"] for i in ent_changed)[:LISTED],
        "entities_removed": sorted(old_ent[i]["name"] for i in ent_removed)[:LISTED],
    }


def diff_tables(old: dict[str, pl.DataFrame], new: dict[str, pl.DataFrame]) -> dict:
    """`diff_rows` of polars frames (what the build holds in memory)."""
    def rows(frames: dict[str, pl.DataFrame]) -> Rows:
        out: Rows = {}
        for table, cols in COLUMNS.items():
            frame = frames[table]
            present = [c for c in cols if c in frame.columns]
            out[table] = [dict(zip(present, r)) for r in frame.select(present).iter_rows()]
        return out

    return diff_rows(rows(old), rows(new))


def read_rows(build_dir: Path) -> Rows:
    """The COLUMNS of a build's articles, sections and entities tables. PackFormatError
    when a table is missing or unreadable."""
    import kuzu

    # In memory: LOAD FROM streams the Parquet files, nothing is stored.
    db = kuzu.Database(buffer_pool_size=256 * 1024 * 1024)
    conn = kuzu.Connection(db)
    out: Rows = {}
    try:
        for table, cols in COLUMNS.items():
            path = build_dir / fmt.TABLES_DIR / f"{table}.parquet"
            if not path.is_file():
                raise fmt.PackFormatError(f"{build_dir}: no {fmt.TABLES_DIR}/{path.name}; "
                                          "not a complete build")
            try:
                result = conn.execute(f"LOAD FROM {file_literal(path)} RETURN {', '.join(cols)}")
            except RuntimeError as exc:
                raise fmt.PackFormatError(f"{path}: unreadable table: {exc}") from exc
            rows = []
            while result.has_next():
                rows.append(dict(zip(cols, result.get_next())))
            out[table] = rows
    finally:
        conn.close()
        db.close()
    return out


def diff_builds(old_dir: Path, new_dir: Path) -> dict:
    """Diff two build folders (see diff_rows for the result)."""
    return diff_rows(read_rows(old_dir), read_rows(new_dir))


def summary_line(diff: dict) -> str:
    p, s, e = diff["pages"], diff["sections"], diff["entities"]
    return (f"pages +{p['added']} ~{p['changed']} -{p['removed']} ({p['unchanged']} unchanged); "
            f"sections +{s['added']} ~{s.get('changed', 0)} -{s['removed']}; "
            f"entities +{e['added']} ~{e.get('changed', 0)} -{e['removed']}")
