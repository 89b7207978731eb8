"""Citations (packs/citations.py) and the offline answer (packs/retrieval/extractive.py):
marker grammar, whitespace-normalised spans, Markdown-aware sentences, selection by
relevance, and offline answers whose citations are spans of the pack's sections table."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
from query_fixtures import embedder, pack, pack_dir, url_of  # noqa: F401 (fixtures)

from packs import format as fmt
from packs.citations import (
    CITATION_FIELDS,
    cite,
    excerpt_citations,
    locate,
    markers,
    precision,
    unverified_note,
)
from packs.result import Facts, RankedSection
from packs.retrieval.context import assemble
from packs.retrieval.extractive import segment, select
from packs.retrieval.synthesis import extractive_answer


@dataclass
class Sec:
    id: str
    url: str
    heading_path: str
    content: str
    pack: str | None = None
    citation: int | None = None
    similarity: float | None = None


def test_markers_grammar():
    text = ("One [1], two packs [2, k8s], together [3][4], listed [5; 6], index items[0], "
            "escaped \\[7], a link [8](https://x.test), not a number [note], `code [9]`\n"
            "```\nx = y[10]\n```\nlast [11].")
    assert markers(text) == [1, 2, 3, 4, 5, 6, 11]
    # A code span may run over a line break, not into the next bullet or paragraph: a
    # stray backtick quoted from a page hides no marker after it.
    assert markers("- set it to `pod`.` [1]\n- the next one, `x` [2]\n\nthen` [3]") == [1, 2, 3]
    assert markers("a `span over\na break [4]` [5]") == [5]


def test_locate_normalises_whitespace_and_gives_offsets_in_the_stored_text():
    text = "Retries  are\ncapped.\n\nThe backoff\tdoubles   each time."
    start, end = locate("capped. The backoff doubles", text)
    assert text[start:end] == "capped.\n\nThe backoff\tdoubles"
    assert locate("  Retries are  ", text) == (0, len("Retries  are"))
    assert locate("backoff halves", text) is None
    assert locate(" \n ", text) is None and locate("", text) is None


def test_cite_aligns_quotes_with_markers_in_order():
    sec = Sec("s1", "https://a.test/", "A > B", "Alpha is first. Beta is second.")
    cits = cite("Alpha [1]. Beta [1]. Gamma [1]. Other [4].", {1: sec},
                [(1, "Alpha is first."), (1, "Beta  is\nsecond."), (4, "whatever")], "docs")
    assert [tuple(c) for c in cits] == [CITATION_FIELDS] * 4
    assert [(c["n"], c["verified"]) for c in cits] == [(1, True), (1, True), (1, False),
                                                       (4, False)]
    assert cits[1] == {"n": 1, "pack": "docs", "url": "https://a.test/", "section_id": "s1",
                       "heading_path": "A > B", "quote": "Beta is second.", "start": 16,
                       "end": 31, "verified": True}
    assert cits[2]["quote"] == "" and cits[3]["url"] is None
    assert precision(cits) == (2, 4)
    assert unverified_note(cits).startswith("Unverified citations 1, 4:")
    assert unverified_note(cits[:2]) is None
    assert markers(unverified_note(cits)) == []  # the note adds no marker


def test_a_section_label_names_the_pack():
    sec = Sec("s1", "u", "h", "Alpha.", pack="kitchen")
    (c,) = cite("Alpha [1, kitchen]", {1: sec}, [(1, "Alpha.")], None)
    assert c["pack"] == "kitchen" and c["verified"]


MARKDOWN = """Pods get a QoS class. The kubelet evicts `BestEffort` pods first,
followed by `Burstable` and
`Guaranteed` pods last, e.g. under memory pressure.

- Requests are what the scheduler reserves. Limits cap usage.
- A pod with no requests
  or limits is `BestEffort`.
1. Set requests.

| Class | Evicted |
|-------|---------|
| BestEffort | first |

```yaml
resources:
  limits:
    memory: 1Gi
```

First line with a hard break\x20\x20
Second line.

A sentence broken by a hard break\x20\x20
runs on in lower case.

