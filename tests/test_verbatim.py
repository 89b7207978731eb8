"""Every line of an offline answer is its cited section's text (issue 51): tiny hand-made
sections of every kind of unit, answered offline and checked by packs/retrieval/verbatim.py
against their verified citations, character for character after whitespace folding."""

from __future__ import annotations

import pytest

from packs.citations import cite
from packs.result import RankedSection
from packs.retrieval import extractive
from packs.retrieval.verbatim import bullets, page_view, unverified_lines

SECTIONS = {
    "Ownership > Rules": """First, let's look at the ownership rules. Keep these rules in mind as we
work through the examples that illustrate them:

- Each value in Rust has an *owner*.
- There can only be **one owner** at a time.
- When the owner goes out of scope, the value will be dropped.

Check the crate with the following command:

```shell
cargo check
```
""",
    "Labels > Printing": """<span class="caption">Figure 8-1: The label printer and its
tray</span>

The label printer handles `<img src=x onerror="f()">` payloads by escaping every angle
bracket before it prints. Read <a href="/docs/printer/">the printer guide</a> for more.

> **Note**: the printer keeps the `labels.toml` file
> in its spool folder, and reads it at start-up.
""",
    "Arrays > Indexing": """Use `items[0]` for the first element of an array; an index
such as items [1] past the end panics at run time.

```
let first = items[0];
```
""",
    "Policies > Concurrency": """The spec may give one of the following concurrency policies:

- `Allow` (default): the schedule allows concurrently running jobs, so a slow run and the
  next one overlap, each with its own pods and its <em>own record</em> in the history of runs.
- `Forbid`: the schedule does not allow concurrent runs; if it is time for a new run and
  the previous run has not finished yet, the schedule skips the new run.
- `Replace`: if it is time for a new run and the previous run has not finished yet, the
  schedule replaces the currently running job with a new one, and the old one is stopped.
- `Queue`: a new run waits until the previous run has finished, and then starts at once,
  however late that is; the runs after it wait in turn, in the order they were due.
""",
    "Nodes > Conditions": """The kubelet reports these node conditions when a node runs low
on a resource:

| Node Condition | Eviction signal | Description |
|----------------|-----------------|-------------|
| `MemoryPressure` | `memory.available` | Available memory on the node has reached the eviction threshold |
| `DiskPressure` | `nodefs.available` | Available disk space on the node has reached the eviction threshold |
| `PIDPressure` | | Available process identifiers on the node have fallen below the eviction threshold |
""",
}

QUESTIONS = [
    "What are the ownership rules?",
    "How do I check the crate?",
    "How does the label printer handle img payloads?",
    "Where does the printer keep labels.toml?",
    "What does Figure 8-1 show?",
    "How do I get the first element of an array?",
    "Which concurrency policies can a schedule use?",
    "What does the Forbid policy do when a run is still going?",
    "Which node condition reports memory pressure?",
    "What node conditions does the kubelet report?",
]


def _sections() -> list[RankedSection]:
    return [RankedSection(id=f"s{n}", article_id="a", url=f"https://t.test/{n}",
                          title=path.split(" > ")[0], heading_path=path, content=text,
                          score=1.0 / n, citation=n)
            for n, (path, text) in enumerate(SECTIONS.items(), start=1)]


@pytest.mark.parametrize("question", QUESTIONS)
def test_every_offline_answer_line_is_its_sections_text(question):
    sections = _sections()
    answer, quotes, used = extractive.answer(question, sections)
    by_n = {s.citation: s for s in [*sections, *used]}
    citations = cite(answer, by_n, quotes)
    assert bullets(answer) and len(citations) == len(bullets(answer))
    assert all(c["verified"] for c in citations)
    texts = {s.id: s.content for s in [*sections, *used]}
    assert unverified_lines(answer, citations, texts) == [], answer


def test_a_table_row_shown_with_its_headers_verifies_against_its_section():
    sections = _sections()
    answer, quotes, used = extractive.answer(QUESTIONS[8], sections, max_units=1)
    assert "Node Condition: `MemoryPressure`; Eviction signal: `memory.available`" in answer
    citations = cite(answer, {s.citation: s for s in [*sections, *used]}, quotes)
    texts = {s.id: s.content for s in sections}
    assert unverified_lines(answer, citations, texts) == []
    # The headers are the section's, read from its table: without the section's text the
    # row's display does not verify, and a header or a cell the page does not have never does.
    assert unverified_lines(answer, citations) != []
    for forged in (answer.replace("Node Condition:", "Condition:"),
                   answer.replace("`memory.available`", "`memory.free`")):
        assert unverified_lines(forged, citations, texts) != [], forged


