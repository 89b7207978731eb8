"""The topic map's core (tasks/topics.py) on tiny hand-made tables, and the whole-pack
question router (packs/retrieval/whole_pack.py)."""

from __future__ import annotations

import json

import polars as pl
from query_fixtures import build_pack, embedder  # noqa: F401 (fixtures)

from packs import format as fmt
from packs.retrieval.whole_pack_questions import rule_kind
from tasks.topics import MIN_ENTITIES, SCHEMAS, topics


def _tables():
    # Two groups of entities, each mentioned together in its own sections.
    groups = {"storage": ["PersistentVolume", "PersistentVolumeClaim", "StorageClass",
                          "volumeMode", "emptyDir"],
              "network": ["Service", "Ingress", "EndpointSlice", "NetworkPolicy", "kube-proxy"]}
    entities, mentions, sections = [], [], []
    for g, names in groups.items():
        for n in names:
            entities.append({"id": f"e-{n}", "name": n})
        for k in range(4):
            sid = f"{g}-{k}"
            text = (f"The {names[k]} works with the {names[k + 1]} and the {names[0]} in a "
                    "cluster of nodes.")
            sections.append({"id": sid, "page_title": g.title(), "content": text})
            for n in names:
                mentions.append({"section_id": sid, "entity_id": f"e-{n}"})
    # 40 filler sections keep each entity under the share cap.
    sections += [{"id": f"x{i}", "page_title": "X", "content": "Nothing here."}
                 for i in range(200)]
    rels = pl.DataFrame(schema={"source_id": pl.Utf8, "target_id": pl.Utf8,
                                "relation": pl.Utf8})
    return (pl.DataFrame(entities), pl.DataFrame(mentions), rels, pl.DataFrame(sections))


def test_communities_become_topics_with_cited_digests():
    ents, mentions, rels, sections = _tables()
    out = topics(ents, mentions, rels, sections)
    t = out[fmt.TOPICS]
    assert t.height == 2 and set(t.columns) == set(fmt.TABLE_COLUMNS[fmt.TOPICS])
    assert sorted(t["title"]) == ["Network", "Storage"]  # the page most sections share
    assert all(size >= MIN_ENTITIES for size in t["size"])
    content = dict(sections.select("id", "content").iter_rows())
    for row in t.iter_rows(named=True):
        cits = json.loads(row["citations"])
        assert cits and row["digest"].count("[") == len(cits)
        for c in cits:  # every digest line is a verbatim span of its section
            assert content[c["section_id"]][c["start"]:c["end"]] in row["digest"]
    members = out[fmt.TOPIC_ENTITIES].group_by("topic_id").agg(pl.col("entity_id"))
    assert sorted(len(m) for m in members["entity_id"]) == [5, 5]
    # Deterministic: the same tables give the same topics.
    assert topics(ents, mentions, rels, sections)[fmt.TOPICS].equals(t)


def test_no_topics_from_an_empty_graph():
    ents, mentions, rels, sections = _tables()
    out = topics(ents, mentions.head(0), rels, sections)
    assert all(df.height == 0 for df in out.values())


