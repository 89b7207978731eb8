"""Which Prefect API a build reports to: the one configured (PREFECT_API_URL), else the
kept local server of this PREFECT_HOME (flows/server.py, started when none runs), else,
with KPACK_SERVER_IDLE_S=0, a temporary server for this build alone
(flows/temporary_server.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from flows import server
from flows.temporary_server import flush_workers, temporary


@contextlib.contextmanager
def _api_url(url: str, updates: dict | None = None) -> Iterator[None]:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    before = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = url  # for processes the build starts (Dask workers)
    try:
        with temporary_settings(updates={**(updates or {}), PREFECT_API_URL: url}):
            yield
    finally:
        if before is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = before


@contextlib.contextmanager
def api_for_build(log=None, timeout_s: float | None = None,
                  updates: dict | None = None) -> Iterator[str]:
    """Point Prefect at a server for the duration of a build (see the module doc), with
    the Prefect settings `updates` (setting → value) applied too; yields "configured",
    "started", "kept" or "temporary". `log` gets one line when a server is started.
    Raises ServerError (one line, what to do) when none comes up in time."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():
        with temporary_settings(updates=updates or {}):
            yield "configured"
        return
    idle = server.idle_setting()
    if idle <= 0:
        if log:
            log(f"starting a temporary Prefect server for this build ({server.IDLE_ENV}=0 keeps "
                "none; `kpack server start` starts one for every build)")
        with temporary(timeout_s) as url, _api_url(url, updates):
            try:
                yield "temporary"
            finally:
                flush_workers()
        return
    folder = server.home()
    # held while the build runs: the kept server stops only when no build holds it
    with server.flock(folder / server.LEASE_FILE, fcntl.LOCK_SH):
        info = server.running()
        if info is None:
            info, started = server.start(0, kind="kept", idle_s=idle, timeout_s=timeout_s)
            if started and log:
                log(f"started a Prefect server for builds in the background: UI {info.ui} "
                    f"(stops after {server.duration(idle)} unused; `kpack server stop` stops it "
                    f"now, {server.IDLE_ENV}=0 keeps none)")
        with _api_url(info.url, updates):
            yield info.kind
