"""The offline answer's text rules and unit selection, template directives removed at split
time, facts that end at sentence ends, and scores a person can read: tiny hand-made
inputs (packs/text.py, packs/retrieval/units.py, packs/retrieval/extractive.py,
tasks/clean.py, tasks/offline_extract.py, packs/retrieval/scores.py)."""

from __future__ import annotations

import math

import pytest

from packs import text
from packs.result import RankedSection
from packs.retrieval import extractive, reader, scores
from packs.retrieval import reader_features as rf
from packs.retrieval.units import Unit, candidates
from tasks.clean import clean_markdown
from tasks.extract.offline import extract_offline
from tasks.sections import split_markdown

# --- packs/text.py ---------------------------------------------------------------------------


def test_a_hard_wrapped_paragraph_is_one_sentence_until_its_end():
    para = ("First, let's look at the rules. Keep these rules in mind as we\n"
            "work through the examples, e.g. the next one, which use `x. Y` a lot.\n"
            "Done")
    assert text.sentences(para) == [
        "First, let's look at the rules.",
        "Keep these rules in mind as we work through the examples, e.g. the next one, "
        "which use `x. Y` a lot.",
        "Done"]


@pytest.mark.parametrize("word, stem", [
    ("configuring", "configur"), ("configured", "configur"), ("configuration", "configur"),
    ("ponies", "poni"), ("caresses", "caress"), ("hopping", "hop"), ("relational", "relat"),
    ("pods", "pod"), ("k8s", "k8s"), ("max_surge", "max_surge"), ("api", "api"),
    # a "y" after a consonant is a vowel, first or after a vowel a consonant; a final
    # consonant-vowel-consonant gets its "e" back; a double consonant is undoubled
    ("happy", "happi"), ("enjoying", "enjoi"), ("yielding", "yield"), ("boyish", "boyish"),
    ("filing", "file"), ("fizzed", "fizz"), ("controlling", "control"),
    ("generalization", "gener")])
def test_porter_stems_and_words_left_alone(word, stem):
    assert text.stem(word) == stem


def test_irregular_plurals_meet_their_singular():
    # A question about "the appendices" was gated: no page writes that word, and Porter
    # stems it apart from "appendix".
    for plural, one in (("appendices", "appendix"), ("indices", "index"),
                        ("analyses", "analysis"), ("children", "child")):
        assert text.singular(plural) == one
        assert text.stem(plural) == text.stem(one)
    assert text.singular("policies") == "policy"  # the ending rules still apply


def test_words_keep_compounds_and_add_their_parts():
    assert text.words("Use kube-proxy, pack.toml and max_surge") == [
        "use", "kube-proxy", "kube", "proxy", "pack.toml", "pack", "toml", "and",
        "max_surge", "max", "surge"]
    assert text.terms("The ownership rules") == ["ownership", "rule"]


def test_a_name_in_a_heading_meets_the_question_however_it_is_written():
    # The Kubernetes docs title a page "Persistent Volumes" and write "PersistentVolume" in
    # the text: "What is a PersistentVolume?" met neither the page title nor its heading.
    asked = set(text.terms("What is a PersistentVolume?"))
    assert not asked & set(text.terms("Persistent Volumes"))
    assert asked <= set(text.name_terms("Persistent Volumes > Introduction"))
    assert set(text.terms("What are persistent volumes?")) <= set(
        text.name_terms("Change the Reclaim Policy of a PersistentVolume"))
    passages = [rf.Passage("A PV is a piece of storage.", "Persistent Volumes > Introduction",
                           "Persistent Volumes", rank=0),
                rf.Passage("A PV is a piece of storage.", "Storage > Persistent Volumes",
                           "Storage", rank=1)]
    units = extractive.units_of("What is a PersistentVolume?", passages)
    x = rf.features(rf.analyse("What is a PersistentVolume?"), passages, units)
    assert x[0, rf.FEATURES.index("title")] > 0 and x[1, rf.FEATURES.index("heading")] > 0
    # No name runs across the headings of a path.
    assert text.stem("volumesintroduction") not in text.name_terms(
        "Persistent Volumes > Introduction")


def test_identifiers_and_code_spans_as_written():
    found = text.identifiers("Set `maxSurge` or --dry-run=client; edit pack.toml, call "
                             "Vec::new() in apps/v1 with HTTP2, e.g. twice.")
    assert found == ["maxSurge", "--dry-run=client", "pack.toml", "Vec::new()", "apps/v1",
                     "HTTP2"]
    assert text.has_number("port 8080") and not text.has_number("step v2 only")
    # A name led by an acronym is one identifier as asked ("Which HTTPRoute field ...?");
    # an acronym's plural is no name.
    assert text.identifiers("Attach the HTTPRoute; the CSIDriver object; OOMKilled") == [
        "HTTPRoute", "CSIDriver", "OOMKilled"]
    assert text.identifiers("PVCs, CRDs and URLs of GPUs") == []


# --- candidates --------------------------------------------------------------------------------

