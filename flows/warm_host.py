"""The warm build process itself (`python -m flows.warm_host`): imports the build once,
then forks a child per `kpack build` request; see flows/warm.py for the protocol and
the rules, and `run` there for the caller's side.

No thread may run when it forks (a copied lock held by a thread that does not exist in
the child would hang it): `preload` only imports, and a request is refused when Python
reports a second thread. Polars starts two native threads at import (jemalloc's
background thread, whose fork handlers make a child safe, and a spill-file cleaner the
child does without).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import selectors
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path

from flows.warm import LOCK_FILE, LOG_FILE, SOCKET_FILE, STATE_FILE, _home, key, read_state


def preload() -> None:
    """Import what a build imports, so that a forked child does not. Imports only: no
    thread may run at fork time."""
    import importlib

    import flows.build  # noqa: F401 (Prefect, the stages, polars)
    import flows.cli.build  # noqa: F401
    import tasks.stages  # noqa: F401 (every stage module comes with the package)

    # what a no-change rebuild imported after the fork (2026-11-27), beyond the build itself
    for name in ("prefect.flow_engine", "prefect.task_engine", "prefect.task_runners",
                 "prefect.client.orchestration", "prefect.events.clients",
                 "prefect.events.worker", "prefect.logging.handlers", "prefect.artifacts",
                 "prefect.results", "prefect.runtime.flow_run", "prefect.cache_policies",
                 "prefect.transactions", "prefect.concurrency.sync",
                 "prefect.utilities.visualization", "fastapi", "starlette.staticfiles",
                 "python_multipart", "anyio", "opentelemetry.metrics", "polars._utils.parquet",
                 "pydantic.color", "rich._emoji_codes", "http.cookies", "encodings.idna",
                 "httpx", "websockets"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


class Host:
    """The warm process's loop: accept requests, fork a child per build, report exit
    codes, stop when idle or told to."""

    def __init__(self, folder: Path, idle_s: float) -> None:
        """Take the home's lock (BlockingIOError: a warm process already runs there)."""
        self.folder, self.idle_s = folder, idle_s
        self.key = key()
        self.children: dict[int, socket.socket] = {}
        self.last_busy = time.monotonic()
        self.stopping = False
        self.sel = selectors.DefaultSelector()
        folder.mkdir(parents=True, exist_ok=True)
        self.lock_fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.lock_fd)
            raise

    def open(self) -> None:
        """Listen on the socket and write the record (after `preload`: a caller that
        connects is answered at once)."""
        # a child's exit wakes the loop at once: SIGCHLD writes to this pipe
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        path = self.folder / SOCKET_FILE
        path.unlink(missing_ok=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            self.listener.bind(str(path))
        finally:
            os.umask(old)
        self.listener.listen(16)
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        state = {"pid": os.getpid(), "key": self.key, "idle_s": self.idle_s,
                 "started_at": time.time(), "socket": str(path)}
        (self.folder / STATE_FILE).write_text(json.dumps(state), encoding="utf-8")

    def serve(self):
        """Loop until stopped; returns (conn, fds, request) in a forked child, None in the
        host when it stops."""
        signal.signal(signal.SIGTERM, self._on_term)
        checked = time.monotonic()
        while True:
            for sel_key, _ in self.sel.select(timeout=1.0):
                if sel_key.data == "wake":
                    with contextlib.suppress(OSError):
                        os.read(self.wake_r, 512)
                elif sel_key.fileobj is self.listener:
                    child = self._accept()
                    if child is not None:
                        return child
                else:
                    self._client_gone(sel_key.fileobj, sel_key.data)
            self._reap()
            now = time.monotonic()
            if self.children:
                self.last_busy = now
                continue
            if self.stopping or now - self.last_busy > self.idle_s or self._replaced():
                return None
            if now - checked > 10:  # the code changed: never serve it stale
                checked = now
                if key() != self.key:
                    return None

    def _replaced(self) -> bool:
        state = read_state(self.folder)
        return not state or state.get("pid") != os.getpid()

    def _on_term(self, _signum, _frame) -> None:
        self.stopping = True
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)

    def _accept(self):
        conn, _ = self.listener.accept()
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", creds)[1] != os.getuid():
            conn.close()
            return None
        try:
            conn.settimeout(5.0)
            msg, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
            while not msg.endswith(b"\n"):
                more = conn.recv(1 << 20)
                if not more:
                    raise ValueError("request cut short")
                msg += more
            request = json.loads(msg)
        except (OSError, ValueError):
            conn.close()
            return None
        # a thread at fork time could hold a lock the child then waits on for ever: none is
        # expected (preload starts none), but a stale or odd host refuses rather than risk it
        if request.get("key") != self.key or self.stopping or len(fds) != 3 \
                or threading.active_count() > 1:
            for fd in fds:
                os.close(fd)
            with contextlib.suppress(OSError):
                conn.sendall(b'{"refused": "stale"}\n')
            conn.close()
            self.stopping = True  # a newer caller replaces this process
            return None
        pid = os.fork()
        if pid == 0:
            return conn, fds, request
        for fd in fds:
            os.close(fd)
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        self.children[pid] = conn
        self.sel.register(conn, selectors.EVENT_READ, pid)
        return None

    def _client_gone(self, conn: socket.socket, pid: int) -> None:
        """The caller's end is readable: "bye" (it has the exit code; the child finishes
        sending its run's events in the background) or end of file (the caller died:
        its build goes with it)."""
        data = b""
        with contextlib.suppress(OSError):
            data = conn.recv(64)
        self.sel.unregister(conn)
        if not data:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(conn)
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode()
                             + b"\n")
            conn.close()

    def close(self) -> None:
        """In the host, on the way out: the socket and record, if still ours."""
        if not self._replaced():
            (self.folder / STATE_FILE).unlink(missing_ok=True)
            (self.folder / SOCKET_FILE).unlink(missing_ok=True)
        self.listener.close()

    def detach(self, conn: socket.socket) -> None:
        """In a forked child: let go of everything of the host's but `conn`, on which the
        child reports its exit code (run_child)."""
        signal.set_wakeup_fd(-1)
        self.sel.close()
        self.listener.close()
        os.close(self.lock_fd)
        os.close(self.wake_r)
        os.close(self.wake_w)
        for other in self.children.values():
            if other is not conn:
                other.close()


