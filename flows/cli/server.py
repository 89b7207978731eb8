"""`kpack server start|stop|status`: this PREFECT_HOME's local Prefect server (flows/server.py)
and the warm build process beside it (flows/warm.py).

Exit codes: 0 done (or, for status, a server answers), 1 the server could not start, the
port is taken, or (status) no server answers; 2 a bad setting (KPACK_SERVER_IDLE_S,
KPACK_SERVER_START_TIMEOUT_S). KPACK_DEBUG=1 re-raises.
"""

from __future__ import annotations

import time
from typing import Annotated, NoReturn

import typer

from packs.cli.common import EXIT_FAILED, fail


def _fail(exc: BaseException) -> NoReturn:
    from flows.server import ServerSettingError
    from flows.server_auth import AuthFileError

    # a taken port or a server that does not come up is a failure (1), never bad input
    fail(exc, (ServerSettingError, AuthFileError))


server_app = typer.Typer(help="This PREFECT_HOME's local Prefect server (with its UI), which "
                         "builds use instead of starting one each time.",
                         no_args_is_help=True)


def _describe(info) -> str:
    from pathlib import Path

    from flows.server import duration
    from flows.server_auth import auth_path

    who = (f"kept by kpack build; stops after {duration(info.idle_s)} unused"
           if info.kind == "kept"
           else "started by kpack server start; runs until kpack server stop")
    return (f"UI {info.ui}, API {info.url} (pid {info.pid}, PREFECT_HOME={info.home}; "
            f"{who}; the UI and API want the secret in {auth_path(Path(info.home))})")


@server_app.command("start")
def server_start(
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port on 127.0.0.1.")] = 4200,
    timeout: Annotated[float | None, typer.Option(min=1, help="Seconds to wait for the server to answer (default: $KPACK_SERVER_START_TIMEOUT_S, else 120 s times the load average per core).")] = None,
) -> None:
    """Start the server in the background, wait until it answers, and return; it runs until
    `kpack server stop`. Its runs and logs live in $PREFECT_HOME (default ~/.prefect).
    Exit 1 when the port is taken (the message names by what) or the server does not
    answer in time."""
    from flows import server

    try:
        info, started = server.start(port, timeout_s=timeout)
    except Exception as exc:  # the CLI edge
        _fail(exc)
    if started:
        typer.echo(f"Prefect server started: {_describe(info)}; kpack build uses it")
        return
    moved = f"; it is on port {info.port}, not {port}" if info.port != port else ""
    typer.echo(f"Prefect server already running: {_describe(info)}{moved}")


@server_app.command("stop")
def server_stop() -> None:
    """Stop this PREFECT_HOME's server (started by `kpack server start` or kept by a build)
    and the warm build process."""
    from flows import server, warm

    info, alive = server.stop()
    builder = warm.stop()
    if info is None:
        typer.echo("no kpack Prefect server is running in this PREFECT_HOME")
    elif alive:
        typer.echo(f"stopped the Prefect server on port {info.port} (pid {info.pid})")
    else:
        typer.echo(f"the Prefect server on port {info.port} (pid {info.pid}) was already "
                   "gone; removed its record")
    if builder:
        typer.echo(f"stopped the warm build process (pid {builder['pid']})")


@server_app.command("status")
def server_status() -> None:
    """Say where builds report: PREFECT_API_URL, this PREFECT_HOME's server (checked: the
    process answering on its port is the one started, with this home), or none (the next
    build starts one). Exit 1 when none answers."""
    from flows import server, warm

    try:
        from prefect.settings import PREFECT_API_URL

        configured = PREFECT_API_URL.value()
    except ImportError:  # pragma: no cover - the build extra is installed with these commands
        configured = None
    if configured:
        state = "answers" if server.healthy(configured) else "does NOT answer"
        typer.echo(f"PREFECT_API_URL={configured} ({state}); builds report there")
        raise typer.Exit(0 if state == "answers" else EXIT_FAILED)
    info = server.running()
    builder = warm.running()
    if builder:
        age = time.time() - float(builder.get("started_at", time.time()))
        typer.echo(f"warm build process: pid {builder['pid']} (up {server.duration(round(age))}; "
                   f"stops after {server.duration(float(builder.get('idle_s', 0)))} without a "
                   "build)")
    if info is None:
        stale = server.read_state()
        if stale is not None:
            typer.echo(f"not running: the record names pid {stale.pid} on port {stale.port}, "
                       "which does not answer as this home's server (kpack server stop "
                       "removes the record)")
        else:
            typer.echo("no Prefect server: the next build starts one and keeps it "
                       "(kpack server start to start one now)")
        raise typer.Exit(EXIT_FAILED)
    typer.echo(f"running: {_describe(info)}")


def register(app: typer.Typer) -> None:
    """Add `kpack server start|stop|status` to `app`."""
    app.add_typer(server_app, name="server")
