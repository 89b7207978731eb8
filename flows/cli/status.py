"""`kpack status [DIR]`: how fresh each pack is (packs/status.py): its last build, its last
successful one and that one's age against max_age, the last alert sent.

The facts come from the pack folders (the explorer's home page shows the same). Before
reading them, the notifications sent since the last record are fetched from the Prefect
server builds report to, when one answers (flows/alert_log.py): a stale alert sent after
`kpack serve` stopped is then listed too. Exit codes: 0 no watched pack is stale, 1 one
is (for a cron or monitoring check), 2 bad input (no pack at DIR).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from packs.cli.common import EXIT_FAILED, fail, print_json


def _fail(exc: BaseException) -> NoReturn:
    fail(exc, (FileNotFoundError,))


def _server() -> tuple[str, str | None] | None:
    """(API URL, secret) of the Prefect server that answers for this shell: $PREFECT_API_URL
    (with this home's secret when it is this home's server), else this home's kpack
    server, never one started for this; None when none answers."""
    from flows import server, server_auth

    url = os.environ.get("PREFECT_API_URL") or ""
    if url:
        record = server.read_state()
        secret = os.environ.get(server_auth.CLIENT_ENV) or server_auth.secret_for(
            url, server.home(), record.port if record else None)
    else:
        info = server.running()
        if info is None:
            return None
        url, secret = info.url, server_auth.read_secret(server.home())
    return (url, secret) if server.healthy(url, timeout_s=2.0) else None


def sync_alerts(folders: list[Path]) -> str | None:
    """Record the alerts sent about `folders` since their last record, from the server
    that answers (None: none answers, nothing was fetched). Returns the server's URL."""
    found = _server()
    if found is None:
        return None
    url, secret = found
    from flows.settings import configure_prefect_env

    configure_prefect_env()
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.alert_log import Recorder
    from flows.server_auth import client_settings

    with temporary_settings(updates={PREFECT_API_URL: url, **client_settings(secret)}):
        Recorder({f.name: f for f in folders}).catch_up()
    return url


def status(
    path: Annotated[Path, typer.Argument(help="An output folder holding packs (OUT), or one pack folder.")] = Path("out"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
    offline: Annotated[bool, typer.Option("--offline", help="Read the pack folders only; do not ask the Prefect server for the alerts sent since the last record.")] = False,
) -> None:
    """Each pack's last build, last successful build (published, or no changes) and its
    age against max_age, and the last alert sent. A pack is stale when kpack serve watches
    it (watch.json) and no build succeeded within its max_age. Exit 1 when one is stale."""
    from packs.status import STALE, describe, pack_folders, pack_status

    folders = pack_folders(path)
    if not folders:
        _fail(FileNotFoundError(f"{path}: no pack folders here (a pack folder holds "
                                "'current' or history.jsonl); pass the --out folder of "
                                "kpack build or kpack serve"))
    if not offline:
        try:
            sync_alerts(folders)
        except Exception as exc:  # the CLI edge: the folders alone still answer
            if os.environ.get("KPACK_DEBUG"):
                raise
            typer.echo(f"note: the alerts sent since the last record were not fetched "
                       f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]})", err=True)
    statuses = [pack_status(f) for f in folders]
    if as_json:
        print_json([s.to_dict() for s in statuses])
    else:
        for s in statuses:
            for line in describe(s):
                typer.echo(line)
    if any(s.state == STALE for s in statuses):
        raise typer.Exit(EXIT_FAILED)


def register(app: typer.Typer) -> None:
    """Add `kpack status` to `app`."""
    app.command(name="status")(status)
