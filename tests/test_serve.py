"""`kpack serve`'s pieces without a server: finding sources, one deployment each."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from flows.cli.serve import register
from flows.schedule import build_deployments, discover_sources, run_environment
from tasks.sources import SourceError


def _source(root: Path, name: str, toml: str = "") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "urls.txt").write_text(f"https://{name}.example/docs\n")
    (folder / "pack.toml").write_text(toml)
    return folder


def test_every_folder_with_urls_txt_is_a_source(tmp_path) -> None:
    _source(tmp_path, "beta")
    _source(tmp_path, "alpha", 'name = "alpha-docs"\n')
    (tmp_path / "notes").mkdir()  # no urls.txt: not a source
    assert [s.name for s in discover_sources(tmp_path)] == ["alpha-docs", "beta"]


def test_bad_sources_are_all_reported_at_once(tmp_path) -> None:
    _source(tmp_path, "one", 'schedule = "daily"\n')
    _source(tmp_path, "two", "unknown_key = 1\n")
    with pytest.raises(SourceError) as err:
        discover_sources(tmp_path)
    assert "one" in str(err.value) and "two" in str(err.value) and "cron" in str(err.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SourceError, match="no source folders"):
        discover_sources(empty)
    with pytest.raises(SourceError, match="not a folder"):
        discover_sources(tmp_path / "nope")


def test_two_sources_with_one_name_are_refused(tmp_path) -> None:
    _source(tmp_path, "a", 'name = "docs"\n')
    _source(tmp_path, "b", 'name = "docs"\n')
    with pytest.raises(SourceError, match="more than one source: docs"):
        discover_sources(tmp_path)


def test_one_deployment_per_source_on_its_pack_toml_cron(tmp_path) -> None:
    _source(tmp_path, "nightly")
    _source(tmp_path, "hourly", 'schedule = "15 * * * *"\ndescription = "Hourly docs"\n')
    out = tmp_path / "out"
    deps = {d.name: d for d in build_deployments(tmp_path, out)}
    assert set(deps) == {"nightly", "hourly"}
    assert deps["hourly"].schedules[0].schedule.cron == "15 * * * *"
    assert deps["nightly"].schedules[0].schedule.cron == "0 3 * * *"  # the default
    hourly = deps["hourly"]
    assert hourly.entrypoint == "flows.build.build_pack"
    assert hourly.parameters == {
        "name": "hourly", "source_dir": str((tmp_path / "hourly").resolve()),
        "out_dir": str(out.resolve()), "work_dir": str((out / ".work").resolve())}
    assert "build_id" not in hourly.parameters  # each run makes its own
    assert set(hourly.tags) == {"pack:hourly", "scheduled"}
    assert hourly.description == "Hourly docs"
    every = build_deployments(tmp_path, out, tmp_path / "w", every=timedelta(seconds=30))
    assert every and all(d.schedules[0].schedule.interval == timedelta(seconds=30) for d in every)
    assert every[0].parameters["work_dir"] == str((tmp_path / "w").resolve())


def test_runs_store_their_results_in_the_work_dir(tmp_path) -> None:
    env = run_environment(tmp_path / "w")
    assert env["PREFECT_LOCAL_STORAGE_PATH"] == str((tmp_path / "w" / "prefect-results").resolve())
    assert env["PREFECT_RESULTS_PERSIST_BY_DEFAULT"] == "true"


def test_cli_bad_input_exits_2_with_one_line(tmp_path) -> None:
    app = typer.Typer()
    app.command("noop")(lambda: None)  # a group, so `serve` is a subcommand as in kpack
    register(app)
    runner = CliRunner()
    res = runner.invoke(app, ["serve", str(tmp_path / "nope")])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "not a folder" in res.output
    _source(tmp_path / "src", "docs")
    res = runner.invoke(app, ["serve", str(tmp_path / "src"), "--task-runner", "gpu"])
    assert res.exit_code == 2 and "unknown task runner" in res.output
