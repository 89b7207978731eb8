"""`kpack serve`: rebuild every source's pack on its schedule, through Prefect.

`register(app)` adds the command to the main `kpack` app (packs/cli/__init__.py, through the kpack.commands entry point). Exit codes as
there: 0 stopped cleanly, 1 the server or a run failed to start, 2 bad input (no
sources, an invalid urls.txt or pack.toml, a bad --task-runner). KPACK_DEBUG=1 re-raises.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from packs.cli.common import EXIT_FAILED, fail


def _fail(exc: BaseException) -> NoReturn:
    from flows.runners import TaskRunnerSettingError
    from tasks.sources import SourceError

    # A ServerError (flows.server, a RuntimeError) is a failure, never bad input.
    fail(exc, (SourceError, TaskRunnerSettingError, FileNotFoundError))


def serve(
    sources: Annotated[Path, typer.Argument(help="Folder with one sub-folder per pack (urls.txt, pack.toml).")] = Path("sources"),
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder the packs are published into, as OUT/<name>/.")] = Path("out"),
    work_dir: Annotated[Path | None, typer.Option(help="Intermediates and caches (default OUT/.work).")] = None,
    every: Annotated[float | None, typer.Option(help="Rebuild every N seconds instead of each pack.toml schedule (demos).")] = None,
    limit: Annotated[int, typer.Option(min=1, help="Most builds running at once.")] = 1,
    task_runner: Annotated[str | None, typer.Option(help="threads | threads:N | dask | dask:N | tcp://host:port (default $KPACK_TASK_RUNNER or threads).")] = None,
) -> None:
    """Serve one Prefect deployment per SOURCES/* pack, scheduled by its pack.toml cron.

    Registers the deployments build-pack/<pack> with the Prefect server in $PREFECT_API_URL
    and runs each build when it falls due, until Ctrl-C.

    Run one now: prefect deployment run 'build-pack/<pack>'. See deployments/README.md.
    """
    from packs.extras import MissingExtraError, build_missing_message

    if needs := build_missing_message("kpack serve"):  # a runtime-only install
        _fail(MissingExtraError(needs))
    try:
        from flows.schedule import serve as serve_all

        serve_all(sources, out, work_dir,
                  every=timedelta(seconds=every) if every else None, limit=limit,
                  task_runner=task_runner)
    except Exception as exc:  # the CLI edge: one clear line, KPACK_DEBUG re-raises
        _fail(exc)


server_app = typer.Typer(help="A persistent local Prefect server (with its UI) that builds use "
                         "instead of starting a temporary one each time.",
                         no_args_is_help=True)


@server_app.command("start")
def server_start(
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port on 127.0.0.1.")] = 4200,
) -> None:
    """Start the server in the background, wait until it answers, and return. Its runs
    and logs live in $PREFECT_HOME (default ~/.prefect)."""
    from flows import server

    try:
        info, started = server.start(port)
    except Exception as exc:  # the CLI edge
        _fail(exc)
    verb = "started" if started else "already running"
    typer.echo(f"Prefect server {verb}: UI {info.ui}, API {info.url} (pid {info.pid}); "
               "kpack build uses it from now on")


@server_app.command("stop")
def server_stop() -> None:
    """Stop the server that `kpack server start` started."""
    from flows import server

    info = server.stop()
    typer.echo(f"stopped the Prefect server on port {info.port}" if info
               else "no kpack Prefect server is running")


@server_app.command("status")
def server_status() -> None:
    """Say whether builds have a server: PREFECT_API_URL, the persistent one, or none
    (each build then starts a temporary one). Exit 1 when none answers."""
    from prefect.settings import PREFECT_API_URL

    from flows import server

    configured = PREFECT_API_URL.value()
    if configured:
        state = "answers" if server.healthy(configured) else "does NOT answer"
        typer.echo(f"PREFECT_API_URL={configured} ({state}); builds report there")
        raise typer.Exit(0 if state == "answers" else EXIT_FAILED)
    info = server.running()
    if info is None:
        typer.echo("no Prefect server: each build starts a temporary one "
                   "(kpack server start to keep one running)")
        raise typer.Exit(EXIT_FAILED)
    typer.echo(f"running: UI {info.ui}, API {info.url} (pid {info.pid})")


def register(app: typer.Typer) -> None:
    """Add `kpack serve` and `kpack server start|stop|status` to `app`."""
    app.command(name="serve")(serve)
    app.add_typer(server_app, name="server")
