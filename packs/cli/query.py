"""`kpack query | search`: answer a question from one pack or several, or rank their
sections for it. Exit codes: see packs/cli/common.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from packs.cli.common import (
    TRUST_HELP,
    UNVERIFIED_HELP,
    OptionError,
    fail,
    open_checks,
    print_json,
    query_input_errors,
)


def _fail(exc: BaseException) -> NoReturn:
    fail(exc, query_input_errors())


def _search_options(max_results: int, no_enhancements: bool,
                    option: list[str] | None) -> dict[str, object]:
    """CLI flags → keyword overrides of packs.options.SearchOptions (validated there)."""
    opts: dict[str, object] = {"max_results": max_results}
    if no_enhancements:
        opts["use_enhancements"] = False
    for item in option or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise OptionError(f"--option {item!r}: write NAME=VALUE, e.g. -o hybrid=false")
        try:
            opts[name.strip()] = json.loads(value)
        except json.JSONDecodeError:
            opts[name.strip()] = value  # a bare string such as bfs
    return opts


def _target(args: list[str], packs: list[Path] | None, models: list[str] | None,
            checks: dict[str, object]):
    """(pack or PackSet, question) from `PACK QUESTION` or `--pack A --pack B QUESTION`.

    With several packs, --embedding-model takes MODEL_ID=FOLDER pairs (a local folder for
    a pack built with MODEL_ID); with one pack, a plain model name or folder as before.
    `checks`: verify= and trust= for opening each pack.
    """
    if packs:
        if len(args) != 1:
            raise OptionError("with --pack, give only the question (quote it), e.g. "
                              "kpack query --pack A --pack B \"how do I ...?\"")
        mapping = {}
        for item in models or []:
            model_id, sep, folder = item.partition("=")
            if not sep:
                raise OptionError(f"--embedding-model {item!r}: with --pack write "
                                  "MODEL_ID=FOLDER")
            mapping[model_id] = folder
        from packs import PackSet

        return PackSet.open(packs, embedding_models=mapping, **checks), args[0]
    if len(args) != 2:
        raise OptionError("give PACK and QUESTION (or --pack PACK ... QUESTION)")
    if models and len(models) > 1:
        raise OptionError("one --embedding-model for one pack")
    from packs import KnowledgePack

    return KnowledgePack.open(Path(args[0]), embedding_model=models[0] if models else None,
                              **checks), args[1]


ARGS_HELP = "PACK QUESTION, or just QUESTION with --pack (several packs at once)."
PACKS_HELP = "A pack folder to search; repeat for several packs (results fused by RRF, each labelled with its pack)."
PER_PACK_HELP = "With several packs: keep the top N of each pack (pack_mode=per_pack) instead of one total cap."
MODEL_HELP = "Local copy of the pack's model; with --pack, MODEL_ID=FOLDER (repeatable)."

# The flags `query` and `search` share, declared once.
QuestionArgs = Annotated[list[str], typer.Argument(metavar="[PACK] QUESTION", help=ARGS_HELP)]
PackList = Annotated[list[Path] | None, typer.Option("--pack", "-p", help=PACKS_HELP)]
MaxResults = Annotated[int, typer.Option("--max-results", "-k", help="Sections to retrieve (1..1000).")]
PerPack = Annotated[int | None, typer.Option("--per-pack", help=PER_PACK_HELP)]
NoEnhancements = Annotated[bool, typer.Option("--no-enhancements", help="Plain vector search (the gate and quality filter stay on).")]
EmbeddingModels = Annotated[list[str] | None, typer.Option(help=MODEL_HELP)]


def _run(method: str, args: list[str], packs: list[Path] | None, models: list[str] | None,
         allow_unverified: bool, trust: list[Path] | None, *, max_results: int,
         no_enhancements: bool, option: list[str] | None, per_pack: int | None):
    """Open the pack(s) that `args` / `packs` name (see _target) and call their `method`
    ("ask" or "search") on the question with the options the flags give. Any error, a bad
    flag included, ends the command with its exit code (the CLI edge)."""
    try:
        opts = _search_options(max_results, no_enhancements, option)
        if per_pack is not None:
            opts.update(pack_mode="per_pack", per_pack_results=per_pack)
        target, question = _target(args, packs, models, open_checks(allow_unverified, trust))
        with target as kp:
            return getattr(kp, method)(question, **opts)
    except Exception as exc:  # the CLI edge
        _fail(exc)


def query(
    args: QuestionArgs,
    pack: PackList = None,
    max_results: MaxResults = 10,
    per_pack: PerPack = None,
    no_enhancements: NoEnhancements = False,
    option: Annotated[list[str] | None, typer.Option("--option", "-o", metavar="NAME=VALUE", help="Any SearchOptions field, value as JSON, e.g. -o expansion_mode=bfs -o hybrid=false -o url_prefix=/docs/tasks/.")] = None,
    embedding_model: EmbeddingModels = None,
    allow_unverified: Annotated[bool, typer.Option("--allow-unverified", help=UNVERIFIED_HELP)] = False,
    trust: Annotated[list[Path] | None, typer.Option("--trust", metavar="PUBKEY", help=TRUST_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer dict as JSON.")] = False,
) -> None:
    """Answer QUESTION from PACK, or from every --pack (Claude when ANTHROPIC_API_KEY is set,
    else extractive)."""
    result = _run("ask", args, pack, embedding_model, allow_unverified, trust,
                  max_results=max_results, no_enhancements=no_enhancements, option=option,
                  per_pack=per_pack)
    if as_json:
        print_json(result)
        return
    typer.echo(result["answer"])
    typer.echo("")
    typer.echo(f"[{result['query_type']}]")
    # Chunks of one section share its heading: list each heading once, with all its [n].
    grouped: dict[tuple, list[int]] = {}
    for src in result["sources"]:
        key = (src.get("pack"), src.get("heading_path") or src.get("title"), src["url"])
        grouped.setdefault(key, []).append(src["n"])
    for (pack_label, heading, url), ns in grouped.items():
        where = f"[{pack_label}] " if pack_label else ""
        typer.echo(f"  [{', '.join(map(str, ns))}] {where}{heading} — {url}")


def search(
    args: QuestionArgs,
    pack: PackList = None,
    max_results: MaxResults = 10,
    per_pack: PerPack = None,
    no_enhancements: NoEnhancements = False,
    option: Annotated[list[str] | None, typer.Option("--option", "-o", metavar="NAME=VALUE", help="Any SearchOptions field, value as JSON, e.g. -o expansion_mode=bfs -o content_kind=code.")] = None,
    context: Annotated[bool, typer.Option("--context", help="Also print the assembled context (what an agent gets).")] = False,
    embedding_model: EmbeddingModels = None,
    allow_unverified: Annotated[bool, typer.Option("--allow-unverified", help=UNVERIFIED_HELP)] = False,
    trust: Annotated[list[Path] | None, typer.Option("--trust", metavar="PUBKEY", help=TRUST_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the search result as JSON.")] = False,
) -> None:
    """Rank the sections of PACK (or of every --pack) for QUESTION and print them (no answer
    synthesis)."""
    result = _run("search", args, pack, embedding_model, allow_unverified, trust,
                  max_results=max_results, no_enhancements=no_enhancements, option=option,
                  per_pack=per_pack)
    data = result.to_dict()
    if as_json:
        print_json(data)
        return
    if data["gated"]:
        from packs.retrieval.gate import reason

        typer.echo(f"the pack holds nothing relevant enough ({reason(result)})")
    if data["filters"]:
        typer.echo(f"filters: {data['filters']}")
    for i, sec in enumerate(data["sections"], start=1):
        where = f"[{sec['pack']}] " if sec.get("pack") else ""
        typer.echo(f"{i:2d}. {sec['score']:.3f}  {where}{sec['heading_path']}  {sec['url']}")
    if context:
        typer.echo(f"\n--- context ({data['context_tokens']} tokens"
                   f"{', truncated' if data['truncated'] else ''}) ---\n{data['context']}")


def register(app: typer.Typer) -> None:
    """Add `query` and `search` to `app`."""
    app.command(name="query")(query)
    app.command(name="search")(search)
