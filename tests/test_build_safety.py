"""Never publish worse than what is there: the publish guard, the pack lock, crashed runs,
a full disk, and a temporary Prefect server that dies with its build. Real builds over a
loopback site, the real Prefect test server, the loopback Messages API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.build import run_build
from packs import format as fmt
from packs.cli import make_app
from tasks.publish import lock
from tasks.publish.guard import GuardError
from tests.anthropic_fake import FakeAnthropic
from tests.small_site import serve_site, write_source

app = make_app()

REPO = Path(__file__).resolve().parents[1]


def _current(out: Path, name: str = "tea") -> str:
    return (out / name / fmt.CURRENT_FILE).read_text().strip()


def _history(out: Path, name: str = "tea") -> list[dict]:
    path = out / name / "history.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("in_child", [False, True], ids=["inline", "publish-in-child"])
def test_a_site_that_went_down_does_not_replace_the_pack_unless_forced(
        prefect_harness, tmp_path, monkeypatch, in_child) -> None:
    if in_child:  # the guard's error crosses the process boundary as itself
        import flows.build

        monkeypatch.setattr(flows.build, "ISOLATE_MIN_PAGES", 1)
    site = tmp_path / "site"
    with serve_site(site) as base:
        source = write_source(tmp_path / "tea", base)
        out, work = tmp_path / "out", tmp_path / "work"
        first = run_build(source, out, work_dir=work)
        for name in ("kettles.md", "teapots.md"):  # two of the three pages are gone
            (site / name).unlink()
        with pytest.raises(GuardError, match=r"2 of the current build's 3 pages \(67%\) could "
                                             r"not be fetched.*stays current.*--force"
                           ) as refused:
            run_build(source, out, work_dir=work)
        # the refused build's counts, for its alert (flows/alert_events.refused_event)
        assert refused.value.counts["sources"] == 4  # with missing.md
        assert refused.value.counts["failed_sources"] == 3
        assert _current(out) == first["build_id"]
        assert _history(out)[-1]["status"] == "refused"
        assert not list((out / "tea" / fmt.BUILDS_DIR).glob(".tmp-*"))
        res = CliRunner().invoke(app, ["build", str(source), "--out", str(out), "--work-dir",
                                       str(work), "--force"])
        assert res.exit_code == 0, res.output
        assert _current(out) != first["build_id"]


def test_an_api_whose_answers_are_all_unusable_does_not_replace_a_good_pack(
        prefect_harness, tmp_path, monkeypatch) -> None:
    with serve_site(tmp_path / "site") as base:
        source = write_source(tmp_path / "tea", base)
        (source / "pack.toml").write_text(
            (source / "pack.toml").read_text().replace('extractor = "offline"', ""))
        out, work = tmp_path / "out", tmp_path / "work"
        with FakeAnthropic(api_key="k") as fake:
            monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
            monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
            good = run_build(source, out, work_dir=work)
            assert good["counts"]["entities"] > 0
        # The same pages, a new prompt context (another model), and an API that answers
        # every call with an extraction that fails validation.
        (source / "pack.toml").write_text((source / "pack.toml").read_text()
                                          + 'extractor_model = "claude-sonnet-4-6"\n')
        with FakeAnthropic(api_key="k", responder=lambda req: {"entities": "not a list"}) as bad:
            monkeypatch.setenv("ANTHROPIC_BASE_URL", bad.base_url)
            with pytest.raises(RuntimeError) as err:
                run_build(source, out, work_dir=work)
        assert "tea" in str(err.value) and "\n" not in str(err.value)
        assert _current(out) == good["build_id"]
        assert _history(out)[-1]["status"] in ("refused", "failed")


def test_a_second_build_of_a_pack_being_built_is_refused(prefect_harness, tmp_path) -> None:
    with serve_site(tmp_path / "site") as base:
        source = write_source(tmp_path / "tea", base)
        out = tmp_path / "out"
        with lock.held(out / "tea", "20990101T000000000Z"):
            with pytest.raises(lock.PackLockedError, match="another build"):
                run_build(source, out, work_dir=tmp_path / "work")
        assert not (out / "tea" / fmt.CURRENT_FILE).exists()
        assert _history(out)[-1]["status"] == "refused"
        run_build(source, out, work_dir=tmp_path / "work")  # the lock was released
        assert not (out / "tea" / lock.LOCK_FILE).exists()


def test_a_killed_build_is_recorded_as_crashed_by_the_next_build(prefect_harness,
                                                                  tmp_path) -> None:
    """kill -9 leaves no history line of its own; the build that takes its lock over
    writes one (#37)."""
    import socket

    with serve_site(tmp_path / "site") as base:
        source = write_source(tmp_path / "tea", base)
        out = tmp_path / "out"
        (out / "tea").mkdir(parents=True)
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
        (out / "tea" / lock.LOCK_FILE).write_text(json.dumps(
            {"host": socket.gethostname(), "pid": int(dead.stdout),
             "build_id": "20260101T000000000Z"}))
        result = run_build(source, out, work_dir=tmp_path / "work")
    crashed, published = _history(out)
    assert (crashed["build_id"], crashed["status"]) == ("20260101T000000000Z", "crashed")
    assert f"taken over by build {result['build_id']}" in crashed["detail"]
    assert f"its process {int(dead.stdout)} is gone" in crashed["detail"]
    assert published["build_id"] == result["build_id"]


def test_strict_exits_3_when_a_source_failed_and_the_run_says_partial(
        prefect_harness, tmp_path) -> None:
    from prefect.client.orchestration import get_client

    with serve_site(tmp_path / "site") as base:
        source = write_source(tmp_path / "tea", base)  # lists a missing page
        res = CliRunner().invoke(app, ["build", str(source), "--out", str(tmp_path / "out"),
                                       "--work-dir", str(tmp_path / "work"), "--strict"])
    assert res.exit_code == 3, res.output
    assert "strict: 1 sources not included" in res.output
    assert "extractor: offline heuristic extractor" in res.output
    assert "offline offline" not in res.output
    build_id = _current(tmp_path / "out")
    with get_client(sync_client=True) as client:
        runs = [r for r in client.read_flow_runs() if r.name == f"tea-{build_id}"]
    assert [(r.state.type.value, r.state.name) for r in runs] == [("COMPLETED", "Partial")]


def test_preflight_reports_every_problem_at_once_before_fetching(tmp_path, monkeypatch) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "urls.txt").write_text("http://127.0.0.1:9/a\nhttp://10.1.2.3/b\n")
    (source / "pack.toml").write_text('embedding_model = "BAAI/bge-base-en-v1.5"\n'
                                      'extractor = "claude"\n')
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    started = time.monotonic()
    res = CliRunner().invoke(app, ["build", str(source), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2
    assert time.monotonic() - started < 30  # no hub retries, no Prefect server
    line = res.output.strip()
    assert "\n" not in line and line.startswith("error: src: ")
    assert "needs ANTHROPIC_API_KEY" in line
    assert "'BAAI/bge-base-en-v1.5' is not on this machine and HF_HUB_OFFLINE is set" in line
    assert "all 2 URLs would be refused" in line and "allow_private_hosts" in line


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_is_one_line_and_a_history_entry(prefect_harness, tmp_path) -> None:
    out = tmp_path / "small"
    out.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(out)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        with serve_site(tmp_path / "site") as base:
            source = write_source(tmp_path / "tea", base)
            res = CliRunner().invoke(app, ["build", str(source), "--out", str(out),
                                           "--work-dir", str(tmp_path / "work")])
        assert res.exit_code == 1, res.output
        last = res.output.strip().splitlines()[-1]
        assert last.startswith("error: ") and "space" in last.lower(), res.output[-3000:]
        assert _history(out)[-1]["status"] == "failed"
        assert not list((out / "tea" / fmt.BUILDS_DIR).glob(".tmp-*"))
        assert not (out / "tea" / fmt.CURRENT_FILE).exists()
    finally:
        subprocess.run(["umount", "-l", str(out)], check=False)


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True).stdout
    return [int(p) for p in out.split()]


def _build_on_its_own_server(source: Path, tmp_path: Path, **env: str):
    """argv and environment of `kpack build` in a subprocess that finds no Prefect API (its
    own PREFECT_HOME, no PREFECT_API_URL), so the build starts a temporary server."""
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "home"), **env}
    env.pop("PREFECT_API_URL", None)
    return ([sys.executable, "-m", "packs.cli", "build", str(source), "--out",
             str(tmp_path / "out")], env)


