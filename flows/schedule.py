"""One scheduled Prefect deployment of the `build-pack` flow per source folder, served by
one long-running process (`kpack serve`).

`discover_sources` finds every `<sources>/*/urls.txt`; `build_deployments` turns each
source into `build_pack.to_deployment(name=<pack>, cron=<pack.toml schedule>)` with the
folders as parameters (no build id: each run makes its own, so its flow run is named
`<pack>-<build id>` like a `kpack build`); `serve` hands them to `prefect.serve`, which
registers them with the Prefect API in $PREFECT_API_URL and runs each flow run in a
subprocess of this one when it falls due. See deployments/README.md.

It lives in flows/ (it composes the build flow into deployments), so the CLI reaches it
without flows/ importing anything outside packs/, tasks/ and flows/.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from flows.settings import configure_prefect_env, run_environment
from tasks.sources import URLS_FILE, SourceConfig, SourceError, load_source

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment

DEFAULT_CONCURRENCY = 1  # builds at once; they share the work dir's caches and the CPU


def discover_sources(sources_dir: Path | str) -> list[SourceConfig]:
    """Every source folder directly under `sources_dir` that holds a urls.txt, by name.

    Raises SourceError when `sources_dir` is not a folder, holds no source, when a
    source is invalid (all problems in one message), or when two sources share a name.
    """
    root = Path(sources_dir)
    if not root.is_dir():
        raise SourceError(f"{root}: not a folder; pass the folder that holds the sources "
                          "(e.g. sources/, one sub-folder per pack)")
    found, problems = [], []
    for folder in sorted(p for p in root.iterdir() if (p / URLS_FILE).is_file()):
        try:
            found.append(load_source(folder))
        except SourceError as exc:  # collect them all: one message lists every bad source
            problems.append(str(exc))
    names = [s.name for s in found]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        problems.append(f"pack names used by more than one source: {', '.join(dupes)}; "
                        "set a distinct name = \"...\" in their pack.toml")
    if problems:
        raise SourceError("; ".join(problems))
    if not found:
        raise SourceError(f"{root}: no source folders (sub-folders with {URLS_FILE})")
    return found


def deployment_parameters(source: SourceConfig, out_dir: Path, work_dir: Path) -> dict:
    """The `build_pack` parameters of a scheduled build of `source` (absolute folders)."""
    return {"name": source.name, "source_dir": str(source.folder),
            "out_dir": str(out_dir.resolve()), "work_dir": str(work_dir.resolve())}


def build_deployments(sources_dir: Path | str, out_dir: Path | str,
                      work_dir: Path | str | None = None, *,
                      every: timedelta | None = None) -> list[RunnerDeployment]:
    """One RunnerDeployment of `build_pack` per source under `sources_dir`.

    The schedule is the source's pack.toml `schedule` cron (default daily at 03:00 UTC),
    or `every` for all of them when given (demos and tests). Tags: `pack:<name>` and
    `scheduled`. Creates nothing on the server (that happens in `serve`); raises
    SourceError as `discover_sources` does.
    """
    from prefect.types.entrypoint import EntrypointType

    from flows.build import build_pack

    out = Path(out_dir)
    work = Path(work_dir) if work_dir else out / ".work"
    deployments = []
    for source in discover_sources(sources_dir):
        schedule = {"interval": every} if every else {"cron": source.config.schedule}
        deployments.append(build_pack.to_deployment(
            name=source.name,
            parameters=deployment_parameters(source, out, work),
            tags=[f"pack:{source.name}", "scheduled"],
            description=source.config.description or f"Rebuild the {source.name} pack",
            # flows.build.build_pack, not a file path: runs start from any folder.
            entrypoint_type=EntrypointType.MODULE_PATH,
            **schedule,
        ))
    return deployments


def serve(sources_dir: Path | str, out_dir: Path | str, work_dir: Path | str | None = None,
          *, every: timedelta | None = None, limit: int | None = DEFAULT_CONCURRENCY,
          task_runner: str | None = None, notify: Sequence[str] = (),
          explorer_url: str | None = None, log=None) -> None:
    """Register every source's deployment and run their flow runs until interrupted.

    Reports to the server a build would (flows/build_api.py): PREFECT_API_URL, else this
    PREFECT_HOME's kept server (started when none runs, and kept while this serves: it
    holds the lease), else with KPACK_SERVER_IDLE_S=0 a temporary server that lives as long
    as this process; the home's secret goes with every request, and to the flow runs.
    `limit` caps concurrent builds. `task_runner` (see flows.runners) is passed to the runs
    as $KPACK_TASK_RUNNER. `log` gets a line when a server is started. Alerts
    (flows/watch.py): `notify` targets for every pack besides each pack.toml's `notify`;
    `explorer_url` (default kpack explore's address) is where messages link. Blocks;
    returns on Ctrl-C / SIGTERM, pausing the schedules. Raises SourceError for bad
    sources, TargetError for a bad notify target, before anything is registered,
    ServerError when no server comes up. An entry point: it applies the project's Prefect
    settings (flows.settings), which its flow-run subprocesses inherit.
    """
    configure_prefect_env()
    from prefect import serve as prefect_serve

    from flows import watch
    from flows.alerts import DEFAULT_EXPLORER
    from flows.build_api import api_for_build
    from flows.runners import TASK_RUNNER_ENV, parse_task_runner
    from tasks.alert_config import TargetError, check_target

    if task_runner:
        parse_task_runner(task_runner)  # fail here, not in every scheduled run
    for target in notify:
        check_target(target)
    if explorer_url and urlsplit(explorer_url).scheme not in ("http", "https"):
        raise TargetError(f"--explorer-url {explorer_url!r}: give the explorer's http(s) "
                          "address, like http://127.0.0.1:8765/")
    out = Path(out_dir)
    work = Path(work_dir) if work_dir else out / ".work"
    deployments = build_deployments(sources_dir, out, work, every=every)
    work.mkdir(parents=True, exist_ok=True)
    # Flow runs are subprocesses of this one and inherit its environment.
    os.environ.update(run_environment(work))
    if task_runner:
        os.environ[TASK_RUNNER_ENV] = task_runner
    with api_for_build(log=log) as server_kind:
        watch.start(discover_sources(sources_dir), out, notify=notify, every=every,
                    explorer_url=explorer_url or DEFAULT_EXPLORER, server_kind=server_kind,
                    out=log or print)
        prefect_serve(*deployments, limit=limit)
