"""`kpack serve`: rebuild every source's pack on its schedule, through Prefect (the
Prefect server itself: `kpack server`, flows/cli/server.py).

`register(app)` adds the command to the main `kpack` app (packs/cli/__init__.py, through the kpack.commands entry point). Exit codes as
there: 0 stopped cleanly, 1 the server or a run failed to start, 2 bad input (no
sources, an invalid urls.txt or pack.toml, a bad --task-runner or --notify target). KPACK_DEBUG=1 re-raises.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from packs.cli.common import fail


def _fail(exc: BaseException) -> NoReturn:
    from flows.runners import TaskRunnerSettingError
    from tasks.alert_config import TargetError
    from tasks.sources import SourceError

    # A ServerError (flows.server, a RuntimeError) is a failure, never bad input.
    fail(exc, (SourceError, TaskRunnerSettingError, FileNotFoundError, TargetError))


def serve(
    sources: Annotated[Path, typer.Argument(help="Folder with one sub-folder per pack (urls.txt, pack.toml).")] = Path("sources"),
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder the packs are published into, as OUT/<name>/.")] = Path("out"),
    work_dir: Annotated[Path | None, typer.Option(help="Intermediates and caches (default OUT/.work).")] = None,
    every: Annotated[float | None, typer.Option(help="Rebuild every N seconds instead of each pack.toml schedule (demos).")] = None,
    limit: Annotated[int, typer.Option(min=1, help="Most builds running at once.")] = 1,
    task_runner: Annotated[str | None, typer.Option(help="threads | threads:N | dask | dask:N | tcp://host:port (default $KPACK_TASK_RUNNER or threads).")] = None,
    notify: Annotated[list[str] | None, typer.Option("--notify", help="Tell this webhook (a URL; a Slack incoming webhook is sent Slack text) or env:NAME (the URL in that variable) of every pack's failed, refused, partial or stale build, besides each pack.toml's notify. Repeat for several.")] = None,
    explorer_url: Annotated[str | None, typer.Option(help="Where messages link for a pack's builds page (default http://127.0.0.1:8765/, kpack explore's address).")] = None,
) -> None:
    """Serve one Prefect deployment per SOURCES/* pack, scheduled by its pack.toml cron.

    Registers the deployments build-pack/<pack> with the Prefect server in $PREFECT_API_URL
    (else this PREFECT_HOME's own server, as kpack build uses) and runs each build when it
    falls due, until Ctrl-C. Alerts: Prefect automations, created or updated at start,
    tell the pack.toml `notify` targets and every --notify target when a build fails,
    crashes, is refused by the publish guard or publishes a partial pack, and when no
    build succeeds within the pack's max_age (stale).

    Run one now: prefect deployment run 'build-pack/<pack>'. See deployments/README.md.
    """
    from packs.extras import MissingExtraError, build_missing_message

    if needs := build_missing_message("kpack serve"):  # a runtime-only install
        _fail(MissingExtraError(needs))
    try:
        from flows.schedule import serve as serve_all

        serve_all(sources, out, work_dir,
                  every=timedelta(seconds=every) if every else None, limit=limit,
                  task_runner=task_runner, notify=notify or (),
                  explorer_url=explorer_url, log=lambda line: typer.echo(line, err=True))
    except Exception as exc:  # the CLI edge: one clear line, KPACK_DEBUG re-raises
        _fail(exc)


def register(app: typer.Typer) -> None:
    """Add `kpack serve` to `app`."""
    app.command(name="serve")(serve)
