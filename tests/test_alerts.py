"""Alerts without a server: pack.toml's alert fields, how targets are named, which event a
build's outcome is, the automations planned for a pack, the messages Prefect renders from
their templates (with Prefect's own sandboxed renderer), and the recorder of sent alerts.
The server side (install, events) is in test_alerts_server.py, the whole path in
test_alerts_e2e.py."""

from __future__ import annotations

import json
import types
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prefect.server.events.schemas.events import ReceivedEvent
from prefect.server.utilities.user_templates import render_user_template_sync

from flows import alert_events as ev
from flows import alert_messages as msg
from flows import alerts
from flows.alert_log import Recorder, parse_name
from packs import layout
from tasks.alert_config import TargetError, describe_target, is_slack, resolve_target
from tasks.publish.guard import GuardError
from tasks.sources import PackConfig, SourceConfig, SourceError, load_config

SLACK = "https://hooks.slack.com/services/T0A1/B0B2/sEcReTsEcReT"
HOOK = "https://ops.example:8443/hooks/kpack?token=sEcReT"
UI = "http://127.0.0.1:4200"
BUILDS = "http://127.0.0.1:8765/builds?pack=tea"
HOSTILE = 'it said "no" \\ </script> {{ 7*7 }} {% raw %}\nsecond line'


def _config(tmp_path: Path, text: str) -> PackConfig:
    (tmp_path / "pack.toml").write_text(text)
    return load_config(tmp_path / "pack.toml")


def test_pack_toml_alert_fields_and_their_defaults(tmp_path) -> None:
    assert PackConfig().notify == [] and PackConfig().max_age is None
    assert PackConfig().notify_failed_sources == 0.2 and PackConfig().notify_on == []
    cfg = _config(tmp_path, f'notify = ["{SLACK}", "env:OPS_HOOK"]\nmax_age = "36h"\n'
                            'notify_on = ["published"]\nnotify_failed_sources = 0.5\n')
    assert cfg.notify == [SLACK, "env:OPS_HOOK"] and cfg.max_age == 36 * 3600
    assert cfg.notify_on == ["published"] and cfg.notify_failed_sources == 0.5
    for given, seconds in (("90", None), ("90s", 90), ("30m", 1800), ("2d", 172800),
                           ("1w", 604800)):
        text = f"max_age = {given}\n" if seconds is None else f'max_age = "{given}"\n'
        assert _config(tmp_path, text).max_age == (seconds or 90)


@pytest.mark.parametrize(("text", "says"), [
    ('notify = ["ftp://files.example/sEcReT"]', "a target is an http(s) URL"),
    ('notify = ["https://user:sEcReT@hooks.example/x"]', "put the whole URL in an environment"),
    ('notify = ["env:1BAD"]', "env: names an environment variable"),
    ('max_age = "soon"', 'such as "90m"'),
    ("max_age = 5", "between 10 seconds and 366 days"),
    ('notify_on = ["failed"]', "'published' or 'unchanged'"),
    ("notify_failed_sources = 2", "less than or equal to 1"),
])
def test_bad_alert_fields_say_how_to_fix_them_and_never_echo_a_secret(tmp_path, text,
                                                                     says) -> None:
    with pytest.raises(SourceError) as err:
        _config(tmp_path, text + "\n")
    assert says in str(err.value) and "pack.toml:1" in str(err.value)
    assert "sEcReT" not in str(err.value)


def test_targets_are_named_by_kind_and_origin_only() -> None:
    assert describe_target(SLACK) == "slack hooks.slack.com" and is_slack(SLACK)
    assert describe_target(HOOK) == "webhook https://ops.example:8443" and not is_slack(HOOK)
    assert describe_target("env:OPS_HOOK") == "env:OPS_HOOK"
    assert not is_slack("https://hooks.slack.com.evil.example/services/x")
    assert resolve_target("env:OPS_HOOK", {"OPS_HOOK": HOOK}) == HOOK
    with pytest.raises(TargetError, match="OPS_HOOK is not set") as err:
        resolve_target("env:OPS_HOOK", {})
    with pytest.raises(TargetError) as err:
        resolve_target("env:OPS_HOOK", {"OPS_HOOK": "ftp://x/sEcReT"})
    assert "sEcReT" not in str(err.value)


def _summary(**over) -> dict:
    return {"status": "published", "build_id": "b2", "partial": False, "partial_reasons": [],
            "failed_sources_total": 0, "sources_total": 10,
            "counts": {"articles": 10, "sections": 30}, **over}


