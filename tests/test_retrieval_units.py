"""Each retrieval stage's pure function on tiny inputs, against hand-computed values."""

from __future__ import annotations

import json

import numpy as np
import pytest

from packs.options import OptionsError, SearchOptions
from packs.result import Facts, RankedSection
from packs.retrieval import (
    analysis,
    context,
    expansion,
    fewshot,
    gate,
    graph,
    hybrid,
    quality,
    titles,
)
from packs.retrieval.cache import TTLCache

# --- hybrid fusion ----------------------------------------------------------------------


def test_rrf_matches_hand_computed_scores():
    scores = hybrid.rrf([["a", "b", "c"], ["c", "a"]], k=60)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["b"] == pytest.approx(1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert hybrid.ranked(scores) == ["a", "c", "b"]


def test_rrf_weights_and_ties_keep_first_ranking_order():
    scores = hybrid.rrf([["a"], ["b"]], k=60, weights=[1.0, 1.0])
    assert hybrid.ranked(scores) == ["a", "b"]
    assert hybrid.rrf([["a"]], k=0, weights=[2.0])["a"] == pytest.approx(2.0)


def test_a_decisive_bm25_match_is_one_well_ahead_of_the_next_or_alone():
    assert hybrid.decisive([3.0, 2.0]) and hybrid.decisive([9.0, 0.0]) and hybrid.decisive([1.0])
    assert not hybrid.decisive([2.9, 2.0]) and not hybrid.decisive([])
    assert not hybrid.decisive([0.0, 0.0])
    assert hybrid.bm25_weight([3.0, 2.0], 2.0) == 2.0
    assert hybrid.bm25_weight([2.0, 2.0], 2.0) == 1.0
    assert SearchOptions(bm25_decisive_weight=0).bm25_decisive_weight == 0
    with pytest.raises(OptionsError, match="bm25_decisive_weight must be >= 0"):
        SearchOptions(bm25_decisive_weight=-1.0)


def test_weighted_fusion_normalises_bm25_by_its_max():
    scores = hybrid.weighted({"a": 0.8, "b": 0.6}, {"b": 4.0, "c": 2.0}, 0.7, 0.3)
    assert scores == pytest.approx({"a": 0.56, "b": 0.72, "c": 0.15})
    assert hybrid.weighted({"a": 0.5}, {}, 0.7, 0.3) == pytest.approx({"a": 0.35})



def test_minmax_fusion_scales_both_signals_to_unit_range():
    # similarity 0.8, 0.6, 0.4 → 1, 0.5, 0; BM25 4, 2 → 1, 0; "a" had no BM25 → 0.
    scores = hybrid.minmax({"a": 0.8, "b": 0.6, "c": 0.4}, {"b": 4.0, "c": 2.0}, 0.5, 0.5)
    assert scores == pytest.approx({"a": 0.5, "b": 0.75, "c": 0.0})
    assert hybrid.ranked(scores) == ["b", "a", "c"]
    # One candidate (or equal scores) leaves nothing to scale: each signal counts fully.
    assert hybrid.minmax({"a": 0.3}, {"a": 1.0}, 0.6, 0.4) == pytest.approx({"a": 1.0})


def test_fusion_option_accepts_minmax_and_rejects_unknown():
    assert SearchOptions(fusion="minmax").fusion == "minmax"
    with pytest.raises(OptionsError, match="'rrf', 'weighted' or 'minmax'"):
        SearchOptions(fusion="sum")

# --- graph ------------------------------------------------------------------------------


def test_centrality_fusion_formula():
    # Candidates in vector-rank order with centralities 1, 5, 3 → centrality ranks 3, 1, 2.
    assert graph.centrality_ranks([1.0, 5.0, 3.0]) == [3, 1, 2]
    assert graph.rrf_scores([1.0, 5.0, 3.0]) == pytest.approx([
        1 / 61 + 0.5 / 63, 1 / 62 + 0.5 / 61, 1 / 63 + 0.5 / 62])


def test_centrality_weighted_mode_and_zero_graph():
    assert graph.weighted_scores([0.9, 0.5], [2.0, 4.0]) == pytest.approx([0.74, 0.70])
    assert graph.weighted_scores([0.9], [0.0]) == pytest.approx([0.54])


def test_graph_rerank_switches_off_on_sparse_graphs():
    assert not graph.enabled(1.99)
    assert graph.enabled(2.0)


def test_cap_articles_and_best_per_article():
    items = [("s1", "A"), ("s2", "B"), ("s3", "A"), ("s4", "C"), ("s5", "B")]
    assert graph.cap_articles(items, lambda t: t[1], 2) == [
        ("s1", "A"), ("s2", "B"), ("s3", "A"), ("s5", "B")]
    rows = [("x1", "X", 0.2), ("x2", "X", 0.7), ("y1", "Y", 0.5), ("z1", "Z", 0.9)]
    best = graph.best_per_article(rows, lambda r: r[1], lambda r: r[2], {"Z"}, 2)
    assert best == [("x2", "X", 0.7), ("y1", "Y", 0.5)]


def test_label_related_keeps_the_closest_label_once():
    labelled = graph.label_related(
        {"same_page": [("a", 0.1)], "links_to": [("b", 0.3), ("a", 0.9), ("c", 0.8)]},
        lambda r: r[0], lambda r: r[1], exclude={"top"})
    assert labelled == [("same_page", ("a", 0.1)), ("links_to", ("c", 0.8)),
                        ("links_to", ("b", 0.3))]


# --- quality filter -------------------------------------------------------------------


def test_quality_score_formula():
    q = "retry backoff policy"
    assert quality.quality_score(" ".join(["word"] * 19), q) == 0.0
    assert quality.quality_score(" ".join(["word"] * 100), q) == pytest.approx(0.5)
    long_text = " ".join(["word"] * 298 + ["retry", "policy"])
    assert quality.quality_score(long_text, q) == pytest.approx(0.8 + 0.2 * 2 / 3)
    # Stop words are not keywords: a question of stop words contributes no overlap.
    assert quality.quality_score(" ".join(["the"] * 40), "what is the") == pytest.approx(0.32)
    assert quality.passes(0.3) and not quality.passes(0.29)


@pytest.mark.parametrize("threshold", [-1.0, 0.0, 0.25, 0.3, 0.35, 0.45, 0.8, 0.95, 1.01])
def test_keeps_decides_as_the_full_score_does(threshold):
    """keeps() skips reading the text when the length alone decides; it must agree with
    passes(quality_score()) at every length, keyword overlap and threshold."""
    question = "How do I retry a failed kestrel job?"
    qkw = quality.keywords(question)
    for words in (0, 5, 19, 20, 21, 25, 30, 33, 34, 40, 60, 100, 200, 400):
        for text in (" ".join(["filler"] * words),
                     " ".join(["retry", "kestrel", *["filler"] * max(words - 2, 0)]),
                     " ".join(["retry", "failed", "kestrel", "job"] * (words // 4 + 1))):
            want = quality.passes(quality.quality_score(text, question, words), threshold)
            assert quality.keeps(text, qkw, words, threshold) is want, (words, text[:30])


def test_quality_uses_precomputed_word_count():
    assert quality.quality_score("short", "q", word_count=100) == pytest.approx(0.5)


# --- gate ---------------------------------------------------------------------------------


def test_gate_threshold_precedence_and_decision():
    assert gate.threshold(None, None) == 0.5
    assert gate.threshold(None, 0.3) == 0.3
    assert gate.threshold(0.7, 0.3) == 0.7
    assert gate.passes(0.5, 0.5) and not gate.passes(0.49, 0.5)
    assert not gate.passes(None, 0.0)


# --- query analysis -----------------------------------------------------------------------


@pytest.mark.parametrize("question,intent", [
    ("What is a RetryPolicy?", "definition"),
    ("How do I install Kestrel?", "how-to"),
    ("Worker keeps crashing with an import error", "troubleshooting"),
    ("kestrel vs celery", "comparison"),
    ("example of the retry argument", "usage"),
    ("scheduler port", "general"),
])
def test_intent(question, intent):
    assert analysis.detect_intent(question) == intent


def test_entities_terms_and_known_names():
    q = 'Why does RetryPolicy.max_attempts ignore "dead letter" in /etc/kestrel/kestrel.toml?'
    ents = analysis.extract_entities(q)
    assert "dead letter" in ents
    assert "RetryPolicy.max_attempts" in ents
    assert "/etc/kestrel/kestrel.toml" in ents
    assert "RetryPolicy" in analysis.extract_entities("what is RetryPolicy")
    index = analysis.build_entity_index([("dead letter queue", []), ("Worker", ["workers"])])
    assert analysis.match_known_entities("where is the Dead Letter Queue", index) == [
        "dead letter queue"]
    assert analysis.match_known_entities("restart the workers", index) == ["Worker"]
    qa = analysis.analyse("delete a job config", index)
    assert qa.terms[:3] == ("delete", "job", "config")
    assert {"remove", "configuration", "settings"} <= set(qa.terms)


# --- multi-query parsing ------------------------------------------------------------------


def test_parse_alternatives_caps_and_dedupes():
    text = 'Sure: ["How are jobs retried?", "how are jobs retried?", "' + "x" * 400 + '", "z"]'
    alts = expansion.parse_alternatives(text, "How are jobs retried?")
    assert alts == ["x" * 300, "z"]
    assert expansion.parse_alternatives("no json here", "q") == []
    assert expansion.parse_alternatives('{"a": 1}', "q") == []
    assert expansion.parse_alternatives("[1, 2]", "q") == []


def test_merge_by_article_keeps_best_score():
    a = [("s1", "A", 0.5), ("s2", "B", 0.4)]
    b = [("s3", "A", 0.9), ("s4", "C", 0.1)]
    merged = expansion.merge_by_article([a, b], lambda r: r[1], lambda r: r[2])
    assert merged == [("s3", "A", 0.9), ("s2", "B", 0.4), ("s4", "C", 0.1)]


# --- context assembly -------------------------------------------------------------------


def _section(i: int, words: int, score: float = 1.0) -> RankedSection:
    return RankedSection(id=f"s{i}", article_id="a", url=f"https://x.test/{i}", title="T",
                         heading_path=f"T > H{i}", content=" ".join(["abcd"] * words),
                         score=score)


def test_budget_split():
    assert context.split_budget(8000, 2000) == (3600, 1800, 600)
    assert context.split_budget(1000, 0) == (600, 300, 100)
    assert context.count_tokens("abcdefgh") == 2 and context.count_tokens("abcdefghi") == 3


def test_assemble_is_greedy_under_each_share_and_numbers_citations():
    # budget 1000, reserve 0 → primary 600 tokens. Each 400-word section is ~500 tokens.
    big, small = _section(1, 400), _section(2, 40)
    too_big = _section(3, 400)
    rel = _section(4, 40)
    facts = Facts(facts=["fact one"], triples=[("A", "uses", "B")])
    ctx = context.assemble([big, too_big, small], [rel], facts, budget=1000, reserve=0)
    assert ctx.truncated
    assert (big.citation, too_big.citation, small.citation, rel.citation) == (1, None, 2, 3)
    assert "### [1] T > H1\nURL" in ctx.text and "URL: https://x.test/1" in ctx.text
    assert "- fact one" in ctx.text and "- A — uses → B" in ctx.text
    assert ctx.tokens == context.count_tokens(ctx.text)


def test_assemble_cuts_a_first_section_larger_than_its_share():
    huge = _section(1, 5000)
    ctx = context.assemble([huge], [], Facts(), budget=1000, reserve=0)
    assert huge.citation == 1 and ctx.truncated
    assert context.count_tokens(ctx.text) <= 620


# --- few-shot, cache, options -------------------------------------------------------------


def test_fewshot_select_and_load(tmp_path):
    ex = [fewshot.Example("q1", "a1"), fewshot.Example("q2", "a2"), fewshot.Example("q3", "a3")]
    m = np.array([[1, 0], [0, 1], [0.6, 0.8]], dtype=np.float32)
    assert fewshot.select(np.array([0.0, 1.0], np.float32), m, ex, 2) == [ex[1], ex[2]]
    assert fewshot.select(np.array([0.0, 1.0], np.float32), m, ex, 0) == []
    path = tmp_path / "examples.jsonl"
    path.write_text(json.dumps({"question": "q", "answer": "a"}) + "\nnot json\n{}\n")
    assert fewshot.load_examples(path) == [fewshot.Example("q", "a")]
    assert fewshot.load_examples(tmp_path / "absent.jsonl") == []


def test_ttl_cache_expires_and_evicts_lru():
    now = [0.0]
    cache = TTLCache(maxsize=2, ttl_s=10, clock=lambda: now[0])
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now most recent
    cache.put("c", 3)  # evicts b
    assert cache.get("b") is None and cache.get("c") == 3
    now[0] = 10.0
    assert cache.get("a") is None


def test_options_validate_ranges_and_reject_unknown():
    # Out of range is refused, not clamped (#37: -o max_results=-1 was accepted).
    for value in (0, -1, 5000):
        with pytest.raises(OptionsError, match=r"max_results must be (>= 1|<= 1000) \(within 1..1000\)"):
            SearchOptions(max_results=value)
    assert SearchOptions(max_results=1000).max_results == 1000
    with pytest.raises(OptionsError, match="unknown search option"):
        SearchOptions.build(max_resluts=3)
    with pytest.raises(OptionsError, match="fusion"):
        SearchOptions(fusion="sum")
    with pytest.raises(OptionsError, match="token_budget"):
        SearchOptions(token_budget=100, answer_reserve=200)
    off = SearchOptions(use_enhancements=False)
    assert not off.enabled("graph_rerank") and not off.enabled("hybrid")
    assert SearchOptions().enabled("hybrid") and not SearchOptions().enabled("multi_query")
    assert not SearchOptions().enabled("graph_rerank")  # off by default (BENCHMARKS.md)
    assert SearchOptions(graph_rerank=True).enabled("graph_rerank")
    with pytest.raises(OptionsError, match="per_article"):
        SearchOptions(per_article=-1)


def test_best_sentence_drops_list_markers():
    from packs.retrieval.extractive import select

    text = "- `KPACK_EMBEDDING_MODEL` overrides the embedding model of every source."
    (best,) = select("which variable overrides the embedding model?", [text])
    assert best.unit.display.startswith("`KPACK_EMBEDDING_MODEL` overrides")
    (item,) = select("create secret", ["1. Create the Secret first."])
    assert item.unit.display == "Create the Secret first."


def test_diversify_moves_an_articles_extra_sections_after_the_others():
    items = ["a1", "a2", "a3", "b1", "a4", "c1", "b2"]
    art = lambda i: i[0]  # noqa: E731
    assert graph.diversify(items, art, 2) == ["a1", "a2", "b1", "c1", "b2", "a3", "a4"]
    assert graph.diversify(items, art, 0) == items
    assert graph.diversify([], art, 3) == []


def test_distinct_first_puts_one_section_of_each_of_the_first_articles_on_top():
    items = ["a1", "a2", "a3", "b1", "a4", "c1", "b2", "d1"]
    art = lambda i: i[0]  # noqa: E731
    assert graph.distinct_first(items, art, 3) == ["a1", "b1", "c1", "a2", "a3", "a4", "b2", "d1"]
    assert graph.distinct_first(items, art, 9) == ["a1", "b1", "c1", "d1", "a2", "a3", "a4", "b2"]
    assert graph.distinct_first(items, art, 0) == items
    assert graph.distinct_first([], art, 5) == []


def test_distinct_first_is_on_in_a_technical_pack_unless_set():
    assert graph.distinct_count(None, 1.0) == graph.DISTINCT_FIRST == 5
    assert graph.distinct_count(None, 0.0) == 0
    assert graph.distinct_count(2, 0.0) == 2 and graph.distinct_count(0, 1.0) == 0
    with pytest.raises(OptionsError, match="distinct_first must be >= 0"):
        SearchOptions(distinct_first=-1)
    with pytest.raises(OptionsError, match="distinct_first must be a whole number or null"):
        SearchOptions(distinct_first="5")


# --- title match ------------------------------------------------------------------------


TITLES = [("nodes", "Nodes"), ("probes", "Liveness, Readiness, and Startup Probes"),
          ("configure-probes", "Configure Liveness, Readiness and Startup Probes"),
          ("drain", "Safely Drain a Node"), ("psa", "Pod Security Admission"),
          *((f"overview-{i}", "Overview") for i in range(titles.MAX_SHARED + 1)),
          ("how-to", "How To"), ("untitled", "")]


@pytest.mark.parametrize("question, pages", [
    ("Nodes", ["nodes"]),
    ("What are nodes?", ["nodes"]),  # plural folded, stop words do not count
    ("How do I drain a node?", []),  # "Nodes" is half of drain + node: not named
    ("safely drain a node", ["drain"]),
    ("Tell me about Pod Security Admission", ["psa"]),  # 3 of the 4 content words
    ("Configure Liveness, Readiness and Startup Probes", ["configure-probes", "probes"]),
    ("Overview", []),  # carried by more than MAX_SHARED pages: names none
    ("How to", []),  # no content word
    ("?", []),
])
def test_title_match_names_pages_whose_title_is_most_of_the_question(question, pages):
    assert titles.TitleIndex(TITLES).match(question) == pages


def test_title_match_keeps_the_title_written_as_it_is():
    """Stems join "Assign" and "Assigning": the page whose title the question writes word
    for word is the one named, whichever order the pages come in; a question that writes
    neither names both."""
    twins = [("concept", "Assigning Pods to Nodes"), ("task", "Assign Pods to Nodes")]
    for pages in (twins, twins[::-1]):
        index = titles.TitleIndex(pages)
        assert index.match("Assign Pods to Nodes") == ["task"]
        assert index.match("What is Assigning Pods to Nodes?") == ["concept"]
        assert sorted(index.match("assigned pods to nodes")) == ["concept", "task"]


def test_a_title_in_words_is_matched_by_the_name_written_as_one():
    # The Kubernetes docs title the page "Persistent Volumes"; people ask about "a
    # PersistentVolume". A longer title or one with a stop word is no name.
    index = titles.TitleIndex([("pv", "Persistent Volumes"), ("how", "How to"),
                               ("long", "Configure Liveness Readiness Probes")])
    assert index.match("What is a PersistentVolume?") == ["pv"]
    assert index.match("What are persistent volumes?") == ["pv"]
    assert index.match("What is a ConfigureLivenessReadinessProbes?") == []
    assert len(index) == 2  # "How to" names nothing


def test_title_match_caps_the_pages_and_handles_an_empty_pack():
    many = titles.TitleIndex([("abc", "alpha beta gamma"), ("bcd", "beta gamma delta"),
                              ("cde", "gamma delta epsilon"), ("abcd", "alpha beta gamma delta")])
    assert many.match("alpha beta gamma delta epsilon") == ["abcd", "abc", "bcd"]
    assert len(many) == 4
    assert titles.TitleIndex([]).match("Nodes") == []
