"""Whole-pack questions (issue 48): offline, a list of items gathered through the graph,
each quoting its section; with a key, a map-reduce over groups of sections through the real
anthropic SDK against the loopback Messages API (tests/anthropic_fake.py)."""

from __future__ import annotations

import os
import re

import pytest
from answer_fake import excerpts, text_reply
from anthropic_fake import FakeAnthropic
from query_fixtures import ARTICLES, build_pack, embedder, pack_dir  # noqa: F401 (fixtures)
from test_query_claude import assert_citations_match_the_pack

from packs import KnowledgePack, PackSet
from packs.explore.render import answer_html
from packs.retrieval import (
    reader,
    whole_pack,
    whole_pack_above,
    whole_pack_claude,
    whole_pack_commands,
    whole_pack_items,
    whole_pack_offline,
    whole_pack_questions,
    whole_pack_rank,
    whole_pack_region,
)
from packs.retrieval.verbatim import bullets, unverified_lines
from packs.text import terms

QUESTION = "Which components does a Kestrel deployment have?"


@pytest.fixture()
def pack(pack_dir):
    with KnowledgePack.open(pack_dir) as p:
        yield p


def test_offline_list_answer_cites_every_item(monkeypatch, pack):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    answer = pack.ask(QUESTION, use_cache=False)
    assert answer["query_type"] == "whole_pack_retrieval_only"
    text = answer["answer"]
    # The single-passage answer's passages first, then the items gathered through the graph.
    assert text.startswith("Retrieval-only answer") and "The items the pack names" in text
    items = [line for line in text[text.index("The items the pack names"):].splitlines()[2:]
             if line.strip()]
    # Entities the region's sections mention; the Worker, whose passage the answer already
    # quotes, adds nothing new and is not listed again (packs/retrieval/whole_pack_rank.py).
    assert "**RetryPolicy**" in text and len(items) >= 2
    assert text.count("one or more Worker processes") == 1
    # An item is a bullet quoting its passage, or (its passage quoted above) a name with
    # its [n] on the closing line; every one cites its section.
    named = [line for line in items if line.startswith("Also named in the passages above: ")]
    assert all(line.startswith("- **") and line.endswith("]") for line in items
               if line not in named)
    assert len(named) <= 1 and all(re.fullmatch(
        r"Also named in the passages above: \*\*[^*]+\*\* \[\d+\]"
        r"(?:, \*\*[^*]+\*\* \[\d+\])*", line) for line in named)
    assert all(c["verified"] for c in answer["citations"]) and not answer["unsupported"]
    assert_citations_match_the_pack(answer, pack)
    # Every line, the single answer's and the items', is its section's text (issue 51).
    names = sum(line.count("**") // 2 for line in named)
    assert len(bullets(text)) + names == len(answer["citations"])
    assert unverified_lines(text, answer["citations"]) == []


def _passages(text: str) -> list[str]:
    """The bullets of an offline answer before its list of items."""
    head = re.split(r"\n\n(?:The items the pack names|Across the pack's pages)", text)[0]
    return [line for line in head.splitlines() if line.startswith("- ")]


def test_a_list_questions_passages_have_the_list_budget(monkeypatch, pack):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert whole_pack_offline.passage_budget(QUESTION) == {
        "max_units": whole_pack_offline.LIST_PASSAGES[0],
        "max_words": whole_pack_offline.LIST_PASSAGES[1], "reach": whole_pack_offline.LIST_REACH}
    assert whole_pack_offline.passage_budget("How many times is a failed job retried?") == {}
    question = "List every setting the docs describe for workers and retries."
    wide = pack.ask(question, use_cache=False)
    # More passages than the reader's own limit for a question about one thing, each
    # verified; then the list.
    assert len(_passages(wide["answer"])) > reader.load().limits.max_units
    assert wide["query_type"] == "whole_pack_retrieval_only"
    assert all(c["verified"] for c in wide["citations"])
    monkeypatch.setattr(whole_pack_offline, "LIST_PASSAGES", (1, 300))
    assert len(_passages(pack.ask(question, use_cache=False)["answer"])) == 1


def test_a_question_that_sets_something_aside_gets_its_list_from_the_search_without_it(
        monkeypatch, pack):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    answer = pack.ask("Which components does a Kestrel deployment have, besides the "
                      "scheduler's timezone setting?", use_cache=False)
    assert answer["query_type"] == "whole_pack_retrieval_only"
    assert "**RetryPolicy**" in answer["answer"]
    # The sections the second search brings are numbered after the first's and verified.
    assert all(c["verified"] for c in answer["citations"]) and not answer["unsupported"]
    assert_citations_match_the_pack(answer, pack)
    assert unverified_lines(answer["answer"], answer["citations"]) == []


def test_the_closing_line_of_items_named_above_follows_the_list():
    # An item whose passage the answer quotes above is named on a closing line; the
    # explorer shows it after the list, not inside its last item.
    text = ("Retrieval-only answer.\n\n- A Kestrel deployment has a Worker. [1]\n\n"
            "The items the pack names, each quoting the section it comes from:\n\n"
            "- **RetryPolicy**: Jobs retry under a RetryPolicy. [2]\n\n"
            "Also named in the passages above: **Worker** [1]")
    html = str(answer_html(text, {}))
    assert re.search(r"</ul>\s*<p>Also named in the passages above: ", html), html


def test_an_overview_shows_what_a_page_covers_though_its_lead_is_quoted_above(monkeypatch,
                                                                              pack):
    # "What does the documentation cover about extending kubectl with plugins?" named the
    # plugins page on the closing line, its lead sentence being quoted above, and so
    # without the headings that answer an overview question.
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    answer = pack.ask("What does the documentation cover about Kestrel?", use_cache=False)
    text = answer["answer"]
    assert answer["query_type"] == "whole_pack_retrieval_only", text
    assert "**Kestrel overview** (covers: Architecture; Installation)" in text
    assert "Also named in the passages above: **Kestrel overview**" not in text
    assert all(c["verified"] for c in answer["citations"])


def test_an_overview_names_more_headings_of_its_first_page(monkeypatch, pack):
    # The first page is often the one the question is about ("the kubectl plugins page"):
    # its headings past the eighth ("Name conflicts and overshadowing") were items.
    from packs.retrieval import whole_pack_overview

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setattr(whole_pack_overview, "HEADINGS", 1)
    monkeypatch.setattr(whole_pack_overview, "FIRST_HEADINGS", 2)
    text = pack.ask("What does the documentation cover about Kestrel?", use_cache=False)["answer"]
    assert "**Kestrel overview** (covers: Architecture; Installation)" in text
    others = re.findall(r"\(covers: ([^)]*)\)", text)[1:]
    assert others and not any(";" in c for c in others), text


def test_an_overview_of_a_page_of_its_own_is_that_pages():
    # tasks/extend-kubectl/ holds only the plugins page: no family of its own, so the
    # overview went to concepts/extend-kubernetes/, the second page's family.
    paths = ["/tasks/extend-kubectl/kubectl-plugins.md", "/concepts/extend-kubernetes/_index.md",
             "/concepts/extend-kubernetes/operator.md", "/concepts/extend-kubernetes/api.md"]
    firsts = ["/tasks/extend-kubectl/kubectl-plugins.md", "/concepts/extend-kubernetes/_index.md"]
    question = "What does the documentation cover about extending kubectl with plugins?"
    assert whole_pack_region.best_family(firsts, paths, question, named=True) == ""
    # A family that names the question clearly better still wins.
    assert whole_pack_region.best_family(
        firsts, paths, "What does the documentation cover about the extend kubernetes "
        "operator api pages?", named=True) == "/concepts/extend-kubernetes/"


def test_a_single_fact_question_keeps_the_single_passage_answer(monkeypatch, pack):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert pack.ask("How many times is a failed job retried?",
                    use_cache=False)["query_type"] == "retrieval_only"


def _items(request: dict, bad: bool = False) -> dict:
    """The items tool's input: one item per excerpt, named by its first capitalised word,
    quoted by its first sentence (and, with `bad`, one quote that is in no excerpt)."""
    out = []
    for n, text in excerpts(request).items():
        sentence = text.split(". ")[0]
        name = next((w.strip(".,:") for w in sentence.split() if w[:1].isupper()), "item")
        out.append({"item": name, "n": n, "quote": sentence})
    if bad and out:
        out.append({"item": "Invented", "n": out[0]["n"], "quote": "not in any section"})
    return {"items": out}


@pytest.fixture()
def fake(monkeypatch):
    with FakeAnthropic(api_key="test-key", text_responder=text_reply) as f:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f.base_url)
        f.responder = lambda req: _items(req, bad=True)
        yield f


