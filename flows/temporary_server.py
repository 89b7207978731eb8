"""The temporary Prefect server of a build that keeps none (KPACK_SERVER_IDLE_S=0): the
app Prefect's ephemeral mode runs, with the home's secret, CSRF protection and the Host
check of a kept server (flows/server_main.py --temporary, flows/server_auth.py), tied to
the build's process (`flows/build_api.py: api_for_build` chooses it).
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

from flows import server_auth
from flows.server import (
    ServerError,
    healthy,
    home,
    private_log,
    server_environment,
    start_timeout,
    timeout_message,
)

TEMPORARY_LOG = "kpack-temporary-server.log"
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@contextlib.contextmanager
def temporary(timeout_s: float | None) -> Iterator[tuple[str, str]]:
    """A Prefect API server for one build, (its API URL, the secret it wants): the app
    Prefect's ephemeral mode runs, on a port claimed here, logging to
    $PREFECT_HOME/kpack-temporary-server.log (a server stopped while starting prints a
    traceback), stopped when the build ends or dies."""
    from prefect.settings import get_current_settings

    from flows import ports

    folder = home()
    folder.mkdir(parents=True, exist_ok=True)
    secret = server_auth.ensure_secret(folder)
    sock = ports.claim(0)
    port = sock.getsockname()[1]
    env = {**server_environment(folder, port),
           **get_current_settings().to_environment_variables(exclude_unset=True),
           "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
           "PREFECT__SERVER_FINAL": "1"}
    for name in ("PREFECT_API_URL", server_auth.CLIENT_ENV, server_auth.SERVER_ENV):
        env.pop(name, None)
    log = folder / TEMPORARY_LOG
    with sock, private_log(log) as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "flows.server_main", "--fd", str(sock.fileno()),
             "--port", str(port), "--home", str(folder), "--temporary"],
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
        yield url, secret
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
