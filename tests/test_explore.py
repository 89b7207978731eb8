"""kpack explore without a browser: every page on real packs (Starlette's TestClient over
the real app, real Kuzu), escaping of hostile pack text, read-only routes and headers,
paged neighbourhoods, Claude's unverified citations, the CLI's one line, and the imports
the explorer must not make. The browser tests are in test_explore_browser.py."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
import tomllib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from answer_fake import cited_answer
from anthropic_fake import FakeAnthropic
from explore_fixtures import (
    EVIL_CODE,
    EVIL_ENTITY,
    EVIL_PACK_DESCRIPTION,
    EVIL_URL,
    HUB,
    HUB_NEIGHBOURS,
    PWNED,
    explorer_packs,
)
from query_fixtures import embedder  # noqa: F401 (fixture)
from starlette.testclient import TestClient

from packs.explore.app import CSP, create_app
from packs.explore.views_graph import NEIGHBOURS_PAGE
from packs.packset import PackSet

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "How many times is a failed job retried?"


@pytest.fixture(scope="module")
def packs(tmp_path_factory, embedder) -> dict[str, Path]:
    return explorer_packs(tmp_path_factory.mktemp("explore"), embedder)


@pytest.fixture(scope="module")
def client(packs):
    packset = PackSet.open([packs["kestrel"], packs["hostile"]])
    with TestClient(create_app(packset), base_url="http://127.0.0.1") as c:
        yield c
    packset.close()


class _Tags(HTMLParser):
    """The start tags of a page as a browser parses them: (tag, {attribute: value})."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _no_markup_from_pack(html: str) -> None:
    """No script but the explorer's own, no event handler, no javascript: URL, in the
    elements a browser would build from the page."""
    for tag, attrs in _Tags(html).tags:
        if tag == "script":
            assert (attrs.get("src") or "").startswith("/static/") or \
                attrs.get("type") == "application/json", attrs
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        for name in ("href", "src", "action", "formaction"):
            value = "".join((attrs.get(name) or "").split()).lower()
            assert not value.startswith(("javascript:", "data:", "vbscript:")), (tag, attrs)
    assert f"<script>{PWNED}" not in html


def test_every_page_answers_on_real_packs(client):
    for path in ("/", "/ask", f"/ask?q={QUESTION}", f"/ask?q={QUESTION}&pack=kestrel",
                 "/entity", "/entity?name=RetryPolicy&pack=kestrel", "/builds?pack=kestrel",
                 "/diff?pack=kestrel", "/eval?pack=kestrel", "/eval?pack=hostile",
                 "/topics?pack=kestrel", "/topics?pack=hostile",
                 "/entity?pack=hostile", f"/entity?name={HUB}&pack=hostile",
                 "/static/vendor/htmx.min.js", "/static/vendor/cytoscape.min.js"):
        res = client.get(path)
        assert res.status_code == 200, (path, res.text[:500])
        assert res.headers["content-security-policy"] == CSP
        assert "http" not in CSP.replace("'self'", "")  # no remote origin is allowed
    index = client.get("/").text
    assert "Kestrel job scheduler docs" in index and "b0005" in index
    # A pack whose graph has no community large enough says so on its Topics page.
    assert 'id="no-topics"' in client.get("/topics?pack=kestrel").text
    assert "1 build(s) refused" in index and "$0.0123" in index


def test_read_only_and_bound_to_its_host(client):
    for method in ("post", "put", "delete", "patch"):
        assert getattr(client, method)("/ask?q=x").status_code == 405
    assert client.post("/static/explore.css").status_code == 405
    # A page elsewhere cannot reach the explorer by pointing its own name at 127.0.0.1.
    assert client.get("/", headers={"host": "evil.example"}).status_code == 400
    assert client.get("/?pack=nope").status_code == 404
    assert client.get("/section/0000?pack=kestrel").status_code == 404
    assert client.get("/diff?pack=kestrel&from=b0003").status_code == 404  # not on disk
    assert client.get("/entity/graph?pack=kestrel&id=nope").status_code == 404
    assert client.get("/entity?pack=kestrel&moffset=x&id=a").status_code in (400, 404)


def test_the_answer_links_markers_to_verified_citations_and_sections(client):
    html = client.get("/ask", params={"q": QUESTION, "pack": "kestrel"}).text
    assert 'data-kind="offline"' in html and "Offline answer" in html
    cites = re.findall(r'<li class="citation card" id="(cite-\d+)" data-n="(\d+)" '
                       r'data-verified="(true|false)"', html)
    assert cites and all(v == "true" for _, _, v in cites)
    for anchor, _, _ in cites:
        assert f'href="#{anchor}"' in html  # each citation has a marker linking to it
    assert "<mark>" in html and "RetryPolicy" in html
    section = re.search(r'class="cite-section" href="([^"]+)"', html).group(1)
    page = client.get(section.replace("&amp;", "&")).text
    assert 'id="cited-passage"' in page and "<mark>" in page
    assert 'id="ranked-sections"' in html and "/entity?name=RetryPolicy" in html
    assert "RetryPolicy.max_attempts defaults to 5." in html  # a fact, linked to its section


