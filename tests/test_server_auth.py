"""Who may talk to the Prefect server kpack keeps (flows/server_auth.py): the gate on its
own, then one real server of a PREFECT_HOME (`kpack server start`, shared by this module)
that a build and `kpack serve` use with the home's secret while another Unix user and a
foreign Host header are refused.

The real server costs 15-40 s to start on 2 cores; everything it needs runs against that
one. Every process started here is stopped in teardown (`kpack server stop`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import pytest

from flows import server, server_auth
from tests.loopback_site import free_port
from tests.prefect_procs import until
from tests.small_site import serve_site, write_source

REPO = Path(__file__).resolve().parents[1]


# --- the gate on its own ------------------------------------------------------------------


def _call(gate, path: str, *, method: str = "GET", host: str = "127.0.0.1:4200",
          auth: str | None = None, kind: str = "http") -> int:
    headers = [(b"host", host.encode())]
    if auth is not None:
        headers.append((b"authorization", auth.encode()))
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(message):
        sent.append(message)

    scope = {"type": kind, "path": path, "method": method, "headers": headers,
             "query_string": b"", "root_path": ""}
    asyncio.run(gate(scope, receive, send))
    return next(m["status"] for m in sent if m["type"].endswith("http.response.start"))


def test_the_gate_wants_the_secret_under_api_and_a_loopback_host() -> None:
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    gate = server_auth.Gate(app, "s3cret")
    good = server_auth.basic("s3cret")
    assert _call(gate, "/api/flow_runs/filter", method="POST") == 401
    assert _call(gate, "/api/flow_runs/x", method="DELETE", auth=server_auth.basic("guess")) == 401
    assert _call(gate, "/api/flow_runs/x", method="DELETE", auth="Bearer s3cret") == 401
    assert _call(gate, "/api/csrf-token", auth="Basic !!notbase64") == 401
    assert _call(gate, "/api", method="POST") == 401
    assert _call(gate, "/api/flow_runs/filter", method="POST", auth=good) == 200
    assert _call(gate, "/api/health") == 200 and _call(gate, "/api/ready") == 200
    assert _call(gate, "/api/health", method="POST") == 401  # the probes are GETs only
    assert _call(gate, "/") == 200 and _call(gate, "/kpack-identity") == 200  # UI, identity
    assert _call(gate, "/", host="localhost:4200") == 200
    for path in ("/", "/api/health", "/api/flow_runs/filter"):
        assert _call(gate, path, host="evil.example", auth=good) == 400
        assert _call(gate, path, host="evil.example:4200", auth=good) == 400


def test_the_secret_is_made_once_mode_0600_and_refused_when_others_may_read_it(
        tmp_path) -> None:
    assert server_auth.read_secret(tmp_path) is None
    made = server_auth.ensure_secret(tmp_path)
    path = server_auth.auth_path(tmp_path)
    assert len(made) >= 40 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert server_auth.ensure_secret(tmp_path) == made == server_auth.read_secret(tmp_path)
    assert not list(tmp_path.glob(".*.tmp"))
    path.chmod(0o644)
    with pytest.raises(server_auth.AuthFileError, match="must be yours with mode 0600"):
        server_auth.read_secret(tmp_path)


def test_a_configured_api_url_gets_the_secret_only_when_it_names_this_homes_server(
        tmp_path) -> None:
    secret = server_auth.ensure_secret(tmp_path)
    assert server_auth.secret_for("http://127.0.0.1:4321/api", tmp_path, 4321) == secret
    assert server_auth.secret_for("http://localhost:4321/api", tmp_path, 4321) == secret
    assert server_auth.secret_for("http://127.0.0.1:4200/api", tmp_path, 4321) is None
    assert server_auth.secret_for("http://127.0.0.1:4321/api", tmp_path, None) is None
    assert server_auth.secret_for("https://prefect.example.com:4321/api", tmp_path,
                                  4321) is None


# --- one real server -------------------------------------------------------------------------


def _env(home: Path, **extra: str) -> dict[str, str]:
    """A subprocess environment with this home and no Prefect API of the session's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PREFECT_") and k != "KPACK_DEBUG"}
    env.update({"PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1",
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                            os.environ.get("PYTHONPATH")])),
                **extra})
    return env


