"""What changed between two builds (packs/diff.py): the pure core on hand-made rows, and
the reader, which goes through Kuzu's LOAD FROM so the query runtime can diff too."""

from __future__ import annotations

import shutil
from pathlib import Path

from query_fixtures import ARTICLES, build_pack, embedder  # noqa: F401 (fixture)

from packs import format as fmt
from packs.diff import diff_builds, diff_rows, read_rows, summary_line
from packs.layout import resolve_build_dir


def _rows(pages: dict[str, str], sections: list[tuple], entities: list[tuple]) -> dict:
    return {
        fmt.ARTICLES: [{"url": u, "content_hash": h} for u, h in pages.items()],
        fmt.SECTIONS: [{"id": i, "url": u, "heading_path": p, "chunk": c}
                       for i, u, p, c in sections],
        fmt.ENTITIES: [{"id": i, "name": n, "type": "concept", "description": d,
                        "aliases": a} for i, n, d, a in entities],
    }


def test_an_edited_section_and_a_redescribed_entity_are_changes():
    old = _rows({"a": "1", "b": "1", "gone": "1"},
                [("s1", "a", "A", 0), ("s2", "a", "A > B", 0), ("s3", "gone", "G", 0)],
                [("e1", "Pod", "a unit", []), ("e2", "Node", "a machine", []),
                 ("e3", "Gone", "", [])])
    new = _rows({"a": "2", "b": "1", "new": "1"},
                [("s1", "a", "A", 0), ("s2x", "a", "A > B", 0), ("s4", "new", "N", 0),
                 ("s5", "a", "A > B", 1)],
                [("e1", "Pod", "a unit", []), ("e2", "Node", "a machine", ["worker"]),
                 ("e4", "New", "", [])])
    d = diff_rows(old, new)
    assert d["pages"] == {"added": 1, "changed": 1, "removed": 1, "unchanged": 1}
    assert d["sections"] == {"added": 2, "changed": 1, "removed": 1, "unchanged": 1}
    assert d["sections_changed"] == [{"url": "a", "heading_path": "A > B", "old_id": "s2",
                                      "new_id": "s2x"}]
    assert d["entities"] == {"added": 1, "changed": 1, "removed": 1}
    assert (d["entities_added"], d["entities_changed"], d["entities_removed"]) == (
        ["New"], ["Node"], ["Gone"])
    assert summary_line(d) == ("pages +1 ~1 -1 (1 unchanged); sections +2 ~1 -1; "
                               "entities +1 ~1 -1")


def test_a_repeated_heading_path_pairs_sections_one_to_one():
    place = ("u", "Page > Example", 0)
    old = _rows({"u": "1"}, [("a", *place), ("b", *place), ("c", *place)], [])
    new = _rows({"u": "2"}, [("x", *place), ("y", *place)], [])
    assert diff_rows(old, new)["sections"] == {"added": 0, "changed": 2, "removed": 1,
                                               "unchanged": 0}
    # Rows without heading paths (a first build's frames) never pair up.
    bare = {**new, fmt.SECTIONS: [{"id": i, "url": "u"} for i in "xyz"]}
    empty = _rows({}, [], [])
    assert diff_rows(empty, bare)["sections"]["added"] == 3
    assert diff_rows({**old, fmt.SECTIONS: [{"id": "a", "url": "u"}]}, bare)["sections"] == {
        "added": 3, "changed": 0, "removed": 1, "unchanged": 0}


def test_builds_are_read_without_polars_wherever_they_are(tmp_path, embedder):
    built = tmp_path / "built"
    build_pack(built, embedder)
    edited = [(slug, title, [(p, c + " Edited." if p == "Queues > Priority queues" else c)
                             for p, c in secs]) for slug, title, secs in ARTICLES]
    build_pack(built, embedder, name="kestrel2", pages=edited)
    # Copied under a quote (LOAD FROM takes its file as a literal): packs open anywhere.
    root = tmp_path / "it's here"
    shutil.copytree(built, root)
    first = resolve_build_dir(root / "kestrel")
    second = resolve_build_dir(root / "kestrel2")
    rows = read_rows(first)
    assert len(rows[fmt.SECTIONS]) == sum(len(s) for _, _, s in ARTICLES)
    d = diff_builds(first, second)
    assert d["sections"]["changed"] == 1 and d["sections"]["added"] == 0
    assert diff_builds(first, first)["sections"]["unchanged"] == len(rows[fmt.SECTIONS])
    assert Path(first).is_dir()
