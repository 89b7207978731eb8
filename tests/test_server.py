"""The local Prefect server of a PREFECT_HOME (flows/server.py, server_main.py, ports.py):
settings, port claims, records believed only when the process answering is the one
started, and the kept server's idle stop. Plain functions, real sockets, real locks and
processes; the tests that start real Prefect servers are at the end, marked
`prefect_server`, and stop what they start."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows import ports, server
from flows.server_main import Watched, should_stop

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "prefect-home"
    folder.mkdir()
    monkeypatch.setenv("PREFECT_HOME", str(folder))
    return folder.resolve()


def _kpack(args: list[str], home: Path, **env: str) -> subprocess.CompletedProcess:
    """`kpack ARGS` in a new process with its own PREFECT_HOME and no PREFECT_API_URL (the
    session's test harness sets one in this process)."""
    full = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    full.update({"PREFECT_HOME": str(home), **env})
    return subprocess.run([sys.executable, "-m", "packs.cli", *args], cwd=REPO, env=full,
                          capture_output=True, text=True, timeout=600)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _record(home: Path, **fields) -> server.ServerInfo:
    info = server.ServerInfo(**{"url": "http://127.0.0.1:9/api", "pid": _dead_pid(),
                                "port": 9, "started_at": time.time(), "home": str(home),
                                "token": "t" * 32, "kind": "kept", "idle_s": 10.0, **fields})
    (home / server.STATE_FILE).write_text(json.dumps(info.__dict__))
    return info


def test_settings_say_how_to_fix_a_bad_value(monkeypatch) -> None:
    monkeypatch.delenv(server.IDLE_ENV, raising=False)
    assert server.idle_setting() == server.DEFAULT_IDLE_S
    monkeypatch.setenv(server.IDLE_ENV, "0")
    assert server.idle_setting() == 0
    monkeypatch.setenv(server.IDLE_ENV, "ten minutes")
    with pytest.raises(server.ServerSettingError, match="KPACK_SERVER_IDLE_S must be a number"):
        server.idle_setting()
    assert server.duration(20) == "20 s" and server.duration(600) == "10 min"


def test_the_start_deadline_scales_with_the_load_and_can_be_set(monkeypatch) -> None:
    monkeypatch.delenv(server.TIMEOUT_ENV, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    assert server.start_timeout()[0] == server.BASE_TIMEOUT_S  # idle: the base
    monkeypatch.setattr(os, "getloadavg", lambda: (8.0, 20.0, 18.0))
    waited, why = server.start_timeout()
    assert waited == server.BASE_TIMEOUT_S * 4 and "load average 8.0 on 2 cores" in why
    monkeypatch.setattr(os, "getloadavg", lambda: (500.0, 1.0, 1.0))
    assert server.start_timeout()[0] == server.MAX_TIMEOUT_S
    monkeypatch.setenv(server.TIMEOUT_ENV, "45")
    assert server.start_timeout() == (45.0, server.TIMEOUT_ENV)
    message = server.timeout_message("the Prefect server", 45, server.TIMEOUT_ENV,
                                     Path("/h/kpack-server.log"))
    assert "\n" not in message and "set KPACK_SERVER_START_TIMEOUT_S" in message


def test_a_taken_port_is_refused_at_once_naming_its_owner() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        with pytest.raises(ports.PortTakenError) as caught:
            ports.claim(port)
    assert f"port {port} on 127.0.0.1 is taken by pid {os.getpid()}" in str(caught.value)
    assert "--port" in str(caught.value)
    with ports.claim(0) as mine:  # any free port, listening, for a child to inherit
        assert mine.getsockname()[1] > 0 and mine.get_inheritable()


def test_a_port_bound_but_not_yet_listening_is_still_named() -> None:
    """The other starter may be between its bind and its listen when a start is refused:
    such a socket is in no table of /proc/net, so the owner is looked for again until it
    listens (once, in CI, the loser said "a process this user cannot see")."""
    import threading

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        timer = threading.Timer(0.3, held.listen)
        timer.start()
        try:
            assert ports.owner(port).startswith(f"pid {os.getpid()} ")
        finally:
            timer.join()


def test_a_record_whose_process_is_gone_is_reported_as_gone(home) -> None:
    stale = _record(home)
    assert server.read_state() == stale and server.running() is None
    res = _kpack(["server", "status"], home)
    assert res.returncode == 1
    assert f"not running: the record names pid {stale.pid} on port 9" in res.stdout
    info, alive = server.stop()
    assert info == stale and not alive and not (home / server.STATE_FILE).exists()


def test_a_live_pid_that_does_not_answer_as_the_server_is_never_believed_or_killed(
        home) -> None:
    with socket.socket() as other:  # something else answers on the record's port
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        port = other.getsockname()[1]
        record = _record(home, pid=os.getpid(), port=port, url=f"http://127.0.0.1:{port}/api")
        assert server.running() is None
        info, alive = server.stop()  # must not signal this test's own process
    assert info == record and alive is False


def _watched(last: float) -> Watched:
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    watched = Watched(app, {"kpack": 1, "pid": 1, "home": "/h", "token": "t"})
    watched.last = last
    return watched


def test_the_identity_endpoint_and_request_tracking() -> None:
    watched = _watched(0.0)
    sent: list[dict] = []

    async def call(path: str) -> None:
        async def send(message):
            sent.append(message)
        await watched({"type": "http", "path": path}, None, send)

    asyncio.run(call(server.IDENTITY_PATH))
    assert json.loads(sent[1]["body"]) == {"kpack": 1, "pid": 1, "home": "/h", "token": "t"}
    assert watched.last == 0.0  # asking who it is does not count as use
    asyncio.run(call("/api/health"))
    assert watched.last > 0 and watched.active == 0


def test_a_kept_server_stops_only_when_unused_and_no_build_holds_the_lease(home) -> None:
    info = _record(home, idle_s=10.0)
    now = time.monotonic()
    assert should_stop(home, info.token, _watched(now - 5), now) is None  # used recently
    busy = _watched(now - 60)
    busy.active = 1  # a build's event stream is open
    assert should_stop(home, info.token, busy, now) is None
    fd = os.open(home / server.LEASE_FILE, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # a build between two requests
        assert should_stop(home, info.token, _watched(now - 60), now) is None
    finally:
        os.close(fd)
    why = should_stop(home, info.token, _watched(now - 60), now)
    assert why and "unused for 60 s" in why
    assert not (home / server.STATE_FILE).exists()  # no build picks it while it stops
    _record(home, idle_s=0.0)  # `kpack server start` keeps a kept server for good
    assert should_stop(home, "t" * 32, _watched(now - 10_000), now) is None
    assert "gone or names another server" in should_stop(home, "other", _watched(now), now)


# --- real servers (each start costs 15-40 s on 2 cores) ----------------------------------


def _gone(pid: int, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not server.pid_alive(pid):
            return True
        time.sleep(0.2)
    return False


@pytest.mark.prefect_server
def test_two_starts_on_one_port_at_once_exactly_one_wins(tmp_path) -> None:
    """Two people, two PREFECT_HOMEs, one port, the same moment: one server, and the
    other start fails saying by whom the port is taken (both used to say "started")."""
    from tests.loopback_site import free_port

    port = free_port()
    homes = [tmp_path / "alice", tmp_path / "bob"]
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    cmd = [sys.executable, "-m", "packs.cli", "server", "start", "--port", str(port),
           "--timeout", "600"]
    procs = [subprocess.Popen(cmd, cwd=REPO, env={**env, "PREFECT_HOME": str(h)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for h in homes]
    try:
        results = [(p.wait(timeout=660), *p.communicate()) for p in procs]
        codes = [r[0] for r in results]
        assert sorted(codes) == [0, 1], results
        winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
        assert "Prefect server started" in results[winner][1]
        line = results[loser][2].strip()
        assert "\n" not in line and line.startswith("error: ")
        assert f"port {port} on 127.0.0.1 is taken by" in line
        assert (f"PREFECT_HOME={homes[winner].resolve()}" in line
                or "kpack server start" in line), line  # the server, or its starter
        ok = _kpack(["server", "status"], homes[winner])
        assert ok.returncode == 0 and f"127.0.0.1:{port}" in ok.stdout
        assert _kpack(["server", "status"], homes[loser]).returncode == 1
    finally:
        for h in homes:
            record = server.read_state(h.resolve())
            _kpack(["server", "stop"], h)
            if record:
                assert _gone(record.pid), f"the server of {h} outlived kpack server stop"


@pytest.mark.prefect_server
def test_a_build_keeps_its_server_and_a_warm_process_for_the_next_build(tmp_path) -> None:
    """The first build starts a server in the background and leaves a warm build
    process; the second reuses both (no server start, no import of Prefect in its own
    process); `kpack server stop` ends both."""
    from flows import warm
    from tests.small_site import serve_site, write_source

    home = tmp_path / "home"
    env = {"KPACK_SERVER_IDLE_S": "300", "KPACK_DEBUG": "1"}
    try:
        with serve_site(tmp_path / "site") as base:
            source = write_source(tmp_path / "tea", base)
            args = ["build", str(source), "--out", str(tmp_path / "out")]
            first = _kpack(args, home, **env)
            assert first.returncode == 0, first.stderr[-3000:]
            assert "started a Prefect server for builds in the background" in first.stderr
            deadline = time.monotonic() + 120  # the warm process imports the build first
            while time.monotonic() < deadline and not (home / warm.SOCKET_FILE).exists():
                time.sleep(0.5)
            assert (home / warm.SOCKET_FILE).exists(), (home / warm.LOG_FILE).read_text()
            second = _kpack(args, home, **env)
        assert second.returncode == 0, second.stderr[-3000:]
        assert "this build runs in the warm build process" in second.stderr
        assert "started a Prefect server" not in second.stderr
        assert "no changes" in second.stdout
        status = _kpack(["server", "status"], home)
        assert status.returncode == 0, status.stdout
        assert "kept by kpack build" in status.stdout and "warm build process" in status.stdout
    finally:
        record = server.read_state(home.resolve())
        builder = warm.read_state(home.resolve())
        stopped = _kpack(["server", "stop"], home)
    assert "stopped the Prefect server" in stopped.stdout, stopped.stdout
    assert record and _gone(record.pid), "the kept server outlived kpack server stop"
    assert builder and _gone(int(builder["pid"])), "the warm process outlived kpack server stop"
