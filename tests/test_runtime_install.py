"""The downstream-app route: a venv with only `pip install knowledge-packs` (the query
runtime, no extras) opens a pack built by the full install and ranks like it.

`make test` (and so CI) builds that venv fresh (`make setup-runtime`) and points
KPACK_RUNTIME_PYTHON at its interpreter; without it these tests are skipped. The last test
adds the `[mcp]` extra to that venv and talks to `kpack mcp` there with a real MCP client;
the one after adds `[explore]` and asks `kpack explore` there over HTTP.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from packs import KnowledgePack
from packs.extras import BUILD_INSTALL, EXPLORE_INSTALL, MCP_INSTALL

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_ENV = "KPACK_RUNTIME_PYTHON"
# Questions about the example pack (this project's docs/), asked on both installs.
QUESTIONS = [
    "How do I choose an embedding model when I have no internet?",
    "What is inside a pack?",
    "How does the confidence gate decide that a question is out of scope?",
    "Which file names the build that readers open?",
    "How are failed builds kept from replacing a good pack?",
    "What does the offline extractor do without an API key?",
    "How do I rebuild a pack on a schedule?",
    "How are sections split from a page?",
    "What does kpack eval measure?",
    "How do I search several packs at once?",
]
BUILD_SIDE = ("torch", "sentence_transformers", "huggingface_hub", "prefect", "transformers",
              "onnx", "polars", "pyarrow", "trafilatura")
# Not even installed there (huggingface_hub is: `tokenizers` requires it; it is never imported).
NOT_INSTALLED = tuple(m for m in BUILD_SIDE if m != "huggingface_hub")
TOP = 5


@pytest.fixture(scope="module")
def runtime() -> Path:
    python = os.environ.get(RUNTIME_ENV)
    if not python:
        pytest.skip(f"set {RUNTIME_ENV} to a runtime-only venv's python (make test does)")
    return Path(python)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KPACK_", "ANTHROPIC_"))}
    # A fresh ONNX cache: the runtime must need none (the pack carries its encoder).
    return {**env, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
            "KPACK_SERVER_IDLE_S": "0"}  # its build keeps no server behind


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**_env(), **env})


@pytest.fixture(scope="module")
def example_pack(runtime, tmp_path_factory) -> Path:
    """sources/example built by this (full) install's kpack."""
    out = tmp_path_factory.mktemp("full-install")
    done = _run([sys.executable, "-m", "packs.cli", "build", str(ROOT / "sources/example"),
                 "--out", str(out)], ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return out / "example"


RUNTIME_SCRIPT = """
import importlib.util, json, sys
from packs import KnowledgePack
questions = json.loads(sys.argv[2])
with KnowledgePack.open(sys.argv[1]) as pack:
    top = {q: [s.id for s in pack.search(q).sections[:%d]] for q in questions}
    backend = pack.embedder.backend
print(json.dumps({"top": top, "backend": backend,
                  "loaded": sorted(m for m in %r if m in sys.modules),
                  "installed": sorted(m for m in %r if importlib.util.find_spec(m))}))
""" % (TOP, BUILD_SIDE, NOT_INSTALLED)  # noqa: UP031 - a script whose braces are its own


def test_the_runtime_venv_ranks_like_the_full_install(runtime, example_pack, tmp_path) -> None:
    with KnowledgePack.open(example_pack) as pack:
        want = {q: [s.id for s in pack.search(q).sections[:TOP]] for q in QUESTIONS}
    done = _run([str(runtime), "-c", RUNTIME_SCRIPT, str(example_pack), json.dumps(QUESTIONS)],
                tmp_path, KPACK_CACHE_DIR=str(tmp_path / "empty-cache"))
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    assert got["installed"] == [], "the runtime venv has build-side packages installed"
    assert got["loaded"] == []
    assert got["backend"] == "onnx"
    assert got["top"] == want


def test_the_readme_command_searches_in_the_runtime_venv(runtime, example_pack, tmp_path) -> None:
    question = QUESTIONS[1]
    done = _run([str(runtime.parent / "kpack"), "search", str(example_pack), question, "--json"],
                tmp_path, KPACK_CACHE_DIR=str(tmp_path / "empty-cache"))
    assert done.returncode == 0, done.stderr[-3000:]
    with KnowledgePack.open(example_pack) as pack:
        want = [s.id for s in pack.search(question).sections[:TOP]]
    assert [s["id"] for s in json.loads(done.stdout)["sections"][:TOP]] == want


def test_build_and_mcp_in_the_runtime_venv_say_what_to_install(runtime, example_pack,
                                                               tmp_path) -> None:
    kpack = str(runtime.parent / "kpack")
    done = _run([kpack, "build", str(ROOT / "sources/example"), "--out", str(tmp_path)], tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"error: kpack build needs the build dependencies ({', '.join(_missing_build())} not "
        f"installed; this is the query runtime): {BUILD_INSTALL}"]
    done = _run([kpack, "mcp", str(example_pack)], tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"error: kpack mcp needs the MCP SDK, which this install lacks: {MCP_INSTALL}"]
    done = _run([kpack, "explore", str(example_pack)], tmp_path)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: kpack explore needs ") and line.endswith(EXPLORE_INSTALL)


def test_kpack_diff_runs_on_the_runtime(runtime, example_pack, tmp_path) -> None:
    done = _run([str(runtime.parent / "kpack"), "diff", str(example_pack), str(example_pack),
                 "--json"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    diff = json.loads(done.stdout)
    with KnowledgePack.open(example_pack) as pack:
        assert diff["pages"]["unchanged"] == pack.manifest.counts.articles
        assert diff["sections"]["unchanged"] == pack.manifest.counts.sections


def _missing_build() -> list[str]:
    from packs.extras import BUILD_MODULES

    return list(BUILD_MODULES)  # none of them is in the runtime venv


def test_the_mcp_server_runs_on_the_runtime_plus_mcp(runtime, example_pack, tmp_path) -> None:
    """Last: adds [mcp] to the runtime venv (make test recreates it each run)."""
    from mcp import Client, StdioServerParameters

    done = _run([str(runtime), "-m", "pip", "install", "--quiet", "-c",
                 str(ROOT / "requirements.lock"), f"{ROOT}[mcp]"], ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    params = StdioServerParameters(command=str(runtime.parent / "kpack"),
                                   args=["mcp", str(example_pack)], env=_env(), cwd=str(tmp_path))

    async def session():
        async with Client(params, read_timeout_seconds=120) as client:
            return await client.call_tool("search", {"pack": "example", "question": QUESTIONS[1]})

    result = anyio.run(session)
    assert not result.is_error
    assert result.content[0].text.startswith("Context from pack 'example'")
    installed = _run([str(runtime), "-c", "import importlib.util as u; print("
                      "[m for m in ('torch', 'prefect') if u.find_spec(m)])"], tmp_path)
    assert installed.stdout.strip() == "[]"


def test_the_explorer_runs_on_the_runtime_plus_explore(runtime, example_pack, tmp_path) -> None:
    """After the MCP test: adds [explore] to the runtime venv and asks the explorer there."""
    import httpx

    done = _run([str(runtime), "-m", "pip", "install", "--quiet", "-c",
                 str(ROOT / "requirements.lock"), f"{ROOT}[explore]"], ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    proc = subprocess.Popen([str(runtime.parent / "kpack"), "explore", str(example_pack),
                             "--port", "0"], cwd=tmp_path, env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read()[-3000:]
        page = httpx.get(url + "ask", params={"q": QUESTIONS[1]}, timeout=120)
        assert page.status_code == 200 and 'data-verified="true"' in page.text
        assert httpx.get(url + "static/vendor/cytoscape.min.js", timeout=30).status_code == 200
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    installed = _run([str(runtime), "-c", "import importlib.util as u; print("
                      "[m for m in ('torch', 'prefect', 'polars') if u.find_spec(m)])"], tmp_path)
    assert installed.stdout.strip() == "[]"