def test_asking_every_pack_at_once_labels_each_citation(client):
    html = client.get("/ask", params={"q": QUESTION}).text  # no pack: the PackSet
    assert "packs: kestrel, hostile" in html
    links = re.findall(r'class="cite-section" href="/section/[0-9a-f]+\?pack=(\w+)', html)
    assert links and set(links) <= {"kestrel", "hostile"} and "kestrel" in links
    for sid, label in re.findall(r'href="/section/([0-9a-f]+)\?pack=(\w+)', html):
        assert client.get(f"/section/{sid}", params={"pack": label}).status_code == 200


def test_every_pack_text_is_escaped(client):
    pages = [client.get(p).text for p in (
        "/", "/?pack=hostile", "/ask?q=how+do+I+descale+a+kettle",
        "/ask?q=how+do+I+descale+a+kettle&pack=hostile", "/entity?pack=hostile",
        f"/entity?name={HUB}&pack=hostile", "/builds?pack=hostile")]
    hostile_ask = pages[3]
    section = re.search(r'class="cite-section" href="([^"]+)"', hostile_ask).group(1)
    pages.append(client.get(section.replace("&amp;", "&")).text)
    entity = client.get("/entity", params={"name": EVIL_ENTITY, "pack": "hostile"}).text
    pages.append(entity)
    for html in pages:
        _no_markup_from_pack(html)
    assert "&lt;script&gt;" in pages[0] and EVIL_PACK_DESCRIPTION.split("<")[0] in pages[0]
    assert EVIL_URL in pages[-2] and f'href="{EVIL_URL}' not in pages[-2]  # URL as text
    assert "&lt;img src=x onerror=" in pages[-1]  # the description, as text
    # The graph's data reaches the page as JSON that cannot close its script element.
    data = re.search(r'<script type="application/json" id="graph-data">(.*?)</script>',
                     pages[5], re.S).group(1)
    assert "<" not in data and json.loads(data)["center"]["name"] == HUB


def test_the_offline_answer_quotes_a_code_span_as_the_page_writes_it(packs, client):
    """A tag inside a code span is code: the answer shows it (escaped on the page) and its
    citation's quote is the same text, character for character (issue 51: tag stripping
    ran inside code spans, "handles ` ` payloads")."""
    from packs import KnowledgePack

    question = "How does the label printer handle img payloads?"
    with KnowledgePack.open(packs["hostile"]) as pack:
        answer = pack.ask(question)
    line = next(x for x in answer["answer"].splitlines() if "label printer" in x)
    assert f"`{EVIL_CODE}`" in line
    quote = next(c for c in answer["citations"] if "label printer" in c["quote"])
    assert quote["verified"] and f"`{EVIL_CODE}`" in quote["quote"]
    html = client.get("/ask", params={"q": question, "pack": "hostile"}).text
    _no_markup_from_pack(html)
    assert "&lt;img src=x onerror=" in html and "handles ` ` payloads" not in html


def test_the_neighbourhood_is_paged_on_the_server(client):
    html = client.get("/entity", params={"name": HUB, "pack": "hostile"}).text
    first = json.loads(re.search(r'id="graph-data">(.*?)</script>', html, re.S).group(1))
    assert len(first["nodes"]) == NEIGHBOURS_PAGE and first["total"] == HUB_NEIGHBOURS + 1
    more = client.get("/entity/graph", params={"pack": "hostile", "id": first["center"]["id"],
                                               "offset": first["next_offset"]}).json()
    assert len(more["nodes"]) == HUB_NEIGHBOURS + 1 - NEIGHBOURS_PAGE
    assert more["next_offset"] is None
    assert not {n["id"] for n in first["nodes"]} & {n["id"] for n in more["nodes"]}
    # Mentions come a page at a time too, as list items for htmx.
    frag = client.get("/entity/mentions", params={"pack": "kestrel",
                                                  "id": _entity_id(client, "Worker"),
                                                  "offset": 1}).text
    assert frag.count("<li>") == 2 and "<html" not in frag


def _entity_id(client, name: str) -> str:
    html = client.get("/entity", params={"name": name, "pack": "kestrel"}).text
    return re.search(r'data-graph-url="/entity/graph\?id=([0-9a-f]+)', html).group(1)


