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
    # Every number has a range; nothing is clamped into it (#37).
    (["jobs?", "-o", "max_results=-1"], "max_results must be >= 1 (within 1..1000), got -1"),
    (["jobs?", "-o", "max_results=0"], "max_results must be >= 1 (within 1..1000), got 0"),
    (["jobs?", "-k", "5000"], "max_results must be <= 1000 (within 1..1000), got 5000"),
    (["jobs?", "-o", "per_pack_results=0"], "per_pack_results must be >= 1 (within 1..1000)"),
    (["jobs?", "-o", "rrf_k=-1"], "rrf_k must be >= 0 (within 0..10000), got -1"),
    (["jobs?", "-o", "vector_weight=2"], "vector_weight must be <= 1 (within 0..1), got 2"),
    (["jobs?", "-o", "gate_threshold=5"], "gate_threshold must be <= 1 (within -1..1), got 5"),
    (["jobs?", "-o", "quality_threshold=-0.1"], "quality_threshold must be >= 0 (within 0..1)"),
    (["jobs?", "-o", "max_tokens=0"], "max_tokens must be >= 1 (within 1..64000), got 0"),
    (["jobs?", "-o", "fewshot_k=1000"], "fewshot_k must be <= 20 (within 0..20), got 1000"),
    (["jobs?", "-o", "max_facts=100000"], "max_facts must be <= 1000 (within 0..1000)"),
    (["jobs?", "-o", 'model=""'], "model must be a model name"),
    (["x" * 40_000], "the question is 40,000 characters long, over the limit of 32,000; "
                     "ask in at most 2,000"),
    (["caf\udce9?"], "the question is not valid UTF-8 text (byte 0xe9 at character 4)"),
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


@pytest.mark.parametrize(("args", "message"), [
    (["search", "out/x", "q", "--bogus"], "error: No such option: --bogus (see kpack search --help)"),
    (["explore", "out/x", "--port", "abc"], "error: Invalid value for '--port'"),
    (["search"], "error: Missing argument"),
    (["frobnicate"], "error: No such command 'frobnicate'."),
])
def test_usage_errors_are_one_lower_case_line(args, message) -> None:
    """Click's own errors (an unknown option, a bad value, a missing argument) came as a
    box or an "Error:" paragraph; the CLI's are `error: ...` on one line."""
    res = CliRunner().invoke(app, args, prog_name="kpack")
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), lines


def test_a_question_that_is_not_utf8_is_one_line_in_a_real_process(pack_dir) -> None:
    """Bytes that are not UTF-8 reach Python as surrogate escapes in sys.argv; they used to
    fail in the tokenizer with "TextEncodeInput must be Union[...]" (exit 1)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LC_ALL": "C.UTF-8"}
    env.pop("KPACK_DEBUG", None)
    res = subprocess.run([sys.executable, "-m", "packs.cli", "search", str(pack_dir),
                          b"how do I retry a caf\xe9 job?"], capture_output=True, timeout=300,
                         env=env, check=False)
    err = res.stderr.decode("utf-8", "replace").strip().splitlines()
    assert res.returncode == 2 and len(err) == 1, err
    assert "not valid UTF-8 text (byte 0xe9" in err[0]


BAD_BUILD_PROBE = r"""
import json, sys
from packs.cli import main

results = []
for args in json.loads(sys.argv[1]):
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code
    results.append(code)
heavy = ("prefect", "torch", "sentence_transformers", "huggingface_hub", "transformers",
         "trafilatura", "polars")
print(json.dumps({"codes": results, "loaded": [m for m in heavy if m in sys.modules]}))
"""


def test_bad_build_input_exits_2_in_one_line_before_prefect_or_the_model_load(tmp_path) -> None:
    """urls.txt, pack.toml, a missing folder, an absent model, a bad task runner: each one
    line and exit 2, without importing Prefect or the embedding libraries (they cost
    seconds; benchmarks/cli_latency.py measures the whole command)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    def source(name: str, urls: str, toml: str = "") -> str:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "urls.txt").write_text(urls)
        if toml:
            (folder / "pack.toml").write_text(toml)
        return str(folder)

    good = "https://example.org/a\n"
    out = str(tmp_path / "out")
    cases = {
        "urls.txt:1: one URL or path per line": ["build", source("typo", "htp:/x y\n"), "-o", out],
        "pack.toml:1: keep_builds: '3' is not a whole number": [
            "build", source("toml", good, 'keep_builds = "3"\n'), "-o", out],
        "unknown source": ["build", str(tmp_path / "nowhere"), "-o", out],
        "'no-such/model' is not on this machine and HF_HUB_OFFLINE is set": [
            "build", source("model", good), "-o", out, "--embedding-model", "no-such/model"],
        "unknown task runner 'cluster'": [
            "build", source("runner", good), "-o", out, "--task-runner", "cluster"],
    }
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("KPACK_DEBUG", None)
    done = subprocess.run([sys.executable, "-c", BAD_BUILD_PROBE, json.dumps(list(cases.values()))],
                          cwd=Path(__file__).resolve().parents[1], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["codes"] == [2] * len(cases), done.stderr
    assert report["loaded"] == [], "bad input must be reported before heavy imports"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == len(cases) and all(line.startswith("error: ") for line in lines)
    for expected, line in zip(cases, lines):
        assert expected in line, (expected, line)
