"""Alerts against the session's Prefect test server: `flows.alerts.install` creates, leaves,
updates and deletes automations idempotently and keeps webhook URLs in the blocks' secrets;
a build that fails tells Prefect so (kpack.build.failed) and writes one history line."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from flows import alerts
from flows.alert_events import FAILED, emit, refused_event
from flows.alert_log import Recorder
from flows.build import BuildError, run_build
from packs import layout
from tasks.sources import PackConfig, SourceConfig
from tests.conftest import OFFLINE_MODEL
from tests.prefect_procs import Receiver, until
from tests.small_site import serve_site

HOOK = "http://127.0.0.1:9/hooks/kpack?token=sEcReT"


def _source(name: str, **config) -> SourceConfig:
    return SourceConfig(name=name, folder=Path("/src") / name, urls=(),
                        config=PackConfig(**config))


def _ours(client) -> dict[str, object]:
    return {a.name: a for a in client.read_automations() if a.name.startswith("kpack ")}


def test_install_creates_then_leaves_updates_and_deletes(prefect_harness, tmp_path) -> None:
    from prefect.client.orchestration import get_client

    lines: list[str] = []
    alpha = alerts.plan([_source("alpha", notify=[HOOK])], tmp_path)
    beta = alerts.plan([_source("beta", notify=[HOOK], max_age=600.0)], tmp_path)
    first = alerts.install(alpha + beta, out=lines.append)
    assert set(first.values()) == {"created"} and len(first) == 10
    assert lines[0] == ("alerts for alpha: failed, crashed, refused, partial, stale -> webhook "
                        "http://127.0.0.1:9 (stale after 2 d without a successful build)")
    with get_client(sync_client=True) as client:
        before = {n: a.id for n, a in _ours(client).items()}
    assert set(alerts.install(alpha + beta).values()) == {"unchanged"}
    later = alerts.plan([_source("alpha", notify=[HOOK], max_age=3600.0,
                                 notify_on=["published"])], tmp_path)
    done = alerts.install(later)
    assert done["kpack alpha stale"] == "updated" and done["kpack alpha published"] == "created"
    assert done["kpack alpha failed"] == "unchanged"
    done = alerts.install(alerts.plan([_source("alpha")], tmp_path))  # notify removed
    assert set(done.values()) == {"deleted"} and len(done) == 6
    with get_client(sync_client=True) as client:
        left = _ours(client)
        assert {n for n in left if n.startswith("kpack alpha")} == set()
        assert {n: a.id for n, a in left.items()} == {
            n: i for n, i in before.items() if n.startswith("kpack beta")}  # beta untouched
        block = client.read_block_document_by_name(
            alpha[0].targets[0].block_name, "custom-webhook", include_secrets=False)
    assert "sEcReT" not in json.dumps(block.data, default=str)
    assert block.data["url"] == "{{kpack_url}}" and block.data["form_data"] == "{{body}}"


def test_a_failed_build_says_so_to_prefect_and_in_its_history_once(prefect_harness,
                                                                   tmp_path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter

    with serve_site(tmp_path / "site") as base:
        source = tmp_path / "sources" / "gone"
        source.mkdir(parents=True)
        (source / "urls.txt").write_text(f"{base}/nope1.md\n{base}/nope2.md\n")
        (source / "pack.toml").write_text(
            f'allow_private_hosts = true\nembedding_model = "{OFFLINE_MODEL}"\n'
            'extractor = "offline"\nfetch_timeout_s = 5\n')
        with pytest.raises(BuildError, match="none of the 2 URLs could be fetched"):
            run_build(source, tmp_path / "out")
    history = layout.read_history(tmp_path / "out" / "gone")
    assert [h["status"] for h in history] == ["failed"]
    assert history[0]["detail"].startswith("BuildError: gone: none of the 2 URLs")
    deadline = time.monotonic() + 60  # the server stores events in batches
    found = []
    with get_client(sync_client=True) as client:
        while not found and time.monotonic() < deadline:
            page = client.read_events(filter=EventFilter(event=EventNameFilter(name=[FAILED])),
                                      limit=50)  # the server allows 50 (the client asks 100)
            found = [e for e in page.events if e.payload.get("pack") == "gone"]
            time.sleep(0.5) if not found else None
        assert found, "no kpack.build.failed event"
        event = found[0]
        assert event.resource.id == "kpack.pack.gone"
        assert event.payload["build_id"] == history[0]["build_id"]
        run = client.read_flow_run(event.payload["flow_run_id"])
    assert run.state.is_failed() and "pack:gone" in run.tags
    assert run.name == f"gone-{history[0]['build_id']}"


def test_an_alert_the_server_sends_is_recorded_in_the_pack_folder(prefect_harness,
                                                                   tmp_path) -> None:
    """The server's triggers and actions send the message (no kpack process involved);
    catching up from its events API writes it into alerts.jsonl once."""
    with Receiver() as hook:
        (plan,) = alerts.plan([_source("delta", notify=[hook.url("/hook?token=sEcReT")])],
                              tmp_path)
        alerts.install([plan])
        layout.write_watch(plan.root, plan.watch_record())
        emit(*refused_event("delta", "b1", "3 of 4 pages could not be fetched"))
        (_, message), = until("the refused message", hook.messages, 60)
        recorder = Recorder({"delta": plan.root})
        until("the sent alert in the events API", recorder.catch_up, 60)
    assert message["kind"] == "refused" and message["build_id"] == "b1"
    (line,) = layout.read_alerts(plan.root)
    assert line["kind"] == "refused" and line["status"] == "sent"
    assert line["target"] == f"webhook {hook.url('')}" and line["build_id"] == "b1"
    assert line["reason"] == "3 of 4 pages could not be fetched"
    assert recorder.catch_up() == 0 and Recorder({"delta": plan.root}).catch_up() == 0
    assert "sEcReT" not in (plan.root / layout.ALERTS_FILE).read_text()