def test_claude_map_reduce_keeps_each_items_citation(fake, pack):
    answer = pack.ask(QUESTION, use_cache=False)
    assert answer["query_type"] == whole_pack_claude.QUERY_TYPE
    assert answer["citations"] and all(c["verified"] for c in answer["citations"])
    assert "Invented" not in answer["answer"]  # its quote is in no section: dropped
    assert_citations_match_the_pack(answer, pack)
    groups = -(-len(answer["sources"]) // whole_pack_claude.GROUP)
    assert fake.stats.requests == answer["token_usage"]["api_calls"] == groups


def test_no_item_is_insufficient_context(fake, pack):
    fake.responder = lambda req: {"items": []}
    answer = pack.ask(QUESTION, use_cache=False)
    assert answer["query_type"] == "insufficient_context" and answer["citations"] == []


def test_a_failed_map_call_degrades_to_the_offline_list(fake, pack):
    fake.script.append("500-no-retry")
    answer = pack.ask(QUESTION, use_cache=False)
    assert answer["query_type"] == "whole_pack_retrieval_only"
    assert all(c["verified"] for c in answer["citations"])


PATHS = ["/concepts/configuration/_index.md", "/concepts/configuration/configmap.md",
         "/concepts/configuration/secret.md", "/concepts/policy/_index.md",
         "/concepts/policy/limit-range.md", "/concepts/services-networking/_index.md",
         "/concepts/services-networking/dns-pod-service.md",
         "/concepts/services-networking/service.md", "/setup/production/container-runtimes.md",
         "/setup/production/tools.md"]


def test_the_region_is_the_family_the_question_names():
    # the search's first page is elsewhere; the question names the configuration folder
    firsts = ["/setup/production/container-runtimes.md", "/concepts/configuration/secret.md"]
    question = "What are the main topics of the configuration concepts?"
    assert whole_pack_region.best_family(firsts, PATHS, question) == "/concepts/configuration/"


def test_a_list_question_also_reads_the_sections_a_deeper_search_finds_beyond_its_region(
        pack):
    """Items of a list question are spread over the pack: beyond the region's pages, the
    sections a deeper search (full text and vectors) ranks high join it, at most
    SPREAD_PER_PAGE of a page, weighted under the region's first sections."""
    question = "Which settings control how failed jobs are retried and requeued?"
    result = pack.search(question, use_cache=False)
    rows = pack.db.read(whole_pack_region.SECTIONS_OF, {"ids": [result.cited()[0].article_id]})
    region = {s.id: s for s in map(whole_pack_items.sec_of, rows)}
    spread = whole_pack_region.spread(pack, result, region)
    assert spread, "the other pages' sections"
    inside = {s.article_id for s in region.values()}
    assert all(s.article_id not in inside and s.id not in region for s in spread)
    per_page: dict[str, int] = {}
    for s in spread:
        per_page[s.article_id] = per_page.get(s.article_id, 0) + 1
    assert max(per_page.values()) <= whole_pack_region.SPREAD_PER_PAGE
    weights = [s.weight for s in spread]
    assert weights == sorted(weights, reverse=True) and 0 < weights[-1] <= weights[0] <= (
        whole_pack_region.SPREAD_WEIGHT)
    # The region is the retries page; the queues page, where failed jobs are requeued,
    # comes first of the others.
    assert spread[0].title == "Queues"


def test_the_first_pages_family_stays_when_its_page_names_the_question():
    # "policies" matches the policy folder's name, but the first page names DNS and Pod
    firsts = ["/concepts/services-networking/dns-pod-service.md"]
    question = "Which DNS policies can a Pod use?"
    assert (whole_pack_region.best_family(firsts, PATHS, question)
            == "/concepts/services-networking/")


def test_a_question_that_names_a_part_of_the_pages_gets_the_family_of_that_name():
    # The search's first page is network-policies.md; "the Policies section" names the
    # policy folder, whose own name counts more than a page's of another folder.
    paths = [*PATHS, "/concepts/services-networking/network-policies.md"]
    firsts = ["/concepts/services-networking/network-policies.md"]
    question = "What does the Policies section of the concepts cover?"

    def idf(word: str) -> float:  # every page of the pack is a concept page
        return 0.2 if word.startswith("concept") else 2.0
    assert whole_pack_region.best_family(firsts, paths, question, idf, named=True) == (
        "/concepts/policy/")
    # Not named so, the first page's family stays on a tie.
    assert whole_pack_region.best_family(firsts, paths, question, idf) == (
        "/concepts/services-networking/")


def test_an_overview_of_a_topic_stays_with_the_pages_the_search_found():
    # "tools" is the last folder of setup/production-environment/tools/, but the question
    # asks what the docs say about ServiceAccounts, not about a part of the pages: the
    # family of the search's first page stays.
    paths = ["/concepts/security/_index.md", "/concepts/security/rbac.md",
             "/concepts/security/service-accounts.md",
             "/setup/production-environment/tools/_index.md",
             "/setup/production-environment/tools/kops.md",
             "/setup/production-environment/tools/kubeadm.md"]
    firsts = ["/concepts/security/service-accounts.md"]
    question = ("Our apps and tools need their own identities in the cluster. What does the "
                "documentation cover about ServiceAccounts?")
    assert whole_pack_region.best_family(firsts, paths, question, named=True) == (
        "/concepts/security/")
    # A question that names a part of the pages still gets it.
    named = "What does the tools section of the setup docs cover?"
    assert whole_pack_region.best_family(firsts, paths, named, named=True) == (
        "/setup/production-environment/tools/")


def test_a_part_named_by_its_index_pages_title_is_that_family():
    # "the 'Troubleshooting Clusters' part" is the title of debug-cluster's index page;
    # its path says only "debug cluster", while "tools" is tasks/tools/'s own folder.
    paths = ["/tasks/debug/debug-cluster/_index.md", "/tasks/debug/debug-cluster/audit.md",
             "/tasks/debug/debug-cluster/crictl.md", "/tasks/tools/_index.md",
             "/tasks/tools/install-kubectl.md", "/tasks/tools/install-kubeadm.md"]
    titles = {"/tasks/debug/debug-cluster/_index.md": "Troubleshooting Clusters",
              "/tasks/tools/_index.md": "Install Tools"}
    firsts = ["/tasks/debug/debug-cluster/audit.md"]
    question = ("Give me an overview of the 'Troubleshooting Clusters' part of the task docs: "
                "which topics and tools does it walk through?")

    def idf(word: str) -> float:  # "clusters" is everywhere in a Kubernetes pack
        return {"clusters": 0.5, "tools": 2.0, "troubleshooting": 3.0}.get(word.lower(), 1.0)
    assert whole_pack_region.best_family(firsts, paths, question, idf, named=True,
                                         titles=titles) == "/tasks/debug/debug-cluster/"
    # Without the titles, the folder the question writes the name of wins.
    assert whole_pack_region.best_family(firsts, paths, question, idf, named=True) == (
        "/tasks/tools/")


def test_a_chapter_named_by_its_number_is_the_family_of_that_number():
    # "Chapter 13's page titles just say closures, iterators, improving the I/O project
    # ..." went to chapter 12 (the I/O project), the search's first page's chapter.
    paths = ["/src/ch12-00-an-io-project.md", "/src/ch12-03-improving-error-handling.md",
             "/src/ch13-00-functional-features.md", "/src/ch13-01-closures.md",
             "/src/ch13-02-iterators.md"]
    firsts = ["/src/ch12-03-improving-error-handling.md"]
    question = "Go below Chapter 13's page titles: what subsections do its pages break into?"
    assert whole_pack_region.best_family(firsts, paths, question, named=True) == "/src/ch13-"
    assert whole_pack_region._number("/src/ch13-") == {"13"}
    assert whole_pack_region._number("/concepts/workloads/") == set()


def test_a_folder_inside_the_first_pages_family_that_matches_more_is_the_region():
    # "the Services tutorials": the search's first page is the tutorials index, whose
    # family holds every tutorial; tutorials/services/ inside it matches one word more.
    paths = ["/tutorials/_index.md", "/tutorials/hello-minikube.md",
             "/tutorials/configuration/configure-redis.md",
             "/tutorials/configuration/updating-configuration.md",
             "/tutorials/services/connect-applications-service.md",
             "/tutorials/services/source-ip.md"]
    question = "What do the Services tutorials walk you through?"

    def idf(word: str) -> float:  # "services" is common in a Kubernetes pack, "tutorials" not
        return {"tutorials": 3.9, "services": 1.6}.get(word, 1.0)
    assert whole_pack_region.best_family(["/tutorials/_index.md"], paths, question, idf,
                                         named=True) == "/tutorials/services/"
    # A folder inside that matches nothing more leaves the first page's family.
    assert whole_pack_region.best_family(["/tutorials/_index.md"], paths,
                                         "What do the tutorials walk you through?", idf,
                                         named=True) == "/tutorials/"


def test_families_that_tie_give_the_same_region_in_every_process():
    # Two guide folders match the question equally and neither holds a first page: the
    # first by name wins, whatever order the process's string hashing gives a set (a
    # whole-pack answer once changed from one run to the next on the same pack).
    import subprocess
    import sys

    code = ("from packs.retrieval.whole_pack_region import best_family\n"
            "paths = ['/docs/guide-b/p1.md', '/docs/guide-b/p2.md', '/docs/guide-a/p1.md',"
            " '/docs/guide-a/p2.md', '/docs/guide-c/p1.md', '/docs/guide-c/p2.md',"
            " '/other/page.md']\n"
            "print(best_family(['/other/page.md'], paths, 'What does the guide cover?'))")
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONHASHSEED": str(seed)}
                           ).stdout.strip() for seed in range(6)}
    assert seen == {"/docs/guide-a/"}


