"""What changed between two builds of a pack: pages, sections and entities.

Reads only the Parquet tables, so it works on any two build folders (or pack folders,
which resolve to their current build) without opening Kuzu. Pages are compared by URL
and content hash; sections and entities by their content-derived ids, so an edited
section shows up as one removed and one added.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from packs import format as fmt
from packs.extras import BUILD_INSTALL, MissingExtraError

if TYPE_CHECKING:
    import polars as pl


def _table(build_dir: Path, name: str, columns: list[str]) -> pl.DataFrame:
    try:  # polars is a build dependency; the query runtime reads Kuzu, not Parquet
        import polars as pl
    except ImportError as exc:
        raise MissingExtraError(f"comparing builds reads their Parquet tables with polars, "
                                f"which the query runtime lacks: {BUILD_INSTALL}") from exc
    return pl.read_parquet(build_dir / fmt.TABLES_DIR / f"{name}.parquet", columns=columns)


def diff_tables(old: dict[str, pl.DataFrame], new: dict[str, pl.DataFrame]) -> dict:
    """The pure core: `old`/`new` map articles(url, content_hash), sections(id, url),
    entities(id, name) to frames. Returns counts and the lists behind them."""
    old_pages = dict(old["articles"].select("url", "content_hash").iter_rows())
    new_pages = dict(new["articles"].select("url", "content_hash").iter_rows())
    added = sorted(set(new_pages) - set(old_pages))
    removed = sorted(set(old_pages) - set(new_pages))
    changed = sorted(u for u in set(old_pages) & set(new_pages) if old_pages[u] != new_pages[u])
    old_sec, new_sec = set(old["sections"]["id"]), set(new["sections"]["id"])
    old_ent = dict(old["entities"].select("id", "name").iter_rows())
    new_ent = dict(new["entities"].select("id", "name").iter_rows())
    return {
        "pages": {"added": len(added), "changed": len(changed), "removed": len(removed),
                  "unchanged": len(new_pages) - len(added) - len(changed)},
        "sections": {"added": len(new_sec - old_sec), "removed": len(old_sec - new_sec),
                     "unchanged": len(new_sec & old_sec)},
        "entities": {"added": len(set(new_ent) - set(old_ent)),
                     "removed": len(set(old_ent) - set(new_ent))},
        "pages_added": added, "pages_changed": changed, "pages_removed": removed,
        "entities_added": sorted(new_ent[i] for i in set(new_ent) - set(old_ent))[:50],
        "entities_removed": sorted(old_ent[i] for i in set(old_ent) - set(new_ent))[:50],
    }


def diff_builds(old_dir: Path, new_dir: Path) -> dict:
    """Diff two build folders (see diff_tables for the result)."""
    cols = {"articles": ["url", "content_hash"], "sections": ["id", "url"],
            "entities": ["id", "name"]}
    return diff_tables(
        {t: _table(old_dir, t, c) for t, c in cols.items()},
        {t: _table(new_dir, t, c) for t, c in cols.items()},
    )


def summary_line(diff: dict) -> str:
    p, s, e = diff["pages"], diff["sections"], diff["entities"]
    return (f"pages +{p['added']} ~{p['changed']} -{p['removed']} ({p['unchanged']} unchanged); "
            f"sections +{s['added']} -{s['removed']}; entities +{e['added']} -{e['removed']}")