def test_whole_pack_questions_are_recognised():
    assert rule_kind("What are the main topics of the storage concepts?") == "overview"
    assert rule_kind("What does the chapter on closures cover?") == "overview"
    # an outline of a part asks for its sections
    assert rule_kind("Give me a section-by-section outline of Chapter 14.") == "overview"
    assert rule_kind("What is the table of contents of the networking docs?") == "overview"
    assert rule_kind("How do you enable autocompletion in each supported shell?") == "across"
    assert rule_kind("Which kubectl subcommands do the debugging pages use?") == "list"
    assert rule_kind("What kinds of containers can run inside a Pod?") == "list"
    # several things asked for in a row, or things "on" something
    for listed in ("Which functions, structs and methods does the project define?",
                   "Which container lifecycle hooks and hook handler types can you configure?",
                   "Which marker traits, and which traits the compiler treats specially, "
                   "does the book discuss?",
                   "Which methods on Rc<T>, Weak<T> and RefCell<T> does the book call?",
                   # a list asked after a first part
                   "How does the book describe lifetimes, and what related terms does it "
                   "name?",
                   # an aside in parentheses; a modifier that is a head noun elsewhere
                   "Which admission controllers (plugins) do the docs name?",
                   "Which port fields appear on containers?",
                   "What are the scalar types in Rust?",
                   "Which Job spec fields decide when the Job is complete?",
                   # what the pages say about a topic, said in several places
                   "What does the book say about the two halves of a channel?",
                   "What do the docs explain about how Secrets are stored?",
                   "What do the docs offer for keeping applications available?",
                   "What does the book's testing chapter say about test organisation?",
                   "What does the book tell Windows users that differs from macOS?"):
        assert rule_kind(listed) == "list", listed
    # the different things the docs go through (not "a different value", "for different
    # Pods")
    for across in ("How do the different tutorials have you clean up afterwards?",
                   "Where do the logs of the different parts of a cluster end up?"):
        assert rule_kind(across) == "across", across
    for single in ("Why would I set different RuntimeClasses for different Pods?",
                   "Why does a restarted Pod get a different IP address?"):
        assert rule_kind(single) is None, single
    for single in ("How do I drain a node?", "Which flag sets the grace period?",
                   "What happens when a probe fails?", "What is a Pod?",
                   # a singular head noun: the "plural" after it is a verb
                   "Which Cargo command checks that code compiles without building it?",
                   "Which priority level handles requests from the system:masters group?",
                   "Which method on a JoinHandle waits for its thread to finish?",
                   # "what" asks about something else; "range of", "kind of" ask for one
                   "What does Kubernetes use Lease objects for?",
                   "What happens to spawned threads when the main thread finishes?",
                   "What range of numbers can a u8 hold?",
                   # what a thing is, bare plural scoped to the pack's subject
                   "What are traits in Rust?", "What are device plugins for in Kubernetes?",
                   "Through what kind of references does Rc<T> share data?",
                   # it counts what it asks for: one set, named together
                   "What two kinds of label selector does the API support?",
                   "What are the three stable API kinds of the Gateway API?",
                   # a number across things; a plural inside a clause of a singular head
                   "Across how many failure zones should you replicate the control plane?",
                   # across things the docs are about, not across the docs' pages: one
                   # answer (these got 800-word lists of the pack's pages)
                   "What is the combined cap on message length across all containers?",
                   "How do I spread my replicas evenly across zones?",
                   "How does Parallel.For split a loop across threads?",
                   "Which PodDisruptionBudget field decides when unhealthy pods may be "
                   "evicted?",
                   # "what" is the object of the closing preposition
                   "What are associated functions that don't take self usually used for?",
                   "What are iterator methods that call next and use the iterator up called?",
                   # one answer however plural the question: why, how many, a singular head
                   # before an auxiliary, "status" is no plural
                   "Why does the kubelet manage the hosts file for each container?",
                   "How many handlers can a container specify for each lifecycle event?",
                   "What delivery guarantee do container lifecycle hooks have?",
                   "What exit status does cargo return when it fails to complete?",
                   "After switching to KMS v2, what prefix shows that a Secret was written?",
                   # the scene set before the question does not make it a list
                   "I cap object counts in each team namespace. Which quota scope matches "
                   "only Pods with a priority class?",
                   "I enabled API Priority and Fairness. Name the two flags whose values are "
                   "added together.",
                   # how to do it: one way, even to list all of something
                   "How do I list all pods in a namespace?",
                   # what a page says about one thing, or what the book means or calls
                   "What does the NetworkPolicy documentation say about hostNetwork Pods?",
                   "What does the book mean when it calls iterators a zero-cost abstraction?",
                   # "name the" one thing, then another
                   "Name the kubelet feature gate that allows it, and the minimum containerd "
                   "version needed."):
        assert rule_kind(single) is None, single
    assert rule_kind("What other kinds of resources can a container request?") == "list"
    assert rule_kind("Name the flags that control eviction.") == "list"
    assert rule_kind("Besides writing manifests by hand, which tools do the docs mention "
                         "for packaging them?") == "list"
    assert rule_kind("Which DNS servers and DNS add-ons does the documentation cover?") \
        == "list"
    assert rule_kind("What does the task section on extending Kubernetes walk you "
                         "through?") == "overview"
    assert rule_kind("List the subcommands of cargo.") == "list"
    for asked in ("Give me all the feature gates the docs mention.",
                  "Show me every environment variable Cargo reads.",
                  "Enumerate the Service types.",
                  "Can you list the kubectl commands used for debugging?"):
        assert rule_kind(asked) == "list", asked
    assert rule_kind("Tell me every place the book uses the Drop trait.") == "across"
    assert rule_kind("What happens to dependents under each propagation policy?") == "across"
    assert rule_kind("Where in the book is the Drop trait implemented?") == "across"
    for across in ("Which trait objects does the book create across its chapters?",
                   "Across the setup, task and tutorial pages, what do the docs change on "
                   "existing objects with kubectl patch?",
                   "How does each of the Job task examples split parallel work across Pods?",
                   "In which different ways does the book use impl blocks across structs, "
                   "enums and traits?"):
        assert rule_kind(across) == "across", across
    assert rule_kind("How do Deployments, DaemonSets, StatefulSets and CronJobs keep a "
                         "history?") == "across"
    # Three things named in a row in a question about one fact: no list.
    assert rule_kind("In what year was the book by Gamma, Helm, Johnson and Vlissides "
                         "published?") is None
    # A singular noun that modifies the plural one, before an auxiliary: still a list.
    assert rule_kind("Which network policy providers have their own install pages?") == "list"
    assert rule_kind("Which kubelet settings control container log rotation?") == "list"