def test_an_item_is_the_subject_only_when_the_question_names_it_in_a_row():
    asked = terms("Which cargo commands does the book use to create, build and run a project?")
    assert whole_pack_items.names_subject(terms("cargo"), asked)
    assert whole_pack_items.names_subject(terms("cargo commands"), asked)
    assert not whole_pack_items.names_subject(terms("cargo run"), asked)  # an item, not the subject
    assert not whole_pack_items.names_subject(terms("cargo build"), asked)


def test_a_table_whose_first_header_names_what_is_asked_lists_items():
    # Kubernetes' ResourceQuota page: "| Resource Name | Description |" rows name
    # `services.nodeports`, which the graph holds no entity for.
    table = ("Quotas cap these.\n\n| Resource Name | Description |\n| --- | --- |\n"
             "| `services.nodeports` | Total number of NodePort services. |\n"
             "| `requests.storage` | Sum of storage requests. |\n\n"
             "| Field | Meaning |\n| --- | --- |\n| `hard` | The limits. |\n")
    sec = whole_pack_items.Sec("a", "s1", "http://x/quota", "Quotas", "Quotas", table, 0, 0.5)
    heads = whole_pack_items.table_heads({"s1": sec}, "Which resources can a ResourceQuota cap?",
                                   "resourc")
    assert [name for _, name, _ in heads] == ["services.nodeports", "requests.storage"]
    assert all(w == 0.5 for w, _, _ in heads)  # the section's weight; "hard": no such header
    assert whole_pack_items.table_heads({"s1": sec}, "Which pods can run here?", "pod") == []
    # A chunk of a long table without its header row: its rows have no header to read, and
    # a colon inside a cell ("what the model reads: 140 ...") is none.
    chunk = whole_pack_items.Sec(
        "a", "s2", "http://x/c", "C", "C > Settings",
        "| `chunk_words` | fits the model | words per chunk (up to what the model reads: 140 "
        "for MiniLM) |\n| `retries` | 1 | tries per page |\n", 0, 0.5)
    assert whole_pack_items.table_heads({"s2": chunk}, "Which settings does kpack read?",
                                        "set") == []