def test_a_builds_outcome_is_one_event() -> None:
    name, payload = ev.outcome_event("tea", "b2", _summary(), 0.2)
    assert name == ev.PUBLISHED and payload["counts"]["sources"] == 10
    # 2 of 10 failed is the threshold itself: not over it
    assert ev.outcome_event("tea", "b2", _summary(failed_sources_total=2), 0.2)[0] == ev.PUBLISHED
    name, payload = ev.outcome_event("tea", "b2", _summary(failed_sources_total=3), 0.2)
    assert name == ev.PARTIAL and "3 of 10 sources failed (30%" in payload["reason"]
    name, payload = ev.outcome_event(
        "tea", "b2", _summary(partial=True, partial_reasons=["4 sections failed extraction"]), 0.2)
    assert name == ev.PARTIAL and "4 sections failed extraction" in payload["reason"]
    name, payload = ev.outcome_event("tea", "b5", _summary(status="no changes"), 0.2)
    assert name == ev.UNCHANGED and payload["build_id"] == "b5"  # the run's, not current's
    assert payload["reason"] == "no changes since build b2: nothing published"
    name, payload = ev.failed_event("tea", "b3", RuntimeError("boom\ntraceback"))
    assert name == ev.FAILED and payload["reason"] == "RuntimeError: boom"
    assert ev.refused_event("tea", "b4", "worse")[1]["counts"] == {}
    counts = {"sources": 4, "failed_sources": 3, "sections": 1, "entities": 2}
    name, payload = ev.refused_event("tea", "b4", GuardError("tea: publish refused", counts))
    assert name == ev.REFUSED and payload["counts"] == counts
    assert payload["reason"] == "tea: publish refused"
    assert len(ev.first_line("x" * 1000)) == ev.MAX_REASON_CHARS


def _source(name: str, **config) -> SourceConfig:
    return SourceConfig(name=name, folder=Path("/src") / name, urls=(),
                        config=PackConfig(**config))


def test_plan_resolves_targets_and_defaults_max_age_to_twice_the_interval() -> None:
    sources = [_source("tea", notify=[HOOK, "env:OPS_HOOK"], notify_on=["unchanged"]),
               _source("weekdays", schedule="0 3 * * 1-5"), _source("daily"),
               _source("set", max_age=600.0)]
    plans = {p.pack: p for p in alerts.plan(sources, Path("/out"), [SLACK],
                                            environ={"OPS_HOOK": HOOK})}
    tea = plans["tea"]
    assert [t.url for t in tea.targets] == [HOOK, SLACK]  # the env target is the same URL
    assert tea.kinds == ["failed", "crashed", "refused", "partial", "stale", "unchanged"]
    assert plans["daily"].max_age_s == 2 * 86400
    assert plans["weekdays"].max_age_s == 2 * 3 * 86400  # the weekend's gap, twice
    assert plans["set"].max_age_s == 600
    every = alerts.plan(sources, Path("/out"), every=timedelta(seconds=20),
                        environ={"OPS_HOOK": HOOK})
    assert {p.max_age_s for p in every if p.pack != "set"} == {40}
    assert "sEcReT" not in json.dumps(tea.watch_record())
    assert tea.targets[0].block_name != tea.targets[1].block_name
    assert "sEcReT" not in tea.targets[1].block_name
    nobody = alerts.plan([_source("quiet")], Path("/out"))[0]
    assert nobody.kinds == [] and nobody.targets == ()


def test_each_kind_is_one_automation_with_one_action_per_target() -> None:
    plan = alerts.plan([_source("tea", notify=[HOOK], notify_on=["published"])],
                       Path("/out"), [SLACK], every=timedelta(seconds=20))[0]
    blocks = {t.block_name: uuid.uuid4() for t in plan.targets}
    made = {a.name: a for a in alerts.automations(plan, blocks, ui=UI)}
    assert set(made) == {f"kpack tea {k}" for k in
                         ("failed", "crashed", "refused", "partial", "stale", "published")}
    crashed = made["kpack tea crashed"].trigger
    assert crashed.expect == {"prefect.flow-run.Crashed"}
    assert crashed.match_related.root == {"prefect.resource.id": "prefect.tag.pack:tea",
                                          "prefect.resource.role": "tag"}
    failed = made["kpack tea failed"].trigger
    assert failed.expect == {ev.FAILED} and failed.posture == "Reactive"
    assert failed.match.root == {"prefect.resource.id": "kpack.pack.tea"}
    stale = made["kpack tea stale"].trigger
    assert stale.posture == "Proactive" and stale.within == timedelta(seconds=40)
    assert stale.expect == set(ev.SUCCESS) and stale.after == {*ev.SUCCESS, ev.WATCHED}
    assert stale.for_each == {"prefect.resource.id"} and stale.threshold == 1
    actions = made["kpack tea partial"].actions
    assert [a.block_document_id for a in actions] == list(blocks.values())
    assert actions[0].body.endswith("}") and actions[1].body.endswith("explorer>")
    assert all("sEcReT" not in a.model_dump_json() for a in made.values())


