"""The build side's `kpack` commands: build (`build.py`), serve (`serve.py`), server
(`server.py`) and status (`status.py`).

The `kpack` entry point lives on the query side (packs/cli/); it loads `register` here
through the `kpack.commands` entry point group (pyproject.toml) for any command line that
is not a runtime command. `register` applies the project's Prefect settings first
(flows.settings), before any command can import Prefect.
"""

from __future__ import annotations

import typer

from flows.cli import build, serve, server, status


def register(app: typer.Typer) -> None:
    """Add build, serve, server and status to `app`, with the project's Prefect settings
    applied."""
    from flows.settings import configure_prefect_env

    configure_prefect_env()
    for group in (build, serve, server, status):
        group.register(app)
