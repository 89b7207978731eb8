"""Real Prefect servers and kpack processes for the tests that need them
(tests/test_prefect_server.py, tests/test_alerts_e2e.py): start them with their own
PREFECT_HOME and environment, wait on them with deadlines, and kill them with their
children in teardown; and a loopback webhook that keeps what it is sent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.loopback_site import free_port

REPO = Path(__file__).resolve().parents[1]
PREFECT = Path(sys.executable).with_name("prefect")


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGTERM the process and its descendants, then SIGKILL what is left after 15 s."""
    try:
        family = [psutil.Process(proc.pid)]
        family += family[0].children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    for p in family:
        try:
            p.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(family, timeout=15)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=5)
    proc.wait(timeout=5)


def tail(path: Path, n: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""


def until(what: str, check: Callable[[], Any], timeout_s: float, log: Path | None = None,
          poll_s: float = 0.5) -> Any:
    """Poll `check` (a real server working in other processes) until it returns a truthy
    value; fail with `what` and the log tail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}\n"
                        f"{tail(log) if log else ''}")
        time.sleep(poll_s)


@contextmanager
def process(cmd: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        kill_tree(proc)


def base_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update({
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
    })
    return env


@contextmanager
def prefect_server(tmp: Path, **settings: str) -> Iterator[dict]:
    """`prefect server start` on a free loopback port with its own PREFECT_HOME under
    `tmp`, with Prefect `settings` (environment variables) added; yields its API URL,
    an environment for clients of it and `tmp`."""
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = base_env(tmp / "home")
    env.update({
        # schedule new runs within seconds instead of once a minute
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2",
        "PREFECT_UI_ENABLED": "false",  # the UI build copy costs startup time, tests need the API
        **settings,
    })
    log = tmp / "server.log"
    with process([str(PREFECT), "server", "start", "--host", "127.0.0.1", "--port",
                   str(port)], env, log) as proc:

        def healthy() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"prefect server exited with {proc.returncode}\n{tail(log)}")
            try:
                return httpx.get(f"{url}/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        until("the Prefect server to answer /api/health", healthy, 120, log)
        client_env = {**base_env(tmp / "client-home"), "PREFECT_API_URL": url}
        yield {"url": url, "env": client_env, "tmp": tmp, "log": log}


@contextmanager
def kpack_home(home: Path, **settings: str) -> Iterator[dict]:
    """A PREFECT_HOME whose server kpack runs: the first build (or `kpack server start`)
    started with `env` starts it with its secret, CSRF and Host gate, and with Prefect
    `settings` added; `server()` then reads its API URL, secret and record kind. `kpack
    server stop` in teardown."""
    from flows import server_auth

    env = base_env(home)
    env.update({"PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2",
                "PREFECT_UI_ENABLED": "false", "KPACK_SERVER_IDLE_S": "600", **settings})

    def server() -> dict:
        record = json.loads((home / "kpack-server.json").read_text())
        return {"url": record["url"], "kind": record["kind"],
                "secret": server_auth.read_secret(home)}

    try:
        yield {"env": env, "server": server, "log": home / "kpack-server.log"}
    finally:
        subprocess.run([sys.executable, "-m", "packs.cli", "server", "stop"], cwd=REPO,
                       env=env, capture_output=True, timeout=120)


class Receiver:
    """A webhook on 127.0.0.1 that keeps every POST: (received at UTC, path, body); it
    answers 204, or 500 under the path `failing`."""

    def __init__(self, failing: str = "/broken") -> None:
        self.got: list[tuple[datetime, str, bytes]] = []
        received = self.got

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                received.append((datetime.now(UTC), self.path, body))
                # a path under `failing` answers as a broken webhook does
                self.send_response(500 if self.path.startswith(failing) else 204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def messages(self, path: str = "/hook") -> list[tuple[datetime, dict]]:
        """Every message sent under `path` so far, parsed (a body that is not JSON fails
        the test)."""
        return [(at, json.loads(body)) for at, p, body in list(self.got)
                if p.startswith(path)]

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
