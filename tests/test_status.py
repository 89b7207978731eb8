"""How fresh a pack is (packs/status.py), as `kpack status` prints it and the explorer's
home page shows it: hand-written pack folders (history.jsonl, watch.json, alerts.jsonl)
read at a fixed time, the CLI's text, JSON and exit codes, and the page of a real pack."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import typer
from explore_fixtures import publish_tables
from query_fixtures import embedder, make_tables  # noqa: F401 (fixture)
from starlette.testclient import TestClient
from typer.testing import CliRunner

from flows.cli.status import register
from packs import layout
from packs.explore.app import create_app
from packs.packset import PackSet
from packs.status import NEVER, STALE, UNWATCHED, describe, pack_folders, pack_status

T0 = datetime(2025, 11, 30, 3, 0, tzinfo=UTC)  # in the past: the CLI reads now


def _at(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat(timespec="seconds")


def _folder(root: Path, name: str, history: list[tuple[float, str, str]],
            watch: dict | None = None, alerts: list[dict] | None = None) -> Path:
    """A pack folder whose history holds (minutes after T0, build id, status) lines."""
    pack = root / name
    pack.mkdir(parents=True)
    lines = [{"at": _at(m), "build_id": b, "status": s, "detail": f"{s} detail"}
             for m, b, s in history]
    (pack / layout.HISTORY_FILE).write_text("".join(json.dumps(x) + "\n" for x in lines)
                                            + "not json\n")
    if watch is not None:
        layout.write_watch(pack, {"since": _at(0), "schedule": "cron 0 3 * * *",
                                  "targets": [{"shown": "webhook https://ops.example",
                                               "block": "kpack-webhook-1"}], **watch})
    layout.append_alerts(pack, alerts or [])
    return pack


def test_fresh_then_stale_once_max_age_passes_since_the_last_success(tmp_path) -> None:
    pack = _folder(tmp_path, "tea", [(0, "b1", "published"), (60, "b2", "no changes"),
                                     (120, "b3", "failed")], {"max_age_s": 7200})
    fresh = pack_status(pack, now=T0 + timedelta(minutes=150))
    assert fresh.state == "fresh" and fresh.age_s == 90 * 60 and fresh.max_age_s == 7200
    assert fresh.last_build["build_id"] == "b3" and fresh.last_success["build_id"] == "b2"
    assert fresh.last_publish["build_id"] == "b1" and fresh.last_alert is None
    stale = pack_status(pack, now=T0 + timedelta(minutes=181))  # b2 + 2 h + 1 min
    assert stale.state == STALE
    lines = describe(stale, now=T0 + timedelta(minutes=181))
    assert lines[0] == "tea: STALE (max_age 2.0 h; last success 2.0 h ago)"
    assert lines[1] == "  last build:   b3 failed 61 min ago: failed detail"
    assert lines[2] == "  last success: b2 no changes 2.0 h ago"
    assert lines[3] == "  last publish: b1 published 3.0 h ago"
    assert lines[4].startswith("  watched:      by kpack serve (cron 0 3 * * *) since ")
    assert lines[4].endswith("alerts to webhook https://ops.example")
    assert lines[5] == "  last alert:   none sent"


def test_with_no_success_a_watched_pack_goes_stale_max_age_after_serve_started(
        tmp_path) -> None:
    pack = _folder(tmp_path, "broken", [(1, "b1", "failed")], {"max_age_s": 600},
                   alerts=[{"at": _at(11), "kind": "stale", "status": "sent",
                            "target": "webhook https://ops.example", "build_id": None,
                            "reason": "no successful build", "id": "e1"}])
    assert pack_status(pack, now=T0 + timedelta(minutes=9)).state == "fresh"
    late = pack_status(pack, now=T0 + timedelta(minutes=12))
    assert late.state == STALE and late.age_s is None and late.last_alert["kind"] == "stale"
    text = "\n".join(describe(late, now=T0 + timedelta(minutes=12)))
    assert "no successful build yet" in text and "  last success: none" in text
    assert ("  last alert:   stale sent 60 s ago to webhook https://ops.example: "
            "no successful build") in text


def test_unwatched_and_never_built_packs(tmp_path) -> None:
    assert pack_status(_folder(tmp_path, "loose", [(0, "b1", "published")])).state == UNWATCHED
    assert pack_status(_folder(tmp_path, "new", [], {"max_age_s": 60}),
                       now=T0 + timedelta(seconds=30)).state == "fresh"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert pack_status(empty).state == NEVER
    assert [p.name for p in pack_folders(tmp_path)] == ["loose", "new"]  # with a history
    assert pack_folders(tmp_path / "loose") == [tmp_path / "loose"]


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command("noop")(lambda: None)  # a group, so `status` is a subcommand as in kpack
    register(app)
    return app


def test_kpack_status_prints_each_pack_and_exits_1_when_one_is_stale(tmp_path) -> None:
    _folder(tmp_path, "tea", [(0, "b1", "published")], {"max_age_s": 60})  # long stale
    _folder(tmp_path, "loose", [(0, "b1", "published")])
    runner = CliRunner()
    res = runner.invoke(_cli(), ["status", str(tmp_path)])
    assert res.exit_code == 1, res.output
    assert "loose: not watched\n" in res.output and "tea: STALE (max_age 60 s;" in res.output
    res = runner.invoke(_cli(), ["status", str(tmp_path / "loose"), "--json", "--offline"])
    assert res.exit_code == 0
    (only,) = json.loads(res.output)
    assert only["pack"] == "loose" and only["last_publish"]["build_id"] == "b1"
    res = runner.invoke(_cli(), ["status", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "no pack folders here" in res.output


@pytest.fixture(scope="module")
def served_pack(tmp_path_factory, embedder) -> Path:
    pack = publish_tables(tmp_path_factory.mktemp("status"), "kestrel", "b0001",
                          make_tables(embedder), embedder, "Kestrel docs")
    (pack / layout.HISTORY_FILE).write_text(json.dumps(
        {"at": "2020-01-01T03:00:00+00:00", "build_id": "b0001", "status": "published",
         "detail": ""}) + "\n")
    layout.write_watch(pack, {"since": "2020-01-01T03:00:00+00:00", "max_age_s": 3600,
                              "schedule": "every 20 s",
                              "targets": [{"shown": "slack hooks.slack.com", "block": "b"}]})
    layout.append_alerts(pack, [{"at": "2020-01-01T04:00:05+00:00", "kind": "stale",
                                 "status": "sent", "target": "slack hooks.slack.com",
                                 "build_id": "b0001", "reason": "<b>no build</b>",
                                 "id": "e1"}])
    return pack


def test_the_explorer_home_page_shows_the_same_freshness(served_pack) -> None:
    packset = PackSet.open([served_pack])
    try:
        with TestClient(create_app(packset), base_url="http://127.0.0.1") as client:
            html = client.get("/").text
    finally:
        packset.close()
    assert '<dd class="freshness" data-state="stale"><span class="badge warn">stale</span> '\
           "STALE (max_age 60 min; last success" in html
    for shown in ("<li>last build:   b0001 published ", "<li>last success: b0001 published ",
                  "<li>watched:      by kpack serve (every 20 s) since 2020-01-01T03:00:00"
                  "+00:00; alerts to slack hooks.slack.com</li>",
                  "<li>last alert:   stale sent ",
                  " to slack hooks.slack.com (build b0001): &lt;b&gt;no build&lt;/b&gt;</li>"):
        assert shown in html, shown  # kpack status's lines, escaped
    assert "<b>no build" not in html
