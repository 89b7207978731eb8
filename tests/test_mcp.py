"""The MCP server: a real client of the official SDK talks to `kpack mcp` over stdio, and
to the same tools in-process and over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

import anyio
import pytest
from query_fixtures import build_pack, embedder, pack_dir, url_of  # noqa: F401 (fixtures)

from packs import PackFormatError
from packs.format import FORMAT_VERSION
from packs.mcp_server import build_server, close_packs, open_packs
from packs.options import MAX_QUESTION_CHARS
from packs.pipeline import ASK_FIELDS

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Where do jobs go after they exhaust their retries?"


def _run(fn, *args):
    return anyio.run(fn, *args)


def test_stdio_server_searches_and_asks_a_pack(pack_dir):
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "packs.cli", "mcp", str(pack_dir)],
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
             "TOKENIZERS_PARALLELISM": "false"},
        cwd=str(ROOT),
    )

    async def session():
        async with Client(params, read_timeout_seconds=120) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            packs = await client.call_tool("list_packs", {})
            search = await client.call_tool("search", {"pack": "kestrel", "question": QUESTION})
            small = await client.call_tool("search", {"question": QUESTION, "max_tokens": 200})
            ask = await client.call_tool("ask", {"question": QUESTION})  # the only pack
            unknown = await client.call_tool("search", {"pack": "nope", "question": QUESTION})
            topics = await client.call_tool("topics", {})
            return tools, packs, search, small, ask, unknown, topics

    tools, packs, search, small, ask, unknown, topics = _run(session)
    assert set(tools) == {"list_packs", "pack_info", "search", "search_packs", "ask", "topics"}
    # The topic map (a small pack may have no community large enough: a list all the same).
    assert not topics.is_error and topics.structured_content["pack"] == "kestrel"
    assert isinstance(topics.structured_content["topics"], list)
    schema = tools["search"].input_schema
    assert schema["required"] == ["question"] and tools["ask"].input_schema["required"] == [
        "question"]
    assert schema["properties"]["question"]["maxLength"] == MAX_QUESTION_CHARS

    assert packs.structured_content["result"][0]["name"] == "kestrel"

    assert not search.is_error
    text = search.content[0].text
    assert text.startswith("Context from pack 'kestrel'")
    assert f"### [1] Queues > Dead letter queue\nURL: {url_of('queues')}" in text
    sources = search.structured_content["sources"]
    assert sources[0] == {**sources[0], "n": 1, "url": url_of("queues")}
    cits = search.structured_content["citations"]
    assert [c["n"] for c in cits] == [s["n"] for s in sources]
    assert all(c["verified"] and c["pack"] == "kestrel" and c["quote"] in text for c in cits)

    assert small.structured_content["context_tokens"] <= 200
    assert small.structured_content["truncated"] is True
    assert [c["quote"] for c in small.structured_content["citations"]] == [cits[0]["quote"]]

    assert not ask.is_error
    answer = ask.structured_content
    assert set(answer) == set(ASK_FIELDS)
    assert answer["query_type"] == "retrieval_only"  # no ANTHROPIC_API_KEY in the child
    assert answer["sources"][0]["url"] == url_of("queues") and "[1]" in answer["answer"]
    assert answer["citations"] and all(c["verified"] for c in answer["citations"])
    assert answer["citations"][0]["section_id"] and answer["citations"][0]["pack"] == "kestrel"

    assert unknown.is_error
    assert "unknown pack 'nope'; this server serves: kestrel" in unknown.content[0].text


@pytest.fixture(scope="module")
def served(pack_dir, embedder, tmp_path_factory):
    gated = build_pack(tmp_path_factory.mktemp("gated"), embedder, name="strict",
                       gate_threshold=0.99)
    mirror = build_pack(tmp_path_factory.mktemp("mirror"), embedder, name="mirror")
    packs = open_packs([pack_dir, gated, mirror])
    yield packs
    close_packs(packs)


def test_tool_inputs_are_validated(served):
    from mcp import Client

    async def calls():
        async with Client(build_server(served)) as client:
            return [
                await client.call_tool("search", {"pack": "kestrel",
                                                  "question": "x" * (MAX_QUESTION_CHARS + 1)}),
                await client.call_tool("search", {"pack": "kestrel", "question": "   "}),
                await client.call_tool("search", {"pack": "kestrel", "question": "queues",
                                                  "max_tokens": 5}),
                await client.call_tool("ask", {"pack": "x" * 500, "question": "queues"}),
                await client.call_tool("pack_info", {"name": "nope"}),
                await client.call_tool("search", {"pack": "kestrel"}),
            ]

    too_long, blank, tiny_budget, long_name, unknown, missing = _run(calls)
    assert all(r.is_error for r in (too_long, blank, tiny_budget, long_name, unknown, missing))
    assert f"at most {MAX_QUESTION_CHARS} characters" in too_long.content[0].text
    assert "the question is empty" in blank.content[0].text
    assert "greater than or equal to 200" in tiny_budget.content[0].text
    assert "at most 128 characters" in long_name.content[0].text
    assert "unknown pack 'nope'" in unknown.content[0].text
    assert "question" in missing.content[0].text


def test_pack_info_list_packs_and_the_gate(served):
    from mcp import Client

    async def calls():
        async with Client(build_server(served)) as client:
            return (await client.call_tool("list_packs", {}),
                    await client.call_tool("pack_info", {"name": "strict"}),
                    await client.call_tool("search", {"pack": "strict", "question": QUESTION}),
                    await client.call_tool("ask", {"pack": "strict", "question": QUESTION}))

    listed, info, gated, gated_ask = _run(calls)
    assert [p["name"] for p in listed.structured_content["result"]] == [
        "kestrel", "mirror", "strict"]
    meta = info.structured_content
    assert meta["build_id"] == "b0001" and meta["counts"]["sections"] == 11
    assert meta["embedding"]["gate_threshold"] == 0.99 and meta["format_version"] == FORMAT_VERSION
    assert gated.content[0].text.startswith("No section of pack 'strict' is relevant enough")
    assert gated.structured_content["gated"] is True
    assert gated.structured_content["sources"] == []
    assert gated_ask.structured_content["query_type"] == "confidence_gated_fallback"


def test_several_packs_need_a_pack_name_or_search_packs(served):
    from mcp import Client

    async def calls():
        async with Client(build_server(served)) as client:
            return [
                await client.call_tool("search", {"question": QUESTION}),
                await client.call_tool("ask", {"question": QUESTION}),
                await client.call_tool("search_packs", {"question": QUESTION, "per_pack": 2}),
                await client.call_tool("search_packs", {"question": QUESTION,
                                                        "packs": ["kestrel", "mirror"],
                                                        "max_results": 3}),
                await client.call_tool("search_packs", {"question": QUESTION, "per_pack": 2,
                                                        "max_results": 3}),
                await client.call_tool("search_packs", {"question": QUESTION,
                                                        "packs": ["kestrel", "nope"]}),
            ]

    no_pack, no_pack_ask, per_pack, capped, both, unknown = _run(calls)
    for r in (no_pack, no_pack_ask):
        assert r.is_error and "serves 3 packs (kestrel, mirror, strict): pass `pack`" in \
            r.content[0].text
    out = per_pack.structured_content
    assert per_pack.content[0].text.startswith("Context from packs 'kestrel', 'mirror', 'strict'")
    assert {p["pack"]: p["passed"] for p in out["packs"]} == {
        "kestrel": True, "mirror": True, "strict": False}  # strict's own gate is 0.99
    assert [1 <= p["sections"] <= 2 for p in out["packs"]] == [True, True, False]
    assert {s["pack"] for s in out["sources"]} == {"kestrel", "mirror"}
    assert [c["n"] for c in out["citations"]] == [s["n"] for s in out["sources"]]
    assert all(c["verified"] and c["pack"] in ("kestrel", "mirror") for c in out["citations"])
    assert "Pack: mirror" in per_pack.content[0].text
    assert capped.structured_content["packs"][0]["sections"] <= 3
    assert {p["pack"] for p in capped.structured_content["packs"]} == {"kestrel", "mirror"}
    assert both.is_error and "not both" in both.content[0].text
    assert unknown.is_error and "unknown pack 'nope'" in unknown.content[0].text


def test_ask_tool_carries_claude_citations_with_a_flagged_quote(served, monkeypatch):
    from answer_fake import cited_answer
    from anthropic_fake import FakeAnthropic
    from mcp import Client

    async def call():
        async with Client(build_server(served)) as client:
            return await client.call_tool("ask", {"pack": "kestrel", "question": QUESTION})

    with FakeAnthropic(responder=lambda req: cited_answer(req, misquote={2: "Not there."})) as f:
        monkeypatch.setenv("ANTHROPIC_API_KEY", f.api_key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f.base_url)
        result = _run(call)
    answer = result.structured_content
    assert answer["query_type"] == "hybrid_search"
    assert [(c["n"], c["verified"]) for c in answer["citations"]] == [(1, True), (2, False)]
    assert answer["citations"][1]["quote"] == "Not there."
    assert "Unverified citation 2:" in answer["answer"]


def test_streamable_http_on_loopback(served):
    import uvicorn
    from mcp import Client

    app = build_server(served).streamable_http_app(host="127.0.0.1")
    # Bind first: the client's connection waits in the backlog until uvicorn accepts it,
    # so the test needs no start-up polling.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()

    async def call():
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            return await client.call_tool("search", {"pack": "kestrel", "question": QUESTION})

    try:
        result = _run(call)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    assert result.structured_content["sources"][0]["url"] == url_of("queues")


def test_open_packs_refuses_duplicates_and_missing(pack_dir, tmp_path):
    with pytest.raises(PackFormatError, match="two packs are named 'kestrel'"):
        open_packs([pack_dir, pack_dir / "builds" / "b0001"], warm=False)
    with pytest.raises(PackFormatError, match="no such pack directory"):
        open_packs([tmp_path / "nope"], warm=False)
    with pytest.raises(PackFormatError, match="no pack given"):
        open_packs([], warm=False)


def test_cli_mcp_fails_cleanly_on_a_bad_pack(tmp_path):
    import typer
    from typer.testing import CliRunner

    from packs.cli.admin import register

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    register(app)
    res = CliRunner().invoke(app, ["mcp", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "no such pack directory" in res.stderr


def test_readme_client_example_runs(pack_dir, tmp_path):
    """The README's MCP client example, run as written against `kpack mcp` over stdio."""
    import os
    import re
    import subprocess

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- mcp-client-example[^>]*-->\n```python\n(.*?)```", readme, re.S)
    assert block, "the README lost its MCP client example"
    script = tmp_path / "mcp_client.py"
    script.write_text(block.group(1), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    done = subprocess.run([sys.executable, str(script), str(pack_dir), QUESTION], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Retrieval-only answer")
    cited = [line for line in lines if re.match(r"\[\d+\] (verified|UNVERIFIED) ", line)]
    assert cited and all(" verified " in line for line in cited)
    assert f"[1] verified {url_of('queues')} (Queues > Dead letter queue)" in cited[0]