RULES = """First, let's look at the ownership rules. Keep these rules in mind as we
work through the examples that illustrate them:

- Each value in Rust has an owner.
- There can only be one owner at a time.
- When the owner goes out of scope, the value will be dropped.

Run the check with the following command:

```shell
cargo check
```

Nothing in the text follows this lead-in, which still says something:"""


def test_a_lead_in_is_only_a_candidate_with_what_it_introduces():
    units = candidates(RULES)
    shown = [(u.kind, u.display) for u in units]
    leadins = [u for u in units if u.kind == "leadin"]
    assert [u.inner for u in leadins] == ["item", "code"]
    # A short paragraph comes whole with the list its last sentence introduces.
    assert leadins[0].display == (
        "First, let's look at the ownership rules. Keep these rules in mind as we work "
        "through the examples that illustrate them:\n"
        "- Each value in Rust has an owner.\n- There can only be one owner at a time.\n"
        "- When the owner goes out of scope, the value will be dropped.")
    assert leadins[1].display.endswith(":\ncargo check")
    # A lead-in is never a unit on its own; one with nothing after it (what it introduced
    # is not in the text) is an ordinary sentence, when it says something on its own.
    last = "Nothing in the text follows this lead-in, which still says something:"
    assert [d for _, d in shown if d.endswith(":")] == [last]
    assert ("sentence", last) in shown
    # "That code is:" introducing a listing the page included from a file says nothing.
    assert not [u for u in candidates("Intro here.\n\nThat code is:\n\nThen more prose.")
                if u.display == "That code is:"]
    for u in units:  # every unit is a span of the text: its own citation quote
        assert RULES[u.start:u.end].split()[0].strip("`-") in u.display


# A lead-in whose listing a template directive included (removed at split time): prose
# follows it, then the sentence that answers.
LISTING_GONE = """To skip the slow tests, mark them with the `ignore` attribute, as shown here:

After the attribute, we add the line to each test we want to exclude. Now when we run
our tests, the slow ones do not run and the output lists them as ignored. The next
paragraph explains more of the output than anyone needs to read in one answer.

To run only the ignored tests, use `cargo test -- --ignored`."""


def test_a_lead_in_is_quoted_with_its_code_past_the_listing_caption():
    # mdBook pages put a file name caption between a lead-in and its code block.
    md = ("For example, to use optimization level 1 in the development profile, add these "
          "two lines to _Cargo.toml_:\n\n"
          '<span class="filename">Filename: Cargo.toml</span>\n\n'
          "```toml\n[profile.dev]\nopt-level = 1\n```\n\nThis overrides the default.")
    lead = next(u for u in candidates(md) if u.kind == "leadin")
    assert lead.inner == "code"
    assert lead.display.endswith("_Cargo.toml_:\n[profile.dev]\nopt-level = 1")
    assert md[lead.start:lead.end].endswith("[profile.dev]\nopt-level = 1")


def test_a_code_block_quoted_with_its_lead_in_is_not_quoted_again_alone():
    # Chunks of a section overlap: the code block opens the next chunk too, where it is a
    # unit of its own; quoting both shows the same listing twice.
    listing = "```toml\n[profile.dev]\nopt-level = 0\n\n[profile.release]\nopt-level = 3\n```"
    first = ("For example, here are the default values for the `opt-level` setting for the "
             "`dev` and `release` profiles:\n\n" + listing)
    second = listing + "\n\nThe `opt-level` setting controls how many optimizations apply."
    picks = extractive.select("What opt-level do the dev and release profiles use by default?",
                              [first, second], max_units=5, max_words=200)
    gists = [" ".join(p.unit.display.split()) for p in picks]
    assert any("opt-level = 3" in g for g in gists)
    assert not [a for a in gists for b in gists if a != b and a in b]


def test_a_lead_in_followed_by_prose_is_a_sentence_not_a_block_of_paragraphs():
    units = candidates(LISTING_GONE)
    assert not [u for u in units if u.kind == "leadin"]
    first = units[0]
    assert (first.kind, first.display) == (
        "sentence", "To skip the slow tests, mark them with the `ignore` attribute, as shown here:")
    # The answer is no longer crowded out by the lead-in glued to the paragraphs after it.
    picks = extractive.select("How do I run only the ignored tests?", [LISTING_GONE],
                              max_words=40)
    assert "cargo test -- --ignored" in " ".join(p.unit.display for p in picks)


def test_html_the_page_keeps_is_shown_as_text_and_an_image_is_no_unit():
    md = ("A `Vec<T>` grows on the heap. It holds values of type `T`.\n\n"
          '<img alt="A diagram of a vector. It points at the heap!" src="img/v.svg" />\n\n'
          '<span class="caption">Figure 8-1: A vector and its heap buffer</span>\n\n'
          "The value `Option<&T>` is returned by `get`.")
    shown = [u.display for u in candidates(md)]
    assert not any("img" in d or "alt=" in d or "src=" in d for d in shown)
    assert "Figure 8-1: A vector and its heap buffer" in shown
    assert "The value `Option<&T>` is returned by `get`." in shown
    assert "A `Vec<T>` grows on the heap." in shown