def _event(name: str, payload: dict | None = None, **resource) -> ReceivedEvent:
    return ReceivedEvent(occurred=datetime(2026, 11, 30, 3, 0, 5, tzinfo=UTC), event=name,
                         resource={"prefect.resource.id": "kpack.pack.tea", **resource},
                         payload=payload or {}, id=uuid.uuid4())


def _render(kind: str, event: ReceivedEvent, slack: bool = False) -> str:
    body = msg.slack_body if slack else msg.json_body
    context = {"event": event, "firing": types.SimpleNamespace(
        triggered=datetime(2026, 11, 30, 3, 0, 9, tzinfo=UTC))}
    return render_user_template_sync(body(kind, "tea", ui=UI, builds_url=BUILDS,
                                          max_age_s=120), context)


def test_every_message_is_valid_json_with_the_pack_the_build_and_the_run() -> None:
    run = str(uuid.uuid4())
    payload = {"pack": "tea", "build_id": "b7", "status": "partial", "reason": HOSTILE,
               "counts": {"articles": 3, "failed_sources": 2}, "flow_run_id": run}
    for kind in (msg.FAILED, msg.REFUSED, msg.PARTIAL, msg.PUBLISHED, msg.UNCHANGED):
        event = _event("kpack.x", payload)
        got = json.loads(_render(kind, event))
        assert got == {"kpack": 1, "kind": kind, "pack": "tea", "build_id": "b7",
                       "reason": HOSTILE.split("\n")[0], "counts": payload["counts"],
                       "flow_run_url": f"{UI}/runs/flow-run/{run}", "builds_url": BUILDS,
                       "at": "2026-11-30T03:00:09+00:00", "alert_id": f"{kind}:{event.id}",
                       "text": f"kpack tea: build b7 {kind}: {HOSTILE.splitlines()[0]}"}
    crashed = _event(msg.RUN_CRASHED, **{
        "prefect.resource.id": f"prefect.flow-run.{run}",
        "prefect.resource.name": "tea-20261130T030001000Z",
        "prefect.state-message": "Flow run process exited with non-zero status code -9."})
    got = json.loads(_render(msg.CRASHED, crashed))
    assert got["kind"] == "crashed" and got["build_id"] == "20261130T030001000Z"
    assert got["flow_run_url"] == f"{UI}/runs/flow-run/{run}" and got["counts"] is None
    assert got["reason"].startswith("Flow run process exited")
    bare = json.loads(_render(msg.FAILED, _event("kpack.x", {})))  # nothing to read: nulls
    assert bare["build_id"] is None and bare["flow_run_url"] is None


def test_the_stale_message_names_the_last_success_or_the_serve_start() -> None:
    run = str(uuid.uuid4())
    last = _event(ev.UNCHANGED, {"pack": "tea", "build_id": "b7", "status": "no changes",
                                 "reason": "", "counts": {"articles": 3},
                                 "flow_run_id": run})
    got = json.loads(_render(msg.STALE, last))
    assert got["kind"] == "stale" and got["build_id"] == "b7"
    assert got["reason"] == ("no successful build for more than 2 min (max_age): the last "
                             "was build b7 (no changes) at 2026-11-30T03:00:05+00:00")
    assert got["flow_run_url"].endswith(run) and got["text"].startswith("kpack tea: stale: ")
    watched = _event(ev.WATCHED, {"pack": "tea", "build_id": "", "flow_run_id": ""})
    got = json.loads(_render(msg.STALE, watched))
    assert got["build_id"] is None and got["counts"] is None and got["flow_run_url"] is None
    assert "none since kpack serve started at 2026-11-30T03:00:05" in got["reason"]


def test_slack_text_escapes_what_slack_reads_as_markup() -> None:
    event = _event("kpack.x", {"pack": "tea", "build_id": "b7", "reason": "a <b> & c",
                               "flow_run_id": "r1"})
    text = _render(msg.REFUSED, event, slack=True)
    assert text.splitlines()[0] == "kpack tea: build b7 refused: a &lt;b&gt; &amp; c"
    assert f"<{UI}/runs/flow-run/r1|flow run in Prefect>" in text
    assert f"<{BUILDS}|builds in the explorer>" in text


