"""Which Prefect server a build reports to, and `kpack server start|stop|status`.

Starting a Prefect server costs 10-20 s on an idle machine and more under load, which
dwarfed small builds (a no-change rebuild of 40 pages: 25 s wall for a 0.4 s flow). So a
build looks for a server in this order (`flows/build_api.py: api_for_build`):

1. `PREFECT_API_URL`, when the user or a deployment set one;
2. the local server of this `PREFECT_HOME`: started by `kpack server start` (it runs until
   `kpack server stop`), or kept by an earlier build (it stops by itself after
   `KPACK_SERVER_IDLE_S`, default 600 s, with no request and no build using it);
3. otherwise it starts that kept server, in the background, and uses it.

`KPACK_SERVER_IDLE_S=0` keeps nothing: each build then starts a temporary server that the
kernel stops when the build's process dies (PR_SET_PDEATHSIG), as Prefect's ephemeral mode.

Who may use it: Prefect's authentication with the home's secret (kpack-server.auth, 0600),
CSRF protection and a loopback-only Host check (flows/server_auth.py).

One server per PREFECT_HOME: `$PREFECT_HOME/kpack-server.json` names its home, port, pid
and a random token; starters take `kpack-server.lock` in turn; the starter binds the port
itself before anything starts (flows/ports.py), so of two starts on one port exactly one
wins and the other names the owner. A record is believed only when the process answering
on its port says, at `/kpack-identity`, that it is that pid of that home with that token:
a dead or reused pid is reported as gone, never as running. Builds hold a shared lock on
`kpack-server.lease` while they use a kept server, which stops only when it can take that
lock exclusively (flows/server_main.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from flows import ports, server_auth
from flows.ports import IDENTITY_PATH, http_get, identify  # noqa: F401 (IDENTITY_PATH: server_main)

STATE_FILE = "kpack-server.json"
START_LOCK = "kpack-server.lock"
LEASE_FILE = "kpack-server.lease"
LOG_FILE = "kpack-server.log"
DEFAULT_PORT = 4200
IDLE_ENV = "KPACK_SERVER_IDLE_S"
DEFAULT_IDLE_S = 600.0
TIMEOUT_ENV = "KPACK_SERVER_START_TIMEOUT_S"
BASE_TIMEOUT_S = 120.0  # on an idle machine; scaled by the load average per core
MAX_TIMEOUT_S = 1200.0
_SPAWNED: list[subprocess.Popen] = []  # reaped now and then, so none lingers as a zombie


class ServerError(RuntimeError):
    """A Prefect server could not be started or reached; the message says what to do."""


class ServerSettingError(ValueError):
    """KPACK_SERVER_IDLE_S or KPACK_SERVER_START_TIMEOUT_S is not a number of seconds."""


@dataclass(frozen=True)
class ServerInfo:
    url: str  # the API URL, http://127.0.0.1:PORT/api
    pid: int
    port: int
    started_at: float
    home: str = ""
    token: str = ""
    kind: str = "started"  # "started": kpack server start; "kept": started by a build
    idle_s: float = 0.0  # stops after this long unused; 0: runs until stopped

    @property
    def ui(self) -> str:
        return self.url.removesuffix("/api")


def home() -> Path:
    """Prefect's home folder ($PREFECT_HOME, default ~/.prefect), without importing Prefect."""
    return Path(os.path.expanduser(os.environ.get("PREFECT_HOME") or "~/.prefect")).resolve()