def test_what_a_list_question_sets_aside():
    def aside(q):
        from packs.retrieval.whole_pack_questions import head_stem
        return whole_pack_items.set_aside(q, head_stem(q))

    assert aside("Which tools besides plain kubectl commands help debug nodes?") == {
        "kubectl", "command"}
    assert aside("Besides CPU and memory, what other kinds of resources can a Pod request?") == {
        "cpu", "memori"}
    # What it asks for elsewhere is not set aside.
    assert aside("Which kinds of dependencies can a Cargo.toml declare besides normal "
                 "dependencies?") == set()
    assert aside("Which kubectl commands debug a node?") == set()
    # Before the question, all it names, not the first name alone.
    assert aside("Apart from cargo, rustc and rustup themselves, what other terminal "
                 "commands does the book have you type?") >= {"cargo", "rustc", "rustup"}


def test_the_region_is_searched_without_what_the_question_sets_aside():
    searched = whole_pack_questions.searched_question
    # After the question, before it, or in the middle: the search leaves it out.
    assert searched("Which StatefulSet fields do the docs describe, besides replicas, selector "
                    "and the Pod template?") == "Which StatefulSet fields do the docs describe?"
    assert searched("Besides CPU and memory, what other kinds of resources can a Pod "
                    "request?") == "what other kinds of resources can a Pod request?"
    assert searched("Which tools besides plain kubectl commands help debug nodes?") == (
        "Which tools help debug nodes?")
    assert searched("Apart from cargo, rustc and rustup themselves, what other terminal "
                    "commands does the book have you type?") == (
        "what other terminal commands does the book have you type?")
    # "beyond" that compares, and a question with nothing set aside, are searched as asked.
    for q in ("What happens to a Pod whose requests go beyond what is available?",
              "Which kubectl commands debug a node?"):
        assert searched(q) == q


def test_an_item_whose_name_holds_a_bracketed_number_is_no_citation():
    # The Rust book's `&"hi"[0]`: named on a line of items, "[0]" read as a citation of
    # source 0 that no section backs (an unverified citation in a list of verified ones).
    from packs.citations import _BRACKET, no_marker

    text = 'Indexing with `&"hi"[0]` panics, and `s[1]` too.'
    sec = whole_pack_items.Sec("a", "s1", "http://x/a", "A", "A", text, 0, 1.0)
    item = whole_pack_items.Item('&"hi"[0]', sec, 0, len(text), 1.0)
    line, _ = whole_pack._bullet([item], 3)
    assert item.bold() == '**&"hi"\\[0]**' and _BRACKET.findall(line) == ["3"]
    assert no_marker("s[1] and [profile.dev]") == "s[1] and [profile.dev]"


def test_the_headings_under_one_that_names_the_noun_asked_for_are_items():
    # "Which authentication mechanisms do the docs discuss?": the hardening guide's page
    # "Authentication Mechanisms" has one section per mechanism; none named in its text.
    from packs.retrieval.whole_pack_overview import heading_items

    def sec(sid, path, text, weight=1.0):
        return whole_pack_items.Sec("a", sid, "http://x/a", "A", path, text, 0, weight)
    title = "Hardening Guide - Authentication Mechanisms"
    by_id = {s.id: s for s in (
        sec("s0", title, "Kubernetes supports several ways to authenticate users."),
        sec("s1", f"{title} > Static token file", "Tokens are stored in a file on disk."),
        sec("s2", f"{title} > Static token file", "They cannot be revoked.", 0.5),
        sec("s3", f"{title} > Bootstrap tokens", "Nodes join a cluster with them."),
        sec("s4", f"{title} > What's next", "Read the authentication reference."),
        sec("s5", "Secrets > Static token file", "A secret holds credentials."))}
    found = {name: s.id for _, name, s in heading_items(by_id, terms("mechanisms")[0])}
    assert found == {"Static token file": "s1", "Bootstrap tokens": "s3"}
    assert heading_items(by_id, None) == []
    # Under a heading that says what to do, the sections are its steps: "Which environment
    # variables ...?" listed "Using environment variables inside of your config".
    task = "Define Environment Variables for a Container"
    steps = {s.id: s for s in (
        sec("t1", f"{task} > Using environment variables inside of your config",
            "Environment variables can be used elsewhere in the configuration."),
        sec("t2", "Environment variables > Container environment", "The hostname is set."))}
    assert [name for _, name, _ in heading_items(steps, terms("variables")[0])] == [
        "Container environment"]


def test_an_item_the_page_writes_as_code_is_shown_as_code():
    # The Rust book writes "the `Coin` enum": a list named it **Coin**, not as the page does.
    text = "Here we match on the `Coin` enum, as Coin values are coins."
    sec = whole_pack_items.Sec("a", "s1", "http://x/a", "A", "A", text, 0, 1.0)
    coin = whole_pack_items.Item("Coin", sec, 0, len(text), 1.0)
    values = whole_pack_items.Item("values", sec, 0, len(text), 1.0)
    assert coin.bold() == "**`Coin`**" and values.bold() == "**values**"
    line, _ = whole_pack._bullet([coin], 2)
    assert line.startswith("- **`Coin`**: ") and line.endswith(" [2]")


