"""Which Prefect API a build reports to: the one configured (PREFECT_API_URL), else the
kept local server of this PREFECT_HOME (flows/server.py, started when none runs), else,
with KPACK_SERVER_IDLE_S=0, a temporary server for this build alone
(flows/temporary_server.py). The servers kpack runs want the home's secret
(flows/server_auth.py): the build sends it, and so do the processes it starts (Dask
workers, `kpack serve`'s flow runs), which get it in their environment.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from flows import server, server_auth
from flows.temporary_server import flush_workers, temporary


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    """`values` in os.environ for the block (for processes started in it), then as before."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _api_url(url: str, updates: dict | None = None, secret: str | None = None) -> Iterator[None]:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    env = {"PREFECT_API_URL": url, **({server_auth.CLIENT_ENV: secret} if secret else {})}
    with _environ(env), temporary_settings(updates={
            **(updates or {}), **server_auth.client_settings(secret), PREFECT_API_URL: url}):
        yield


@contextlib.contextmanager
def api_for_build(log=None, timeout_s: float | None = None,
                  updates: dict | None = None) -> Iterator[str]:
    """Point Prefect at a server for the duration of a build (see the module doc), with
    the Prefect settings `updates` (setting → value) applied too; yields "configured",
    "started", "kept" or "temporary". `log` gets one line when a server is started.
    Raises ServerError (one line, what to do) when none comes up in time, AuthFileError
    when the home's secret is unusable."""
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    configured = PREFECT_API_URL.value()
    if configured:
        # this home's own server, named by the user (kpack server start's URL): its secret
        record = None if PREFECT_API_AUTH_STRING.value() else server.read_state()
        secret = server_auth.secret_for(configured, server.home(),
                                        record.port if record else None)
        if secret:
            with _api_url(configured, updates, secret):
                yield "configured"
        else:
            with temporary_settings(updates=updates or {}):
                yield "configured"
        return
    idle = server.idle_setting()
    if idle <= 0:
        if log:
            log(f"starting a temporary Prefect server for this build ({server.IDLE_ENV}=0 keeps "
                "none; `kpack server start` starts one for every build)")
        with temporary(timeout_s) as (url, secret), _api_url(url, updates, secret):
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
                    f"now, {server.IDLE_ENV}=0 keeps none; the UI asks for the secret in "
                    f"{server_auth.auth_path(folder)})")
        with _api_url(info.url, updates, server_auth.read_secret(folder)):
            yield info.kind
