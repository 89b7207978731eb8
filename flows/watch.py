"""What `kpack serve` does for alerts when it starts (flows/schedule.py calls `start`):

1. read each pack's targets (pack.toml `notify` and `--notify`, `env:NAME` resolved) and
   max_age (flows/alerts.py `plan`): a bad target stops serve before anything is
   registered;
2. save the targets' notification blocks and create or update the automations
   (`flows.alerts.install`, idempotent);
3. write each pack's `watch.json` (max_age, schedule, the targets named without their
   secrets) for `kpack status` and the explorer;
4. emit `kpack.pack.watched` for each pack, which opens its stale window when none is open
   (no build succeeds after this: one stale alert after max_age);
5. record the notifications sent while no kpack serve ran, then follow the event stream
   to record the next ones (flows/alert_log.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from flows import alert_events as ev
from flows import alerts
from flows.alert_log import Recorder
from packs import layout
from tasks.sources import SourceConfig

log = logging.getLogger("kpack.alerts")


def start(sources: Sequence[SourceConfig], out_dir: Path, *, notify: Sequence[str] = (),
          every: timedelta | None = None, explorer_url: str = alerts.DEFAULT_EXPLORER,
          server_kind: str = "configured", out: Callable[[str], object] = print) -> Recorder:
    """Set up the alerts of `sources` on the Prefect server the environment names (steps
    1-5 of the module doc); `out` gets one line per pack. `server_kind` is what
    flows.build_api.api_for_build found: with alerts to send, this home's kept server is
    kept for good (a stale alert is sent after kpack serve stops, by the server), and a
    temporary one is said to stop with kpack serve. Returns the recorder, following the
    stream in a daemon thread. Raises tasks.alert_config.TargetError for a target that
    cannot be used (bad input), Prefect's errors when the server refuses."""
    from prefect.settings import PREFECT_UI_URL

    plans = alerts.plan(sources, out_dir, notify, every)
    if any(p.targets for p in plans):
        _server_outlives_serve(server_kind, out)
    alerts.install(plans, explorer_url=explorer_url, out=out)
    since = datetime.now(UTC).isoformat(timespec="seconds")
    ui = str(PREFECT_UI_URL.value() or "")
    for p in plans:
        layout.write_watch(p.root, {**p.watch_record(), "since": since, "ui": ui,
                                    "builds": alerts.builds_link(explorer_url, p.pack)})
        ev.emit(*ev.watched_event(p.pack, p.max_age_s, p.schedule))
        if not p.targets:
            out(f"alerts for {p.pack}: none (no notify targets; stale after "
                f"{alerts.msg.duration_words(p.max_age_s)} shows in kpack status)")
    recorder = Recorder({p.pack: p.root for p in plans})
    try:
        recorder.catch_up()
    except (httpx.HTTPError, OSError) as exc:  # the record lags; the alerts themselves work
        log.warning("could not read the alerts sent while kpack serve was not running "
                    "(%s: %s); kpack status fetches them", type(exc).__name__, exc)
    recorder.follow()
    return recorder


def _server_outlives_serve(server_kind: str, out: Callable[[str], object]) -> None:
    """The alerts are the server's to send, the stale one after kpack serve has stopped:
    a kept server (it stops when unused) is kept until `kpack server stop`."""
    from flows import server

    if server_kind == "kept":
        info, _ = server.start(0, kind="started")  # running: marks it as kept for good
        out(f"alerts: this home's Prefect server (pid {info.pid}) now runs until `kpack "
            "server stop`, so that it can tell of a stale pack after kpack serve stops")
    elif server_kind == "temporary":
        out("alerts: the temporary Prefect server stops with kpack serve, and no stale "
            "alert can come after that; run `kpack server start` for one that outlives it")

