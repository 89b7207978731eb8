"""KnowledgePack on a small real pack (real embedder, real Kuzu), no API key."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from query_fixtures import ARTICLES, build_pack, embedder, pack, pack_dir, url_of  # noqa: F401

from packs import EmbeddingModelError, KnowledgePack, PackFormatError, QuestionError, __version__
from packs.cypher import ARTICLE_SECTIONS
from packs.options import MAX_QUESTION_CHARS
from packs.pipeline import ASK_FIELDS
from packs.retrieval import gate

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def test_version():
    assert __version__ == "0.1.0"


def test_opens_pack_folder_build_folder_and_a_copy(pack_dir, tmp_path):
    with KnowledgePack.open(pack_dir / "builds" / "b0001") as p:
        assert p.manifest.name == "kestrel"
    copy = tmp_path / "copied"
    shutil.copytree(pack_dir, copy)
    with KnowledgePack.open(copy) as p:
        assert p.search("dead letter queue").sections[0].url == url_of("queues")


def test_open_errors_are_one_clear_line(tmp_path, pack_dir):
    with pytest.raises(PackFormatError, match="no such pack directory"):
        KnowledgePack.open(tmp_path / "nope")
    with pytest.raises(PackFormatError, match="not a knowledge pack"):
        KnowledgePack.open(tmp_path)
    (tmp_path / "current").write_text("../../etc\n")
    with pytest.raises(PackFormatError, match="invalid build id"):
        KnowledgePack.open(tmp_path)
    bad = tmp_path / "bad"
    shutil.copytree(pack_dir / "builds" / "b0001", bad, ignore=shutil.ignore_patterns("pack.db"))
    raw = json.loads((bad / "manifest.json").read_text())
    raw["format_version"] = 99
    (bad / "manifest.json").write_text(json.dumps(raw))
    with pytest.raises(PackFormatError, match="format 99 is not readable") as exc:
        KnowledgePack.open(bad)
    assert "\n" not in str(exc.value)


def test_refuses_a_different_embedding_model(pack_dir, monkeypatch):
    with pytest.raises(EmbeddingModelError, match="built with embedding model "
                       "sentence-transformers/all-MiniLM-L6-v2 .dim 384., not "
                       "BAAI/bge-base-en-v1.5 .the embedding model asked for"):
        KnowledgePack.open(pack_dir, embedding_model="BAAI/bge-base-en-v1.5")
    monkeypatch.setenv("KPACK_EMBEDDING_MODEL", "BAAI/bge-small-en-v1.5")
    with pytest.raises(EmbeddingModelError, match="KPACK_EMBEDDING_MODEL"):
        KnowledgePack.open(pack_dir)
    monkeypatch.setenv("KPACK_EMBEDDING_MODEL", "minilm")  # an alias of the same model
    KnowledgePack.open(pack_dir).close()


@pytest.mark.parametrize("question,slug,heading", [
    ("How many times is a failed job retried?", "retries", "Retry policy"),
    ("Where do jobs go after they exhaust their retries?", "queues", "Dead letter queue"),
    ("my jobs stay pending forever", "troubleshooting", "Jobs stuck in pending"),
    ("which port does kestrel serve listen on", "overview", "Installation"),
])
@pytest.mark.parametrize("fusion", ["rrf", "minmax", "weighted"])
def test_search_ranks_the_right_section_first(pack, question, slug, heading, fusion):
    result = pack.search(question, fusion=fusion, use_cache=False)
    top = result.sections[0]
    assert (top.url, top.heading_path.split(" > ")[-1]) == (url_of(slug), heading)
    assert top.citation == 1 and "vector" in top.stages
    assert "[1]" in result.context and top.url in result.context
    assert result.context_tokens > 0 and not result.gated


def test_search_result_shape_and_json(pack):
    result = pack.search("How do I configure the RetryPolicy backoff?")
    d = json.loads(json.dumps(result.to_dict()))
    assert d["sections"][0]["stages"] == ["vector", "bm25"]  # graph rerank is opt-in
    assert d["gate"]["rule"] == "calibrated" and d["gate"]["passed"]
    assert set(d["gate"]["signals"]) == set(gate.SIGNALS) == {
        "similarity", "margin", "coverage", "section_coverage", "unknown", "specific", "pairs",
        "pack_pairs", "names", "doc_specific", "doc_rare_names", "small"}
    assert d["analysis"]["known_entities"] == ["RetryPolicy"]
    assert "QUERY_VECTOR_INDEX" in d["cypher_query"] and "$q" in d["cypher_query"]
    assert "RetryPolicy.max_attempts defaults to 5." in d["facts"]["facts"]
    assert {"name": "RetryPolicy", "type": "class"} in d["facts"]["entities"]
    assert d["fewshot"] and len(d["fewshot"]) == 2
    assert set(d["timings_ms"]) >= {"embed", "vector", "bm25", "quality", "context"}
    # The question's vector rides along for the offline answer, outside the JSON.
    assert "question_vector" not in d
    assert np.allclose(result.question_vector, pack.embed_query(result.question))


def test_quality_filter_drops_short_sections(pack):
    result = pack.search("What is a broker?", max_results=12)
    assert result.sections and all(s.quality >= 0.3 for s in result.sections)
    assert "Glossary > Broker" not in [s.heading_path for s in result.sections]


def test_quality_fallback_uses_whole_articles(pack):
    # Only the glossary's short sections survive a 2-result search with a tight cap.
    result = pack.search("job broker glossary", max_results=1, quality_threshold=0.99)
    assert result.fallback_full_articles
    assert result.sections and all(s.stages == ["full_article_fallback"]
                                   for s in result.sections)
    assert len({s.article_id for s in result.sections}) == 1


def test_use_enhancements_false_keeps_gate_and_quality(pack):
    result = pack.search("How many times is a failed job retried?", use_enhancements=False)
    assert result.sections and all(s.stages == ["vector"] for s in result.sections)
    assert "QUERY_FTS_INDEX" not in result.cypher_query
    assert not result.related and not result.facts.facts and not result.fewshot
    assert all(s.quality >= 0.3 for s in result.sections)
    gated = pack.search("recipe for banana bread", use_enhancements=False, gate_threshold=0.9)
    assert gated.gated


def test_multi_doc_neighbours_and_bfs_labels(pack):
    # max_results=1 leaves the linked articles out of the primary list.
    result = pack.search("How many times is a failed job retried?", max_results=1)
    assert result.related and all(s.relation == "links_to" for s in result.related)
    assert len({s.article_id for s in result.related}) <= 2
    bfs = pack.search("How many times is a failed job retried?", max_results=1,
                      expansion_mode="bfs")
    labels = {s.relation for s in bfs.related}
    assert {"same_page", "linked_from"} <= labels
    assert labels <= {"same_page", "links_to", "linked_from", "shares_entity"}
    same = [s for s in bfs.related if s.relation == "same_page"]
    assert same[0].heading_path == "Configuring retries > The RetryPolicy class"


def test_neighbours_expansion_is_the_best_section_of_the_best_linked_articles(pack):
    """Kuzu scores the linked sections (linked_scores); only the picked ones are fetched.
    The pick must be what the full rows (linked_sections) give."""
    q = "How many times is a failed job retried?"
    result = pack.search(q, max_results=1, use_cache=False)
    top, qvec = result.sections[0], pack.embed_query(q)
    full = pack.db.linked_sections([top.article_id], qvec, "out")
    scores = pack.db.linked_scores([top.article_id], qvec)
    assert sorted((sid, art) for sid, art, _ in scores) == sorted(
        (r.id, r.article_id) for r in full)
    by_id = {r.id: r.similarity for r in full}
    assert scores and all(abs(sim - by_id[sid]) < 1e-5 for sid, _, sim in scores)
    best: dict[str, object] = {}
    for r in full:
        if r.article_id != top.article_id and (
                r.article_id not in best or r.similarity > best[r.article_id].similarity):
            best[r.article_id] = r
    want = sorted(best.values(), key=lambda r: -r.similarity)[:2]
    assert [(s.id, s.content) for s in result.related] == [(r.id, r.content) for r in want]
    assert [s.fusion_score for s in result.related] == pytest.approx([r.similarity for r in want])


def _coded_pack(tmp_path, embedder) -> Path:
    """The Kestrel pages with a code fence in every section: a technical pack."""
    coded = [(slug, title, [(h, f"{text}\n\n```\nkestrel --help\n```") for h, text in secs])
             for slug, title, secs in ARTICLES]
    return build_pack(tmp_path, embedder, name="coded", pages=coded)


def _articles(result) -> list[str]:
    return [s.article_id for s in result.sections]


def test_distinct_first_reorders_the_results_not_the_pages(pack, tmp_path, embedder):
    """The first results come from distinct pages; each page keeps its first rank, so the
    pages in order are those of the plain ranking. Prose (the Kestrel pack) is left alone
    unless asked; a pack whose sections hold code gets it by default."""
    q = "RetryPolicy max_attempts and backoff of a retried job"
    plain = pack.search(q, distinct_first=0, gate_threshold=-1.0, use_cache=False)
    arts = _articles(plain)
    assert arts[0] == arts[1]  # the retries page holds the two best sections
    spread = pack.search(q, distinct_first=3, gate_threshold=-1.0, use_cache=False)
    got = _articles(spread)
    assert len(set(got[:3])) == 3
    assert list(dict.fromkeys(got)) == list(dict.fromkeys(arts))
    assert sorted(s.id for s in spread.sections) == sorted(s.id for s in plain.sections)
    assert _articles(pack.search(q, gate_threshold=-1.0, use_cache=False)) == arts
    with KnowledgePack.open(_coded_pack(tmp_path, embedder)) as docs:
        assert docs.vocabulary().technical == 1.0
        auto = _articles(docs.search(q, gate_threshold=-1.0, use_cache=False))
        pages = len(set(auto))  # fewer than 5: the pack has 5, the quality filter drops one
        assert pages >= 3 and len(set(auto[:pages])) == pages and auto[0] == auto[pages]


def test_the_first_results_do_not_depend_on_how_many_are_asked_for(pack):
    """The vector and BM25 rankings bring pipeline.CANDIDATES and BM25_CANDIDATES
    candidates however few results are asked for, so a search for 3 returns the first 3 of
    a search for 10, with or without distinct pages first. (With only max_results
    candidates, one page filled the 3 fused candidates of this question and the distinct
    pages were never found.)"""
    q = "how do workers poll queues and retry failed jobs"
    for distinct in (0, 3):
        few, many = (pack.search(q, max_results=n, distinct_first=distinct,
                                 gate_threshold=-1.0, use_cache=False) for n in (3, 10))
        assert [s.id for s in few.sections] == [s.id for s in many.sections[:3]]
    assert len(set(_articles(few))) == 3


def test_sections_too_short_to_show_do_not_use_up_a_pages_places(tmp_path, embedder):
    """Per-article diversification counts the sections the quality filter keeps: a page
    whose first-ranked sections are too short to show keeps its place with its next one."""
    lens = "The lens coating repels rain so the camera sees clearly."
    filler = ("It is applied once at the factory, cured under ultraviolet light for an hour, "
              "and checked with a water spray before the camera ships to a customer. ")
    pages = [
        ("coating", "Lens coating", [
            ("Lens coating", "Lens coating repels rain."),  # under 20 words: never shown
            ("Lens coating > How it works", f"{lens} {filler}"),
            ("Lens coating > Care", f"{lens} Clean the lens coating with a soft cloth. {filler}"),
        ]),
        ("mounts", "Mounts", [("Mounts", "A camera mount holds the camera on a pole outdoors. "
                                         "Tighten the clamp by hand, then a quarter turn "
                                         f"with the wrench so wind cannot rotate it. {filler}")]),
        ("power", "Power", [("Power", "The camera draws power over the network cable from a "
                                      "switch that supplies power over ethernet, so no "
                                      f"separate adapter is needed at the pole. {filler}")]),
    ]
    with KnowledgePack.open(build_pack(tmp_path, embedder, name="cams", pages=pages,
                                       links=[], fewshot=None)) as cams:
        result = cams.search("How does the lens coating repel rain?", per_article=1,
                             distinct_first=0, max_results=5, gate_threshold=-1.0,
                             use_cache=False)
        assert result.sections[0].heading_path.startswith("Lens coating > ")
        assert "Lens coating repels rain." not in [s.content for s in result.sections]


def test_a_decisive_bm25_match_weighs_double_in_prose_only(pack, tmp_path, embedder):
    """'dlq requeue' is written in one section only (a decisive full-text match): in a
    prose pack its BM25 first place counts 2 in RRF, in a technical pack 1."""
    q = "kestrel dlq requeue"

    def top(p, **kw):
        s = p.search(q, gate_threshold=-1.0, use_cache=False, title_match=False, **kw)
        return s.sections[0]

    plain, boosted = top(pack, bm25_decisive_weight=1.0), top(pack)
    assert plain.id == boosted.id and "dlq requeue" in boosted.content
    assert boosted.fusion_score - plain.fusion_score == pytest.approx(1 / 61)
    with KnowledgePack.open(_coded_pack(tmp_path, embedder)) as docs:
        assert top(docs).fusion_score == pytest.approx(
            top(docs, bm25_decisive_weight=1.0).fusion_score)
        assert top(docs, bm25_decisive_weight=3.0).fusion_score - top(docs).fusion_score == \
            pytest.approx(2 / 61)


def test_graph_rerank_modes_and_sparse_graph(pack, tmp_path, embedder):
    weighted = pack.search("retries", graph_rerank=True, graph_rerank_mode="weighted",
                           use_cache=False)
    assert weighted.sections and all("graph_rerank" in s.stages for s in weighted.sections)
    assert not any("graph_rerank" in s.stages for s in pack.search("retries").sections)
    assert "multi_doc" in pack.search("retries", use_cache=False).timings_ms  # enough links
    sparse_dir = build_pack(tmp_path, embedder, name="sparse", links=[("overview", "retries")])
    with KnowledgePack.open(sparse_dir) as sparse:
        assert sparse.manifest.avg_links_per_article < 2
        result = sparse.search("retries", graph_rerank=True)
        assert not any("graph_rerank" in s.stages for s in result.sections)
        assert not result.related and "multi_doc" not in result.timings_ms
        assert result.fewshot  # the fixture writes few-shot examples by default


def test_ask_offline_is_extractive_and_labelled(pack):
    answer = pack.ask("How many times is a failed job retried?")
    assert tuple(answer) == ASK_FIELDS
    assert answer["query_type"] == "retrieval_only"
    assert answer["answer"].startswith("Retrieval-only answer")
    assert "[1]" in answer["answer"]
    assert answer["sources"][0] == {
        "n": 1, "url": url_of("retries"), "title": "Configuring retries",
        "heading_path": "Configuring retries > Retry policy",
        "score": answer["sources"][0]["score"],
        "fusion_score": answer["sources"][0]["fusion_score"]}
    # The shown score is the gate's confidence for the first source, 0-1 and non-increasing.
    shown = [s["score"] for s in answer["sources"]]
    assert 0 < shown[0] <= 1 and shown == sorted(shown, reverse=True)
    assert not answer["unsupported"]
    assert "RetryPolicy" in answer["entities"]
    assert answer["token_usage"] == {"input_tokens": 0, "output_tokens": 0, "api_calls": 0,
                                     "cost_usd": 0.0}
    json.dumps(answer)


def test_gated_question_has_no_pack_context(pack):
    answer = pack.ask("Who won the 1998 football world cup?", gate_threshold=0.6)
    assert answer["query_type"] == "confidence_gated_fallback"
    assert answer["sources"] == answer["entities"] == answer["facts"] == []
    result = pack.search("Who won the 1998 football world cup?", gate_threshold=0.6)
    assert result.gated and result.sections == [] and result.context == ""


def test_question_is_validated_and_capped(pack):
    with pytest.raises(QuestionError):
        pack.search("   ")
    result = pack.search("retry " * 1000)
    assert len(result.question) == MAX_QUESTION_CHARS


def test_cache_returns_the_same_result_until_options_change(pack):
    first = pack.search("dead letter queue")
    assert pack.search("dead  letter queue") is first
    assert pack.search("dead letter queue", max_results=3) is not first
    assert pack.search("dead letter queue", use_cache=False) is not first


def test_stream_offline_yields_text_then_the_dict(pack):
    parts = list(pack.ask("dead letter queue", stream=True))
    assert isinstance(parts[0], str) and isinstance(parts[-1], dict)
    assert parts[-1]["answer"] == parts[0]


def test_import_and_search_load_no_prefect(pack_dir):
    code = textwrap.dedent(f"""
        import sys
        from packs import KnowledgePack
        with KnowledgePack.open({str(pack_dir)!r}) as p:
            p.search("dead letter queue")
            p.ask("dead letter queue")
        bad = sorted(m for m in sys.modules if m.split(".")[0] in ("prefect", "tasks", "flows"))
        print(bad)
        sys.exit(1 if bad else 0)
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("ANTHROPIC_API_KEY", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=Path(__file__).resolve().parents[1], timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]


