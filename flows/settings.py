"""Prefect settings the project needs, applied once by each entry point.

Prefect reads its settings when it is first imported, so an entry point calls
`configure_prefect_env()` before anything imports Prefect: `kpack` (`flows.cli.register`,
which `packs.cli.main` loads for the build commands),
`flows.schedule.serve` (whose flow-run subprocesses inherit the environment), the
benchmarks' `benchmarks.common.setup()` and the tests' conftest. Importing a module never
changes a setting. A value the user has set in the environment always wins.

`prefect.toml` at the repository root only covers `prefect` commands run by hand from
there (analytics off); everything `kpack` starts gets its settings from here.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    # Ephemeral runs (no PREFECT_API_URL) start a local server; give it time on 2 cores.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_LOGGING_LOG_PRINTS": "false",
    # Loggers that are chatty at INFO: keep their warnings only.
    "PREFECT_LOGGING_EXTRA_LOGGERS": "kpack",
    # kpack.* loggers also run outside flows (queries, the CLI): no API log there.
    "PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW": "ignore",
}


def configure_prefect_env() -> None:
    """Set each of DEFAULTS in os.environ unless the user set it; idempotent. Call it from
    an entry point before Prefect is imported (later calls reach only subprocesses)."""
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)


def results_dir(work_dir: Path) -> Path:
    """Where a build's Prefect task results are persisted: the work dir's prefect-results/."""
    return (Path(work_dir) / "prefect-results").resolve()


def result_updates(work_dir: Path) -> dict:
    """Prefect setting → value that persist task results under `results_dir(work_dir)`
    (for temporary_settings; flows.build_api.api_for_build applies them with the API URL in
    one go: each temporary_settings rebuilds every Prefect setting, 0.1-0.4 s)."""
    from prefect.settings import PREFECT_LOCAL_STORAGE_PATH, PREFECT_RESULTS_PERSIST_BY_DEFAULT

    return {PREFECT_LOCAL_STORAGE_PATH: str(results_dir(work_dir)),
            PREFECT_RESULTS_PERSIST_BY_DEFAULT: True}


HEARTBEAT_ENVS = ("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "PREFECT_RUNNER_HEARTBEAT_FREQUENCY")


def build_updates(work_dir: Path) -> dict:
    """The Prefect settings a `kpack build` run gets: `result_updates`, and no flow-run
    heartbeat unless the user set its frequency. Prefect's heartbeat thread sleeps in 1 s
    steps and the flow waits for it at its end: 0-1 s on every build (0.5 s on average,
    a third of a no-change rebuild), for heartbeats that only an automation the project
    does not install would read; a build that died is marked Crashed by the next build of
    its pack (flows.build.mark_crashed)."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY

    updates = result_updates(work_dir)
    if not any(os.environ.get(name) for name in HEARTBEAT_ENVS):
        updates[PREFECT_FLOWS_HEARTBEAT_FREQUENCY] = None
    return updates


def result_settings(work_dir: Path):
    """A context manager (Prefect's temporary_settings) persisting task results under
    `results_dir(work_dir)`, for a build or estimate run in this process."""
    from prefect.settings import temporary_settings

    return temporary_settings(updates=result_updates(work_dir))


def quiet_libraries() -> None:
    """HTTP and HTML-extraction libraries log at WARNING and above only (they are chatty
    at INFO for every page)."""
    for name in ("httpx", "httpcore", "trafilatura", "htmldate", "courlan", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)


def stage_logging() -> None:
    """The stages' `kpack.*` lines at INFO in this process (the flow's, or a Dask worker's).

    The stages log with the standard library (tasks/ imports no Prefect);
    PREFECT_LOGGING_EXTRA_LOGGERS gives the `kpack` logger Prefect's API handler, which files
    each line under the task run it was written in, but leaves its level to the root
    logger's WARNING. A level the user set is kept."""
    kpack = logging.getLogger("kpack")
    if kpack.level == logging.NOTSET:
        kpack.setLevel(logging.INFO)


def run_environment(work_dir: Path) -> dict[str, str]:
    """The result settings of a build as environment variables (for flow runs started in
    subprocesses; `run_build` sets the same values in-process): task results persisted
    under `results_dir(work_dir)`."""
    return {"PREFECT_LOCAL_STORAGE_PATH": str(results_dir(work_dir)),
            "PREFECT_RESULTS_PERSIST_BY_DEFAULT": "true"}


class _OneLineErrors:
    """A console-handler filter: log records keep their first line; tracebacks and the
    rest of multi-line messages stay out of the terminal. The records reach Prefect's API
    handler first (it sits on the run loggers, the console on the root logger), so the
    run logs in the Prefect UI keep the full tracebacks."""

    def filter(self, record) -> bool:
        if record.exc_info or record.exc_text or record.stack_info:
            record.exc_info = record.exc_text = record.stack_info = None
        message = record.getMessage()
        if "\n" in message:
            record.msg, record.args = message.split("\n", 1)[0] + " [...]", None
        return True


def console_errors_one_line() -> None:
    """Keep tracebacks out of the terminal (unless KPACK_DEBUG is set): the CLI prints
    one line with the reason last. Call it after Prefect has configured logging."""
    if os.environ.get("KPACK_DEBUG"):
        return
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _OneLineErrors) for f in handler.filters):
            handler.addFilter(_OneLineErrors())
