"""The explorer's citations and page sections (issue 47): a verified quote of a section the
search result does not hold (the offline answer also reads the other sections of the cited
pages) is shown in that section's text, never as "not found" beside a "verified" badge;
the chunks of one long section are told apart in a page's section list. Real packs, real
Kuzu (tests/explore_fixtures.py)."""

from __future__ import annotations

import dataclasses
import re

import pytest
from explore_fixtures import explorer_packs
from query_fixtures import embedder  # noqa: F401 (fixture)

from packs.browse import chunk_labels
from packs.explore import views_ask
from packs.explore.web import Explorer, environment
from packs.packset import PackSet

QUESTION = "How many times is a failed job retried?"


@pytest.fixture(scope="module")
def explorer(tmp_path_factory, embedder):
    packs = explorer_packs(tmp_path_factory.mktemp("explore-cite"), embedder)
    with PackSet.open([packs["kestrel"]]) as packset:
        yield Explorer(packset)


def test_a_verified_quote_outside_the_result_is_shown_in_its_section(explorer):
    served = explorer.get("kestrel")
    full = served.pack.search(QUESTION)
    section = served.pack.browse.section(full.sections[-1].id)
    # The answer quotes a section the (cached) search result shown beside it lacks.
    result = dataclasses.replace(full, sections=full.sections[:-1], related=[])
    words = section.content.split()
    quote = " ".join(words[:6])
    start = section.content.index(quote)
    answer = {"citations": [
        {"n": 9, "pack": "kestrel", "url": section.url, "section_id": section.id,
         "heading_path": section.heading_path, "quote": quote, "start": start,
         "end": start + len(quote), "verified": True},
        {"n": 10, "pack": "kestrel", "url": section.url, "section_id": section.id,
         "heading_path": section.heading_path, "quote": "Words that are nowhere.",
         "start": None, "end": None, "verified": False}]}
    cites, anchors = views_ask._citations(explorer, "kestrel", answer, result)
    assert cites[0]["excerpt"] is not None and cites[0]["excerpt"].quote == quote
    assert cites[1]["excerpt"] is None and anchors == {9: ["cite-0"], 10: ["cite-1"]}

    html = environment().get_template("ask.html").render(
        question=QUESTION, error=None, answer={"query_type": "retrieval_only"}, kind="offline",
        kind_label="Offline answer", default_label="kestrel", labels=["kestrel"],
        current="kestrel", switch_links=[], answer_html="", gate_reason=None, usage={},
        citations=[{**cites[0], "excerpt": None}, cites[1]], result=result, facts=[])
    items = re.findall(r'<li class="citation card".*?</li>', html, re.S)
    assert len(items) == 2
    # A verified citation whose text could not be read shows its quote, not "not found".
    assert 'data-verified="true"' in items[0] and "not found" not in items[0]
    assert 'data-verified="false"' in items[1] and "not found in the section" in items[1]


def test_the_chunks_of_one_section_are_told_apart():
    rows = [("a", "Page > Intro", 0, 0), ("b", "Page > Setup", 1, 0),
            ("c", "Page > Setup", 1, 1), ("d", "Page > Setup", 1, 2),
            ("e", "Page > Notes", 2, 0), ("f", "Page > Notes", 3, 0)]
    assert chunk_labels(rows) == [
        ("a", "Page > Intro"), ("b", "Page > Setup (part 1 of 3)"),
        ("c", "Page > Setup (part 2 of 3)"), ("d", "Page > Setup (part 3 of 3)"),
        ("e", "Page > Notes"), ("f", "Page > Notes")]
