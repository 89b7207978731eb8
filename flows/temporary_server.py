"""The temporary Prefect server of a build that keeps none (KPACK_SERVER_IDLE_S=0): the
command Prefect's ephemeral mode runs, tied to the build's process
(`flows/build_api.py: api_for_build` chooses it).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from flows.server import ServerError, healthy, home, start_timeout, timeout_message

TEMPORARY_LOG = "kpack-temporary-server.log"
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@contextlib.contextmanager
def temporary(timeout_s: float | None) -> Iterator[str]:
    """A Prefect API server for one build: the command Prefect's ephemeral mode runs, on a
    port claimed here, logging to $PREFECT_HOME/kpack-temporary-server.log (a server
    stopped while starting prints a traceback), stopped when the build ends or dies."""
    import prefect
    from prefect.settings import get_current_settings

    from flows import ports

    folder = home()
    folder.mkdir(parents=True, exist_ok=True)
    sock = ports.claim(0)
    port = sock.getsockname()[1]
    env = {**os.environ, **get_current_settings().to_environment_variables(exclude_unset=True),
           "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
           "PREFECT__SERVER_FINAL": "1"}
    log = folder / TEMPORARY_LOG
    with sock, log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", str(Path(prefect.__file__).parents[1]),
             "--factory", "prefect.server.api.server:create_app", "--fd", str(sock.fileno()),
             "--log-level", "error", "--lifespan", "on"],
            env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            pass_fds=(sock.fileno(),),
            preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    url = f"http://127.0.0.1:{port}/api"
    try:
        waited, why = (timeout_s, "the timeout asked for") if timeout_s else start_timeout()
        deadline = time.monotonic() + waited
        while not healthy(url, timeout_s=1.0):
            if proc.poll() is not None:
                raise ServerError(f"the temporary Prefect server exited with code "
                                  f"{proc.returncode} while starting; see {log}")
            if time.monotonic() > deadline:
                raise ServerError(timeout_message("the temporary Prefect server", waited,
                                                   why, log))
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


FLUSH_TIMEOUT_S = 15.0


def flush_workers() -> None:
    """Send the run logs and events this process still queues to the server, before a
    temporary server stops. Otherwise Prefect's workers retry them against the stopped
    server when the process exits: about a minute after the build's last line, then
    "Error logging to API". Waits at most FLUSH_TIMEOUT_S per worker."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        worker.drain_all(timeout=FLUSH_TIMEOUT_S)
