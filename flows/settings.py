"""Prefect settings the project needs, applied before Prefect is imported.

Project-wide defaults also live in `prefect.toml` at the repository root (read by Prefect
when run from there); this module makes the same choices hold wherever `kpack` runs.
A value the user has set in the environment always wins.
"""

from __future__ import annotations

import os

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
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)