def test_tags_inside_a_code_span_are_code_and_stay():
    md = ("The sanitiser handles `<img src=x onerror=\"f()\">` payloads. A "
          '<span class="caption">caption</span> and `<br>` with <br> here.')
    shown = [u.display for u in candidates(md)]
    assert "The sanitiser handles `<img src=x onerror=\"f()\">` payloads." in shown
    assert "A caption and `<br>` with here." in shown  # only the tags outside code go
    for u in candidates(md):  # the code spans of a display are the text's, as written
        assert text.code_spans(u.display) == text.code_spans(md[u.start:u.end])


def test_character_references_show_as_the_page_shows_them():
    # A Markdown page's raw HTML table (the Kubernetes command-line references) writes
    # "&nbsp;" and "&quot;": an answer quoted them as written. "&lt;" stays: no tag is made.
    md = ('<table><tr><td colspan="2">--address string&nbsp;&nbsp;&nbsp;Default: 0.0.0.0</td>'
          "</tr>\n<tr><td></td><td>Set to &quot;0.0.0.0&quot; to listen everywhere; write "
          "&lt;host&gt; as `&quot;x&quot;`.</td></tr></table>")
    shown = " ".join(u.display for u in candidates(md))
    assert "--address string Default: 0.0.0.0" in shown
    assert 'Set to "0.0.0.0" to listen everywhere; write &lt;host&gt; as `&quot;x&quot;`.' in shown
    assert "&nbsp;" not in shown


def test_whole_short_items_and_short_paragraphs_are_units():
    md = ("Requests are reserved. Limits cap usage.\n\n"
          "- A pod with no requests is `BestEffort`. It is evicted first.\n"
          "- One more item.\n")
    kinds = [(u.kind, u.display) for u in candidates(md)]
    assert ("paragraph", "Requests are reserved. Limits cap usage.") in kinds
    assert ("item", "A pod with no requests is `BestEffort`. It is evicted first.") in kinds
    assert ("sentence", "Limits cap usage.") in kinds


def test_a_long_item_or_paragraph_opens_with_a_unit_of_its_first_sentences():
    long = " ".join(["It goes on about other things at some length, word after word."] * 6)
    md = ("- The memory limit defines a limit for that cgroup. If the container allocates "
          f"more memory than this limit, the kernel stops the process. {long}\n\n"
          f"Limits are set per container. They cap usage. {long}\n")
    units = candidates(md)
    item = ("The memory limit defines a limit for that cgroup. If the container allocates "
            "more memory than this limit, the kernel stops the process. It goes on")
    opening = [u for u in units if u.kind == "item" and u.display.startswith(item)]
    assert len(opening) == 1 and len(opening[0].display.split()) == 59  # 5 sentences fit 60
    assert ("item", "The memory limit defines a limit for that cgroup.") in [
        (u.kind, u.display) for u in units]  # its sentences stay units
    para = [u for u in units if u.kind == "paragraph"]
    assert len(para) == 1 and para[0].display.startswith("Limits are set per container. They")
    assert len(para[0].display.split()) == 56  # 2 + 4 sentences
    short = [(u.kind, u.display) for u in candidates("- One. Two. Three. Four. Five.\n")]
    assert short == [("item", "One. Two. Three. Four. Five.")]  # whole, no opening beside it


# --- selection ---------------------------------------------------------------------------------


def test_a_paragraph_indented_under_an_item_is_that_items_and_the_list_goes_on():
    md = ("To protect your nodes, you can:\n\n"
          "1. Run a specialized operating system on your nodes.\n\n"
          "   Such systems present a reduced attack surface.\n"
          "1. Define resource quotas.\n\n"
          "Unindented text ends the list.\n")
    units = candidates(md)
    kinds = [(u.kind, u.display) for u in units]
    assert ("item", "Run a specialized operating system on your nodes. Such systems present "
            "a reduced attack surface.") in kinds
    lead = next(u for u in units if u.kind == "leadin")
    assert "Define resource quotas." in lead.display  # the list did not stop at the paragraph
    assert "Unindented" not in lead.display
    assert ("sentence", "Unindented text ends the list.") in kinds


def test_a_list_question_gets_the_lead_in_with_its_list():
    picks = extractive.select("What are the ownership rules?", [RULES])
    assert picks[0].unit.kind == "leadin" and "only be one owner" in picks[0].unit.display


def test_the_passage_that_names_the_setting_beats_general_sentences_of_the_first_section():
    first = ("Settings change how the runtime behaves. Most settings can be changed at any "
             "time. Settings are read when the runtime starts.")
    second = ("The runtime re-adjusts its pool every minute. Set `adjust_interval = 0` to "
              "turn off the periodic re-adjustment of the pool.")
    picks = extractive.select(
        "Which setting turns off the runtime's periodic re-adjustment of the pool?",
        [first, second])
    assert picks[0].section == 1 and "adjust_interval" in picks[0].unit.display


