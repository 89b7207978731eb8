"""`kpack`: build, query and inspect knowledge packs.

Thin by design: each command parses its arguments, calls one library function and prints.
`--json` prints machine-readable output. Exit codes: 0 success, 1 the work failed (a build
that published nothing, a query that errored), 2 bad input (unknown source, invalid
urls.txt or pack.toml, a failed preflight, an unreadable or damaged pack, a mismatched
model, bad options), 3 `build --strict` published a pack with failed sources or a
partial one. Errors are one line; set KPACK_DEBUG=1 to get the full traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

app = typer.Typer(
    help="Turn a list of URLs into a self-contained, queryable knowledge pack.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_PARTIAL = 3  # kpack build --strict: published, but sources failed or the pack is partial


def _input_errors() -> tuple[type[BaseException], ...]:
    from flows.runners import TaskRunnerSettingError
    from packs.embedding import EmbeddingModelError
    from packs.format import PackFormatError
    from tasks.sources import SourceError

    from flows.preflight import PreflightError
    from packs.options import OptionsError
    from packs.pipeline import QuestionError

    return (SourceError, PackFormatError, EmbeddingModelError, FileNotFoundError,
            TaskRunnerSettingError, OptionsError, OptionError, QuestionError, PreflightError)


def _fail(exc: BaseException) -> None:
    if os.environ.get("KPACK_DEBUG"):
        raise exc
    code = EXIT_BAD_INPUT if isinstance(exc, _input_errors()) else EXIT_FAILED
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(code)


def _print_json(data: object) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


@app.command()
def build(
    source: Annotated[Path, typer.Argument(help="Source folder holding urls.txt (and pack.toml).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder the pack is published into, as OUT/<name>/.")] = Path("out"),
    work_dir: Annotated[Optional[Path], typer.Option(help="Intermediates and caches (default OUT/.work).")] = None,
    embedding_model: Annotated[Optional[str], typer.Option(help="Model id or local folder; overrides pack.toml and $KPACK_EMBEDDING_MODEL.")] = None,
    extractor: Annotated[Optional[str], typer.Option(help="auto | claude | offline (default from pack.toml: auto).")] = None,
    allow_private_hosts: Annotated[bool, typer.Option("--allow-private-hosts", help="Allow fetching from loopback/private addresses.")] = False,
    max_cost: Annotated[Optional[float], typer.Option(help="Stop starting Claude calls once this many USD are spent.")] = None,
    task_runner: Annotated[Optional[str], typer.Option(help="threads | threads:N | dask | dask:N | tcp://host:port of a Dask scheduler (default $KPACK_TASK_RUNNER or threads).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Publish even when the publish guard finds the build clearly worse than the current one.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help=f"Exit {EXIT_PARTIAL} when any source failed or the pack is partial (for schedulers).")] = False,
    estimate: Annotated[bool, typer.Option("--estimate", help="Fetch and split, then print the Claude tokens and USD a build would spend; publish nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the build summary as JSON.")] = False,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Ask Claude again for sections whose answers were unusable on earlier builds (remembered failures are otherwise retried on extract_failure_retries builds, then skipped).")] = False,
) -> None:
    """Build (or rebuild) the pack of SOURCE and publish it atomically into OUT/<name>/.

    Before anything is fetched, a preflight checks the config, the embedding model, the
    hosts, the API key and the output folder (exit 2 with every problem in one line).
    A build the publish guard finds clearly worse than the current one publishes nothing
    and exits 1 (--force overrides); a second build of a pack that is being built is
    refused. With --strict, failed sources or a partial pack exit 3."""
    from packs.extras import MissingExtraError, build_missing_message

    if needs := build_missing_message():  # a runtime-only install: say what to add
        _fail(MissingExtraError(needs))
    if estimate:
        _estimate(source, out, work_dir, embedding_model, extractor, allow_private_hosts, as_json)
        return
    try:
        from flows.build import run_build, shortfalls
        from flows.settings import console_errors_one_line

        console_errors_one_line()
        summary = run_build(
            source, out, work_dir=work_dir, embedding_model=embedding_model,
            extractor=extractor, allow_private_hosts=allow_private_hosts, max_cost_usd=max_cost,
            task_runner_setting=task_runner, force=force, retry_failed=retry_failed,
            log=lambda line: typer.echo(line, err=True),
        )
    except Exception as exc:  # the CLI edge: one clear line, KPACK_DEBUG re-raises
        _fail(exc)
    _print_build(summary, as_json)
    if strict and shortfalls(summary):
        typer.echo(f"strict: {'; '.join(shortfalls(summary))}", err=True)
        raise typer.Exit(EXIT_PARTIAL)


def _print_build(summary: dict, as_json: bool) -> None:
    if as_json:
        _print_json(summary)
        return
    c = summary["counts"]
    if summary.get("status") == "no changes":
        typer.echo(f"no changes: {summary['pack']} stays at build {summary['build_id']} "
                   f"({summary['seconds']} s)")
        return
    typer.echo(
        f"built {summary['pack']} (build {summary['build_id']}) in {summary['seconds']} s: "
        f"{c['articles']} articles, {c['sections']} sections, {c['entities']} entities, "
        f"{c['facts']} facts, {c['links']} links"
    )
    if summary.get("changes"):
        from packs.diff import summary_line

        typer.echo(f"changes: {summary_line(summary['changes'])}")
    extractor = summary["extractor"]
    typer.echo(f"extractor: {extractor.get('note') or extractor['kind']}")
    for failed in summary["failed_sources"]:
        typer.echo(f"  not included: {failed['url']}: {failed['status']}: {failed['error']}")
    if summary["partial"]:
        typer.echo("  the pack is PARTIAL: see manifest.json partial_reasons")


def _estimate(source, out, work_dir, embedding_model, extractor, allow_private_hosts,
              as_json) -> None:
    try:
        from flows.build import run_estimate

        est = run_estimate(source, out, work_dir=work_dir, embedding_model=embedding_model,
                           extractor=extractor, allow_private_hosts=allow_private_hosts)
    except Exception as exc:  # the CLI edge
        _fail(exc)
    if as_json:
        _print_json(est)
        return
    typer.echo(
        f"estimate for {est['pack']} with {est['model']}: {est['to_call']} of {est['sections']} "
        f"sections to extract ({est['cached']} cached); ~{est['input_tokens']:,} input + "
        f"~{est['output_tokens']:,} output tokens ≈ ${est['cost_usd']:.2f} "
        f"(prices as of {est['prices_as_of']})"
    )


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


class OptionError(ValueError):
    """A malformed --option on the command line."""


def _open(pack: Path, embedding_model: str | None):
    from packs import KnowledgePack

    return KnowledgePack.open(pack, embedding_model=embedding_model)


def _target(args: list[str], packs: list[Path] | None, models: list[str] | None):
    """(pack or PackSet, question) from `PACK QUESTION` or `--pack A --pack B QUESTION`.

    With several packs, --embedding-model takes MODEL_ID=FOLDER pairs (a local folder for
    a pack built with MODEL_ID); with one pack, a plain model name or folder as before.
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

        return PackSet.open(packs, embedding_models=mapping), args[0]
    if len(args) != 2:
        raise OptionError("give PACK and QUESTION (or --pack PACK ... QUESTION)")
    if models and len(models) > 1:
        raise OptionError("one --embedding-model for one pack")
    return _open(Path(args[0]), models[0] if models else None), args[1]