def test_an_item_is_quoted_by_a_sentence_that_does_not_end_by_introducing_a_listing():
    # The Rust book's Markdown includes its listings from files: "... won't compile:" is
    # then followed by nothing in the pack, and quoted alone it introduces nothing.
    sec_a = whole_pack_items.Sec("a", "s1", "http://x/a", "A", "A",
                                 "For example, this code that uses `Option<i8>` won't compile:", 0, 1.0)
    sec_b = whole_pack_items.Sec("b", "s2", "http://x/b", "B", "B",
                                 "Here is a short one with `Option<i8>`:\n\n"
                                 "The `Option<i8>` type holds an `i8` or nothing at all.", 0, 0.5)
    span = whole_pack_items.quote_span(sec_b, "Option<i8>")
    assert sec_b.content[span[0]:span[1]].startswith("The `Option<i8>` type holds")
    sec, span = whole_pack_items.quote_of([sec_a, sec_b], "Option<i8>")
    assert sec is sec_b and sec.content[span[0]:span[1]].endswith("nothing at all.")
    # With no other quote, the one ending in ":" still names the item; none: no quote.
    sec, span = whole_pack_items.quote_of([sec_a], "Option<i8>")
    assert sec is sec_a and span is not None
    assert whole_pack_items.quote_of([sec_a, sec_b], "Vec<T>") == (sec_a, None)
    # A section whose text is only its heading quotes nothing: it says nothing of the item.
    bare = whole_pack_items.Sec("c", "s3", "http://x/c", "C", "ReplicaSet > Working with "
                                "ReplicaSets", "Working with ReplicaSets", 0, 1.0)
    assert whole_pack_items.quote_of([bare], "ReplicaSets") == (bare, None)


def test_code_spans_the_graph_lacks_are_items_of_a_list_question():
    sec = whole_pack_items.Sec("a", "s1", "u", "Tests", "Tests > Attributes",
              "Mark a test with `#[should_panic]` or skip it with `#[ignore]`; run "
              "`cargo test`.", 0, weight=1.0)
    found = whole_pack_items.code_span_items({"s1": sec}, {"cargo test"}, ["attribut"], "attribut",
                            lambda w: 2.0)
    assert sorted(name for _, name, _ in found) == ["#[ignore]", "#[should_panic]"]
    assert all(secs == [sec] for _, _, secs in found)


def test_the_keys_a_code_block_sets_are_items_of_a_question_about_fields():
    content = ("A claim asks for storage:\n\n```yaml\nkind: PersistentVolumeClaim\nspec:\n"
               "  storageClassName: manual\n  accessModes:\n    - ReadWriteOnce\n```\n\n"
               "And the runtime's file:\n\n```toml\nSystemdCgroup = true\n```\n\n"
               "```rust\nlet total = 5;\ncount = count + 1;\n```\n\n"
               "```json\n{\n  \"serving\": true\n}\n```\n")
    sec = whole_pack_items.Sec("a", "s1", "u", "Volumes", "Volumes > Claims", content, 0,
                               weight=1.0)
    found = whole_pack_items.config_key_items({"s1": sec}, {"kind"}, ["field"], "field",
                                              lambda w: 2.0)
    # YAML, TOML and JSON keys; not what the graph names already (`kind`), not a statement
    # of code ("count = count + 1;"), not a list item's value ("- ReadWriteOnce").
    assert sorted(name for _, name, _ in found) == [
        "SystemdCgroup", "accessModes", "serving", "spec", "storageClassName"]
    a, b = whole_pack_items.key_line(sec, "storageClassName")
    assert content[a:b] == "storageClassName: manual"
    assert whole_pack_items.key_line(sec, "replicas") is None


def test_an_across_question_is_itemised_by_its_subject_not_by_how_it_asks():
    q = "What changed in the tern command from release to release?"
    intro = whole_pack_items.Sec("r19", "s1", "u1", "Tern 1.19", "Tern 1.19 > Introduction",
                                 "The latest Tern release, version 1.19, changed little.", 0,
                                 weight=1.0)
    tools = whole_pack_items.Sec("r20", "s2", "u2", "Tern 1.20", "Tern 1.20 > Tern command",
                                 "The `tern build` command no longer accepts the `-i` flag.",
                                 0, weight=0.5)
    by_id = {"s1": intro, "s2": tools}
    scaffold = whole_pack_questions.across_terms(q)
    assert scaffold == set(terms("changed release"))
    found = whole_pack_items.page_items(by_id, q, scaffold=scaffold)
    assert [i.section.id for i in found] == ["s2"]
    assert {i.section.id for i in whole_pack_items.page_items(by_id, q)} == {"s1", "s2"}


def test_the_words_that_name_the_pages_are_no_part_of_an_across_subject():
    # "In this chapter and throughout the book, we'll show some commands" held two of the
    # question's terms, "chapter" and "book", and was listed as what the book says about
    # its for loops.
    q = "What does the book point out about iterator loops in the various chapters?"
    assert whole_pack_questions.across_terms(q) == set(terms("book point various chapters"))
    install = whole_pack_items.Sec("a1", "s1", "u1", "Installation", "Installation",
                                   "In this chapter and throughout the book, we show commands.",
                                   0, weight=1.0)
    loops = whole_pack_items.Sec("a2", "s2", "u2", "Loops", "Loops > Iterators",
                                 "Iterator loops take ownership of the iterator.", 0, weight=0.5)
    found = whole_pack_items.page_items({"s1": install, "s2": loops}, q,
                                        scaffold=whole_pack_questions.across_terms(q))
    assert [i.section.id for i in found] == ["s2"]



def test_an_across_passage_counts_the_question_s_rare_terms_above_its_common_ones():
    # "What does the book say about the u8 type ..., from integer basics to strings and the
    # web server?" listed five web-server sentences (two terms each) before any holding
    # `u8`: a term counts by its IDF in the pack, the rarest the question has counting 1.
    q = "What does the book say about the u8 type, from integers to the web server?"
    idf = {"u8": 5.0, "type": 1.0, "integ": 3.5, "web": 3.0, "server": 3.0}.get
    web = whole_pack_items.Sec("a1", "s1", "u1", "Web", "Web", "Our web server answers.", 0,
                               weight=0.5)
    byte = whole_pack_items.Sec("a2", "s2", "u2", "Types", "Types",
                                "A u8 integer holds 0 to 255.", 0, weight=0.5)
    secs = {"s1": web, "s2": byte}
    scaffold = whole_pack_questions.across_terms(q)
    weighed = whole_pack_items.page_items(secs, q, scaffold=scaffold,
                                          idf=lambda t: idf(t, 2.0))
    assert [i.section.id for i in weighed] == ["s2", "s1"]
    # Counted alike (no IDF), two terms each: the order is the pages'.
    assert [i.section.id for i in whole_pack_items.page_items(secs, q, scaffold=scaffold)
            ] == ["s1", "s2"]

