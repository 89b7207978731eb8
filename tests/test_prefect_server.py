"""Against a real `prefect server start`: a build's flow run, named task runs and
artifacts read back through the Prefect client, and a served deployment whose schedule
fires and publishes a new build.

One server per module (~20 s to start on 2 cores). The build and the serve process run
as subprocesses with their own environment, so the session's in-process test harness
(tests/conftest.py) never gets in the way. Every process started here is killed, with
its children, in teardown. Deselect with `-m "not prefect_server"`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.prefect_procs import REPO, process, tail, until
from tests.prefect_procs import prefect_server as start_server
from tests.small_site import PAGES, serve_site, write_source

pytestmark = pytest.mark.prefect_server

STAGES = ("fetch", "split", "links", "extract", "embed", "resolve", "publish")
SHARD_STAGES = ("fetch", "split", "extract", "embed")
PROGRESS_STAGES = SHARD_STAGES


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory) -> Iterator[dict]:
    """`prefect server start` on a free loopback port with its own PREFECT_HOME."""
    with start_server(tmp_path_factory.mktemp("prefect-server")) as started:
        yield started


@contextmanager
def _client(url: str):
    """A sync Prefect client on `url`, whatever the session's harness has configured."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: url}), \
            get_client(sync_client=True) as client:
        yield client


def _flow_run_named(client, name: str):
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[name])))
    return runs[0] if runs else None


def _task_runs(client, flow_run_id) -> list:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    return client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))


def _artifacts(client, flow_run_id) -> dict:
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    arts = client.read_artifacts(artifact_filter=ArtifactFilter(
        flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))
    return {a.key: a for a in arts if a.key}  # keyless artifacts are persisted task results


