"""Which Prefect server a build reports to, and `kpack server start|stop|status`.

Starting a temporary Prefect server costs 10-60 s, which dwarfed small builds (an 11 s
build took 68 s; a no-change rebuild of 5 pages 19 s). So a build looks for a server in
this order (`api_for_build`):

1. `PREFECT_API_URL`, when the user or a deployment set one;
2. the persistent local server of `kpack server start`, found through its state file
   `$PREFECT_HOME/kpack-server.json` and a health check;
3. otherwise a temporary server, started here rather than by Prefect: the kernel sends
   it SIGTERM when the build's process dies (PR_SET_PDEATHSIG), so a build that crashes
   or is killed with -9 never leaves a ~225 MB server behind, and it is stopped when the
   build ends.

The persistent server is `prefect server start` with its UI, in its own session,
logging to `$PREFECT_HOME/kpack-server.log`; it keeps its runs in Prefect's database in
`$PREFECT_HOME`, the same one temporary servers use, so earlier builds stay visible.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

STATE_FILE = "kpack-server.json"
LOG_FILE = "kpack-server.log"
DEFAULT_PORT = 4200
START_TIMEOUT_S = 120.0
_PR_SET_PDEATHSIG = 1


class ServerError(RuntimeError):
    """A Prefect server could not be started or reached; the message says what to do."""


@dataclass(frozen=True)
class ServerInfo:
    url: str  # the API URL, http://127.0.0.1:PORT/api
    pid: int
    port: int
    started_at: float

    @property
    def ui(self) -> str:
        return self.url.removesuffix("/api")


def prefect_home() -> Path:
    from prefect.settings import get_current_settings

    return Path(get_current_settings().home).expanduser()


def healthy(url: str, timeout_s: float = 2.0) -> bool:
    """Whether the Prefect API at `url` answers its health check."""
    import httpx

    try:
        return httpx.get(f"{url}/health", timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


def running() -> ServerInfo | None:
    """The `kpack server start` server, when its state file names one that answers."""
    path = prefect_home() / STATE_FILE
    try:
        info = ServerInfo(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None
    return info if healthy(info.url) else None


def _free_port(preferred: int | None = None) -> int:
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise ServerError("no free port on 127.0.0.1")


def _wait(url: str, proc: subprocess.Popen, timeout_s: float, log: Path | None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            where = f"; see {log}" if log else ""
            raise ServerError(f"the Prefect server exited with code {proc.returncode} while "
                              f"starting{where}")
        if healthy(url, timeout_s=1.0):
            return
        time.sleep(0.2)
    proc.terminate()
    raise ServerError(f"the Prefect server did not answer at {url} within {timeout_s:.0f} s")


def start(port: int = DEFAULT_PORT, timeout_s: float = START_TIMEOUT_S) -> tuple[ServerInfo, bool]:
    """Start the persistent server in the background and wait until it answers.

    Returns (info, started): started is False when one was already running. Raises
    ServerError when the port is taken by something else or the server does not come up.
    """
    info = running()
    if info is not None:
        return info, False
    if _free_port(port) != port:
        raise ServerError(f"port {port} is in use; pick another with --port")
    home = prefect_home()
    home.mkdir(parents=True, exist_ok=True)
    log = home / LOG_FILE
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
             "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)  # its own process group: stop() ends it and its children
    info = ServerInfo(url=f"http://127.0.0.1:{port}/api", pid=proc.pid, port=port,
                      started_at=time.time())
    _wait(info.url, proc, timeout_s, log)
    tmp = home / f".{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(asdict(info)), encoding="utf-8")
    os.replace(tmp, home / STATE_FILE)
    return info, True


def stop() -> ServerInfo | None:
    """Stop the persistent server (its whole process group); the info of the one stopped,
    or None when there was none."""
    path = prefect_home() / STATE_FILE
    try:
        info = ServerInfo(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(info.pid, signal.SIGTERM)
        for _ in range(50):
            os.killpg(info.pid, 0)
            time.sleep(0.1)
        os.killpg(info.pid, signal.SIGKILL)
    path.unlink(missing_ok=True)
    return info


def _die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _temporary_server(timeout_s: float) -> tuple[subprocess.Popen, str]:
    """A Prefect API server for one build: the same command Prefect's ephemeral mode runs,
    tied to this process's life."""
    import prefect
    from prefect.settings import get_current_settings

    port = _free_port()
    env = {**os.environ, **get_current_settings().to_environment_variables(exclude_unset=True),
           "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
           "PREFECT__SERVER_FINAL": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--app-dir", str(Path(prefect.__file__).parents[1]),
         "--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "error", "--lifespan", "on"],
        env=env, stdin=subprocess.DEVNULL,
        preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    url = f"http://127.0.0.1:{port}/api"
    _wait(url, proc, timeout_s, None)
    return proc, url


FLUSH_TIMEOUT_S = 15.0


def _flush_workers() -> None:
    """Send the run logs and events this process still queues to the server, before a
    temporary server stops. Otherwise Prefect's workers retry them against the stopped
    server when the process exits: about a minute after the build's last line, then
    "Error logging to API". Waits at most FLUSH_TIMEOUT_S per worker."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        worker.drain_all(timeout=FLUSH_TIMEOUT_S)


@contextlib.contextmanager
def api_for_build(log=None, timeout_s: float = START_TIMEOUT_S) -> Iterator[str]:
    """Point Prefect at a server for the duration of a build (see the module doc);
    yields "configured", "persistent" or "temporary"."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():
        yield "configured"
        return
    info = running()
    proc = None
    if info is not None:
        url, kind = info.url, "persistent"
    else:
        if log:
            log("starting a temporary Prefect server (run `kpack server start` once to "
                "skip this on every build)")
        proc, url = _temporary_server(timeout_s)
        kind = "temporary"
    before = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = url  # for processes the build starts (Dask workers)
    try:
        with temporary_settings(updates={PREFECT_API_URL: url}):
            try:
                yield kind
            finally:
                if proc is not None:
                    _flush_workers()
    finally:
        if before is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = before
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