def _kpack(args: list[str], env: dict[str, str], timeout: float = 600
           ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "packs.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """`kpack server start` in a home of its own (the scheduler every 2 s, for serve), and
    a three-page loopback site with its source folder."""
    tmp = tmp_path_factory.mktemp("kept")
    home = (tmp / "home").resolve()
    env = _env(home, KPACK_SERVER_IDLE_S="300",
               PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="2")
    port = free_port()
    try:
        started = _kpack(["server", "start", "--port", str(port), "--timeout", "600"], env,
                         timeout=660)
        assert started.returncode == 0, started.stderr[-3000:]
        info = server.read_state(home)
        with serve_site(tmp / "site") as base:
            source = write_source(tmp / "sources" / "tea", base)
            yield {"home": home, "env": env, "info": info, "tmp": tmp, "source": source,
                   "secret": server_auth.read_secret(home)}
    finally:
        _kpack(["server", "stop"], env)


@contextmanager
def _client(url: str, secret: str | None):
    """A sync Prefect client on `url` sending `secret` (none: no auth)."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: url, PREFECT_API_AUTH_STRING: secret}), \
            get_client(sync_client=True) as client:
        yield client


@pytest.fixture(scope="module")
def built(kept):
    """`kpack build` with no PREFECT_API_URL: it finds the home's server and reports to it
    with the secret (its flow run, task runs and CSRF-protected changes)."""
    out = kept["tmp"] / "out"
    res = _kpack(["build", str(kept["source"]), "--out", str(out), "--json"], kept["env"])
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout)
    name = f"tea-{summary['build_id']}"
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    with _client(kept["info"].url, kept["secret"]) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            name=FlowRunFilterName(any_=[name])))
    assert runs and runs[0].state.is_completed(), runs
    return {"summary": summary, "run": runs[0], "out": out}


@pytest.mark.prefect_server
def test_the_secret_is_on_no_command_line_and_the_database_is_private(kept, built) -> None:
    secret, token = kept["secret"], kept["info"].token
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            assert secret.encode() not in cmdline and token.encode() not in cmdline, entry
    mode = stat.S_IMODE(server_auth.auth_path(kept["home"]).stat().st_mode)
    assert mode == 0o600
    assert stat.S_IMODE((kept["home"] / "prefect.db").stat().st_mode) == 0o600
    assert stat.S_IMODE((kept["home"] / server.LOG_FILE).stat().st_mode) == 0o600


@pytest.mark.prefect_server
def test_the_python_client_needs_the_secret(kept, built) -> None:
    from prefect.exceptions import PrefectHTTPStatusError

    with _client(kept["info"].url, None) as client, pytest.raises(PrefectHTTPStatusError,
                                                                  match="401"):
        client.read_flow_runs()
    with _client(kept["info"].url, kept["secret"]) as client:
        client.set_flow_run_name(built["run"].id, built["run"].name)  # a change: CSRF too
        assert client.read_flow_run(built["run"].id).name == built["run"].name


@pytest.mark.prefect_server
def test_a_build_pointed_at_the_homes_server_by_url_sends_the_secret(kept, built) -> None:
    """`export PREFECT_API_URL=<kpack server start's API>` (deployments/README) is this
    home's server: the build adds the secret itself (no PREFECT_API_AUTH_STRING set)."""
    env = {**kept["env"], "PREFECT_API_URL": kept["info"].url, "KPACK_SERVER_IDLE_S": "0"}
    res = _kpack(["build", str(kept["source"]), "--out", str(built["out"])], env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "no changes" in res.stdout and "temporary" not in res.stderr


NOBODY = r"""
import http.client, json, sys
port, run_id, secret_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def call(method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(method, path, body=body,
                 headers={"content-type": "application/json", **(headers or {})})
    resp = conn.getresponse()
    status, data = resp.status, resp.read().decode("utf-8", "replace")[:300]
    conn.close()
    return [status, data]

try:
    open(secret_path).read()
    read = "read"
except PermissionError:
    read = "denied"
print(json.dumps({
    "uid": __import__("os").getuid(), "secret": read,
    "filter": call("POST", "/api/flow_runs/filter", "{}"),
    "logs": call("POST", "/api/logs/filter", "{}"),
    "delete": call("DELETE", "/api/flow_runs/" + run_id),
    "guessed": call("DELETE", "/api/flow_runs/" + run_id,
                    headers={"Authorization": "Basic Og==", "Prefect-Csrf-Token": "x",
                             "Prefect-Csrf-Client": "y"}),
    "csrf": call("GET", "/api/csrf-token?client=mine"),
}))
"""


def _as_nobody() -> None:  # runs in the child between fork and exec
    nobody = pwd.getpwnam("nobody")
    os.setgroups([])
    os.setgid(nobody.pw_gid)
    os.setuid(nobody.pw_uid)


@pytest.mark.prefect_server
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a request as another Unix "
                                              "user (`nobody`); run the suite as root to check it")