BUILD_SCRIPT = """
import json, sys
from flows.build import run_build
summary = run_build(sys.argv[1], sys.argv[2], extractor="offline")
open(sys.argv[3], "w").write(json.dumps(summary, default=str))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[tuple[Path, str]]:
    root = tmp_path_factory.mktemp("tea-site")
    with serve_site(root) as base:
        yield root, base


@pytest.fixture(scope="module")
def first_build(prefect_server, site, tmp_path_factory) -> dict:
    """`run_build` in a subprocess whose PREFECT_API_URL is the real server."""
    _, base = site
    tmp = tmp_path_factory.mktemp("tea")
    source = write_source(tmp / "sources" / "tea", base)
    out, summary_file, log = tmp / "out", tmp / "summary.json", tmp / "build.log"
    with log.open("wb") as fh:
        done = subprocess.run([sys.executable, "-c", BUILD_SCRIPT, str(source), str(out),
                               str(summary_file)], cwd=REPO, env=prefect_server["env"],
                              stdout=fh, stderr=subprocess.STDOUT, timeout=240)
    assert done.returncode == 0, tail(log)
    return {"summary": json.loads(summary_file.read_text()), "sources": tmp / "sources",
            "out": out, "tmp": tmp}


def test_the_build_is_a_named_flow_run_with_named_task_runs(prefect_server, first_build):
    summary = first_build["summary"]
    with _client(prefect_server["url"]) as client:
        run = _flow_run_named(client, f"tea-{summary['build_id']}")
        assert run is not None and run.state.is_completed()
        assert client.read_flow(run.flow_id).name == "build-pack"
        assert run.parameters["name"] == "tea"
        assert "pack:tea" in run.tags
        # task runs reach the server as events; give the recorder a moment
        names = until("the stage task runs", lambda: (
            lambda trs: trs if all(any(t.name.startswith(f"{s}-") for t in trs)
                                   for s in STAGES) else None)(_task_runs(client, run.id)), 30)
    by_stage = {s: [t for t in names if t.name.startswith(f"{s}-")] for s in STAGES}
    for stage, runs in by_stage.items():
        assert runs and all(t.state.is_completed() for t in runs), stage
        assert all(t.tags == [] for t in runs), (stage, [t.tags for t in runs])
        # <stage>-<pack>-<i>/<n> for the shard stages, <stage>-<pack> for the reduce steps
        want = {f"{stage}-tea-1/1"} if stage in SHARD_STAGES else {f"{stage}-tea"}
        assert {t.name for t in runs} == want, stage


def test_the_build_leaves_its_artifacts(prefect_server, first_build):
    summary = first_build["summary"]
    with _client(prefect_server["url"]) as client:
        run = _flow_run_named(client, f"tea-{summary['build_id']}")
        arts = until("the build's artifacts", lambda: (
            lambda a: a if {"build-report-tea", "sources-tea", "pack-tea"} <= set(a) else None)(
                _artifacts(client, run.id)), 30)
    report = arts["build-report-tea"].data
    assert report.startswith("# Build report: tea") and summary["build_id"] in report
    assert "missing.md" in report  # the failed URL, with its reason
    rows = json.loads(arts["sources-tea"].data)
    assert {r["url"].rsplit("/", 1)[-1]: r["status"] for r in rows} == {
        **dict.fromkeys(PAGES, "ok"), "missing.md": "failed"}
    assert Path(summary["pack"]).resolve().as_uri() in arts["pack-tea"].data
    for stage in PROGRESS_STAGES:  # the flow moves each stage's bar as its shards finish
        bar = arts[f"progress-tea-{stage}"]
        assert bar.type == "progress" and float(bar.data) == 100.0, stage
        assert bar.flow_run_id == run.id


SERVE_SCRIPT = """
import sys
from datetime import timedelta
from flows.schedule import serve
serve(sys.argv[1], sys.argv[2], every=timedelta(seconds=float(sys.argv[3])))
"""


def test_a_served_deployment_fires_on_schedule_and_publishes(prefect_server, first_build, site):
    """Serve the sources' deployments with a 10 s interval; after one page of the site
    changes, the first scheduled run rebuilds and publishes a new current build."""
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.exceptions import ObjectNotFound

    from packs import format as fmt

    root, _ = site
    old = first_build["summary"]["build_id"]
    (root / "teapots.md").write_text(PAGES["teapots.md"] + "\n## Cosies\n\nA tea cosy keeps "
                                     "the pot warm for half an hour.\n", encoding="utf-8")
    env = {**prefect_server["env"], "PREFECT_RUNNER_POLL_FREQUENCY": "2"}
    log = first_build["tmp"] / "serve.log"
    cmd = [sys.executable, "-c", SERVE_SCRIPT, str(first_build["sources"]),
           str(first_build["out"]), "10"]
    with process(cmd, env, log) as proc, _client(prefect_server["url"]) as client:

        def deployment():
            assert proc.poll() is None, tail(log)
            try:
                return client.read_deployment_by_name("build-pack/tea")
            except ObjectNotFound:  # until serve has registered it
                return None

        dep = until("serve to register build-pack/tea", deployment, 60, log)
        assert dep.parameters["out_dir"] == str(first_build["out"].resolve())
        assert "build_id" not in dep.parameters

        def finished_run():
            assert proc.poll() is None, tail(log)
            runs = client.read_flow_runs(deployment_filter=DeploymentFilter(
                id=DeploymentFilterId(any_=[dep.id])))
            failed = [r for r in runs if r.state and r.state.is_final()
                      and not r.state.is_completed()]
            assert not failed, (failed[0].state, tail(log))
            done = [r for r in runs if r.state and r.state.is_completed()]
            return done[0] if done else None

        run = until("a scheduled run of build-pack/tea to complete", finished_run, 120, log)
    current = (first_build["out"] / "tea" / fmt.CURRENT_FILE).read_text().strip()
    assert current != old
    assert run.name == f"tea-{current}"
    assert run.auto_scheduled  # made by the server's scheduler, not by hand
    manifest = json.loads((first_build["out"] / "tea" / fmt.BUILDS_DIR / current
                           / fmt.MANIFEST_FILE).read_text())
    assert manifest["counts"]["articles"] == len(PAGES)