def test_numbers_identifiers_and_reasons_by_question_type():
    assert extractive.question_types("How many retries does a job get?") == {"number"}
    assert "name" in extractive.question_types("Which flag turns off swap?")
    assert extractive.question_types("Why is the cache cleared?") == {"why"}
    assert "list" in extractive.question_types("What are the rules of references?")
    text_ = ("Jobs are retried when a worker fails. A job gets 5 retries before it moves "
             "to the dead letter queue. Retries happen on any worker.")
    (best,) = extractive.select("How many retries does a job get?", [text_], max_units=1)
    assert "5 retries" in best.unit.display
    why = ("The cache is cleared on restart. It is cleared because stale entries would "
           "point at deleted pages. The cache holds pages.")
    (best,) = extractive.select("Why is the cache cleared?", [why], max_units=1)
    assert "because" in best.unit.display


def test_a_number_written_as_a_word_answers_how_often():
    text_ = ("The collector removes unused images. It checks how much disk the images use "
             "and removes unused images, oldest first, when the disk fills. It runs on "
             "unused images every two minutes.")
    (best,) = extractive.select("How often does the collector remove unused images?",
                                [text_], max_units=1)
    assert "every two minutes" in best.unit.display


POLICIES = """The `concurrencyPolicy` field is optional. It says how to treat concurrent runs of
a job this schedule creates. The spec may give one of the following concurrency policies:

- `Allow` (default): the schedule allows concurrently running jobs, so a slow run and the
  next one overlap, each with its own pods and its own record in the history of runs.
- `Forbid`: the schedule does not allow concurrent runs; if it is time for a new run and the
  previous run has not finished yet, the schedule skips the new run and counts it as missed.
- `Replace`: if it is time for a new run and the previous run has not finished yet, the
  schedule replaces the currently running job with a new one, and the old one is stopped."""


def test_a_question_for_several_things_gets_the_names_of_a_long_lists_items():
    assert "list" in extractive.question_types("Which concurrency policies can a schedule use?")
    assert "list" not in extractive.question_types("Which flag turns off swap?")
    first = ("Concurrency policies of a schedule apply only to the jobs the same schedule "
             "creates. Jobs of different schedules always run concurrently, whatever policies "
             "each schedule sets, and a schedule can use policies only for its own jobs.")
    picks = extractive.select("Which concurrency policies can a schedule use?",
                              [first, POLICIES])
    shown = "\n".join(p.unit.display for p in picks)
    lead = next(p.unit for p in picks if p.unit.kind == "leadin")
    assert lead.display.endswith("policies:\n- `Allow` (default)\n- `Forbid`\n- `Replace`")
    assert all(name in shown for name in ("`Allow`", "`Forbid`", "`Replace`"))
    # Asked about one thing, the list is shown whole.
    (one,) = extractive.select("What does the Forbid concurrency policy do when a run is "
                               "late?", [POLICIES], max_units=1)
    assert "skips the new run" in one.unit.display


FIELDS = """HTTP checks have additional fields that can be set on `httpGet`:

- `host`: Host name to connect to, defaults to the pod IP. You probably want to set "Host"
  in the headers instead.
- `scheme`: Scheme to use for connecting to the host (HTTP or HTTPS). Defaults to "HTTP".
- `path`: Path to access on the HTTP server. Defaults to "/".
- `httpHeaders`: Custom headers to set in the request. HTTP allows repeated headers.
- `port`: Name or number of the port to access on the container. Number must be in the
  range 1 to 65535."""


def test_a_long_list_shows_the_items_the_question_asks_about_and_heads_of_the_rest():
    (pick,) = extractive.select("What URL path does an httpGet check request when no path "
                                "is given?", [FIELDS], max_units=1)
    shown = pick.unit.display.split("\n")
    assert pick.unit.kind == "leadin"
    assert shown == ["HTTP checks have additional fields that can be set on `httpGet`:",
                     "- `host`", "- `scheme`",
                     '- `path`: Path to access on the HTTP server. Defaults to "/".',
                     "- `httpHeaders`: Custom headers to set in the request. HTTP allows "
                     "repeated headers.", "- `port`"]
    assert FIELDS[pick.unit.start:pick.unit.end].endswith("range 1 to 65535.")  # its quote


def test_the_packs_idf_weighs_a_rare_word_over_a_common_one():
    sections = ["Kestrel jobs run on every worker of the pool.",
                "Cron schedules are read by the beat process."]
    # In this pack "kestrel" is in every section and "cron" in a few.
    idf = {"kestrel": 0.1, "cron": 5.0, "job": 1.0}.get

    def pack_idf(word: str) -> float:
        return idf(text.stem(word), 1.0)
    question = "kestrel cron jobs"
    # Without the pack's statistics, two matching words beat one.
    assert extractive.select(question, sections, max_units=1)[0].section == 0
    assert extractive.select(question, sections, max_units=1, pack_idf=pack_idf)[0].section == 1


