"""The warm build process: `kpack build` without paying Prefect's imports again.

A no-change rebuild runs a 0.4 s flow, but a new `kpack build` process first spends 3-4 s
importing Prefect and the build (more under load), several times `kpack inspect`. So,
like the Prefect server a build keeps (flows/server.py), the first build of a
PREFECT_HOME leaves one more process behind: `python -m flows.warm_host`, which imports the
build once, starts no thread, and waits on the Unix socket
`$PREFECT_HOME/kpack-builder.sock` (mode 0600; only the same user may connect).

A later `kpack build` checks its inputs itself (flows/preflight.py), then sends the
request, its environment, its working folder and its stdin/stdout/stderr (SCM_RIGHTS)
here; this process forks, and the child runs the build exactly as `kpack build` would in
its own process, writing to the caller's terminal; its exit code goes back to the caller,
which passes Ctrl-C (SIGINT, SIGTERM, SIGHUP) on to the child's process group.

A request is served only when the caller would have run the same code the same way: same
Python, same working folder, same import-time environment (PREFECT_*, PYTHON*, HF_*,
...), and the same project code and installed packages (file times); otherwise the caller
builds in its own process and replaces this one. It stops after KPACK_SERVER_IDLE_S (600 s)
without a build, when its record `kpack-builder.json` is gone (`kpack server stop`), or
when the code changed; `KPACK_SERVER_IDLE_S=0` keeps none.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

SOCKET_FILE = "kpack-builder.sock"
STATE_FILE = "kpack-builder.json"
LOCK_FILE = "kpack-builder.lock"
LOG_FILE = "kpack-builder.log"
ENV_PREFIXES = ("PREFECT_", "PYTHON", "HF_", "TRANSFORMERS_", "TOKENIZERS_", "DO_NOT_TRACK",
                "OMP_", "MKL_", "OPENBLAS_", "POLARS_", "LD_", "VIRTUAL_ENV", "KPACK_SERVER_")
MAX_PATH = 100  # sun_path holds 108 bytes


def _home() -> Path:
    from flows.server import home

    return home()


def _stamp() -> list:
    """File times that change when the project code or the installed packages change."""
    import flows
    import packs
    import tasks

    newest, count = 0, 0
    for pkg in (flows, packs, tasks):
        for path in Path(pkg.__file__).parent.rglob("*.py"):
            newest, count = max(newest, path.stat().st_mtime_ns), count + 1
    sites = sorted({p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)})
    return [newest, count, [os.stat(p).st_mtime_ns for p in sites]]


def key() -> str:
    """What a request must match to be served here (see the module doc)."""
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(ENV_PREFIXES))
    raw = json.dumps([sys.executable, os.getcwd(), env, _stamp()])
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def usable() -> bool:
    """Whether this process may hand its build to a warm process: POSIX with fd passing,
    a kept server allowed (KPACK_SERVER_IDLE_S > 0), a short enough socket path, and real
    stdio (not a test runner's captured streams)."""
    from flows.server import idle_setting

    if os.name != "posix" or not hasattr(socket, "send_fds") or idle_setting() <= 0:
        return False
    if len(str(_home() / SOCKET_FILE)) > MAX_PATH:
        return False
    try:
        return sys.stdout.fileno() == 1 and sys.stderr.fileno() == 2 and \
            all(os.fstat(fd) for fd in (0, 1, 2))
    except (OSError, ValueError, AttributeError):
        return False


def read_state(folder: Path | None = None) -> dict | None:
    try:
        data = json.loads(((folder or _home()) / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _readline(conn: socket.socket) -> dict | None:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buf += chunk
    return json.loads(buf)


def run(request: dict) -> int | None:
    """Run a `kpack build` request in the warm process; the build's exit code, or None
    when no warm process serves it (none runs, or it runs other code or settings)."""
    if not usable():
        return None
    path = _home() / SOCKET_FILE
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(10.0)
        conn.connect(str(path))
        msg = json.dumps({"key": key(), "request": request, "env": dict(os.environ),
                          "cwd": os.getcwd()}).encode() + b"\n"
        socket.send_fds(conn, [msg], [0, 1, 2])
        reply = _readline(conn)
    except (OSError, ValueError):
        conn.close()
        return None
    if not reply or "pid" not in reply:
        conn.close()
        return None
    pid = int(reply["pid"])

    def forward(signum, _frame) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signum)

    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {s: signal.signal(s, forward) for s in sigs}
    done = None
    try:
        conn.settimeout(None)
        done = _readline(conn)
    except (OSError, ValueError):
        pass
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
        if done and "exit" in done:
            with contextlib.suppress(OSError):
                conn.sendall(b"bye\n")  # got it: the child may finish in the background
        conn.close()
    if not done or "exit" not in done:
        print("error: the warm build process ended before the build did; see "
              f"{_home() / LOG_FILE}", file=sys.stderr)
        return 1
    code = int(done["exit"])
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell says


def spawn() -> None:
    """Start the warm process for this PREFECT_HOME in the background, with this
    process's environment and folder (it exits at once when one already runs)."""
    if not usable():
        return
    from flows.server import idle_setting, private_log

    folder = _home()
    folder.mkdir(parents=True, exist_ok=True)
    with private_log(folder / LOG_FILE) as log:
        subprocess.Popen([sys.executable, "-m", "flows.warm_host", "--idle",
                          str(idle_setting())],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True)


def stop() -> dict | None:
    """Stop this PREFECT_HOME's warm process (its running builds get SIGTERM); its record,
    or None when none runs."""
    folder = _home()
    state = read_state(folder)
    (folder / STATE_FILE).unlink(missing_ok=True)
    if not state:
        return None
    from flows.ports import cmdline

    pid = int(state.get("pid", 0))
    if pid and "flows.warm_host" in cmdline(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
        return state
    return None


def running() -> dict | None:
    """The warm process's record when that process is alive."""
    from flows.ports import cmdline

    state = read_state()
    return state if state and "flows.warm_host" in cmdline(int(state.get("pid", 0))) else None