def test_the_code_span_with_a_tag_is_shown_and_quoted_as_written():
    answer, quotes, _ = extractive.answer(QUESTIONS[2], _sections(), max_units=1)
    assert '`<img src=x onerror="f()">`' in answer
    assert '`<img src=x onerror="f()">`' in quotes[0][1]


def test_a_rewritten_line_does_not_verify():
    quote = "The printer handles `<img src=x>` payloads. | `Allow` | Runs overlap. |"
    citation = [{"verified": True, "quote": quote, "heading_path": "Labels > Printing"}]
    assert unverified_lines("- The printer handles ` ` payloads. [1]", citation) == [
        "The printer handles ` ` payloads."]
    assert unverified_lines("- Policy: `Allow`; Effect: Runs overlap. [1]", citation) == [
        "Policy: `Allow`; Effect: Runs overlap."]
    assert unverified_lines("- The printer handles `<img src=x>` payloads. [1]", citation) == []
    # A heading the bullet opens with is the section's heading, not its text.
    assert unverified_lines("- *Printing*: The printer handles `<img src=x>` payloads. [1]",
                            citation) == []
    unverified = [{"verified": False, "quote": "x", "heading_path": ""}]
    assert unverified_lines("- anything [1]", unverified) == ["- anything [1]"]


def test_only_the_answers_own_escape_of_a_bracket_is_taken_off():
    # The answer writes "\\[" before a digit so that it reads as no citation marker; a
    # page's own escaped brackets are its text and are shown as written.
    quote = "Index with items[0] and [1, 2]. `cargo search` \\[*options*\\] \\[*query*…\\]"
    citation = [{"verified": True, "quote": quote, "heading_path": "Search > Synopsis"}]
    assert unverified_lines("- Index with items[0] and \\[1, 2]. [1]", citation) == []
    assert unverified_lines("- `cargo search` \\[*options*\\] \\[*query*…\\] [1]", citation) == []
    assert unverified_lines("- `cargo search` [*options*] [*query*…] [1]", citation) == [
        "`cargo search` [*options*] [*query*…]"]


def test_the_page_view_leaves_out_only_what_a_reader_never_sees():
    assert page_view("> a <span>b</span>\n> `<br>` c <img src=x>") == "a b `<br>` c"


def test_a_whole_pack_items_label_may_hold_an_asterisk():
    # "**hugepages-***: ..." is the label of the item hugepages-* before its quote
    quote = "You cannot overcommit `hugepages-*` resources."
    citation = [{"verified": True, "quote": quote, "heading_path": "Resources > Huge pages"}]
    assert unverified_lines(f"- **hugepages-***: {quote} [1]", citation) == []
    assert unverified_lines(f"- **memory**: {quote} [1]", citation) == []
    assert unverified_lines("- **hugepages-***: You can overcommit it. [1]", citation) == [
        "You can overcommit it."]


def test_a_clause_cut_from_its_sentence_verifies_with_its_marks():
    quote = "and the `azureDisk` type now goes to the disk.csi.azure.com driver"
    citation = [{"verified": True, "quote": quote, "heading_path": "Volumes"}]
    assert unverified_lines(f"- **azureDisk**: … {quote} … [1]", citation) == []
    assert unverified_lines("- **azureDisk**: … and the `azureDisk` type is gone … [1]",
                            citation) == ["and the `azureDisk` type is gone"]


def test_a_line_with_character_references_shown_verifies_and_a_changed_one_does_not():
    quote = "--address string&nbsp;&nbsp;Default: 0.0.0.0 Set to &quot;::&quot; for all."
    citation = [{"verified": True, "quote": quote, "heading_path": "kubelet"}]
    assert unverified_lines('- --address string Default: 0.0.0.0 Set to "::" for all. [1]',
                            citation) == []
    assert unverified_lines('- --address string Default: 1.2.3.4 Set to "::" for all. [1]',
                            citation) != []
