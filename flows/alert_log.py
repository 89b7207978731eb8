"""Which notifications were sent, written into each pack's `alerts.jsonl`, so that
`kpack status` and the explorer (which read the pack folder only) can say so.

Prefect's actions service sends the messages; for each it emits
`prefect.automation.action.executed` (or `.failed`), with the automation (named
`kpack <pack> <kind>`, flows/alerts.py), the notification block and the event that
triggered it as related resources. `Recorder` turns those events into lines:

    {"at": "...", "kind": "failed", "status": "sent", "target": "webhook http://host:8123",
     "build_id": "20261130T030001123Z", "reason": "BuildError: ...", "id": "<event id>",
     "alert_id": "failed:<triggering event id>"}

It reads them two ways: `follow` (a subscriber to the server's event stream, in a thread
of `kpack serve`) as they happen, and `catch_up` (the events API) for what was sent while
no kpack serve ran, a stale alert about a stopped serve process above all; `kpack serve`
catches up when it starts, `kpack status` before it reports. Lines are keyed by event id:
recording the same event twice writes one line. A message Prefect sent twice for one alert
(its delivery is at least once: flows/alert_messages.py) has two action events with the
same `alert_id`, target and status: the second writes no line.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections import OrderedDict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

from flows import alert_events as ev
from flows.alert_messages import duration_words
from flows.alerts import AUTOMATION_PREFIX
from packs import layout

ACTION_EVENTS = ("prefect.automation.action.executed", "prefect.automation.action.failed")
LOOKBACK = timedelta(days=400)  # a stale alert's triggering event is the last success
MAX_CACHED = 500
PAGE_SIZE = 50  # the most the events API returns a page
log = logging.getLogger("kpack.alerts")


def parse_name(name: str) -> tuple[str, str] | None:
    """(pack, kind) of an automation named `kpack <pack> <kind>`, else None."""
    if not name.startswith(AUTOMATION_PREFIX):
        return None
    parts = name[len(AUTOMATION_PREFIX):].split(" ")
    return (parts[0], parts[1]) if len(parts) == 2 else None


def _related(event, role: str):
    return next((r for r in event.related if r.role == role), None)


def _details(trigger, kind: str, max_age_s: float | None) -> dict:
    """Build id and reason, from the event that triggered the notification (for stale: the
    last success, or kpack serve's start)."""
    if trigger is None:
        return {}
    if kind == "stale":
        since = trigger.occurred.astimezone(UTC).isoformat(timespec="seconds")
        payload = trigger.payload or {}
        last = (f"none since kpack serve started at {since}" if trigger.event == ev.WATCHED
                else f"the last was build {payload.get('build_id')} "
                     f"({payload.get('status')}) at {since}")
        return {"build_id": payload.get("build_id") or None,
                "reason": f"no successful build for more than "
                          f"{duration_words(max_age_s or 0)} (max_age): {last}"}
    if trigger.event.startswith("kpack."):
        payload = trigger.payload or {}
        return {"build_id": payload.get("build_id") or None,
                "reason": payload.get("reason") or None}
    pack_build = trigger.resource.name or ""
    return {"build_id": pack_build.split("-", 1)[1] if "-" in pack_build else None,
            "reason": ev.first_line(trigger.resource.get("prefect.state-message"))}


def _repeat_key(line: dict) -> str | None:
    """What a repeat of the alert of `line` has in common with it: the alert, the target
    and the outcome (None for a line that does not name its triggering event)."""
    if not line.get("alert_id"):
        return None
    return f"{line['alert_id']} {line.get('target')} {line.get('status')}"


def read_event(client, event_id: UUID):
    """The event `event_id` from the server's events API (None when it is not stored)."""
    from prefect.events.filters import EventFilter, EventIDFilter, EventOccurredFilter

    now = datetime.now(UTC)
    page = client.read_events(filter=EventFilter(
        id=EventIDFilter(id=[event_id]),
        occurred=EventOccurredFilter(since=now - LOOKBACK, until=now + timedelta(minutes=5))),
        limit=1)
    return page.events[0] if page.events else None


def _read_event_now(event_id: UUID):
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return read_event(client, event_id)


def _last_recorded(root: Path) -> datetime | None:
    """When the newest line of `root`'s alerts.jsonl was sent, less a margin (the server
    may store events out of order); None without one."""
    times = [a.get("at", "") for a in layout.read_alerts(root)]
    latest = max((t for t in times if t), default="")
    try:
        return datetime.fromisoformat(latest) - timedelta(minutes=1) if latest else None
    except ValueError:
        return None


class Recorder:
    """Writes the notifications about `roots` (pack name → pack folder) to their
    alerts.jsonl; `lookup` reads an event by id from the server (None: do not)."""

    def __init__(self, roots: dict[str, Path]) -> None:
        self.roots = roots
        lines = [a for root in roots.values() for a in layout.read_alerts(root)]
        self.seen = ({a.get("id") for a in lines} | {_repeat_key(a) for a in lines}) - {None}
        self.recent: OrderedDict[UUID, object] = OrderedDict()  # events seen in the stream
        self.lock = threading.Lock()

    def remember(self, event) -> None:
        self.recent[event.id] = event
        while len(self.recent) > MAX_CACHED:
            self.recent.popitem(last=False)

    def record(self, event, lookup=None) -> dict | None:
        """Write the line of an automation action event about one of our packs (once);
        other events are kept a while, as the triggering events of later actions."""
        if event.event not in ACTION_EVENTS:
            self.remember(event)
            return None
        named = parse_name(event.resource.name or "")
        if named is None or named[0] not in self.roots or str(event.id) in self.seen:
            return None
        pack, kind = named
        trig_ref = _related(event, "triggering-event")
        trigger = trig_id = None
        if trig_ref is not None:
            trig_id = UUID(trig_ref.id.rsplit(".", 1)[-1])
            trigger = self.recent.get(trig_id) or (lookup(trig_id) if lookup else None)
        block = _related(event, "block")
        watch = layout.read_watch(self.roots[pack]) or {}
        shown = {t.get("block"): t.get("shown") for t in watch.get("targets", [])}
        line = {"at": event.occurred.astimezone(UTC).isoformat(timespec="seconds"),
                "kind": kind, "status": "sent" if event.event == ACTION_EVENTS[0] else
                f"failed: {ev.first_line((event.payload or {}).get('reason'), 200)}",
                "target": shown.get(block.name if block else None)
                or (block.name if block else None),
                "build_id": None, "reason": None,
                **_details(trigger, kind, watch.get("max_age_s")), "id": str(event.id),
                "alert_id": f"{kind}:{trig_id}" if trig_id else None}
        with self.lock:
            keys = {line["id"], _repeat_key(line)} - {None}
            if keys & self.seen:
                return None
            self.seen |= keys
            layout.append_alerts(self.roots[pack], [line])
        return line

    def catch_up(self, since: datetime | None = None) -> int:
        """Record the action events since `since` (default: the oldest of each pack's newest
        line, or LOOKBACK for a pack with none) from the events API of the server the
        environment names. Returns the lines written."""
        from prefect.client.orchestration import get_client
        from prefect.events.filters import (
            EventFilter,
            EventNameFilter,
            EventOccurredFilter,
            EventOrder,
            EventResourceFilter,
        )
        from prefect.events.schemas.events import ResourceSpecification

        now = datetime.now(UTC)
        if since is None:  # from the pack whose record is the oldest
            since = min((_last_recorded(root) or now - LOOKBACK for root in self.roots.values()),
                        default=now)
        written = 0
        with get_client(sync_client=True) as client:
            def lookup(event_id: UUID):
                return read_event(client, event_id)

            page = client.read_events(filter=EventFilter(
                event=EventNameFilter(name=list(ACTION_EVENTS)),
                resource=EventResourceFilter(labels=ResourceSpecification(
                    {"prefect.resource.name": [f"{AUTOMATION_PREFIX}{p} *" for p in self.roots]})),
                occurred=EventOccurredFilter(since=since, until=now + timedelta(minutes=5)),
                order=EventOrder.ASC), limit=PAGE_SIZE)
            while True:
                for event in page.events:
                    written += self.record(event, lookup) is not None
                if not page.next_page:
                    break
                page = client.read_events_page(str(page.next_page))
        return written

    def follow(self) -> threading.Thread:
        """Record action events as the server streams them, in a daemon thread (it ends
        with the process; a stream that breaks for good is logged, and caught up with at
        the next start)."""
        # in this context: Prefect's settings (the API, its secret) live in context vars
        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(self._follow_sync,),
                                  name="kpack-alert-log", daemon=True)
        thread.start()
        return thread

    def _follow_sync(self) -> None:
        try:
            asyncio.run(self._follow())
        except Exception as exc:  # a thread's edge: say why recording stopped
            log.warning("stopped recording sent alerts (%s: %s); kpack status and the next "
                        "kpack serve catch up from the server", type(exc).__name__, exc)

    async def _follow(self) -> None:
        from prefect.events.clients import get_events_subscriber
        from prefect.events.filters import EventFilter, EventNameFilter, EventOccurredFilter

        from flows.alert_messages import RUN_CRASHED

        now = datetime.now(UTC)
        wanted = EventFilter(
            event=EventNameFilter(prefix=[*ACTION_EVENTS, "kpack.", RUN_CRASHED]),
            # the stream leaves out events after `until`: follow for years
            occurred=EventOccurredFilter(since=now, until=now + timedelta(days=3650)))
        async with get_events_subscriber(filter=wanted, reconnection_attempts=100) as sub:
            async for event in sub:
                try:
                    self.record(event, _read_event_now)
                except OSError as exc:  # the pack folder is gone or full: keep following
                    log.warning("could not record an alert: %s", exc)