ARGS_HELP = "PACK QUESTION, or just QUESTION with --pack (several packs at once)."
PACKS_HELP = "A pack folder to search; repeat for several packs (results fused by RRF, each labelled with its pack)."
PER_PACK_HELP = "With several packs: keep the top N of each pack (pack_mode=per_pack) instead of one total cap."
MODEL_HELP = "Local copy of the pack's model; with --pack, MODEL_ID=FOLDER (repeatable)."


def _multi_options(opts: dict[str, object], per_pack: int | None) -> dict[str, object]:
    if per_pack is not None:
        opts.update(pack_mode="per_pack", per_pack_results=per_pack)
    return opts


@app.command()
def query(
    args: Annotated[list[str], typer.Argument(metavar="[PACK] QUESTION", help=ARGS_HELP)],
    pack: Annotated[Optional[list[Path]], typer.Option("--pack", "-p", help=PACKS_HELP)] = None,
    max_results: Annotated[int, typer.Option("--max-results", "-k", help="Sections to retrieve (1..1000).")] = 10,
    per_pack: Annotated[Optional[int], typer.Option("--per-pack", help=PER_PACK_HELP)] = None,
    no_enhancements: Annotated[bool, typer.Option("--no-enhancements", help="Plain vector search (the gate and quality filter stay on).")] = False,
    option: Annotated[Optional[list[str]], typer.Option("--option", "-o", metavar="NAME=VALUE", help="Any SearchOptions field, value as JSON, e.g. -o expansion_mode=bfs -o hybrid=false -o url_prefix=/docs/tasks/.")] = None,
    embedding_model: Annotated[Optional[list[str]], typer.Option(help=MODEL_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer dict as JSON.")] = False,
) -> None:
    """Answer QUESTION from PACK, or from every --pack (Claude when ANTHROPIC_API_KEY is set,
    else extractive)."""
    try:
        opts = _multi_options(_search_options(max_results, no_enhancements, option), per_pack)
        target, question = _target(args, pack, embedding_model)
        with target as kp:
            result = kp.ask(question, **opts)
    except Exception as exc:  # the CLI edge
        _fail(exc)
    if as_json:
        _print_json(result)
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


@app.command()
def search(
    args: Annotated[list[str], typer.Argument(metavar="[PACK] QUESTION", help=ARGS_HELP)],
    pack: Annotated[Optional[list[Path]], typer.Option("--pack", "-p", help=PACKS_HELP)] = None,
    max_results: Annotated[int, typer.Option("--max-results", "-k", help="Sections to retrieve (1..1000).")] = 10,
    per_pack: Annotated[Optional[int], typer.Option("--per-pack", help=PER_PACK_HELP)] = None,
    no_enhancements: Annotated[bool, typer.Option("--no-enhancements", help="Plain vector search (the gate and quality filter stay on).")] = False,
    option: Annotated[Optional[list[str]], typer.Option("--option", "-o", metavar="NAME=VALUE", help="Any SearchOptions field, value as JSON, e.g. -o expansion_mode=bfs -o content_kind=code.")] = None,
    context: Annotated[bool, typer.Option("--context", help="Also print the assembled context (what an agent gets).")] = False,
    embedding_model: Annotated[Optional[list[str]], typer.Option(help=MODEL_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the search result as JSON.")] = False,
) -> None:
    """Rank the sections of PACK (or of every --pack) for QUESTION and print them (no answer
    synthesis)."""
    try:
        opts = _multi_options(_search_options(max_results, no_enhancements, option), per_pack)
        target, question = _target(args, pack, embedding_model)
        with target as kp:
            result = kp.search(question, **opts)
    except Exception as exc:  # the CLI edge
        _fail(exc)
    data = result.to_dict()
    if as_json:
        _print_json(data)
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


@app.command()
def diff(
    old: Annotated[Path, typer.Argument(help="Old pack or build folder.")],
    new: Annotated[Path, typer.Argument(help="New pack or build folder.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the diff as JSON.")] = False,
) -> None:
    """Pages added/changed/removed, sections and entities between two builds."""
    try:
        from packs.diff import diff_builds, summary_line
        from packs.layout import resolve_build_dir

        result = diff_builds(resolve_build_dir(old), resolve_build_dir(new))
    except Exception as exc:  # the CLI edge
        _fail(exc)
    if as_json:
        _print_json(result)
        return
    typer.echo(summary_line(result))
    for key, mark in (("pages_added", "+"), ("pages_changed", "~"), ("pages_removed", "-")):
        for url in result[key]:
            typer.echo(f"  {mark} {url}")


@app.command()
def inspect(
    pack: Annotated[Path, typer.Argument(help="Pack folder (or one build folder).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
) -> None:
    """Show a pack's manifest: build, counts, model, extractor, sources."""
    try:
        from packs.layout import resolve_build_dir
        from packs.manifest import read_manifest

        manifest = read_manifest(resolve_build_dir(pack))
    except Exception as exc:  # the CLI edge
        _fail(exc)
    if as_json:
        _print_json(manifest.model_dump())
        return
    m = manifest
    typer.echo(f"{m.name}: build {m.build_id} at {m.built_at}{' (PARTIAL)' if m.partial else ''}")
    if m.description:
        typer.echo(f"  {m.description}")
    typer.echo("  counts: " + ", ".join(f"{k} {v}" for k, v in m.counts.model_dump().items()))
    typer.echo(f"  embedding: {m.embedding.model} (dim {m.embedding.dim})")
    typer.echo(f"  extractor: {m.extractor.kind} {m.extractor.model or ''} {m.extractor.note}".rstrip())
    ok = sum(s.status in ("ok", "not_modified") for s in m.sources)
    typer.echo(f"  sources: {ok}/{len(m.sources)} fetched")
    for s in m.sources:
        if s.status not in ("ok", "not_modified"):
            typer.echo(f"    {s.status}: {s.url}: {s.error}")
    typer.echo("  durations: " + ", ".join(f"{k} {v:.1f}s" for k, v in m.durations.items()))


@app.command()
def verify(
    pack: Annotated[Path, typer.Argument(help="Pack folder (or one build folder).")],
) -> None:
    """Check every file of a pack's build against the checksums in its manifest (opening a
    pack checks sizes and the database only). Exit 2 names the first damaged file."""
    try:
        from packs.integrity import verify as verify_files
        from packs.manifest import read_manifest
        from packs.layout import resolve_build_dir

        build = resolve_build_dir(pack)
        sums = read_manifest(build).checksums
        checked = verify_files(build, sums)
    except Exception as exc:  # the CLI edge
        _fail(exc)
    if not checked:
        typer.echo(f"{build}: this build has no checksums (built before they were recorded); "
                   "nothing to verify")
        return
    typer.echo(f"ok: {build}: {len(checked)} files match their checksums")


from flows.cli_distribute import register as _register_distribute  # noqa: E402

_register_distribute(app)  # kpack mcp / pack / install / list

from flows.cli_eval import register as _register_eval  # noqa: E402

_register_eval(app)  # kpack eval

from flows.cli_serve import register as _register_serve  # noqa: E402

_register_serve(app)  # kpack serve


def main() -> None:
    """The `kpack` entry point: the project's Prefect settings first (flows.settings), then
    the command."""
    from flows.settings import configure_prefect_env

    configure_prefect_env()
    app(prog_name="kpack")


if __name__ == "__main__":
    sys.exit(main())