def test_the_answer_stays_within_its_word_budget_and_units_do_not_overlap():
    long = " ".join(f"Sentence {i} talks about retries and queues at length." for i in range(30))
    picks = extractive.select("retries queues", [long, long], max_units=10, per_section=10,
                              max_words=40)
    assert sum(len(p.unit.display.split()) for p in picks) <= 40
    spans = sorted((p.section, p.unit.start, p.unit.end) for p in picks)
    assert all(a[0] != b[0] or a[2] <= b[1] for a, b in zip(spans, spans[1:]))


def test_the_offline_answer_shows_a_lead_in_with_its_items_and_cites_the_span():
    sec = RankedSection(id="s", article_id="a", url="u", title="Ownership",
                        heading_path="Ownership > Ownership Rules", content=RULES, score=1.0,
                        citation=1)
    answer, quotes, extra = extractive.answer("What are the ownership rules?", [sec])
    assert extra == []
    first = answer.split("\n- ")[1]
    assert first.startswith("First, let's look at the ownership rules. Keep these rules")
    assert "\n  - There can only be one owner at a time." in first and first.endswith("[1]")
    assert quotes[0][1] == RULES[:RULES.index("dropped.") + 8]


# --- template directives and facts -----------------------------------------------------------


def test_template_directives_go_and_their_text_stays():
    md = ("Listing 4-4 shows it.\n\n"
          '<Listing number="4-4" file-name="src/main.rs" caption="Returning `Vec<T>` values">\n\n'
          "```rust\n{{#rustdoc_include ../listings/ch04/src/main.rs:here}}\n```\n\n"
          "</Listing>\n\n"
          "A `Vec<T>` or Box<dyn Error> in prose stays.\n\n"
          "```rust\nfn main() {}\n{{#include ../x.rs}}\n```\n\n"
          '{{< note >}}Keep the {{< glossary_tooltip text="kubelet" term_id="kubelet" >}} '
          "running.{{< /note >}}\n\n<Tabs>\n<TabItem value=\"a\">\nTab text.\n</TabItem>\n</Tabs>\n")
    out = clean_markdown(md)
    assert "{{" not in out and "<Listing" not in out and "</Listing>" not in out
    assert "Listing 4-4: Returning `Vec<T>` values" in out
    assert "```rust\n```" not in out  # the fence left empty by the include is gone
    assert "```rust\nfn main() {}\n```" in out
    assert "A `Vec<T>` or Box<dyn Error> in prose stays." in out
    assert "Keep the kubelet running." in out and "Tab text." in out
    assert "<Tab" not in out
    assert clean_markdown("no directives here") == "no directives here"
    chunks = split_markdown(out, "Page")
    assert all("rustdoc_include" not in c.content for c in chunks)


def test_facts_never_end_at_a_hard_line_wrap():
    content = ("The `Drop` trait runs code when a value goes out of scope. A `Box` frees its\n"
               "heap memory when the `Drop` trait runs for it.\n\n- Each value has an owner.")
    facts = [f["text"] for f in extract_offline("Ownership", "Ownership > Rules", content)["facts"]]
    assert facts == ["The `Drop` trait runs code when a value goes out of scope.",
                     "A `Box` frees its heap memory when the `Drop` trait runs for it."]


# --- scores a person can read ----------------------------------------------------------------


def _sec(i: str, score: float, url: str = "u", heading: str | None = None,
         similarity: float = 0.5) -> RankedSection:
    return RankedSection(id=i, article_id=url, url=url, title="t", heading_path=heading or i,
                         content="c", score=score, similarity=similarity)


def test_shown_scores_are_the_gates_confidence_scaled_and_never_go_up():
    primary = [_sec("a", 0.030, "p1"), _sec("b", 0.016, "p2"), _sec("c", 0.025, "p3")]
    related = [_sec("r", 0.9, "p4", similarity=0.45)]
    primary[0].similarity = 0.6
    scores.readable(primary, related, lambda _: 0.9)
    assert [s.fusion_score for s in primary] == [0.030, 0.016, 0.025]
    assert related[0].fusion_score == 0.45  # a related section's raw score: its similarity
    shown = [s.score for s in (*primary, *related)]
    assert shown[0] == pytest.approx(0.9)
    assert shown[1] == pytest.approx(0.9 * 0.016 / 0.030, abs=1e-4)
    assert shown[2] == shown[1]  # shown after a lower one: no higher than it
    assert shown == sorted(shown, reverse=True) and all(0 <= x <= 1 for x in shown)
    scores.readable(primary, related, lambda _: None)  # no verdict: relative scores only
    assert primary[0].score == 1.0 and primary[0].fusion_score == 0.030


