"""The pack folder's layout: the pointer, the builds a prune keeps, temp folders."""

from __future__ import annotations

import json

import pytest

from packs import format as fmt
from packs import layout


def _builds(root, *ids: str) -> None:
    for build_id in ids:
        (root / fmt.BUILDS_DIR / build_id).mkdir(parents=True)


def test_prune_keeps_the_newest_builds_and_always_the_current_one(tmp_path) -> None:
    _builds(tmp_path, "b1", "b2", "b3", "b4", ".tmp-b5")
    layout.set_current(tmp_path, "b1")  # an older build installed over newer ones
    assert layout.prune(tmp_path, keep=2) == ["b2"]
    assert layout.build_ids(tmp_path) == ["b1", "b3", "b4"]
    assert (tmp_path / fmt.BUILDS_DIR / ".tmp-b5").is_dir()  # only remove_temp_dirs does
    assert layout.remove_temp_dirs(tmp_path) == [".tmp-b5"]


def test_the_pointer_is_replaced_whole_and_checked_when_read(tmp_path) -> None:
    _builds(tmp_path, "b1")
    (tmp_path / fmt.BUILDS_DIR / "b1" / fmt.MANIFEST_FILE).write_text("{}")
    layout.set_current(tmp_path, "b1")
    assert layout.current_id(tmp_path) == "b1"
    assert layout.resolve_build_dir(tmp_path) == tmp_path / fmt.BUILDS_DIR / "b1"
    assert sorted(p.name for p in tmp_path.iterdir()) == [fmt.BUILDS_DIR, fmt.CURRENT_FILE]
    with pytest.raises(ValueError):
        layout.set_current(tmp_path, "../escape")
    (tmp_path / fmt.CURRENT_FILE).write_text("../../etc\n")
    with pytest.raises(fmt.PackFormatError, match="invalid build id"):
        layout.resolve_build_dir(tmp_path)


def test_history_is_one_json_line_per_run(tmp_path) -> None:
    layout.append_history(tmp_path / "p", "b1", "published", "pages +1")
    layout.append_history(tmp_path / "p", "b2", "refused", "guard")
    lines = [json.loads(x) for x in (tmp_path / "p" / layout.HISTORY_FILE).read_text().splitlines()]
    assert [(x["build_id"], x["status"]) for x in lines] == [("b1", "published"), ("b2", "refused")]


def test_history_is_read_whole_and_a_torn_line_is_shown_not_hidden(tmp_path) -> None:
    assert layout.read_history(tmp_path) == []
    layout.append_history(tmp_path, "b1", "published", "pages +2")
    with (tmp_path / layout.HISTORY_FILE).open("a") as f:
        f.write('{"at": "2026-01-0\n')  # a write cut short
    layout.append_history(tmp_path, "b2", "crashed", "died")
    rows = layout.read_history(tmp_path)
    assert [r["status"] for r in rows] == ["published", "unreadable", "crashed"]
    assert rows[1]["detail"] == '{"at": "2026-01-0'


def test_a_build_knows_its_pack_folder_unless_it_stands_alone(tmp_path) -> None:
    _builds(tmp_path, "b1")
    layout.set_current(tmp_path, "b1")
    assert layout.pack_root_of(tmp_path / fmt.BUILDS_DIR / "b1") == tmp_path.resolve()
    assert layout.pack_root_of(tmp_path / "elsewhere") is None


def test_eval_scorecards_are_kept_per_build_beside_the_builds(tmp_path) -> None:
    assert layout.latest_eval_report(tmp_path) is None
    path = layout.save_eval_report(tmp_path, "b1", {"overall": {"mrr": 0.5}})
    assert path == tmp_path / "eval" / "b1.json"
    layout.save_eval_report(tmp_path, "b2", {"overall": {"mrr": 0.7}})
    layout.save_eval_report(tmp_path, "b1", {"overall": {"mrr": 0.6}})  # the last one wins
    assert layout.latest_eval_report(tmp_path, "b1") == ("b1", {"overall": {"mrr": 0.6}})
    assert layout.latest_eval_report(tmp_path, "b9")[0] == "b2"  # else the newest build's
    assert layout.latest_eval_report(tmp_path)[0] == "b2"
    assert not list((tmp_path / "eval").glob(".*"))  # no temp file left behind
    with pytest.raises(ValueError):
        layout.save_eval_report(tmp_path, "../escape", {})
    (tmp_path / "eval" / "b3.json").write_text("[1, 2]")
    with pytest.raises(fmt.PackFormatError, match="not a JSON object"):
        layout.latest_eval_report(tmp_path)
    assert json.loads(path.read_text()) == {"overall": {"mrr": 0.6}}