# More ways of asking (the forms whole-pack rounds 4 and 5 used, made general), by the kind
# each is read as.
MORE_WAYS = {
    "across": ("Where does the book use iterators, and what does it say each time?",
               "How do the workers read their settings, depending on how they start?",
               "In how many different ways can a job be retried, and where is each set?",
               "How does the queue come back in later pages, and what does each visit add?",
               "The asterisk plays several roles. What are they, and where does each come "
               "up?"),
    "overview": ("What do the opening pages and the foreword cover?",
                 "What sections make up the chapter on queues?",
                 "What do the configuration tutorials walk you through?",
                 "Walk me through the retries chapter heading by heading.",
                 "What subsections do the pages of the queues chapter break down into?"),
    "list": ("When you work with the broker directly, which kestrel or kctl subcommands do "
             "you run?",
             "Who are the people the book thanks?",
             "What error codes show up in the output, and how do you read one?",
             "I need to know every queue setting the docs mention for retries.",
             "I'd like every type the guide says implements the Worker trait.",
             "Give me the condition types that jobs report in their status.",
             "Besides phase and conditions, what fields from a job's status do the docs show?",
             "Other than kestrel.toml, what files and directories under /var/lib/kestrel do "
             "the docs refer to?"),
    # "each" or "depending on" inside a question about one thing keeps it one, and so does
    # a question that opens as a yes-or-no one, whatever follows
    None: ("How does each worker find out which slice of the input to process?",
           "How long does each sleep call wait between messages?",
           "What moves tasks between threads depending on how busy each thread is?",
           "Which trait fits a closure that mutates what it captured, and what does it mean "
           "that iterators are lazy?",
           "Can one worker use both a retry policy and a dead letter queue, and where does "
           "each go in the config?"),
}


def test_more_ways_of_asking_about_the_whole_pack():
    read = {q: rule_kind(q) for qs in MORE_WAYS.values() for q in qs}
    assert read == {q: kind for kind, qs in MORE_WAYS.items() for q in qs}


def _topic_tables(tables: dict) -> dict:
    """One hand-made topic over the Kestrel fixture: its entities, two sections, and a
    digest line quoting the first sentence of the first section."""
    ents = tables[fmt.ENTITIES]
    secs = tables[fmt.SECTIONS].sort("id")
    sid, content = secs["id"][0], secs["content"][0]
    end = content.index(".") + 1
    cites = json.dumps([{"n": 1, "section_id": sid, "start": 0, "end": end}])
    tid = "t1"
    return {
        fmt.TOPICS: pl.DataFrame([{
            "id": tid, "title": "Retries and workers", "rank": 0, "size": ents.height,
            "sections": 2, "entity_names": ents["name"].to_list(),
            "digest": f"- {content[:end]} [1]", "digest_kind": "sentences",
            "citations": cites}], schema=SCHEMAS[fmt.TOPICS]),
        fmt.TOPIC_ENTITIES: pl.DataFrame(
            [{"topic_id": tid, "entity_id": e, "rank": k, "weight": 1.0}
             for k, e in enumerate(ents["id"])], schema=SCHEMAS[fmt.TOPIC_ENTITIES]),
        fmt.TOPIC_SECTIONS: pl.DataFrame(
            [{"topic_id": tid, "section_id": s, "rank": k, "weight": 1.0}
             for k, s in enumerate(secs["id"][:2])], schema=SCHEMAS[fmt.TOPIC_SECTIONS]),
    }