def test_a_section_is_listed_once():
    a1, a2 = _sec("a1", 0.03, "p", "Page > Long section"), _sec("a2", 0.02, "p",
                                                                  "Page > Long section")
    b, rel = _sec("b", 0.01, "q"), _sec("a3", 0.5, "p", "Page > Long section")
    primary, related = scores.dedupe([a1, b, a2], [rel, _sec("r", 0.4, "z")])
    assert [s.id for s in primary] == ["a1", "b"] and [s.id for s in related] == ["r"]


def test_a_section_of_the_first_page_outside_the_context_is_quoted_and_numbered_next():
    from packs.citations import cite

    cited = [RankedSection(id="a", article_id="p", url="u", title="Probes",
                           heading_path="Probes > Overview", content="Probes check containers.",
                           score=1.0, citation=1)]
    extra = [RankedSection(id="b", article_id="p", url="u", title="Probes",
                           heading_path="Probes > Configure probes",
                           content="- `timeoutSeconds`: Number of seconds after which the probe "
                                   "times out. Defaults to 1 second.", score=0.0)]
    answer, quotes, used = extractive.answer(
        "How long before a probe times out by default?", cited, extra=extra)
    assert "Defaults to 1 second. [2]" in answer
    assert [(s.id, s.citation) for s in used] == [("b", 2)] and extra[0].citation is None
    sections = {1: cited[0], 2: used[0]}
    assert all(c["verified"] for c in cite(answer, sections, quotes))


# --- issue 34b: link definitions, shell output, the page prior, the semantic rerank --------


def test_link_reference_definitions_are_never_quoted():
    md = ("Traits can be implemented on local types.\n\n"
          "[newtype]: ch20-02-advanced-traits.html#the-newtype-pattern\n"
          "[traits]: ch10-02-traits.html \"Traits\"\n")
    shown = [u.display for u in candidates(md)]
    assert shown == ["Traits can be implemented on local types."]


def test_what_is_it_called_gets_the_sentence_that_introduces_the_term():
    text_ = ("Methods call `next` on the iterator, and methods that call `next` are called "
             "often. Such methods are _consuming adapters_ because they use it up.")
    question = "What are methods that call next called?"
    assert "term" in extractive.question_types(question)
    (now,) = extractive.select(question, [text_], max_units=1)
    assert "consuming adapters" in now.unit.display
    # The reader's feature for it: a term the unit introduces in italics, asked for.
    passages = [rf.Passage(text_, rank=0)]
    units = extractive.units_of(question, passages)
    x = rf.features(rf.analyse(question), passages, units)
    col = rf.FEATURES.index("type_term")
    assert [bool(v) for v in x[:, col]] == ["_consuming adapters_" in text_[u.start:u.end]
                                             for _, u in units]


def test_the_first_versions_rules_still_quote_link_definitions():
    md = "Text here.\n\n[traits]: ch10-02-traits.html\n"
    assert len(candidates(md)) == 1 and len(candidates(md, links=True)) == 2


def test_a_best_passage_over_the_word_budget_gives_way_to_a_close_one_that_fits():
    # A lead-in with its list can run past max_words on its own and fill the answer;
    # when a passage that fits scores within long_margin of it, that one is shown instead.
    limits = reader.Limits(margin=1.0, long_margin=0.5)
    long = Unit(0, 10, "leadin", " ".join(["word"] * (limits.max_words + 10)))
    fits = Unit(20, 30, "sentence", "The root of the index holds `config.json` for Cargo.")
    other = Unit(40, 50, "sentence", "Each package has a file of its own in the index.")
    units = [(0, long), (0, fits), (0, other)]

    def picked(close: float) -> list[Unit]:
        ranked = [reader.Scored(0, 1.0), reader.Scored(1, close), reader.Scored(2, 0.4)]
        return [units[s.index][1] for s in reader.pick(ranked, units, {}, limits)]

    assert picked(1.0 - limits.long_margin + 0.05) == [fits, other]
    assert picked(1.0 - limits.long_margin - 0.1) == [long]  # nothing close: the best, whole


def test_an_identifier_most_candidates_write_does_not_choose_the_answer() -> None:
    # "in Cargo.toml" only says where: in the Cargo book half the passages write it, and a
    # flat bonus for it put "Each `Cargo.toml` is a manifest." above the passage naming
    # the key asked for.
    q = "Which key in Cargo.toml says which profile a custom profile takes its settings from?"
    texts = ["\n\n".join(["Profile settings can be changed in `Cargo.toml`.",
                          "The package table of `Cargo.toml` names the package.",
                          "Each `Cargo.toml` is a manifest.",
                          "Dependencies are listed in `Cargo.toml` too.",
                          "Features are declared in `Cargo.toml`.",
                          "Workspaces share one `Cargo.lock`."]),
             "A custom profile sets the `inherits` key to the profile whose settings it takes."]
    picks = extractive.select(q, texts)
    assert "`inherits`" in picks[0].unit.display
    assert rf.rarity(1, 12) == 1.0 > rf.rarity(6, 12) > rf.rarity(12, 12)