#### Heading inside a section
Done."""


def test_segment_respects_markdown():
    units = [(u.kind, u.display) for u in segment(MARKDOWN)]
    assert units == [
        ("sentence", "Pods get a QoS class."),
        ("sentence", "The kubelet evicts `BestEffort` pods first, followed by `Burstable` and "
                     "`Guaranteed` pods last, e.g. under memory pressure."),
        ("item", "Requests are what the scheduler reserves."),
        ("item", "Limits cap usage."),
        ("item", "A pod with no requests or limits is `BestEffort`."),
        ("item", "Set requests."),
        ("row", "Class: BestEffort; Evicted: first"),
        ("code", "resources:\n  limits:\n    memory: 1Gi"),
        ("sentence", "First line with a hard break"),
        ("sentence", "Second line."),
        # A hard break inside a sentence (the next line goes on in lower case) is no end of
        # the unit: "... compatible control plane" then "components automatically use ...".
        ("sentence", "A sentence broken by a hard break runs on in lower case."),
        ("heading", "Heading inside a section"),
        ("sentence", "Done."),
    ]
    for u in segment(MARKDOWN):  # every unit is a span of the text
        assert u.display.split()[-1].strip("`") in MARKDOWN[u.start:u.end]


def test_selection_is_by_relevance_not_position():
    text = ("Kestrel is a scheduler. It has a web UI. Workers poll queues in priority order. "
            "The scheduler listens on port 8400 by default.")
    best = select("Which port does the scheduler listen on?", [text], max_units=2)
    assert best[0].unit.display == "The scheduler listens on port 8400 by default."
    # A later section's sentence beats an earlier section's when it answers the question.
    picks = select("How many attempts does a job get?",
                   ["Jobs are functions. They run on workers.",
                    "A job gets at most 5 attempts before the dead letter queue."])
    assert picks[0].section == 1


def test_page_brackets_do_not_become_markers():
    sec = Sec("s", "u", "h", "The array a [2] holds the retry count [3] of each job.", citation=1)
    answer, quotes, _ = extractive_answer("retry count", [sec])
    assert markers(answer) == [1]
    (c,) = cite(answer, {1: sec}, quotes)
    assert c["verified"] and c["quote"] == sec.content


def test_offline_answer_cites_spans_of_the_sections_table(pack):
    answer = pack.ask("What is the default value of max_attempts?", use_cache=False)
    assert answer["query_type"] == "retrieval_only"
    lines = answer["answer"].splitlines()
    # "Its fields ..." is quoted with the sentence that says whose (extractive.with_antecedent).
    assert lines[2].startswith("- RetryPolicy is a Python class you attach to a job with the "
                               "retry argument. Its fields are max_attempts, which defaults to 5,")
    table = pl.read_parquet(pack.path / fmt.TABLES_DIR / f"{fmt.SECTIONS}.parquet")
    stored = dict(zip(table["id"], table["content"]))
    assert [c["n"] for c in answer["citations"]] == markers(answer["answer"])
    assert len(answer["citations"]) == len(lines) - 2  # one per bullet
    for c in answer["citations"]:
        assert c["verified"] and c["pack"] == "kestrel"
        assert stored[c["section_id"]][c["start"]:c["end"]] == c["quote"]
    assert answer["citations"][0]["url"] == url_of("retries")
    # No heading is repeated in the answer: the sources list names them once.
    assert "Configuring retries >" not in answer["answer"]


def test_gated_offline_answer_has_no_citations(pack):
    answer = pack.ask("Who won the 1998 football world cup?", gate_threshold=0.6)
    assert answer["citations"] == [] and answer["query_type"] == "confidence_gated_fallback"


def test_excerpt_citations_quote_what_the_context_shows():
    long = "  " + " ".join(f"Sentence number {i} about retries." for i in range(200)) + "\n"
    secs = [RankedSection(id=f"s{i}", article_id="a", url=f"https://x.test/{i}", title="T",
                          heading_path=f"T > H{i}", content=text, score=1.0)
            for i, text in enumerate([long, "Short second section about queues."])]
    ctx = assemble(secs, [], Facts(), budget=300, reserve=0)
    assert ctx.truncated and secs[0].citation == 1
    first, *_ = excerpt_citations([s for s in secs if s.citation], "docs")
    assert first["verified"] and first["start"] == 2 and first["quote"] in ctx.text
    assert first["end"] < len(long.rstrip())  # the block was cut to fit its share
    assert long[first["start"]:first["end"]] == first["quote"]