def test_another_unix_user_cannot_read_or_delete_runs(kept, built) -> None:
    """The issue's probe: another local user read flow runs and logs with
    POST /api/flow_runs/filter and deleted a run (204). Now that user cannot read the
    secret, and every such request is 401, CSRF token or not; the run is still there."""
    run = built["run"]
    # the venv's interpreter may sit in a folder only root can enter (/root/.pyenv)
    python = shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin")
    if python is None:
        pytest.skip("no system python3 that the user `nobody` could run")
    res = subprocess.run([python, "-I", "-S", "-c", NOBODY, str(kept["info"].port),
                          str(run.id), str(server_auth.auth_path(kept["home"]))],
                         preexec_fn=_as_nobody, cwd="/", env={"PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    seen = json.loads(res.stdout)
    assert seen["uid"] == pwd.getpwnam("nobody").pw_uid and seen["secret"] == "denied"
    for what in ("filter", "logs", "delete", "guessed", "csrf"):
        status, body = seen[what]
        assert status == 401, (what, status, body)
        assert run.name not in body
    with _client(kept["info"].url, kept["secret"]) as client:
        assert client.read_flow_run(run.id).name == run.name  # not deleted


@pytest.mark.prefect_server
def test_a_foreign_host_header_is_refused_even_with_the_secret(kept, built) -> None:
    """DNS rebinding: a page on evil.example whose name now points at 127.0.0.1 sends
    Host: evil.example. Refused before anything is read, even were the secret known."""
    root = kept["info"].ui
    auth = {"Authorization": server_auth.basic(kept["secret"])}
    for method, path in (("GET", "/"), ("GET", "/api/health"), ("GET", "/kpack-identity"),
                         ("POST", "/api/flow_runs/filter"),
                         ("DELETE", f"/api/flow_runs/{built['run'].id}")):
        resp = httpx.request(method, root + path, headers={**auth, "Host": "evil.example"},
                             json={} if method == "POST" else None, timeout=60)
        assert resp.status_code == 400, (method, path, resp.status_code, resp.text[:200])
    assert httpx.get(root + "/api/health", timeout=60).status_code == 200


@pytest.mark.prefect_server
def test_the_ui_is_served_and_asks_for_the_secret(kept) -> None:
    root = kept["info"].ui
    page = httpx.get(root + "/", timeout=60, follow_redirects=True)
    assert page.status_code == 200 and "<html" in page.text.lower()
    settings = httpx.get(root + "/ui-settings", timeout=60).json()
    assert settings["auth"] == "BASIC" and settings["csrf_enabled"] is True
    assert settings["api_url"] == kept["info"].url
    status = _kpack(["server", "status"], kept["env"])
    assert status.returncode == 0 and str(server_auth.auth_path(kept["home"])) in status.stdout


@pytest.mark.prefect_server
def test_kpack_serve_runs_a_schedule_on_the_homes_server(kept, built) -> None:
    """`kpack serve` with no PREFECT_API_URL registers its deployments with the home's
    server and its scheduled runs complete there, sending the secret."""
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.exceptions import ObjectNotFound

    env = {**kept["env"], "PREFECT_RUNNER_POLL_FREQUENCY": "2"}
    log = kept["tmp"] / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "packs.cli", "serve",
                                 str(kept["source"].parent), "--out", str(built["out"]),
                                 "--every", "10"], cwd=REPO, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with _client(kept["info"].url, kept["secret"]) as client:
            def deployment():
                assert proc.poll() is None, log.read_text()[-3000:]
                try:
                    return client.read_deployment_by_name("build-pack/tea")
                except ObjectNotFound:
                    return None

            dep = until("serve to register build-pack/tea", deployment, 120, poll_s=1.0)

            def completed():
                assert proc.poll() is None, log.read_text()[-3000:]
                runs = client.read_flow_runs(deployment_filter=DeploymentFilter(
                    id=DeploymentFilterId(any_=[dep.id])))
                failed = [r for r in runs if r.state and r.state.is_final()
                          and not r.state.is_completed()]
                assert not failed, (failed[0].state, log.read_text()[-3000:])
                return [r for r in runs if r.state and r.state.is_completed()]

            runs = until("a scheduled run to complete", completed, 240, poll_s=1.0)
        assert runs[0].auto_scheduled
        # ... on the home's server: serve started no server process of its own (Prefect's
        # ephemeral one, a child listening on a port, answers anyone with no secret; the
        # serve process's own listener is the runner's control channel to its flow runs)
        children = psutil.Process(proc.pid).children(recursive=True)
        listening = [(p.pid, c.laddr) for p in children for c in p.net_connections("tcp")
                     if c.status == psutil.CONN_LISTEN]
        assert listening == [], listening
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_basic_is_what_prefect_sends() -> None:
    assert server_auth.basic("a:b") == "Basic " + base64.b64encode(b"a:b").decode()
