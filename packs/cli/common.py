"""What every `kpack` command shares: exit codes, the one-line error edge, JSON output.

Exit codes: 0 success, 1 the work failed, 2 bad input, 3 `build --strict` published a
pack with failed sources or a partial one, 130 a build stopped by Ctrl-C (flows/cli/build.py). Which exceptions count as bad input is each
command group's call (`fail(exc, bad_input)`); KPACK_DEBUG=1 re-raises instead.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import NoReturn

import typer
from typer.core import TyperGroup

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_PARTIAL = 3  # kpack build --strict: published, but sources failed or the pack is partial


class OptionError(ValueError):
    """A malformed option on the command line (--option, --pack, --embedding-model)."""


UNVERIFIED_HELP = "Open a pack whose manifest has no checksums (or leaves files out), unchecked: a damaged database may crash the process."
TRUST_HELP = "Refuse a pack whose manifest is not signed by this public key (repeatable: any of them)."


def open_checks(allow_unverified: bool, trust: list[Path] | None) -> dict[str, object]:
    """--allow-unverified / --trust as KnowledgePack.open's verify= / trust= (OptionError
    for both at once: a signature vouches for checksums that would not be checked)."""
    if allow_unverified and trust:
        raise OptionError("--trust checks the pack's checksums: it cannot go with "
                          "--allow-unverified")
    return {"verify": not allow_unverified, "trust": trust or None}


def query_input_errors() -> tuple[type[BaseException], ...]:
    """Bad input for query, search, diff, inspect and verify: an unreadable or damaged
    pack, a mismatched model, bad options, an empty question."""
    from packs.embedding import EmbeddingModelError
    from packs.format import PackFormatError
    from packs.options import OptionsError
    from packs.pipeline import QuestionError

    return (PackFormatError, EmbeddingModelError, FileNotFoundError, OptionsError,
            OptionError, QuestionError)


def fail(exc: BaseException, bad_input: tuple[type[BaseException], ...]) -> NoReturn:
    """The CLI edge: print `error: <exc>` on one line and exit 2 when `exc` is one of
    `bad_input`, else 1. Re-raises `exc` when KPACK_DEBUG is set."""
    if os.environ.get("KPACK_DEBUG"):
        raise exc
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(EXIT_BAD_INPUT if isinstance(exc, bad_input) else EXIT_FAILED)


class OneLineErrors(TyperGroup):
    """The `kpack` command group: a usage error (an unknown option, a missing argument, a
    value of the wrong type) is one line, `error: <what> (see kpack CMD --help)`, exit 2,
    like every other error of the CLI, instead of click's "Error:" paragraph or a box."""

    def main(self, args=None, prog_name=None, complete_var=None,  # type: ignore[override]
             standalone_mode: bool = True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.TyperException as exc:  # click's errors (Typer vendors click)
            ctx = getattr(exc, "ctx", None)
            if type(exc).__name__ == "NoArgsIsHelpError":  # `kpack` alone: the help
                text = ctx.get_help() if ctx else ""
                if text:  # (rich help is printed by get_help itself)
                    typer.echo(text)
            else:
                message = " ".join(exc.format_message().split())
                typer.echo(f"error: {message} (see {ctx.command_path if ctx else 'kpack'} "
                           "--help)", err=True)
            sys.exit(getattr(exc, "exit_code", EXIT_BAD_INPUT))
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(EXIT_FAILED)
        sys.exit(code if isinstance(code, int) else 0)


def print_json(data: object) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