def _seconds(env: str, default: float) -> float:
    raw = os.environ.get(env, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise ServerSettingError(f"{env} must be a number of seconds (0 or more), got {raw!r}")
    return value


def duration(seconds: float) -> str:
    """`seconds` in words for messages: "45 s", "10 min", "2 h"."""
    if seconds < 120:
        return f"{seconds:g} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def idle_setting() -> float:
    """Seconds a kept server waits unused before it stops ($KPACK_SERVER_IDLE_S, default
    600); 0 keeps none (a temporary server per build)."""
    return _seconds(IDLE_ENV, DEFAULT_IDLE_S)


def start_timeout() -> tuple[float, str]:
    """How long to wait for a server to answer, and why: $KPACK_SERVER_START_TIMEOUT_S,
    else 120 s times the 1-minute load average per core (at least 1, at most 1200 s)."""
    if os.environ.get(TIMEOUT_ENV, "").strip():
        return _seconds(TIMEOUT_ENV, BASE_TIMEOUT_S), TIMEOUT_ENV
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    scaled = min(MAX_TIMEOUT_S, BASE_TIMEOUT_S * max(1.0, load / cores))
    return scaled, f"load average {load:.1f} on {cores} cores"


def read_state(folder: Path | None = None) -> ServerInfo | None:
    """The server record of a PREFECT_HOME, believed or not (see `running`)."""
    try:
        data = json.loads(((folder or home()) / STATE_FILE).read_text(encoding="utf-8"))
        return ServerInfo(**data)
    except (OSError, ValueError, TypeError):
        return None


def _write_state(folder: Path, info: ServerInfo) -> None:
    tmp = folder / f".{STATE_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(asdict(info)), encoding="utf-8")
    os.replace(tmp, folder / STATE_FILE)


def healthy(url: str, timeout_s: float = 2.0) -> bool:
    """Whether the Prefect API at `url` answers its health check."""
    if not url.startswith("http://"):  # https (a remote API): httpx, with TLS
        import httpx

        try:
            return httpx.get(f"{url}/health", timeout=timeout_s).status_code == 200
        except httpx.HTTPError:
            return False
    got = http_get(f"{url}/health", timeout_s)
    return bool(got) and got[0] == 200


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive, and not ours
    return True


def answers_as(info: ServerInfo, timeout_s: float = 2.0) -> bool:
    """Whether the process answering on info's port is the server info names: its pid is
    alive and it reports that pid, home and token."""
    if not pid_alive(info.pid):
        return False
    ident = identify(info.ui, timeout_s)
    return bool(ident) and (ident.get("pid"), ident.get("home"), ident.get("token")) == (
        info.pid, info.home, info.token)


def running() -> ServerInfo | None:
    """The server of this PREFECT_HOME, when its record is true (see `answers_as`)."""
    info = read_state()
    return info if info is not None and answers_as(info) else None


@contextlib.contextmanager
def flock(path: Path, mode: int) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # releases the lock


def _reap() -> None:
    _SPAWNED[:] = [p for p in _SPAWNED if p.poll() is None]


def private_log(path: Path):
    """`path` opened for appending, readable by this user alone (run logs go there)."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab")


def server_environment(folder: Path, port: int) -> dict[str, str]:
    """The environment a server of this home runs with (flows/server_main.py adds the
    secret and CSRF protection itself)."""
    env = {**os.environ, "PREFECT_HOME": str(folder),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    for name in ("PREFECT_API_URL", server_auth.CLIENT_ENV, server_auth.SERVER_ENV):
        env.pop(name, None)  # the server is the API; it talks to no other
    # the UI calls the API it was served from, on whichever port that is; no other web
    # origin may call it from a browser
    env.setdefault("PREFECT_UI_API_URL", f"http://127.0.0.1:{port}/api")
    env.setdefault("PREFECT_SERVER_CORS_ALLOWED_ORIGINS",
                   f"http://127.0.0.1:{port},http://localhost:{port}")
    return env


def _spawn(sock, folder: Path, token: str, idle_s: float, port: int) -> subprocess.Popen:
    env = {**server_environment(folder, port), "KPACK_SERVER_TOKEN": token}
    fd = sock.fileno()
    with private_log(folder / LOG_FILE) as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "flows.server_main", "--fd", str(fd), "--port", str(port),
             "--home", str(folder), "--idle", str(idle_s)],
            pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, env=env)  # its own session: it outlives its starter
    _SPAWNED.append(proc)
    return proc


def timeout_message(what: str, waited: float, why: str, log: Path) -> str:
    """One line: what did not answer, how long was waited and why that long, what to do."""
    return (f"{what} did not answer within {waited:.0f} s ({why}); the machine may be busy: "
            f"set {TIMEOUT_ENV}=SECONDS (or `kpack server start --timeout SECONDS`) to wait "
            f"longer (log: {log})")


def _wait(info: ServerInfo, proc: subprocess.Popen, timeout_s: float, why: str,
          log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerError(f"the Prefect server exited with code {proc.returncode} while "
                              f"starting; see {log}")
        if answers_as(info, timeout_s=1.0):
            return
        time.sleep(0.2)
    raise ServerError(timeout_message("the Prefect server", timeout_s, why, log))


def start(port: int = DEFAULT_PORT, *, kind: str = "started", idle_s: float = 0.0,
          timeout_s: float | None = None) -> tuple[ServerInfo, bool]:
    """Start this PREFECT_HOME's server in the background and wait until it answers.

    `port` 0 takes any free port. `kind` "started" (kpack server start) runs until
    stopped; "kept" (a build) stops after `idle_s` unused. Returns (info, started):
    started is False when one was already running (a kept one asked for by `kpack
    server start` then stays until stopped). Raises flows.ports.PortTakenError naming
    the owner of a taken port, ServerError when the server does not come up in time
    (`start_timeout`)."""

    folder = home()
    with flock(folder / START_LOCK, fcntl.LOCK_EX):
        _reap()
        info = running()
        if info is not None:
            if kind == "started" and info.kind == "kept":
                info = replace(info, kind="started", idle_s=0.0)
                _write_state(folder, info)  # the server reads it: no idle stop any more
            return info, False
        token = secrets.token_hex(16)
        server_auth.ensure_secret(folder)
        sock = ports.claim(port)
        try:
            port = sock.getsockname()[1]
            proc = _spawn(sock, folder, token, idle_s, port)
        finally:
            sock.close()  # the server holds its own copy
        info = ServerInfo(url=f"http://127.0.0.1:{port}/api", pid=proc.pid, port=port,
                          started_at=time.time(), home=str(folder), token=token, kind=kind,
                          idle_s=idle_s)
        _write_state(folder, info)
        waited, why = (timeout_s, "the timeout asked for") if timeout_s else start_timeout()
        try:
            _wait(info, proc, waited, why, folder / LOG_FILE)
        except ServerError:
            _terminate(proc.pid)
            (folder / STATE_FILE).unlink(missing_ok=True)
            raise
        return info, True


def _terminate(pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM the process group `pid` leads, SIGKILL it after `grace_s`."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            os.killpg(pid, 0)
            _reap()
            time.sleep(0.1)
        os.killpg(pid, signal.SIGKILL)


def _is_server_process(info: ServerInfo) -> bool:
    """The pid still runs the server this record started (the server module and this
    home are on its command line): a pid reused by another program is never signalled."""
    if answers_as(info):
        return True
    args = ports.cmdline(info.pid).split()
    return pid_alive(info.pid) and "flows.server_main" in args and "--home" in args[:-1] \
        and args[args.index("--home") + 1] == info.home


def stop() -> tuple[ServerInfo | None, bool]:
    """Stop this PREFECT_HOME's server (its whole process group). Returns (record, was
    running): (None, False) when there is no record; (record, False) for a record whose
    process was already gone (the record is removed)."""
    folder = home()
    info = read_state(folder)
    if info is None:
        return None, False
    alive = _is_server_process(info)
    if alive:
        _terminate(info.pid)
    with contextlib.suppress(OSError):
        if read_state(folder) == info:
            (folder / STATE_FILE).unlink()
    return info, alive
