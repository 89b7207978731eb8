"""Bad input on the command line is exit 2 with one line that says what to fix."""

from __future__ import annotations

import pytest
from query_fixtures import embedder, pack_dir  # noqa: F401 (fixtures)
from typer.testing import CliRunner

from packs.cli import make_app

app = make_app()


@pytest.mark.parametrize(("args", "message"), [
    (["   "], "the question is empty"),
    (["jobs?", "-o", "max_results=Infinity"], "max_results must be a whole number, got inf"),
    (["jobs?", "-o", "vector_weight=abc"], "vector_weight must be a number, got 'abc'"),
    (["jobs?", "-o", "rrf_k=null"], "rrf_k must be a whole number, got None"),
    (["jobs?", "-o", "gate_threshold=NaN"], "gate_threshold must be a finite number, got nan"),
    (["jobs?", "-o", "quality_threshold=NaN"], "quality_threshold must be a finite number"),
    (["jobs?", "-o", "hybrid=1"], "hybrid must be true or false, got 1"),
    (["jobs?", "-o", "colour=red"], "unknown search option(s) ['colour']"),
    (["jobs?", "-o", "=3"], "write NAME=VALUE"),
])
@pytest.mark.parametrize("command", ["query", "search"])
def test_bad_questions_and_options_exit_2_with_one_line(pack_dir, command, args,
                                                        message) -> None:
    res = CliRunner().invoke(app, [command, str(pack_dir), *args])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines


def test_a_mismatched_model_names_both_models_plainly(pack_dir) -> None:
    res = CliRunner().invoke(app, ["search", str(pack_dir), "jobs?", "--embedding-model",
                                   "BAAI/bge-small-en-v1.5"])
    assert res.exit_code == 2
    line = res.output.strip()
    assert ("built with embedding model sentence-transformers/all-MiniLM-L6-v2 (dim 384), "
            "not BAAI/bge-small-en-v1.5 (the embedding model asked for)") in line
    assert "'BAAI/bge-small-en-v1.5' is 'BAAI/bge-small-en-v1.5'" not in line


def test_help_has_no_double_negative_flags() -> None:
    for command in ("query", "search", "build", "eval"):
        res = CliRunner().invoke(app, [command, "--help"], terminal_width=200)
        assert "--no-no-" not in res.output and "--no-allow-private-hosts" not in res.output
