"""`kpack topics`: the map of a pack's topics (communities of its entity graph, computed by
the build), each with its title, top entities and sections and a digest whose lines cite
the sections they quote. Exit codes: see packs/cli/common.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from packs.cli.common import (
    TRUST_HELP,
    UNVERIFIED_HELP,
    fail,
    open_checks,
    print_json,
    query_input_errors,
)


def topics(
    pack: Annotated[Path, typer.Argument(help="Pack folder (or one build folder).")],
    limit: Annotated[int, typer.Option("--limit", "-n", help="Topics to list (1..1000), largest first.")] = 30,
    allow_unverified: Annotated[bool, typer.Option("--allow-unverified", help=UNVERIFIED_HELP)] = False,
    trust: Annotated[list[Path] | None, typer.Option("--trust", metavar="PUBKEY", help=TRUST_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the topics as JSON.")] = False,
) -> None:
    """List the topics of PACK, largest first: title, size, top entities, top sections and
    the digest with its citations (each checked against its section). A pack built before
    topics lists none and says to rebuild."""
    try:
        if not 1 <= limit <= 1000:
            raise ValueError(f"--limit {limit}: use 1..1000")
        from packs import KnowledgePack
        from packs.topics import has_topics, pack_topics

        with KnowledgePack.open(pack, **open_checks(allow_unverified, trust)) as kp:
            present = has_topics(kp.db)
            found = pack_topics(kp, limit) if present else []
            name = kp.manifest.name
    except Exception as exc:  # the CLI edge
        fail(exc, query_input_errors())
    if as_json:
        print_json({"pack": name, "topics": [t.to_dict() for t in found]})
        return
    if not present:
        typer.echo(f"{name}: this build has no topic map (built before topics); rebuild it")
        return
    typer.echo(f"{name}: {len(found)} topics")
    for t in found:
        typer.echo(f"\n{t.rank + 1}. {t.title}  ({t.size} entities, {t.sections_total} sections)")
        typer.echo("   entities: " + ", ".join(e.name for e in t.entities))
        for line in t.digest.splitlines():
            typer.echo(f"   {line}")
        for c in t.citations:
            mark = "" if c["verified"] else "  UNVERIFIED"
            typer.echo(f"     [{c['n']}] {c['heading_path']} — {c['url']}{mark}")


def register(app: typer.Typer) -> None:
    """Add `topics` to `app`."""
    app.command(name="topics")(topics)
