"""What the build-side `kpack` commands add to packs/cli/common.py: their bad input."""

from __future__ import annotations

from packs.cli.common import query_input_errors


def build_input_errors() -> tuple[type[BaseException], ...]:
    """Bad input for build and serve: the query side's, plus an unknown source, an invalid
    urls.txt or pack.toml, a failed preflight, a bad --task-runner or server setting."""
    from flows.preflight import PreflightError
    from flows.runners import TaskRunnerSettingError
    from flows.server import ServerSettingError
    from tasks.sources import SourceError

    return (*query_input_errors(), SourceError, TaskRunnerSettingError, PreflightError,
            ServerSettingError)