def test_a_list_names_the_less_likely_items_after_it_each_cited(monkeypatch, pack):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    shipped = whole_pack_rank.load()
    one = whole_pack_rank.ItemModel(shipped.model, shipped.bias,
                                    whole_pack_rank.Limits(max_items=1, alpha=0.0, more=10),
                                    shipped.version)  # the shipped weights, one item listed
    result = pack.search(QUESTION, use_cache=False)
    text, quotes, added = whole_pack.answer(pack, result, "list", model=one)
    listed = [line for line in text.splitlines() if line.startswith("- **")]
    less = [line for line in text.splitlines() if line.startswith("Less likely items")]
    assert len(listed) == 1 and len(less) == 1
    names = re.findall(r"\*\*([^*]+)\*\* \[(\d+)\]", less[0])
    assert names and listed[0].split("**")[1] not in {n for n, _ in names}
    # Each name cites a section whose quote names it; the quotes follow the bullets'.
    by_n = {n: sec for n, sec in added}
    for (name, n), (qn, quote) in zip(names, quotes[len(listed):]):
        assert int(n) == qn and name.lower() in quote.lower()
        sec = by_n.get(qn) or next(s for s in result.cited() if s.citation == qn)
        assert quote in sec.content


def test_a_long_list_quotes_its_first_items_and_names_the_rest(monkeypatch, pack):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    shipped = whole_pack_rank.load()
    every = whole_pack_rank.ItemModel(shipped.model, shipped.bias,
                                      whole_pack_rank.Limits(max_items=20, alpha=0.0, more=10),
                                      shipped.version)  # the shipped weights, no floor
    monkeypatch.setattr(whole_pack, "load_items", lambda: every)  # what is listed is not
    result = pack.search(QUESTION, use_cache=False)  # this test's point: how it is shown
    full, _, _ = whole_pack.answer(pack, result, "list")
    monkeypatch.setattr(whole_pack, "QUOTED_ITEMS", 1)
    text, quotes, added = whole_pack.answer(pack, result, "list")
    listed = [line for line in text.splitlines() if line.startswith("- **")]
    more = [line for line in text.splitlines() if line.startswith("More items: ")]
    assert len([line for line in full.splitlines() if line.startswith("- **")]) >= 2
    assert len(listed) == 1 and len(more) == 1 and listed[0] in full.splitlines()
    names = re.findall(r"\*\*([^*]+)\*\* \[(\d+)\]", more[0])
    assert names and all(f"**{name}**" in full for name, _ in names)
    # Each name cites a section whose quote names it; the quotes follow the bullet's.
    by_n = {n: sec for n, sec in added}
    for (name, n), (qn, quote) in zip(names, quotes[1:]):
        assert int(n) == qn and name.lower() in quote.lower()
        sec = by_n.get(qn) or next(s for s in result.cited() if s.citation == qn)
        assert quote in sec.content
    # ask() verifies each of them like any other citation.
    answer = pack.ask(QUESTION, use_cache=False)
    assert "More items: " in answer["answer"]
    assert all(c["verified"] for c in answer["citations"]) and not answer["unsupported"]


def test_a_listed_item_shows_the_clause_that_names_it():
    clause = whole_pack_items.clause
    short = "The `gitRepo` volume type is deprecated."
    assert clause(short, "gitRepo") == (0, len(short))
    long = ("In Kubernetes 1.31, all operations for the in-tree driver are redirected, "
            "and the `azureDisk` type now goes to the disk.csi.azure.com driver, which "
            "the cluster operator must install before upgrading any of the nodes.")
    a, b = clause(long, "azureDisk")
    assert "azureDisk" in long[a:b] and len(long[a:b].split()) <= whole_pack_items.CLAUSE_WORDS
    # the longest run of whole clauses that names it: cut after a comma, not mid-clause
    assert long[a:b] == ("all operations for the in-tree driver are redirected, and the "
                         "`azureDisk` type now goes to the disk.csi.azure.com driver")
    # No clause to cut: a sentence up to half as long again stays whole, a longer one
    # shows the words around the name.
    plain = " ".join(["word"] * 12 + ["FlexVolume"] + ["word"] * 12)
    assert clause(plain, "FlexVolume") == (0, len(plain))
    longer = " ".join(["word"] * 30 + ["FlexVolume"] + ["word"] * 30)
    a, b = clause(longer, "FlexVolume")
    assert "FlexVolume" in longer[a:b] and len(longer[a:b].split()) == 20


def test_a_bullet_shows_a_clause_only_when_it_names_each_of_its_items():
    content = ("| Name | Meaning |\n|---|---|\n| `Sub` | subtraction, which the `-` operator "
               "calls on two values of any numeric type that implements the trait, "
               "as the standard library does for every integer and float type |\n\n"
               "The `Add` trait, which the `+` operator calls, is in std::ops; so is the "
               "trait that every numeric type of the standard library implements for the "
               "product of two values, the `Mul` trait.")
    sec = whole_pack_items.Sec("a", "s1", "u", "Ops", "Ops", content, 0)
    row_end = content.index("|\n\n") + 1
    row = whole_pack_items.Item("Sub", sec, content.index("| `Sub`"), row_end, 1.0)
    assert whole_pack_items.shown_span([row]) == (row.start, row.end)  # a table row whole
    start = content.index("The `Add`")
    add = whole_pack_items.Item("Add", sec, start, len(content), 1.0)
    mul = whole_pack_items.Item("Mul", sec, start, len(content), 1.0)
    a, b = whole_pack_items.shown_span([add])
    assert content[a:b] == "The `Add` trait, which the `+` operator calls, is in std::ops"
    assert len(content[start:].split()) > whole_pack_items.CLAUSE_WORDS
    assert whole_pack_items.shown_span([add, mul]) == (start, len(content))


