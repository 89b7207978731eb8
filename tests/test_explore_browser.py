"""kpack explore as a person uses it, in Chromium (Debian's `chromium`, driven by
pytest-playwright): ask a question, follow a citation to its section, open an entity and
expand its graph, switch packs, open the diff, and see a hostile page's markup as text.
The explorer runs as `kpack explore` serves it (uvicorn on 127.0.0.1, port 0) in a thread.
Every page is also checked for Content-Security-Policy violations: the explorer's own
assets must not need anything the policy refuses.

Skipped only when /usr/bin/chromium is absent (`.ci/run` installs it; so does
`apt-get install chromium`); `playwright install` cannot download browsers here.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
from explore_fixtures import EVIL_ENTITY, EVIL_TEXT, HUB, PWNED, explorer_packs
from query_fixtures import embedder  # noqa: F401 (fixture)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
QUESTION = "How many times is a failed job retried?"

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="no Chromium at /usr/bin/chromium: apt-get install chromium (.ci/run does)")


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright's launch arguments, on Debian's Chromium."""
    return {**browser_type_launch_args, "executable_path": str(CHROMIUM),
            "args": CHROMIUM_ARGS}


@pytest.fixture(scope="module")
def explorer_url(tmp_path_factory, embedder):
    from packs.explore.cli import bind, open_app, server, url_of

    packs = explorer_packs(tmp_path_factory.mktemp("explore-browser"), embedder)
    app, packset = open_app([packs["kestrel"], packs["hostile"]])
    sock = bind("127.0.0.1", 0)
    srv = server(app, sock)
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield url_of(sock).rstrip("/")
    finally:
        srv.should_exit = True
        thread.join(timeout=30)
        sock.close()
        packset.close()


@pytest.fixture()
def csp_violations(page):
    """Console errors about the Content-Security-Policy, collected while a test runs."""
    seen: list[str] = []
    page.on("console", lambda msg: seen.append(msg.text)
            if msg.type == "error" and "Content Security Policy" in msg.text else None)
    return seen


def test_ask_follow_a_citation_and_open_an_entity(page, explorer_url, csp_violations):
    page.goto(explorer_url + "/?pack=kestrel")
    page.get_by_label("question").fill(QUESTION)
    page.get_by_label("pack to ask").select_option("kestrel")
    page.get_by_role("button", name="Ask").click()
    page.wait_for_selector("#answer")
    assert page.locator("#question").inner_text() == QUESTION
    assert "Offline answer" in page.locator("#answer-kind").inner_text()
    cites = page.locator("li.citation")
    assert cites.count() >= 1
    assert page.locator('li.citation[data-verified="true"]').count() == cites.count()
    assert "/ask?q=How%20many" in page.url  # htmx pushed the answer's own address

    marker = page.locator("#answer a.cite-marker").first
    target = marker.get_attribute("href")
    marker.click()
    assert page.url.endswith(target)
    citation = page.locator(target)
    quote = citation.locator("mark").inner_text()
    assert quote and citation.is_visible()

    citation.locator("a.cite-section").click()
    page.wait_for_selector("#section-text")
    assert page.locator("#cited-passage mark").inner_text() == quote
    assert quote.split(".")[0] in page.locator("#section-text").inner_text()

    page.locator("#section-entities a", has_text="RetryPolicy").click()
    page.wait_for_selector('#graph[data-graph-ready="true"]')
    assert page.locator("#entity-name").inner_text().startswith("RetryPolicy")
    assert int(page.locator("#graph").get_attribute("data-nodes")) == 3  # it and 2 neighbours
    assert page.locator("#mentions li").count() == 2
    assert csp_violations == []


def test_the_graph_expands_a_page_at_a_time(page, explorer_url, csp_violations):
    page.goto(f"{explorer_url}/entity?pack=hostile&name={HUB}")
    page.wait_for_selector('#graph[data-graph-ready="true"]')
    first = int(page.locator("#graph").get_attribute("data-nodes"))
    assert first == 41  # the entity and one page of neighbours
    page.locator("#graph-more").click()
    page.wait_for_selector('#graph[data-graph-ready="true"][data-nodes="47"]')
    assert page.locator("#graph-more").is_hidden()
    assert page.locator("#graph-count").inner_text() == "46 of 46 neighbours"
    assert csp_violations == []


def test_switch_packs_and_open_the_diff(page, explorer_url, csp_violations):
    page.goto(explorer_url + "/builds?pack=hostile")
    page.locator("#pack-switcher a", has_text="kestrel").click()
    assert page.url.endswith("/builds?pack=kestrel")
    statuses = page.locator("#builds tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.status)")
    assert statuses == ["published", "crashed", "failed", "refused", "published"]
    page.get_by_role("button", name="Diff").click()
    page.wait_for_selector("#diff-counts")
    row = page.locator('#diff-counts tr[data-kind="sections"]')
    assert [row.locator(f"td.{k}").inner_text() for k in ("added", "changed", "removed")] == [
        "1", "1", "2"]
    assert "Worker" in page.locator("#entities_changed").inner_text()
    page.locator("#pack-switcher a", has_text="hostile").click()
    assert "hostile" in page.locator("h1").inner_text()
    assert csp_violations == []


def test_a_hostile_page_shows_its_markup_as_text(page, explorer_url, csp_violations):
    page.goto(explorer_url + "/?pack=hostile")
    assert "<script>" in page.locator('section[data-pack="hostile"]').inner_text()
    page.goto(explorer_url + "/ask?q=how+do+I+descale+a+kettle&pack=hostile")
    page.locator("li.citation a.cite-section").first.click()
    page.wait_for_selector("#section-text")
    text = page.locator("#section-text").inner_text()
    assert f"<script>{PWNED} = 'text'</script>" in text
    assert "<img src=x onerror=" in text and '<a href="javascript:alert(2)">' in text
    assert "onerror" in page.locator("#heading-path").inner_text()
    assert page.locator("#section-text a").count() == 0  # the javascript: links are text
    assert page.locator("#section-url a").count() == 0  # so is the javascript: URL
    page.goto(f"{explorer_url}/entity?pack=hostile&name={EVIL_ENTITY}")
    page.wait_for_selector('#graph[data-graph-ready="true"]')
    assert page.locator("#entity-name").inner_text().startswith(EVIL_ENTITY)
    assert page.evaluate(f"typeof {PWNED}") == "undefined"
    assert page.locator("script:not([src]):not([type='application/json'])").count() == 0
    assert re.sub(r"\s+", " ", EVIL_TEXT.split("<script>")[0]).strip()[:40] in text
    assert csp_violations == []
