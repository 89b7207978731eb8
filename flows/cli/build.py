"""`kpack build`: build (or rebuild) one source's pack and publish it; `--estimate` prints
what the Claude extraction would cost instead. Exit codes: see packs/cli/common.py."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from flows.cli.common import build_input_errors
from packs.cli.common import EXIT_PARTIAL, fail, print_json

EXIT_INTERRUPTED = 130  # as a shell reports a job ended by SIGINT
EXIT_GRACE_S = 5.0


def _fail(exc: BaseException) -> NoReturn:
    fail(exc, build_input_errors())


def build(
    source: Annotated[Path, typer.Argument(help="Source folder holding urls.txt (and pack.toml).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder the pack is published into, as OUT/<name>/.")] = Path("out"),
    work_dir: Annotated[Path | None, typer.Option(help="Intermediates and caches (default OUT/.work).")] = None,
    embedding_model: Annotated[str | None, typer.Option(help="Model id or local folder; overrides pack.toml and $KPACK_EMBEDDING_MODEL.")] = None,
    extractor: Annotated[str | None, typer.Option(help="auto | claude | offline (default from pack.toml: auto).")] = None,
    allow_private_hosts: Annotated[bool, typer.Option("--allow-private-hosts", help="Allow fetching from loopback/private addresses.")] = False,
    max_cost: Annotated[float | None, typer.Option(help="Stop starting Claude calls once this many USD are spent.")] = None,
    task_runner: Annotated[str | None, typer.Option(help="threads | threads:N | dask | dask:N | tcp://host:port of a Dask scheduler (default $KPACK_TASK_RUNNER or threads).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Publish even when the publish guard finds the build clearly worse than the current one.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help=f"Exit {EXIT_PARTIAL} when any source failed or the pack is partial (for schedulers).")] = False,
    estimate: Annotated[bool, typer.Option("--estimate", help="Fetch and split, then print the Claude tokens and USD a build would spend; publish nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the build summary as JSON.")] = False,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Ask Claude again for sections whose answers were unusable on earlier builds (remembered failures are otherwise retried on extract_failure_retries builds, then skipped).")] = False,
) -> None:
    """Build (or rebuild) the pack of SOURCE and publish it atomically into OUT/<name>/.

    Before anything is fetched or Prefect is loaded, the inputs are checked: urls.txt,
    pack.toml, the embedding model, the hosts, the API key, the output folder (exit 2 with
    every problem in one line). The build reports to $PREFECT_API_URL, to the server of
    `kpack server start`, or to one it starts and keeps in the background (stopped after
    $KPACK_SERVER_IDLE_S unused, default 600 s; `kpack server stop`), and it leaves a warm
    build process there too, so the next build starts at once (KPACK_SERVER_IDLE_S=0 keeps
    nothing). A build the publish guard finds clearly worse than the current one publishes
    nothing and exits 1 (--force overrides); a second build of a pack that is being built
    is refused. With --strict, failed sources or a partial pack exit 3."""
    from packs.extras import MissingExtraError, build_missing_message

    if needs := build_missing_message():  # a runtime-only install: say what to add
        _fail(MissingExtraError(needs))
    if estimate:
        _estimate(source, out, work_dir, embedding_model, extractor, allow_private_hosts, as_json)
        return
    request = {"source": str(source), "out": str(out),
               "work_dir": str(work_dir) if work_dir else None,
               "embedding_model": embedding_model, "extractor": extractor,
               "allow_private_hosts": allow_private_hosts, "max_cost": max_cost,
               "task_runner": task_runner, "force": force, "strict": strict,
               "as_json": as_json, "retry_failed": retry_failed}
    try:  # bad input is reported before Prefect is imported or a server started
        from flows import warm
        from flows.preflight import check_build_inputs
        from flows.runners import parse_task_runner
        from flows.server import idle_setting

        parse_task_runner(task_runner)
        idle_setting()
        inputs = check_build_inputs(source, out, work_dir, embedding_model=embedding_model,
                                    extractor=extractor,
                                    allow_private_hosts=allow_private_hosts)
    except Exception as exc:  # the CLI edge: one clear line, KPACK_DEBUG re-raises
        _fail(exc)
    code = warm.run(request)
    if code is None:  # no warm build process for this home (yet): build here
        try:
            code = run_request(request, inputs)
        except KeyboardInterrupt:
            code = _interrupted()
        finally:
            warm.spawn()
    raise typer.Exit(code)


def _interrupted() -> int:
    """Ctrl-C during a build run in this process. The flow has stopped (its lock given
    back, nothing published), but a task may still run in a worker thread, and Python
    waits for those at exit: a fetch of 60 s would hold the terminal that long. Prefect
    gets EXIT_GRACE_S to send its last events, then the process ends whatever runs."""
    typer.echo("interrupted", err=True)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    timer = threading.Timer(EXIT_GRACE_S, os._exit, args=(EXIT_INTERRUPTED,))
    timer.daemon = True
    timer.start()
    return EXIT_INTERRUPTED


@contextlib.contextmanager
def interrupts_stay_interrupts() -> Iterator[None]:
    """Ctrl-C pressed during the block ends it as KeyboardInterrupt, even when the interrupt
    surfaced as another error: Python 3.11 wraps an exception raised while a class is being
    created (`__set_name__`) in a RuntimeError, Prefect imports its task engine when the
    first task starts, and its flow engine then fails the run with that error (seen in a
    full test run: Ctrl-C right after the flow began gave exit 1, "Error calling
    __set_name__ on 'Field' instance 'logger' in 'BaseTaskRunEngine'", not 130). Only in
    the main thread (where signal handlers live) and where SIGINT is not ignored."""
    previous = signal.getsignal(signal.SIGINT)
    if (threading.current_thread() is not threading.main_thread()
            or previous in (signal.SIG_IGN, None)):
        yield
        return
    pressed = threading.Event()

    def on_sigint(signum, frame):
        pressed.set()
        if callable(previous):
            previous(signum, frame)
        else:  # SIG_DFL: Python's own reading of Ctrl-C
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    except Exception as exc:
        if pressed.is_set():
            raise KeyboardInterrupt from exc
        raise
    finally:
        signal.signal(signal.SIGINT, previous)


def run_request(request: dict, inputs=None) -> int:
    """Run the build `request` (the options of a `kpack build` command line, as built in
    `build`) in this process and print its outcome; the exit code. `inputs` are the
    checked inputs (flows.preflight.BuildInputs); None reads them again without the
    preflight (the caller ran it: the warm build process, flows/warm.py)."""
    try:
        from flows.build import run_build, shortfalls
        from flows.preflight import check_build_inputs
        from flows.settings import console_errors_one_line

        console_errors_one_line()
        inputs = inputs or check_build_inputs(
            request["source"], request["out"], request["work_dir"],
            embedding_model=request["embedding_model"], extractor=request["extractor"],
            allow_private_hosts=request["allow_private_hosts"], run_preflight=False)
        with interrupts_stay_interrupts():
            summary = run_build(
                request["source"], request["out"], work_dir=request["work_dir"],
                embedding_model=request["embedding_model"], extractor=request["extractor"],
                allow_private_hosts=request["allow_private_hosts"],
                max_cost_usd=request["max_cost"], task_runner_setting=request["task_runner"],
                force=request["force"], retry_failed=request["retry_failed"], inputs=inputs,
                log=lambda line: typer.echo(line, err=True),
            )
    except Exception as exc:  # the CLI edge: one clear line, KPACK_DEBUG re-raises
        try:
            _fail(exc)
        except typer.Exit as done:
            return done.exit_code
    _print_build(summary, request["as_json"])
    if request["strict"] and shortfalls(summary):
        typer.echo(f"strict: {'; '.join(shortfalls(summary))}", err=True)
        return EXIT_PARTIAL
    return 0


def _print_build(summary: dict, as_json: bool) -> None:
    if as_json:
        print_json(summary)
        return
    from packs.manifest import Counts, Freshness

    c = Counts.model_validate(summary["counts"])
    fresh = Freshness.model_validate(summary.get("freshness") or {}).pages.line()
    if summary.get("status") == "no changes":
        typer.echo(f"no changes: {summary['pack']} stays at build {summary['build_id']} "
                   f"({summary['seconds']} s)")
        if fresh:
            typer.echo(fresh)
        return
    typer.echo(
        f"built {summary['pack']} (build {summary['build_id']}) in {summary['seconds']} s: "
        f"{c.articles} articles, {c.sections} sections, {c.entities} entities, "
        f"{c.facts} facts, {c.links} links"
    )
    if summary.get("changes"):
        from packs.diff import summary_line

        typer.echo(f"changes: {summary_line(summary['changes'])}")
    if fresh:
        typer.echo(fresh)
    extractor = summary["extractor"]
    typer.echo(f"extractor: {extractor.get('note') or extractor['kind']}")
    for failed in summary["failed_sources"]:
        typer.echo(f"  not included: {failed['url']}: {failed['status']}: {failed['error']}")
    if summary["partial"]:
        typer.echo("  the pack is PARTIAL: see manifest.json partial_reasons")


def _estimate(source, out, work_dir, embedding_model, extractor, allow_private_hosts,
              as_json) -> None:
    try:
        from flows.estimate import run_estimate

        est = run_estimate(source, out, work_dir=work_dir, embedding_model=embedding_model,
                           extractor=extractor, allow_private_hosts=allow_private_hosts)
    except Exception as exc:  # the CLI edge
        _fail(exc)
    if as_json:
        print_json(est)
        return
    typer.echo(
        f"estimate for {est['pack']} with {est['model']}: {est['to_call']} of {est['sections']} "
        f"sections to extract ({est['cached']} cached); ~{est['input_tokens']:,} input + "
        f"~{est['output_tokens']:,} output tokens ≈ ${est['cost_usd']:.2f} "
        f"(prices as of {est['prices_as_of']})"
    )



def register(app: typer.Typer) -> None:
    """Add `build` to `app`."""
    app.command(name="build")(build)