def test_an_item_that_introduces_a_sub_list_is_quoted_with_it() -> None:
    # Kubernetes field lists: "- **whenUnsatisfiable** indicates how to deal with a Pod
    # ...:" then its values one level down; the item was quoted alone, without them.
    t = ("- **whenUnsatisfiable** indicates how to deal with a Pod that does not satisfy "
         "the constraint:\n"
         "  - `DoNotSchedule` (default) tells the scheduler not to schedule it.\n"
         "  - `ScheduleAnyway` tells the scheduler to still schedule it.\n"
         "- **labelSelector** is used to find matching Pods.\n")
    lead = next(u for u in candidates(t) if u.kind == "leadin")
    assert lead.display.startswith("**whenUnsatisfiable**")
    assert "`DoNotSchedule`" in lead.display and "`ScheduleAnyway`" in lead.display
    assert "labelSelector" not in lead.display  # the next item at its own depth ends it
    # An item followed by items at its own depth introduces nothing of its own.
    flat = "- Some options:\n- `a` does one thing.\n- `b` does another.\n"
    assert not any(u.kind == "leadin" for u in candidates(flat))


# --- issue 34, sixth pass: a section's prior from its similarity too ----------------------------


def test_a_sections_features_say_its_rank_and_its_similarity():
    e = math.exp
    passages = [rf.Passage("One sentence here.", similarity=0.5, rank=0),
                rf.Passage("Two sentence here.", similarity=0.7, rank=1),
                rf.Passage("Three sentence here.", similarity=None, rank=None),
                rf.Passage("Four sentence here.", similarity=0.6, rank=None)]
    units = extractive.units_of("sentence", passages)
    x = rf.features(rf.analyse("sentence"), passages, units)
    col = {f: x[:, rf.FEATURES.index(f)] for f in ("prior", "sec_rank", "extra", "sec_sim_rel")}
    # Issue 34's prior: the better of the rank's and the similarity's.
    assert col["prior"] == pytest.approx([max(0.5, 0.5 * e(-2)), max(0.25, 0.5), 0.0,
                                          0.5 * e(-1)], rel=1e-5)
    assert col["sec_rank"] == pytest.approx([1.0, 0.5, 0.0, 0.0])
    assert list(col["extra"]) == [0.0, 0.0, 1.0, 1.0]
    assert col["sec_sim_rel"] == pytest.approx([-0.2, 0.0, rf.NO_SIMILARITY, -0.1], abs=1e-6)


def _probe_sections(extra_similarity: float):
    cited = [RankedSection(id=k, article_id="p", url="u", title="Probes",
                           heading_path=f"Probes > {k}", content=text, score=1.0,
                           citation=n, similarity=sim)
             for n, (k, text, sim) in enumerate([
                 ("Overview", "The kubelet restarts a container whose probes fail: one that "
                  "stops answering gets no traffic.", 0.62),
                 ("History", "Probes came to the kubelet early.", 0.40),
                 ("Liveness", "A liveness probe restarts a container that stops answering.",
                  0.70)], start=1)]
    extra = [RankedSection(id="t", article_id="p", url="u", title="Probes",
                           heading_path="Probes > Timing", score=0.0,
                           content="A probe gives up after `timeoutSeconds`, 1 second by default.",
                           similarity=extra_similarity)]
    return cited, extra


def test_a_similar_section_cited_late_outweighs_the_top_sections_place():
    cited, _ = _probe_sections(0.0)
    q = "What restarts a container that stops answering?"
    answer, _, _ = extractive.answer(q, cited, max_units=1)
    assert "liveness probe restarts" in answer


def test_an_extra_section_far_less_similar_than_the_best_is_not_read():
    q = "How long does a probe wait before it gives up?"
    near, far = _probe_sections(0.55), _probe_sections(0.45)  # best 0.70, reach 0.2
    assert "1 second by default" in extractive.answer(q, near[0], extra=near[1])[0]
    assert "1 second by default" not in extractive.answer(q, far[0], extra=far[1])[0]
    # A list's passages reach further (whole_pack_offline.LIST_REACH): its items sit in
    # other sections of the pages it cites.
    assert "1 second by default" in extractive.answer(q, far[0], extra=far[1], reach=1.0)[0]


def test_list_as_a_verb_does_not_ask_for_a_list():
    # A list question is shown its items by their heads alone: the limit "at most 3" in
    # the item would be cut from "How many nameservers can dnsConfig list at most?".
    assert extractive.question_types("How many servers can a config list at most?") == {"number"}
    assert "list" in extractive.question_types("List the ownership rules.")
    assert "list" in extractive.question_types("Give me a list of the scalar types.")


