"""The warm build process (flows/warm.py, warm_host.py): which requests it may serve, and
real `kpack build` commands run through it, against the session's Prefect test server:
output on the caller's pipes, exit codes back, Ctrl-C passed on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows import warm
from packs import format as fmt
from tasks.publish import lock
from tests.small_site import serve_site, write_source

REPO = Path(__file__).resolve().parents[1]
MARK = "this build runs in the warm build process"


def test_the_key_follows_import_time_settings_code_and_folder(monkeypatch, tmp_path) -> None:
    base = warm.key()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")  # read at run time: same process ok
    monkeypatch.setenv("TERM", "dumb")
    assert warm.key() == base
    monkeypatch.setenv("PREFECT_LOGGING_LEVEL", "DEBUG")  # read when Prefect is imported
    assert warm.key() != base
    monkeypatch.delenv("PREFECT_LOGGING_LEVEL")
    monkeypatch.setattr(warm, "_stamp", lambda: ["code edited"])
    assert warm.key() != base
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)  # prefect.toml and .env are read from the folder
    assert warm.key() != base


def test_no_warm_process_serves_a_caller_without_real_stdio_or_kept_servers(
        monkeypatch) -> None:
    import io

    monkeypatch.setenv("KPACK_SERVER_IDLE_S", "0")
    assert not warm.usable() and warm.run({}) is None
    monkeypatch.setenv("KPACK_SERVER_IDLE_S", "60")
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # a test runner's captured output
    assert not warm.usable() and warm.run({}) is None


@pytest.fixture
def warm_host(prefect_harness, tmp_path):
    """A warm build process in its own PREFECT_HOME whose builds report to the session's
    test server; yields the environment a caller needs. Stopped in teardown."""
    from prefect.settings import PREFECT_API_URL

    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": PREFECT_API_URL.value(),
           "KPACK_SERVER_IDLE_S": "300", "KPACK_DEBUG": "1"}
    host = subprocess.Popen([sys.executable, "-m", "flows.warm_host", "--idle", "300"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while not (home / warm.SOCKET_FILE).exists():
            assert host.poll() is None and time.monotonic() < deadline, "no warm process"
            time.sleep(0.2)
        yield env
    finally:
        host.terminate()
        host.wait(timeout=60)
    assert not (home / warm.SOCKET_FILE).exists()


def _build(source: Path, out: Path, env: dict, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "packs.cli", "build", str(source), "--out",
                           str(out)], cwd=REPO, env={**env, **extra}, capture_output=True,
                          text=True, timeout=600)


def test_builds_run_in_the_warm_process_with_their_output_and_exit_codes(
        warm_host, tmp_path) -> None:
    with serve_site(tmp_path / "site") as base:
        source = write_source(tmp_path / "tea", base)
        done = _build(source, tmp_path / "out", warm_host)
        assert done.returncode == 0, done.stderr[-3000:]
        assert MARK in done.stderr and done.stdout.startswith("built ")
        assert (tmp_path / "out" / "tea" / fmt.CURRENT_FILE).exists()
        broken = tmp_path / "broken"
        broken.mkdir()
        (broken / "urls.txt").write_text(f"{base}/gone-1.md\n{base}/gone-2.md\n")
        (broken / "pack.toml").write_text((source / "pack.toml").read_text())
        failed = _build(broken, tmp_path / "out", warm_host)
    assert failed.returncode == 1 and MARK in failed.stderr
    assert "none of the 2 URLs could be fetched" in failed.stderr


def _interrupted_build(source: Path, out: Path, env: dict) -> tuple[int, str, float]:
    """Run `kpack build` with its fetch held for 120 s (KPACK_FAULTS), press Ctrl-C once it
    holds the pack's lock, again every 3 s until it exits; (exit code, stderr, seconds
    from the first Ctrl-C to the exit)."""
    caller = subprocess.Popen(
        [sys.executable, "-m", "packs.cli", "build", str(source), "--out", str(out)],
        cwd=REPO, env={**env, "KPACK_FAULTS": "fetch@1:sleep=120"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while not (out / source.name / lock.LOCK_FILE).exists():
            assert caller.poll() is None and time.monotonic() < deadline, \
                caller.communicate()[1][-3000:]
            time.sleep(0.2)
        started = time.monotonic()
        # what a terminal sends on Ctrl-C; Prefect lets the first one pass while the
        # flow waits on its tasks, as a user presses it again
        while caller.poll() is None and time.monotonic() - started < 90:
            caller.send_signal(signal.SIGINT)
            time.sleep(3)
        _, err = caller.communicate(timeout=30)
    finally:
        if caller.poll() is None:
            caller.kill()
    return caller.returncode, err, time.monotonic() - started


def test_ctrl_c_reaches_the_build_in_the_warm_process(warm_host, tmp_path) -> None:
    with serve_site(tmp_path / "site") as base:
        source = write_source(tmp_path / "tea", base)
        out = tmp_path / "out"
        code, err, seconds = _interrupted_build(source, out, warm_host)
    assert code == 130 and MARK in err and "interrupted" in err
    assert seconds < 60  # not the 120 s sleep the fault injected
    assert not (out / "tea" / fmt.CURRENT_FILE).exists()


def test_ctrl_c_stops_a_build_run_in_process_and_leaves_the_pack_buildable(
        prefect_harness, tmp_path) -> None:
    """No warm process (KPACK_SERVER_IDLE_S=0): the build runs in the command's own
    process, and Ctrl-C during a task's sleep ends it as 130 with the lock given back."""
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(),
           "KPACK_SERVER_IDLE_S": "0", "PREFECT_HOME": str(tmp_path / "home")}
    with serve_site(tmp_path / "site") as base:
        source = write_source(tmp_path / "tea", base)
        out = tmp_path / "out"
        code, err, seconds = _interrupted_build(source, out, env)
        assert code == 130 and "interrupted" in err, err[-3000:]
        assert MARK not in err  # it did run in process
        assert seconds < 60  # not the 120 s sleep the fault injected
        assert not (out / "tea" / fmt.CURRENT_FILE).exists()
        assert not (out / "tea" / lock.LOCK_FILE).exists()  # the lock is given back
        again = _build(source, out, env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (out / "tea" / fmt.CURRENT_FILE).exists()


def test_ctrl_c_that_surfaces_as_another_error_still_ends_the_build_as_interrupted() -> None:
    """A Ctrl-C that lands while Prefect imports its task engine reaches the flow as a
    RuntimeError (Python wraps errors raised in `__set_name__`); the build still ends as
    interrupted (exit 130 in `kpack build`), and other errors pass as they are."""
    from flows.cli.build import interrupts_stay_interrupts

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    try:
        with pytest.raises(KeyboardInterrupt) as caught, interrupts_stay_interrupts():
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)  # the interrupt lands here
            except KeyboardInterrupt as exc:
                raise RuntimeError("Error calling __set_name__ on 'Field' instance") from exc
        assert isinstance(caught.value.__cause__, RuntimeError)
        with pytest.raises(RuntimeError, match="not an interrupt"), \
                interrupts_stay_interrupts():
            raise RuntimeError("not an interrupt")
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # given back
    finally:
        signal.signal(signal.SIGINT, before)