def test_commands_of_the_region_code_blocks_are_items_of_a_command_question():
    content = ("To update Rust:\n\n```console\n$ rustup update\n```\n\nTo remove it:\n\n"
               "```console\n$ rustup self uninstall\n$ rustup\n$ cargo build --release\n"
               "$ rustup override set nightly\n```\n")
    sec = whole_pack_items.Sec("a", "s1", "u", "Install", "Install", content, 0, 0.5)
    q = "Which rustup commands does the book show?"
    asked = terms(q)
    found = whole_pack_commands.command_items({"s1": sec}, set(), {"rustup"}, asked, "command",
                                           lambda w: 1.0)
    # the command's words up to its first argument; the program alone is the subject, a
    # program the question does not name (cargo) gives none
    assert whole_pack_commands.programs_asked({"s1": sec}, q) == {"rustup"}
    assert sorted(name for _, name, _ in found) == [
        "rustup override set nightly", "rustup self uninstall", "rustup update"]
    assert "rustup update" not in {name for _, name, _ in whole_pack_commands.command_items(
        {"s1": sec}, {"rustup update"}, {"rustup"}, asked, None, lambda w: 1.0)}
    # a command the question names with its subcommand: only that subcommand's lines
    sub = "Which rustup self subcommands does the book show?"
    assert whole_pack_commands.programs_asked({"s1": sec}, sub) == {"rustup self"}
    assert [name for _, name, _ in whole_pack_commands.command_items(
        {"s1": sec}, set(), {"rustup self"}, terms(sub), None, lambda w: 1.0)] == [
        "rustup self uninstall"]
    scored = [(9.0, "rustup update", [sec], "command", 1), (1.0, "rustup self uninstall", [sec],
              "command", 1)]
    assert [x[0] for x in whole_pack_commands.subcommands_first(scored, {"rustup self"})] == [
        9.0, 9.0]
    assert whole_pack_commands.subcommands_first(scored, {"rustup"}) == scored
    besides = "Which tools besides rustup commands does the book show?"
    assert whole_pack_commands.programs_asked({"s1": sec}, besides, set(terms("rustup"))) == set()


def test_a_command_run_with_sudo_is_the_command_it_runs():
    content = ("Restart the kubelet:\n\n```shell\nsudo systemctl daemon-reload\n"
               "$ sudo -E systemctl restart kubelet\n```\n")
    sec = whole_pack_items.Sec("a", "s1", "u", "Kubelet", "Kubelet", content, 0, 0.5)
    q = "Which systemctl commands do the docs run on a node?"
    assert whole_pack_commands.programs_asked({"s1": sec}, q) == {"systemctl"}
    found = whole_pack_commands.command_items({"s1": sec}, set(), {"systemctl"}, terms(q),
                                           "command", lambda w: 1.0)
    assert sorted(name for _, name, _ in found) == [
        "systemctl daemon-reload", "systemctl restart kubelet"]


def test_a_question_about_commands_that_names_no_program_reads_every_prompted_one():
    content = ("Make a folder and fetch the code:\n\n```console\n$ mkdir projects\n"
               "$ git clone example.org/someproject\n$ cargo new hello\nlet x = 5;\n"
               "> dir /B\n```\n")
    sec = whole_pack_items.Sec("a", "s1", "u", "Start", "Start", content, 0, 0.5)
    assert whole_pack_commands.prompted_programs({"s1": sec}) == {"mkdir", "git", "cargo", "dir"}
    assert whole_pack_commands.prompted_programs({"s1": sec}, {"cargo"}) == {"mkdir", "git", "dir"}


def test_a_clause_is_never_cut_inside_a_code_span():
    text = ("Run `kubectl get pods -o jsonpath={.items}, {.spec.nodeName}` to print where each "
            "Pod of the namespace runs, one name a line, as the scheduler placed them today.")
    for name in ("{.spec.nodeName}", "scheduler"):
        a, b = whole_pack_items.clause(text, name, limit=12)
        assert name in text[a:b] and text[a:b].count("`") % 2 == 0, text[a:b]
    linked = ("See [Pods, Deployments and the other workload resources](/docs/workloads/) for "
              "how each of them runs containers on the nodes that the scheduler picks, and "
              "why a Deployment is the usual choice.")
    a, b = whole_pack_items.clause(linked, "Deployments", limit=12)
    assert linked[a:b].count("[") == linked[a:b].count("]"), linked[a:b]


def test_a_list_the_passages_quote_whole_answers_the_question_alone():
    # "Which concurrency policies can a CronJob use?" got its three policies from one
    # lead-in, then 17 items of the CronJob pages (ResourceQuotas, 08:30:00, ...).
    question = "Which concurrency policies can a CronJob use?"
    lead = ("The spec may specify only one of the\nfollowing concurrency policies:\n\n"
            "* `Allow` (default)\n* `Forbid`\n* `Replace`")
    text = f"Intro.\n\n{lead}\n\nNote that concurrency policy only applies to one CronJob."
    assert whole_pack_above.listed_above(question, [(1, lead)], {1: text})
    # The list may go on where the section (a chunk) or the answer's budget cut it.
    assert not whole_pack_above.listed_above(question, [(1, lead)], {1: f"Intro.\n\n{lead}"})
    assert not whole_pack_above.listed_above(
        question, [(1, lead)], {1: f"{lead}\n* `Queue`\n\nMore."})
    assert not whole_pack_above.listed_above(
        question, [(1, lead)], {1: f"{lead}\n\n`Queue`\n: waits\n\nMore."})
    # A list that ends its section (a chunk) is whole where the page's next chunk does not
    # go on with it, or the page ends there (the CronJob page's list ends its chunk).
    ends = {1: f"Intro.\n\n{lead}"}
    for following, whole in (("", True), ("\nNote that the policy applies to one CronJob.", True),
                             ("* `Queue`\n* `Drop`", False)):
        assert whole_pack_above.listed_above(
            question, [(1, lead)], ends, lambda n, f=following: f) is whole, following
    # A question that asks for two kinds of thing is not answered by the list of one.
    assert not whole_pack_above.listed_above(
        "Which concurrency policies and schedules can a CronJob use?", [(1, lead)], {1: text})
    # Emphasis marks are not part of the lead-in's words.
    channels = "There are three _release channels_ for Rust:\n\n* Nightly\n* Beta\n* Stable"
    assert whole_pack_above.listed_above(
        "Which release channels does Rust have?", [(1, channels)],
        {1: f"{channels}\n\nMost Rust developers use the stable channel."})
    # A lead-in whose list is of something else, though it names the noun.
    other = ("A parameter is a manifest-command policy if it has one of:\n\n"
             "* Path separators\n* A `.rs` extension")
    assert not whole_pack_above.listed_above(question, [(1, other)], {1: other + "\n\nX."})
    assert not whole_pack_above.listed_above("How do I drain a node?", [(1, lead)],
                                                 {1: text})


