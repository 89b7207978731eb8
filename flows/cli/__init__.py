"""`kpack`: build, query and inspect knowledge packs.

Thin by design: each command parses its arguments, calls one library function and prints.
Commands live by job: build (`build.py`), query and search (`query.py`), looking into and
shipping packs (`admin.py`), the explorer web page (`explore.py`), evaluation (`evaluate.py`), the scheduled rebuild server
(`serve.py`); `common.py` holds the exit codes and the error edge.
`--json` prints machine-readable output. Exit codes: 0 success, 1 the work failed (a build
that published nothing, a query that errored), 2 bad input (unknown source, invalid
urls.txt or pack.toml, a failed preflight, an unreadable or damaged pack, a mismatched
model, bad options), 3 `build --strict` published a pack with failed sources or a
partial one. Errors are one line; set KPACK_DEBUG=1 to get the full traceback.
"""

from __future__ import annotations

import sys

import typer

from flows.cli import admin, build, evaluate, explore, query, serve
from flows.cli.common import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_PARTIAL, OptionError

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_PARTIAL", "OptionError", "app", "main"]

app = typer.Typer(
    help="Turn a list of URLs into a self-contained, queryable knowledge pack.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
for _group in (build, query, admin, explore, evaluate, serve):  # the order `kpack --help` lists them
    _group.register(app)


def main() -> None:
    """The `kpack` entry point: the project's Prefect settings first (flows.settings), then
    the command."""
    from flows.settings import configure_prefect_env

    configure_prefect_env()
    app(prog_name="kpack")


if __name__ == "__main__":
    sys.exit(main())