def test_a_pack_reads_its_topics_and_the_explorer_shows_them(tmp_path, embedder):
    from starlette.testclient import TestClient

    from packs import KnowledgePack, PackSet
    from packs.explore.app import create_app
    from packs.topics import has_topics, pack_topics

    folder = build_pack(tmp_path, embedder, extra=_topic_tables)
    with KnowledgePack.open(folder) as pack:
        assert has_topics(pack.db) and pack.manifest.counts.topics == 1
        [t] = pack_topics(pack)
        assert t.title == "Retries and workers" and len(t.sections) == 2
        assert {e.name for e in t.entities} >= {"RetryPolicy", "Worker"}
        [c] = t.citations
        assert c["verified"] and c["quote"] in t.digest and c["url"].startswith("https://")
    with PackSet.open([folder]) as packs:
        with TestClient(create_app(packs), base_url="http://127.0.0.1") as client:
            html = client.get("/topics").text
    assert "Retries and workers" in html and 'data-verified="true"' in html
    assert "/entity?id=" in html and "/section/" in html


def _digest_reply(request: dict) -> dict:
    """The digest tool's input: a summary citing excerpt 1 by its first sentence."""
    import re

    from anthropic_fake import _first_user_text

    first = re.search(r'<excerpt n="1"[^>]*>\n(.*?)\n</excerpt>', _first_user_text(request), re.S)
    sentence = first.group(1).split(". ")[0] if first else "nothing"
    return {"summary": "This topic covers the cluster's parts [1].",
            "citations": [{"n": 1, "quote": sentence}]}


def test_claude_digests_cite_verified_spans_and_are_cached(tmp_path, monkeypatch):
    import random

    from anthropic_fake import FakeAnthropic

    from tasks.llm import guards
    from tasks.llm import layers as llm
    from tasks.llm import store as llm_store
    from tasks.topic_digest import DIGEST_VERSION, claude_digests

    ents, mentions, rels, sections = _tables()
    tables = topics(ents, mentions, rels, sections)
    content = dict(sections.select("id", "content").iter_rows())

    def client(fake, journal):
        store = llm_store.ResponseStore(llm_store.read_journal(journal), journal=journal)
        provider = llm.AnthropicProvider("test-key", base_url=fake.base_url, timeout_s=10)
        return llm.LLM(provider, store, model="claude-haiku-4-5",
                       prompt_version=DIGEST_VERSION, concurrency=2, max_retries=0,
                       budget=guards.Budget(None), clock=lambda: 0.0, sleep=lambda s: None,
                       rng=random.Random(0), run_id="r1")

    journal = tmp_path / "digests.jsonl"
    with FakeAnthropic(api_key="test-key", responder=_digest_reply) as fake:
        out = claude_digests(tables, sections, client(fake, journal))[fmt.TOPICS]
        assert set(out["digest_kind"]) == {"claude"} and fake.stats.requests == 2
        for row in out.iter_rows(named=True):
            [c] = json.loads(row["citations"])
            quote = content[c["section_id"]][c["start"]:c["end"]]
            assert quote and "[1]" in row["digest"]
        again = claude_digests(tables, sections, client(fake, journal))[fmt.TOPICS]
        assert again.equals(out) and fake.stats.requests == 2  # answered from the journal


def test_the_noun_a_list_question_asks_for():
    from packs.retrieval.whole_pack_questions import head_stem

    assert head_stem("What kinds of containers can run inside a Pod?") == "contain"
    assert head_stem("Which Kubernetes workload resources create and manage Pods?") == "resourc"
    assert head_stem("Which kinds of memory-safety and concurrency bugs does the book warn "
                     "about?") == "bug"
    assert head_stem("Which types of Service can you create?") == "servic"
    assert head_stem("Which special or unusual kinds of types does the book explain?") == "type"
    assert head_stem("Which tools besides plain kubectl commands help?") == "tool"
    assert head_stem("How do I drain a node?") is None


