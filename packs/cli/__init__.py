"""`kpack`: build, query and inspect knowledge packs.

Thin by design: each command parses its arguments, calls one library function and prints.
The runtime commands live here, on the query side, and import nothing of the build:
query and search (`query.py`), looking into and shipping packs (`admin.py`), the topic
map (`topics.py`), the explorer
web page (`explore.py`), evaluation (`evaluate.py`); `common.py` holds the exit codes and
the error edge. The build side adds its commands (build, serve, server) through the
`kpack.commands` entry point group (pyproject.toml), loaded only when the command asked
for is not a runtime one, so `kpack search` never loads Prefect, `tasks` or `flows`.

`--json` prints machine-readable output. Exit codes: 0 success, 1 the work failed (a build
that published nothing, a query that errored), 2 bad input (unknown source, invalid
urls.txt or pack.toml, a failed preflight, an unreadable or damaged pack, a mismatched
model, bad options), 3 `build --strict` published a pack with failed sources or a
partial one. Errors are one line; set KPACK_DEBUG=1 to get the full traceback.
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

import typer

from packs.cli import admin, evaluate, explore, query, topics
from packs.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_PARTIAL,
    OneLineErrors,
    OptionError,
)

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_PARTIAL", "OptionError", "main",
           "make_app"]

PLUGIN_GROUP = "kpack.commands"
RUNTIME_GROUPS = (query, admin, topics, explore, evaluate)  # the order `kpack --help` lists them
# The commands of RUNTIME_GROUPS: a command line naming one of these loads no plugin.
RUNTIME_COMMANDS = frozenset({"query", "search", "diff", "inspect", "verify", "mcp", "keygen",
                              "pack", "install", "list", "eval", "explore", "topics"})


def make_app(plugins: bool = True) -> typer.Typer:
    """The `kpack` Typer app: the runtime commands, and with `plugins` every command group
    registered under the `kpack.commands` entry points (the build side's)."""
    app = typer.Typer(
        cls=OneLineErrors,
        help="Turn a list of URLs into a self-contained, queryable knowledge pack.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    if plugins:
        for ep in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
            ep.load()(app)
    for group in RUNTIME_GROUPS:
        group.register(app)
    return app


def main(argv: list[str] | None = None) -> int | None:
    """The `kpack` entry point. A runtime command (search, query, ...) gets an app without
    the build side's commands; anything else (build, serve, --help) gets them all."""
    args = sys.argv[1:] if argv is None else argv
    runtime_only = bool(args) and args[0] in RUNTIME_COMMANDS
    return make_app(plugins=not runtime_only)(args=args, prog_name="kpack")