def test_a_sentence_that_counts_and_names_the_things_asked_for_answers_alone():
    # "Which Rust editions are available?" got the sentence that names all four, then a
    # list of what the pages around it name (Cargo.toml, rustfmt, ...).
    counted = whole_pack_above.counted_above
    editions = ("At the time of this writing, four Rust editions are available: Rust 2015, "
                "Rust 2018, Rust 2021, and Rust 2024. This book uses Rust 2024.")
    assert counted("Which Rust editions are available?", [(1, editions)])
    macros = ("The three kinds of procedural macros are custom `derive`, attribute-like, and "
              "function-like, and all work in a similar fashion.")
    assert counted("What kinds of procedural macros are there?", [(1, macros)])
    # As many as it counts, the last after "and" or "or".
    assert not counted("Which variants does Option have?",
                       [(1, "Option has three variants, Some and None.")])
    assert counted("Which variants does Option have?",
                   [(1, "Option has two variants, Some and None.")])
    # "These two" counts what was named before, not all there are; nor is any list or
    # count all of the others a question asks for.
    assert not counted("Which commands does the book run?", [(
        1, "These two commands are analogous to `rustc` and `cargo`.")])
    assert not counted("Which other variants does Option have?",
                       [(1, "Option has two variants, Some and None.")])
    assert not counted("Besides Some, which variants does Option have?",
                       [(1, "Option has two variants, Some and None.")])
    # A narrower kind than the one asked for; a count of something else; two kinds asked.
    tuples = "Here we define and use two tuple structs named `Color` and `Point`:"
    assert not counted("Which structs does the book define in its examples?", [(1, tuples)])
    assert not counted("Which Rust editions are available?",
                       [(1, "Two crates, rand and regex, are used in every edition.")])
    assert not counted("Which Rust editions and release channels are there?", [(1, editions)])


def test_the_next_chunk_of_a_page_is_read_from_the_pack(pack):
    # listed_above asks what follows a list that ends its section: the page's next chunk.
    rows = pack.db.read("MATCH (a:Article)-[:HAS_SECTION]->(s:Section) "
                        "RETURN a.id, s.id, s.position, s.chunk, s.content", {})
    pages: dict[str, list] = {}
    for art, sid, position, chunk, content in rows:
        pages.setdefault(art, []).append(((position, chunk), sid, content))
    page = next(sorted(secs) for secs in pages.values() if len(secs) > 1)
    for (_, sid, _), (_, _, following) in zip(page, page[1:]):
        assert pack.db.read(whole_pack_offline.NEXT_SECTION, {"id": sid}) == [[following]]
    assert pack.db.read(whole_pack_offline.NEXT_SECTION, {"id": page[-1][1]}) == []


def _listed(answer: str) -> list[str]:
    """The bold names of a whole-pack answer's list (after its passages)."""
    return re.findall(r"\*\*([^*]+)\*\*", answer[answer.index("The items the pack names"):])


def test_a_pack_asked_through_a_packset_lists_what_it_lists_alone(monkeypatch, pack, pack_dir):
    # A PackSet read no database of its own, so a list question asked of several packs got
    # only the passages. Each pack now lists its items from the region of its own search.
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    alone = pack.ask(QUESTION, use_cache=False)
    with PackSet.open([pack_dir]) as packs:
        through = packs.ask(QUESTION, use_cache=False)
    assert through["query_type"] == alone["query_type"] == "whole_pack_retrieval_only"
    assert _listed(through["answer"]) == _listed(alone["answer"])
    assert "From the pack" not in through["answer"]  # one pack lists: no label line
    assert all(c["verified"] for c in through["citations"]) and not through["unsupported"]


def _renamed(pages):
    """The Kestrel pages with its parts named otherwise, as code (so a second pack lists
    other names), the other sections as they are (so the two packs share section ids)."""
    names = {"the scheduler, which": "the `dispatcher`, which", "the broker, which":
             "the `ledger`, which", "Worker processes": "`Runner` processes"}
    out = []
    for slug, title, secs in pages:
        renamed = []
        for path, content in secs:
            for a, b in names.items():
                content = content.replace(a, b)
            renamed.append((path, content))
        out.append((slug, title, renamed))
    return out


def test_each_pack_of_a_packset_lists_its_own_items_each_cited_from_it(
        monkeypatch, pack_dir, tmp_path, embedder):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    other = build_pack(tmp_path, embedder, name="heron", pages=_renamed(ARTICLES))
    with PackSet.open([pack_dir, other]) as packs:
        answer = packs.ask(QUESTION, use_cache=False)
        labels = packs.labels
    text = answer["answer"]
    assert answer["query_type"] == "whole_pack_retrieval_only"
    blocks = [text.index(f"From the pack {label}:") for label in labels]
    assert blocks == sorted(blocks)  # one list per pack, each under its label
    # The two packs hold the same section ids: every [n] is one pack's section, and every
    # item's quote is verified in the section of the pack it cites.
    numbers = [s["n"] for s in answer["sources"]]
    assert len(numbers) == len(set(numbers))
    assert answer["citations"] and all(c["verified"] for c in answer["citations"])
    by_n = {s["n"]: s["pack"] for s in answer["sources"]}
    first, second = text[blocks[0]:blocks[1]], text[blocks[1]:]
    for block, label in ((first, labels[0]), (second, labels[1])):
        cited = {int(n) for n in re.findall(r"\[(\d+)\]", block)}
        assert cited and all(by_n[n] == label for n in cited)
    # A name the first pack's list gives, the second's does not give again.
    names = [re.findall(r"\*\*([^*]+)\*\*", block) for block in (first, second)]
    assert names[0] and names[1] and not set(names[0]) & set(names[1])



def test_claude_maps_the_sections_of_each_pack_of_a_packset(fake, pack_dir, tmp_path):
    import shutil

    twin = shutil.copytree(pack_dir, tmp_path / "twin")
    with PackSet.open([pack_dir, twin]) as packs:
        answer = packs.ask(QUESTION, use_cache=False)
        labels = packs.labels
    assert answer["query_type"] == whole_pack_claude.QUERY_TYPE
    # Both packs' regions are mapped, their sections numbered apart, each with its label.
    assert {s["pack"] for s in answer["sources"]} == set(labels)
    numbers = [s["n"] for s in answer["sources"]]
    assert len(numbers) == len(set(numbers)) <= whole_pack_claude.MAX_SECTIONS
    assert answer["citations"] and all(c["verified"] for c in answer["citations"])
    assert "Invented" not in answer["answer"]


def test_the_kind_of_item_asked_for_is_read_on_the_noun_asked_about():
    from packs.retrieval.whole_pack_questions import wanted_types

    # the noun phrase asked about decides, not a kind named in the scene before it
    assert wanted_types("When a cluster is set up with a configuration file instead of "
                        "flags, which fields do the examples set?") == {"setting", "code"}
    # "command-line" says what kind of flag it is
    assert wanted_types("I need every kubelet command-line flag the docs mention.") == {"flag"}
    assert wanted_types("Which kubectl subcommands do the debugging pages use?") == {
        "command", "tool"}
    # no kind in the noun phrase: the whole question is read
    assert wanted_types("Which tools and APIs collect resource usage metrics?") == {
        "code", "api"}
    assert wanted_types("What does the book say about closures?") == set()