def test_a_list_is_asked_after_a_preposition_or_with_a_participle_after_its_noun():
    # A participle after the plural ends its noun phrase ("the kubectl commands used ..."),
    # a question may end with the plural ("What are the available volume types?"), and a
    # preposition before "which" or "what" asks as the bare question does; these got the
    # single-passage answer.
    for listed in ("List the kubectl commands used for debugging.",
                   "What are the Cargo subcommands shown in the book?",
                   "Name the annotations described on the well-known labels page.",
                   "What are the available volume types?",
                   "In which ways can you set a container's environment variables?",
                   "With which cloud vendors can Karpenter manage nodes?",
                   "Under what conditions does the scheduler use storage capacity?"):
        assert rule_kind(listed) == "list", listed
    for single in ("At what point before its certificate expires does the kubelet ask for "
                   "a new one?",
                   "In which directory does kubeadm keep its certificates?",
                   "In which list of legislative subjects does Education appear?",
                   "What are Pods?"):
        assert rule_kind(single) is None, single
    # "In which situations ..." stays an across question (each place the pages say so).
    assert rule_kind("In which situations does the book use the move keyword?") == "across"


def test_a_question_about_the_pack_itself_is_answered_by_each_packs_topic_map(
        tmp_path, embedder, monkeypatch):
    # "What is this pack about?" got the passages its words find ("pack": bin packing),
    # then the topic map of the first pack the search cited only.
    from packs import KnowledgePack, PackSet

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)

    def titled(title):
        def extra(tables):
            out = _topic_tables(tables)
            out[fmt.TOPICS] = out[fmt.TOPICS].with_columns(pl.lit(title).alias("title"))
            return out
        return extra

    first = build_pack(tmp_path, embedder, name="kestrel", extra=titled("Retries and workers"))
    second = build_pack(tmp_path, embedder, name="heron", extra=titled("Queues and brokers"))
    question = "What is this pack about?"
    with KnowledgePack.open(first) as pack:
        alone = pack.ask(question, use_cache=False)
    text = alone["answer"]
    assert alone["query_type"] == "whole_pack_retrieval_only"
    assert text.startswith("Retrieval-only answer") and "most relevant passages" not in text
    assert "**Retries and workers**" in text and "[1]" in text
    assert [s["n"] for s in alone["sources"]] == [1]
    with PackSet.open([first, second]) as packs:
        both = packs.ask(question, use_cache=False)
    text = both["answer"]
    assert "most relevant passages" not in text
    assert "From the pack kestrel:" in text and "From the pack heron:" in text
    assert "**Retries and workers**" in text and "**Queues and brokers**" in text
    assert sorted(s["n"] for s in both["sources"]) == [1, 2]
    assert both["citations"] and all(c["verified"] for c in both["citations"])


def _first_excerpt_item(request: dict) -> dict:
    """The items tool's input: one item quoting the first sentence of excerpt [1]."""
    import re

    from anthropic_fake import _first_user_text

    m = re.search(r"### \[1\][^\n]*\nURL: [^\n]*\n\n([^\n]+)", _first_user_text(request))
    sentence = m.group(1).split(". ")[0] if m else "nothing"
    return {"items": [{"item": "Kestrel jobs", "n": 1, "quote": sentence}]}


def test_with_a_key_a_question_about_the_pack_maps_its_topics_sections(
        tmp_path, embedder, monkeypatch):
    # With a key, "What is this pack about?" was gated on this pack (its words find
    # nothing), or mapped the sections those words find; now Claude reads the topics'.
    from anthropic_fake import FakeAnthropic

    from packs import KnowledgePack
    from packs.retrieval import whole_pack_claude

    folder = build_pack(tmp_path, embedder, extra=_topic_tables)
    with FakeAnthropic(api_key="test-key", responder=_first_excerpt_item) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        with KnowledgePack.open(folder) as pack:
            answer = pack.ask("What is this pack about?", use_cache=False)
            topic = pack.db.read("MATCH (t:Topic)-[:COVERS]->(s:Section) "
                                 "RETURN s.url, s.heading_path", {})
    assert answer["query_type"] == whole_pack_claude.QUERY_TYPE
    assert {(s["url"], s["heading_path"]) for s in answer["sources"]} == {tuple(r) for r in topic}
    assert answer["citations"] and all(c["verified"] for c in answer["citations"])
    assert "**Kestrel jobs**" in answer["answer"] and fake.stats.requests == 1
