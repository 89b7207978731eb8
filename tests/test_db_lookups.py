"""PackDB's lookups by section id and its prepared statements, on a real Kuzu database:
primary-key lookups (up to PK_LOOKUPS ids) must return what the `IN $ids` scan returns."""

from __future__ import annotations

import os

import numpy as np
import pytest
from query_fixtures import build_pack, embedder, pack_dir  # noqa: F401 (fixtures)

from packs import KnowledgePack
from packs import db as db_mod

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture()
def pack(pack_dir):
    with KnowledgePack.open(pack_dir) as p:
        yield p


def _scan(db, statement, ids):
    """The reference: the `WHERE s.id IN $ids` statement, run as it is."""
    return sorted(map(repr, db._run(statement, {"ids": ids}, None)))


def test_lookups_by_key_return_what_the_scan_returns(pack, monkeypatch):
    db = pack.db
    ids = [r[0] for r in db._run("MATCH (s:Section) RETURN s.id ORDER BY s.id", {}, None)]
    assert len(ids) >= 4
    qvec = np.zeros(pack.manifest.embedding.dim, dtype=np.float32)
    asked = [ids[2], ids[0], "no-such-section", ids[2], ids[1]]
    log = db_mod.QueryLog()
    found = db.sections_by_id(asked, qvec, log)
    assert sorted(r.id for r in found) == sorted(ids[:3])  # each once, the missing one left out
    assert log.statements == [db_mod.by_key(f"{db_mod.SECTION_COLS}, s.embedding", 4)]
    rows = db._by_key(f"{db_mod.SECTION_COLS}, s.embedding", db_mod.SECTIONS_BY_ID,
                      asked, None)
    assert sorted(map(repr, rows)) == _scan(db, db_mod.SECTIONS_BY_ID, asked)
    graphs = db._by_key("s.id, s.graph", db_mod.SECTION_GRAPHS, ids, None)
    assert sorted(map(repr, graphs)) == _scan(db, db_mod.SECTION_GRAPHS, ids)
    # Past PK_LOOKUPS ids, the scan itself runs.
    monkeypatch.setattr(db_mod, "PK_LOOKUPS", 2)
    log = db_mod.QueryLog()
    assert sorted(r.id for r in db.sections_by_id(ids[:3], qvec, log)) == sorted(ids[:3])
    assert log.statements == [db_mod.SECTIONS_BY_ID]
    assert db.sections_by_id([], qvec) == []


def test_prepared_statements_are_reused_and_give_the_same_rows(pack):
    db = pack.db
    qvec = pack.embed_query("How do retries back off?")
    first = [r.id for r in db.vector_search(qvec, 5)]
    prepared = dict(db._prepared)
    assert db_mod.VECTOR_SEARCH in prepared
    assert [r.id for r in db.vector_search(qvec, 5)] == first
    assert db._prepared[db_mod.VECTOR_SEARCH] is prepared[db_mod.VECTOR_SEARCH]
    # The same statement, not prepared, finds the same sections.
    plain = db._run(db_mod.VECTOR_SEARCH, {"q": qvec.tolist(), "k": 5}, None)
    assert [v[0] for v in plain] == first
    assert db.fts_raw("retry backoff", 5) == db._run(
        db_mod.FTS_SEARCH, {"q": "retry backoff", "k": 5}, None)


def test_full_text_rows_carry_their_bm25_score_and_similarity(pack):
    """score_fts gives each full-text row its BM25 score and its similarity: the stored
    embedding's dot product with the question vector."""
    db = pack.db
    qvec = pack.embed_query("How many times is a failed job retried?")
    raw = db.fts_raw("failed job retried retry", 30)
    assert len(raw) >= 2
    rows = db.score_fts(raw, qvec)
    assert [r.id for r in rows] == [v[0] for v in raw]
    for r, values in zip(rows, raw):
        assert r.bm25 == pytest.approx(float(values[8]))
        assert r.similarity == pytest.approx(
            float(np.dot(np.asarray(values[9], dtype=np.float32), qvec)), abs=1e-5)
    assert [r.bm25 for r in rows] == sorted((r.bm25 for r in rows), reverse=True)
    assert db.score_fts([], qvec) == []


def test_a_pages_sections_come_with_their_similarity_computed_by_the_database(pack):
    """article_sections asks Kuzu for each section's inner product with the question, not
    for its vector: the figures must be the vectors' own, in page then document order."""
    db = pack.db
    qvec = pack.embed_query("How do retries back off?")
    vectors = {r[0]: r[1] for r in db._run(
        "MATCH (s:Section) RETURN s.id, s.embedding", {}, None)}
    articles = sorted({r[0] for r in db._run("MATCH (s:Section) RETURN s.article_id", {},
                                             None)})[:2]
    rows = db.article_sections(articles, qvec)
    assert rows and {r.article_id for r in rows} == set(articles)
    assert [(r.article_id, r.position) for r in rows] == sorted(
        (r.article_id, r.position) for r in rows)
    for r in rows:
        want = float(np.dot(np.asarray(vectors[r.id], dtype=np.float32), qvec))
        assert r.similarity == pytest.approx(want, abs=1e-5)
    assert db_mod.ARTICLE_SECTIONS in db._prepared  # prepared once, reused
    assert [r.id for r in db.article_sections(articles, qvec)] == [r.id for r in rows]


def test_each_part_of_a_question_gets_every_page_sections_similarity_in_one_statement(pack):
    """article_similarities: each section of the pages → its inner product with each of
    several vectors (the parts of a question, embedded in one batch), the vectors' own
    figures; one statement prepared per number of vectors."""
    db = pack.db
    parts = ["How do retries back off?", "Which setting caps the retries?"]
    qvecs = pack.embed_queries(parts)
    assert qvecs.shape[0] == 2
    for q, part in zip(qvecs, parts):  # a batch embeds as one question at a time does
        assert np.allclose(q, pack.embed_query(part), atol=1e-5)
    vectors = {r[0]: r[1] for r in db._run(
        "MATCH (s:Section) RETURN s.id, s.embedding", {}, None)}
    articles = sorted({r[0] for r in db._run("MATCH (s:Section) RETURN s.article_id", {},
                                             None)})[:2]
    found = db.article_similarities(articles, qvecs)
    assert set(found) == {r.id for r in db.article_sections(articles, qvecs[0])}
    for sid, sims in found.items():
        assert len(sims) == 2
        for got, q in zip(sims, qvecs):
            want = float(np.dot(np.asarray(vectors[sid], dtype=np.float32), q))
            assert got == pytest.approx(want, abs=1e-5)
    assert db_mod.article_similarities(2) in db._prepared
    assert db.article_similarities(articles, []) == {} and db.article_similarities([], qvecs) == {}
