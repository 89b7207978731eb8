"""`kpack explore`: a read-only local web page to look inside packs, ask them and judge
them (packs/explore/). Runs on the query runtime plus `knowledge-packs[explore]`; imports
nothing of the build side (no Prefect). Exit codes as in packs/cli/common.py: 2 for an
unreadable pack or an address it cannot listen on, 1 for a missing extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from packs.cli.common import TRUST_HELP, UNVERIFIED_HELP, OptionError, fail, open_checks


def explore(
    packs: Annotated[list[Path], typer.Argument(help="Pack folders (or build folders) to explore; the first is the default, the others a click away.")],
    host: Annotated[str, typer.Option(help="Address to listen on. The default serves this machine only; any other address needs a token (--token, or one is made and printed in the URL) and prints a warning.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on; 0 picks a free one.")] = 8765,
    token: Annotated[str | None, typer.Option(envvar="KPACK_EXPLORE_TOKEN", help="The token every visitor must bring (the printed URL carries it; a cookie after the first visit). Off loopback one is made when none is given. $KPACK_EXPLORE_TOKEN keeps it off the command line.")] = None,
    allow_host: Annotated[list[str] | None, typer.Option("--allow-host", metavar="NAME", help="Another Host name to answer to (a DNS alias of this machine; repeatable). It answers to its address, this machine's names and loopback anyway.")] = None,
    allow_unverified: Annotated[bool, typer.Option("--allow-unverified", help=UNVERIFIED_HELP)] = False,
    trust: Annotated[list[Path] | None, typer.Option("--trust", metavar="PUBKEY", help=TRUST_HELP)] = None,
) -> None:
    """Serve a read-only web page on HOST:PORT to look inside PACKS: every pack, asking with
    citations and the sections behind them, sections, entities and their neighbourhood
    graph, build history, diffs between builds and the last eval scorecard. Prints one
    line, the URL, then serves until Ctrl-C; a rebuild of a pack is served at once (each
    pack folder's `current` is followed). Off loopback: a warning on stderr first, and the
    URL carries the token."""
    try:
        from packs.explore.cli import serve

        serve(packs, host=host, port=port, out=typer.echo, token=token,
              allow_hosts=tuple(allow_host or ()), **open_checks(allow_unverified, trust))
    except KeyboardInterrupt:
        pass
    except Exception as exc:  # the CLI edge
        from packs.embedding import EmbeddingModelError
        from packs.explore.cli import ExploreError
        from packs.format import PackFormatError

        fail(exc, (PackFormatError, EmbeddingModelError, ExploreError, FileNotFoundError,
                   OptionError))


def register(app: typer.Typer) -> None:
    """Add `explore` to `app`."""
    app.command(name="explore")(explore)