def test_builds_diff_and_eval(client):
    builds = client.get("/builds?pack=kestrel").text
    statuses = re.findall(r'data-status="([^"]+)" data-build="(b\d+)"', builds)
    assert statuses == [("published", "b0005"), ("crashed", "b0004"), ("failed", "b0003"),
                        ("refused", "b0002"), ("published", "b0001")]
    assert "extract 3.0" in builds and "$0.0123" in builds
    assert 'href="/diff?pack=kestrel&amp;from=b0001&amp;to=b0005"' in builds
    diff = client.get("/diff?pack=kestrel").text  # defaults: previous build → current
    counts = dict(re.findall(r'<tr data-kind="(\w+)"><th>\w+</th><td class="added">(\d+)',
                             diff))
    assert counts == {"pages": "1", "sections": "1", "entities": "0"}
    assert "Priority queues" in diff and "Worker" in diff and "/glossary/" in diff
    scorecard = client.get("/eval?pack=kestrel").text
    assert 'id="scorecard"' in scorecard and "q-retry" in scorecard and "ndcg@10" in scorecard
    assert 'id="no-eval"' in client.get("/eval?pack=hostile").text


def test_claude_answers_are_labelled_and_unverified_citations_say_so(packs, monkeypatch):
    def misquoting(request: dict) -> dict:
        return cited_answer(request, cite=(1, 2), misquote={2: "Words that are nowhere."})

    with FakeAnthropic(api_key="test-key", responder=misquoting) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        with PackSet.open([packs["kestrel"]]) as packset:
            with TestClient(create_app(packset), base_url="http://127.0.0.1") as c:
                html = c.get("/ask", params={"q": QUESTION}).text
    assert 'data-kind="claude"' in html and "Answer by Claude" in html
    verdicts = re.findall(r'data-n="(\d)" data-verified="(true|false)"', html)
    assert ("1", "true") in verdicts and ("2", "false") in verdicts
    assert "Words that are nowhere." in html and "Claude: 1 call(s)" in html


def test_the_gate_abstains_with_its_reason(client):
    html = client.get("/ask", params={"q": "Who won the 1998 football world cup?",
                                      "pack": "kestrel"}).text
    assert 'data-kind="gated"' in html and 'id="gate-reason"' in html
    assert "confidence" in html or "similarity" in html


PROBE = """
import json, sys
from packs.cli import make_app
make_app(plugins=False)  # what `kpack explore` builds (a runtime command: no plugins)
from starlette.testclient import TestClient
from packs.explore.cli import open_app
app, packset = open_app(sys.argv[1:])
with TestClient(app, base_url="http://127.0.0.1") as c:
    codes = [c.get(p).status_code for p in ("/", "/ask?q=retry", "/builds", "/diff", "/eval",
                                             "/entity?name=Worker")]
packset.close()
bad = sorted(m for m in sys.modules if m.split(".")[0] in
             ("tasks", "flows", "prefect", "torch", "sentence_transformers", "polars",
              "pyarrow"))
print(json.dumps({"codes": codes, "loaded": bad}))
"""


def test_the_explorer_loads_nothing_of_the_build_side(packs):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(packs["kestrel"])], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"codes": [200] * 6, "loaded": []}


def test_kpack_explore_prints_one_line_and_serves(packs):
    import httpx

    kpack = Path(sys.executable).with_name("kpack")
    proc = subprocess.Popen([str(kpack), "explore", str(packs["kestrel"]), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        line = proc.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", line), line
        res = httpx.get(line, timeout=30)
        assert res.status_code == 200 and "kestrel" in res.text
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert out == "" and "Traceback" not in err  # nothing but the URL, ever
    bad = subprocess.run([str(kpack), "explore", str(packs["kestrel"].parent / "nope")],
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")


def test_the_listening_socket_is_tcp_so_responses_are_not_held_back():
    # asyncio sets TCP_NODELAY only on sockets created with IPPROTO_TCP; without it every
    # page (headers, then body) waited ~40 ms on the client's delayed ACK.
    import socket

    from packs.explore.cli import ExploreError, bind

    sock = bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
        with pytest.raises(ExploreError, match="pick another --port"):
            bind("127.0.0.1", sock.getsockname()[1])
    finally:
        sock.close()


def test_every_asset_and_template_is_package_data():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = conf["tool"]["setuptools"]["package-data"]["packs.explore"]
    here = ROOT / "packs" / "explore"
    files = [p.relative_to(here).as_posix() for sub in ("templates", "static")
             for p in (here / sub).rglob("*") if p.is_file()]
    assert files and all(any(fnmatch.fnmatch(f, g) for g in globs) for f in files), files
    assert {"static/vendor/htmx.LICENSE", "static/vendor/cytoscape.LICENSE"} <= set(files)