def test_a_build_on_its_temporary_server_sends_its_logs_before_stopping_it(tmp_path) -> None:
    """Prefect's log worker used to retry against the stopped temporary server at exit:
    about a minute after the build's last line, then "Error logging to API"."""
    with serve_site(tmp_path / "site") as base:
        argv, env = _build_on_its_own_server(write_source(tmp_path / "tea", base), tmp_path,
                                             PREFECT_LOGGING_TO_API_ENABLED="true")
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "starting a temporary Prefect server" in done.stdout + done.stderr
    assert "Error logging to API" not in done.stdout + done.stderr


def test_the_temporary_server_dies_with_a_killed_build(tmp_path) -> None:
    with serve_site(tmp_path / "site") as base:
        argv, env = _build_on_its_own_server(write_source(tmp_path / "tea", base), tmp_path,
                                             KPACK_FAULTS="fetch@1:sleep=120")
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 180
            servers: list[int] = []
            while time.monotonic() < deadline and not servers and proc.poll() is None:
                # flows.server_main --temporary: Prefect's app behind the home's secret (#49)
                servers = [p for p in _children(proc.pid) if "--temporary" in
                           Path(f"/proc/{p}/cmdline").read_text(errors="replace")]
                time.sleep(0.2)
            assert servers, "the build should have started its temporary server"
            while time.monotonic() < deadline and not (tmp_path / "out" / "tea" /
                                                       lock.LOCK_FILE).exists():
                time.sleep(0.2)
            proc.kill()  # SIGKILL: no atexit, no finally
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and Path(f"/proc/{servers[0]}").exists():
            state = Path(f"/proc/{servers[0]}/stat").read_text().split()[2]
            if state == "Z":
                break
            time.sleep(0.2)
        alive = Path(f"/proc/{servers[0]}").exists() and \
            Path(f"/proc/{servers[0]}/stat").read_text().split()[2] != "Z"
        if alive:
            os.kill(servers[0], signal.SIGKILL)
        assert not alive, "the temporary Prefect server outlived the killed build"