def test_vendored_zip_imports_the_module(tmp_path):
    from packs.vendor import write_zipapp

    pyz = write_zipapp(tmp_path / "packs.pyz")
    assert write_zipapp(tmp_path / "again.pyz").read_bytes() == pyz.read_bytes()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import packs, packs.pack; "
            "print(packs.__file__, packs.__version__)")
    proc = subprocess.run([sys.executable, "-c", code, str(pyz)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == [str(pyz / "packs" / "__init__.py"), "0.1.0"]


def test_questions_are_embedded_on_the_onnx_backend(pack_dir, embedder, monkeypatch):
    pytest.importorskip("onnxruntime")
    monkeypatch.delenv("KPACK_EMBEDDING_MODEL", raising=False)
    with KnowledgePack.open(pack_dir) as p:
        q = "Where do jobs go after they exhaust their retries?"
        vec = p.embed_query(q)
        assert p.embedder.backend == "onnx"
        assert float(vec @ embedder.encode_query(q)) > 0.9999
        assert p.search(q).sections[0].url == url_of("queues")


def test_cli_search_and_query_json(pack_dir, monkeypatch):
    from typer.testing import CliRunner

    from packs.cli import make_app

    app = make_app()

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("KPACK_EMBEDDING_MODEL", raising=False)
    runner = CliRunner()
    res = runner.invoke(app, ["query", str(pack_dir), "dead letter queue", "--json"])
    assert res.exit_code == 0, res.output
    answer = json.loads(res.output)
    assert tuple(answer) == ASK_FIELDS and answer["sources"][0]["url"] == url_of("queues")
    res = runner.invoke(app, ["search", str(pack_dir), "dead letter queue", "-k", "2",
                              "-o", "expansion_mode=bfs", "--context"])
    assert res.exit_code == 0, res.output
    assert "[1]" in res.output
    res = runner.invoke(app, ["search", str(pack_dir), "q", "-o", "bogus=1"])
    assert res.exit_code == 2 and "bogus" in res.output
    res = runner.invoke(app, ["query", str(pack_dir / "missing"), "q"])
    assert res.exit_code == 2 and "error:" in res.output




def test_the_calibrated_gate_abstains_on_a_neighbouring_tool(pack):
    # Celery is a neighbouring job queue: the question's words are not the pack's.
    absent = pack.search("How do I set autoretry_for on a Celery task with a Redis broker?",
                         use_cache=False)
    assert absent.gated and absent.gate["rule"] == "calibrated" and not absent.sections
    assert absent.gate["confidence"] < absent.gate["cut"]
    answer = pack.ask("How do I set autoretry_for on a Celery task with a Redis broker?")
    assert answer["query_type"] == "confidence_gated_fallback"
    assert "confidence" in answer["answer"] and answer["sources"] == []
    # the plain similarity rule, asked for explicitly, lets it through
    assert not pack.search("How do I set autoretry_for on a Celery task with a Redis broker?",
                           gate_threshold=0.0, use_cache=False).gated


WORKERS = [
    ("workers", "Workers", [
        ("Workers",
         "Each process started by kestrel worker takes jobs from the broker, runs them one at "
         "a time and reports every result back to the scheduler, which records it in the "
         "store. Workers stop after their current job when they receive SIGTERM, and a "
         "stopped worker leaves its queued jobs to the others.")]),
    ("scaling", "Scaling out", [
        ("Scaling out > More workers",
         "Add workers to scale out: more workers poll the queues, so more workers run jobs "
         "in parallel, and workers on other hosts join the same broker as workers.")]),
]


def test_a_question_naming_a_page_title_finds_that_page(tmp_path, embedder):
    """'Workers' names the Workers page; without the title match, the section that says
    'workers' most (on the Scaling out page) comes first."""
    with KnowledgePack.open(build_pack(tmp_path, embedder, name="titled",
                                       pages=[*ARTICLES, *WORKERS])) as docs:
        for question in ("Workers", "What are workers?"):
            named = docs.search(question, gate_threshold=-1.0, use_cache=False)
            assert named.sections[0].title == "Workers" and "title" in named.sections[0].stages
            plain = docs.search(question, gate_threshold=-1.0, use_cache=False,
                                title_match=False)
            assert plain.sections[0].title == "Scaling out"
            assert not any("title" in s.stages for s in plain.sections)
        # Not named: "drain" is half of the question.
        assert not any("title" in s.stages for s in docs.search(
            "How do workers drain?", gate_threshold=-1.0, use_cache=False).sections)
        # Asked for one result, the named page is still first: it is among the candidates
        # however few results are asked for. (With only max_results candidates, a search for
        # one result put the "Scaling out > More workers" section first, one for three the
        # Workers page.)
        for n in (1, 3):
            first = docs.search("More workers", gate_threshold=-1.0, use_cache=False,
                                max_results=n).sections[0]
            assert first.title == "Workers" and "title" in first.stages
        # A named page whose every section is under the quality filter's 20 words (an index
        # page, a glossary) is fetched and shown: it is the page asked for. Unnamed, it is
        # not.
        glossary = docs.search("Glossary", gate_threshold=-1.0, use_cache=False)
        top = glossary.sections[0]
        assert top.title == "Glossary" and top.word_count < 20 and "title" in top.stages
        assert ARTICLE_SECTIONS in glossary.cypher_query
        assert [s.title for s in glossary.sections].count("Glossary") == 1
        assert "Glossary" not in [s.title for s in docs.search(
            "Glossary", gate_threshold=-1.0, use_cache=False, title_match=False).sections]
        # Filters hold for the named page too.
        queues = docs.search("Workers", gate_threshold=-1.0, use_cache=False,
                             url_prefix=url_of("queues"))
        assert queues.sections and {s.url for s in queues.sections} == {url_of("queues")}


@pytest.mark.parametrize("question", ["How many times is a failed job retried?",
                                      "dead letter queue", "worker crash loops"])
def test_result_scores_read_0_to_1_down_the_list_and_sections_appear_once(pack, question):
    result = pack.search(question, use_cache=False, max_results=10)
    shown = [*result.sections, *result.related]
    scores = [s.score for s in shown]
    assert all(0.0 <= x <= 1.0 for x in scores) and scores == sorted(scores, reverse=True)
    assert scores[0] == pytest.approx(result.gate["confidence"], abs=1e-4)
    assert all(s.fusion_score is not None for s in shown)
    keys = [(s.url, s.heading_path) for s in shown]
    assert len(keys) == len(set(keys))


def test_a_vocabulary_counted_with_other_text_rules_is_counted_again(pack_dir, monkeypatch):
    """tables/terms.json names the packs/text.py rules it was counted with; a pack built
    with other rules (a new TEXT_RULES_VERSION, or none: the plural fold before text-v1)
    has its gate vocabulary counted from the sections with the current ones."""
    import json

    from packs import format as fmt
    from packs import text as text_rules

    with KnowledgePack.open(pack_dir) as p:
        raw = json.loads((p.path / fmt.TABLES_DIR / fmt.TERMS_FILE).read_text())
        assert raw["text_rules"] == text_rules.TEXT_RULES_VERSION
        assert p.vocabulary().df == raw["terms"]
        counted = gate.count_vocabulary(p.db.section_texts())
    assert counted.df == raw["terms"]
    monkeypatch.setattr(text_rules, "TEXT_RULES_VERSION", "text-v0")
    monkeypatch.setattr(text_rules, "stem", lambda word: word)  # other rules: no stems
    with KnowledgePack.open(pack_dir) as p:
        assert p.vocabulary().df == gate.count_vocabulary(p.db.section_texts()).df
        assert p.vocabulary().df != raw["terms"]


def test_a_recounted_vocabulary_is_kept_per_database_checksum(pack_dir, monkeypatch, tmp_path):
    """A pack counted with other text rules pays its recount once per machine: the recount
    is kept in the cache folder under the database's checksum and the rules' version, and
    the next open reads it from there."""
    import json

    from packs import format as fmt
    from packs import text as text_rules
    from packs import vocabulary

    monkeypatch.setenv("KPACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(text_rules, "TEXT_RULES_VERSION", "text-v0")  # terms.json is stale
    with KnowledgePack.open(pack_dir) as p:
        recount = p.vocabulary()
        db_sum = p.manifest.checksums[fmt.DB_FILE]["sha256"]
    kept = vocabulary.cache_file(db_sum)
    assert kept.is_file() and "text-v0" in kept.name
    raw = json.loads(kept.read_text())
    assert raw["terms"] == recount.df and raw["sections"] == recount.sections
    raw["terms"]["zzsentinel"] = 1  # only a read of the kept file can bring this back
    kept.write_text(json.dumps(raw))
    with KnowledgePack.open(pack_dir) as p:
        again = p.vocabulary()
    assert again.df.get("zzsentinel") == 1
    assert list(again.pairs) == list(recount.pairs)
    assert again.code_sections == recount.code_sections


def _strict_gate():
    """A calibrated gate that reads only how much of the question the best single section
    holds: it refuses a question whose two halves sit on two pages."""
    from packs.manifest import GateInfo
    from packs.retrieval import gate

    return GateInfo(version=gate.GATE_VERSION, bias=-7.0, cut=0.5,
                    weights={"section_coverage": 10.0})


def test_a_question_asking_two_things_passes_when_each_passes_searched_alone(tmp_path,
                                                                              embedder):
    """A gate that reads how much of the question the best single section holds refuses a
    question whose two halves sit on two pages; searched alone, each half passes, so the
    question does. A half about another tool keeps it refused."""
    from packs import KnowledgePack
    from packs.retrieval import gate

    with KnowledgePack.open(build_pack(tmp_path, embedder, gate=_strict_gate())) as p:
        both = p.search("Which port does the scheduler listen on by default, and which "
                        "command lists the jobs in the dead letter queue?", use_cache=False)
        assert both.gate["confidence"] < both.gate["cut"] == 0.5 * gate.PARTS_CUT
        assert [x["passed"] for x in both.gate["parts"]] == [True, True]
        assert not both.gated and both.gate["calibrated_passed"] and both.sections
        other = p.search("Which port does the scheduler listen on by default, and how do I "
                         "set autoretry_for on a Celery task?", use_cache=False)
        assert [x["passed"] for x in other.gate["parts"]] == [True, False]
        assert other.gated and not other.sections
        # a question about one thing is not searched again
        one = p.search("How do I set autoretry_for on a Celery task?", use_cache=False)
        assert one.gated and "parts" not in one.gate


def test_a_refused_question_searches_each_thing_it_asks_once(tmp_path, embedder):
    """The gate searches each thing a refused question asks alone and keeps those
    searches; the part search reads them: the page it adds is the best of the gate's own
    search of one of those things."""
    from packs import KnowledgePack, pipeline
    from packs.options import SearchOptions
    from packs.retrieval import asks
    from packs.retrieval.state import QueryState

    question = ("Which port does the scheduler listen on by default, and which command "
                "lists the jobs in the dead letter queue?")
    with KnowledgePack.open(build_pack(tmp_path, embedder, gate=_strict_gate())) as p:
        st = pipeline.run(QueryState(question, SearchOptions(max_results=2)), p,
                          pipeline.SEARCH)
    assert list(st.alone) == asks.parts(question) and "parts" in st.verdict
    added = [i for i in st.order if "part_search" in st.stages.get(i, [])]
    assert added and added[0] in {alone.order[0] for alone in st.alone.values()}


def _searched_with_and_without_parts(pack_dir, question: str):
    """(the search with the part search off, with it on), two results each."""
    from packs import KnowledgePack
    from packs.options import SearchOptions

    with KnowledgePack.open(pack_dir) as p:
        off = p.search(question, SearchOptions(max_results=2, part_search=False),
                       use_cache=False)
        on = p.search(question, SearchOptions(max_results=2), use_cache=False)
    return off, on


def test_each_thing_a_question_asks_is_searched_and_its_page_joins_the_results(tmp_path,
                                                                                embedder):
    """Two things asked in one question, the first on a page the whole question's search
    does not show among its results: searched alone, that thing's page goes second. With
    the stage off, the results hold the other thing's page only."""
    off, on = _searched_with_and_without_parts(
        build_pack(tmp_path, embedder),
        "Which port does the scheduler listen on by default, and which command lists the "
        "jobs in the dead letter queue?")
    assert [s.heading_path for s in off.sections] == ["Queues > Dead letter queue",
                                                      "Queues > Priority queues"]
    assert [s.heading_path for s in on.sections] == ["Queues > Dead letter queue",
                                                     "Kestrel overview > Installation"]
    assert "part_search" in on.sections[1].stages and "part_search" in on.timings_ms


def test_a_thing_asked_that_names_nothing_the_pack_holds_adds_no_page(tmp_path, embedder):
    """The second thing asked names nothing the pack holds ("what value must it have"):
    searched alone, the gate refuses it, so its best section (noise, of a page the results
    lack) joins nothing; the results are those of the stage turned off."""
    off, on = _searched_with_and_without_parts(
        build_pack(tmp_path, embedder),
        "Which command lists the jobs in the dead letter queue, and what value must it have "
        "so that my changes are kept?")
    assert on.sections and not on.gated
    assert [s.heading_path for s in on.sections] == [s.heading_path for s in off.sections]
    assert not any("part_search" in s.stages for s in on.sections)