def run_child(conn: socket.socket, fds: list[int], request: dict, log: Path) -> int:
    """In the forked child: become the caller's `kpack build` and run it. Its exit code
    goes to the caller as soon as the build is done and its output written; what is left
    (Prefect sending the run's last events and logs to the kept server, 1-3 s at exit)
    then happens with stdout and stderr on the warm process's log."""
    os.setpgid(0, 0)  # the caller signals this group, as a terminal signals a job
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=stream.isatty())
    from prefect.logging.configuration import setup_logging

    setup_logging(incremental=False)  # the console handler again, now on the caller's terminal
    if os.environ.get("KPACK_DEBUG"):
        print(f"kpack: this build runs in the warm build process (pid {os.getpid()}, forked "
              f"from {os.getppid()})", file=sys.stderr)
    from flows.cli.build import run_request

    try:
        code = run_request(request["request"])
    except KeyboardInterrupt:  # the caller's Ctrl-C: answer now; task threads end later
        print("interrupted", file=sys.stderr)
        code = 130
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    with log.open("ab") as out:
        for target in (1, 2):
            os.dup2(out.fileno(), target)
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps({"exit": code}).encode() + b"\n")
    conn.close()
    return code


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="The warm kpack build process (flows/warm.py).")
    ap.add_argument("--idle", type=float, required=True)
    args = ap.parse_args(argv)
    folder = _home()
    try:
        host = Host(folder, args.idle)
    except BlockingIOError:
        return 0  # another one runs for this home
    preload()
    host.open()
    child = host.serve()
    if child is None:
        host.close()
        return 0
    conn, fds, request = child
    host.detach(conn)
    return run_child(conn, fds, request, folder / LOG_FILE)


if __name__ == "__main__":
    raise SystemExit(main())
