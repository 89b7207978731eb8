"""Prefect settings are applied by entry points, never by importing a module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from flows import settings

REPO = Path(__file__).resolve().parents[1]

_PROBE = """
import os, sys
import flows.build, flows.cli, flows.schedule  # noqa: F401
leaked = [k for k in {keys!r} if k in os.environ]
print("LEAKED", leaked)
from flows import settings
settings.configure_prefect_env()
print("SET", [k for k in {keys!r} if os.environ.get(k) == settings.DEFAULTS[k]])
"""


def test_importing_the_build_changes_no_setting():
    env = {k: v for k, v in os.environ.items() if k not in settings.DEFAULTS}
    env["PYTHONPATH"] = str(REPO)
    keys = sorted(settings.DEFAULTS)
    proc = subprocess.run([sys.executable, "-c", _PROBE.format(keys=keys)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, check=True)
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert lines["LEAKED"] == "[]"
    assert lines["SET"] == repr(keys)


def test_the_user_environment_wins(monkeypatch):
    monkeypatch.setenv("PREFECT_LOGGING_LOG_PRINTS", "true")
    settings.configure_prefect_env()
    assert os.environ["PREFECT_LOGGING_LOG_PRINTS"] == "true"


def test_run_environment_puts_results_under_the_work_dir(tmp_path):
    env = settings.run_environment(tmp_path / "w")
    assert env["PREFECT_LOCAL_STORAGE_PATH"] == str(settings.results_dir(tmp_path / "w"))
    assert settings.results_dir(tmp_path / "w") == (tmp_path / "w" / "prefect-results").resolve()