def test_a_lead_in_inside_a_blockquote_is_quoted_with_its_quoted_code():
    md = ("Unwinding is the default.\n\n"
          "> Note: profiles live in the _Cargo.toml_ file. To abort on panic in release\n"
          "> mode, add this:\n>\n> ```toml\n> [profile.release]\n> panic = 'abort'\n> ```\n\n"
          "Let's try calling `panic!`.")
    lead = [u for u in candidates(md) if u.kind == "leadin"]
    assert len(lead) == 1 and lead[0].display.endswith("[profile.release]\npanic = 'abort'")
    assert md[lead[0].start:lead[0].end].endswith("> panic = 'abort'")  # the span: its quote
    (code,) = [u for u in candidates(md) if u.kind == "code"]
    assert code.display == "[profile.release]\npanic = 'abort'"
    picks = extractive.select("How do I abort on panic in release mode?", [md], max_units=1)
    assert "panic = 'abort'" in extractive.shown(picks[0].unit)


def test_when_asks_for_a_time_only_at_the_start():
    assert "number" in extractive.question_types("When was the scheduler added?")
    assert extractive.question_types("Why must tests not share state when they run?") == {"why"}


def _with_leadins(text: str) -> tuple[list, list]:
    """(the candidates of `text`, its lead-ins among them)."""
    units = list(candidates(text))
    return units, [u for u in units if u.kind == "leadin"]


def test_a_sentence_ending_in_a_comma_leads_the_list_it_goes_on_in():
    # Kubernetes' taints page: "... the indicated effects on the pod. In particular," and
    # then the list of what each effect does; the list is what answers.
    text = ("The remaining taints have the indicated effects on the pod. In particular,\n\n"
            "- with effect `NoSchedule` Kubernetes will not schedule the pod onto the node\n"
            "- with effect `NoExecute` the pod is evicted from the node\n\n"
            "Items that end in commas are no lead-ins:\n\n"
            "- apples,\n- pears,\n\n```\nfruit = 1\n```")
    units, leadins = _with_leadins(text)
    assert leadins[0].display.startswith(
        "The remaining taints have the indicated effects on the pod. In particular,\n"
        "- with effect `NoSchedule`")
    assert "evicted" in leadins[0].display
    assert not any(u.display.endswith(",") for u in units if u.kind == "sentence")
    assert [u.inner for u in leadins] == ["item", "item"]  # "pears," introduces no code


def test_a_sentence_that_stops_mid_clause_goes_on_in_the_block_after_it():
    # Kubernetes' container runtimes page: "... with `runc`, set" and then the code block
    # that holds `SystemdCgroup = true`; quoted alone, the answer stopped at "set".
    text = ("To use the `systemd` cgroup driver with `runc`, set\n\n"
            "```\n[plugins.runc.options]\n  SystemdCgroup = true\n```\n\n"
            "To list all events you can use\n\n- `kubectl get events`\n- the dashboard\n\n"
            "A sentence that stops mid-clause before prose is a sentence, as written\n\n"
            "Another paragraph.")
    units, leadins = _with_leadins(text)
    assert [u.inner for u in leadins] == ["code", "item"]
    assert leadins[0].display.endswith("SystemdCgroup = true")
    assert "the dashboard" in leadins[1].display
    shown = [u.display for u in units]
    assert "To use the `systemd` cgroup driver with `runc`, set" not in shown  # never alone
    assert "A sentence that stops mid-clause before prose is a sentence, as written" in shown


def test_a_bare_connective_in_a_long_paragraph_is_read_with_the_sentence_before_it():
    # A paragraph too long to lead its list whole: "In particular," alone ranked 60th for
    # "How do taints and tolerations keep pods off nodes?"; with its sentence it names them.
    para = (" ".join(f"w{j}" for j in range(50)) + ". The remaining taints have the "
            "indicated effects on the pod. In particular,")
    text = para + "\n\n- with effect `NoSchedule` the pod is not scheduled\n- more\n"
    lead = next(u for u in candidates(text) if u.kind == "leadin")
    assert lead.display.startswith("The remaining taints have the indicated effects on the "
                                   "pod. In particular,\n- with effect `NoSchedule`")


def test_a_section_that_is_only_its_heading_gives_no_unit():
    # "## Working with ReplicaSets" followed at once by "### Scaling": the split keeps the
    # heading as the section's text, and the reader ranked it first for "How does a
    # ReplicaSet differ from a ReplicationController?".
    chunks = split_markdown("# ReplicaSet\n\nA ReplicaSet keeps pods running.\n\n"
                            "## Working with ReplicaSets\n\n### Scaling\n\nSet replicas.\n",
                            "ReplicaSet")
    bare = next(c for c in chunks if c.heading_path == "ReplicaSet > Working with ReplicaSets")
    assert bare.content == "Working with ReplicaSets"
    passages = [rf.Passage(c.content, c.heading_path, rank=k) for k, c in enumerate(chunks)]
    texts = [u.display for _, u in extractive.units_of("ReplicaSets", passages)]
    assert texts == ["A ReplicaSet keeps pods running.", "Set replicas."]
    # A section whose text says more than its heading keeps its units.
    kept = [rf.Passage("Scaling", "ReplicaSet > Working with ReplicaSets", rank=0)]
    assert [u.display for _, u in extractive.units_of("scaling", kept)] == ["Scaling"]