def _action(name: str, automation: str, block: str, trigger: ReceivedEvent | None,
            reason: str = ""):
    related = [{"prefect.resource.id": "prefect.block-document.x",
                "prefect.resource.role": "block", "prefect.resource.name": block}]
    if trigger is not None:
        related.append({"prefect.resource.id": f"prefect.event.{trigger.id}",
                        "prefect.resource.role": "triggering-event"})
    return ReceivedEvent(occurred=datetime(2026, 11, 30, 3, 1, tzinfo=UTC), event=name,
                         resource={"prefect.resource.id": "prefect.automation.a1",
                                   "prefect.resource.name": automation},
                         related=related, payload={"reason": reason} if reason else {},
                         id=uuid.uuid4())


def test_the_recorder_writes_each_sent_alert_once_without_secrets(tmp_path) -> None:
    root = tmp_path / "tea"
    plan = alerts.plan([_source("tea", notify=[HOOK])], tmp_path)[0]
    layout.write_watch(root, plan.watch_record())
    recorder = Recorder({"tea": root})
    trigger = _event(ev.REFUSED, {"pack": "tea", "build_id": "b9", "reason": "worse"})
    assert recorder.record(trigger) is None  # kept as a possible triggering event
    block = plan.targets[0].block_name
    sent = _action("prefect.automation.action.executed", "kpack tea refused", block, trigger)
    line = recorder.record(sent)
    assert line == {"at": "2026-11-30T03:01:00+00:00", "kind": "refused", "status": "sent",
                    "target": "webhook https://ops.example:8443", "build_id": "b9",
                    "reason": "worse", "id": str(sent.id), "alert_id": f"refused:{trigger.id}"}
    assert recorder.record(sent) is None and Recorder({"tea": root}).record(sent) is None
    # Prefect sent the same alert again (a retried action: a new action event, the same
    # triggering event): one line, in this recorder and in the next kpack serve's
    again = _action("prefect.automation.action.executed", "kpack tea refused", block, trigger)
    assert recorder.record(again) is None and Recorder({"tea": root}).record(again) is None
    last = _event(ev.UNCHANGED, {"pack": "tea", "build_id": "b8", "status": "no changes",
                                 "reason": "no changes since build b7"})
    recorder.record(last)
    failed = _action("prefect.automation.action.failed", "kpack tea stale", block, last,
                     reason="Notification failed")
    line = recorder.record(failed)
    assert line["status"] == "failed: Notification failed" and line["build_id"] == "b8"
    assert line["reason"] == ("no successful build for more than 2 d (max_age): the last was "
                              "build b8 (no changes) at 2026-11-30T03:00:05+00:00")
    other = _action("prefect.automation.action.executed", "kpack coffee stale", block, None)
    assert recorder.record(other) is None  # not one of this recorder's packs
    unknown = [_action("prefect.automation.action.executed", "kpack tea failed", block, None)
               for _ in range(2)]  # no triggering event named: each action is its own line
    assert all(recorder.record(u)["alert_id"] is None for u in unknown)
    assert [a["kind"] for a in layout.read_alerts(root)] == ["refused", "stale", "failed",
                                                             "failed"]
    assert "sEcReT" not in (root / layout.ALERTS_FILE).read_text()
    assert parse_name("kpack tea stale") == ("tea", "stale") and parse_name("other") is None


def test_urls_in_the_servers_log_lines_lose_their_path_and_query(tmp_path) -> None:
    import logging

    from flows.log_redaction import redact, redact_handlers

    assert redact(f"error for url '{HOOK}'") == "error for url 'https://ops.example:8443/…'"
    assert redact(f"{SLACK} and http://127.0.0.1:9") == (
        "https://hooks.slack.com/… and http://127.0.0.1:9")
    log = logging.getLogger("kpack.test.redaction")
    handler = logging.FileHandler(tmp_path / "server.log")
    log.addHandler(handler)
    added = redact_handlers()  # every handler of this process: pytest's too, taken off below
    try:
        assert handler in added and redact_handlers() == []  # once per handler
        try:
            raise RuntimeError(f"Server error '500' for url '{HOOK}'")
        except RuntimeError:
            log.exception("Error in message handler for %s", SLACK)
    finally:
        for each in added:
            for f in [f for f in each.filters if type(f).__name__ == "RedactUrls"]:
                each.removeFilter(f)
        log.removeHandler(handler)
        handler.close()
    written = (tmp_path / "server.log").read_text()
    assert "sEcReT" not in written and "RuntimeError: Server error '500' for url " in written
    assert "Error in message handler for https://hooks.slack.com/…" in written
