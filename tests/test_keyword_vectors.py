"""Keyword-aware vectors: a second vector per section from its entities and key phrases,
stored beside the content vector (format 2) and blended with it at query time."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import polars as pl
import pytest
from test_packset import GARDEN, build_small_pack

from packs import KnowledgePack
from packs import format as fmt
from packs.embedding import Embedder
from tasks import vectors as embed_core

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("kw")
    emb = Embedder("all-MiniLM-L6-v2")
    return {
        "with": build_small_pack(root, "garden", "https://garden.test", GARDEN, emb),
        "without": build_small_pack(root, "plain", "https://plain.test", GARDEN, emb,
                                    keyword_vectors=False),
        "root": root,
    }


def test_key_phrases_and_keyword_text():
    text = ("Pinch off the suckers that grow between the main stem and the branches. "
            "Removing suckers keeps the plant open.\n```python\nignored_identifier = 1\n```")
    phrases = embed_core.key_phrases(text, k=4)
    assert len(phrases) == 4 and "suckers" in " ".join(phrases)
    assert not any("ignored" in p for p in phrases)
    assert embed_core.keyword_text("A > B", ["Tomato", "Tomato", "Stem"], ["main stem"]) == \
        "Tomato; Stem; main stem"
    assert embed_core.keyword_text("A > B", [], []) == "A > B"


def test_keyword_texts_use_the_entities_extracted_from_each_section():
    sections = pl.DataFrame({"id": ["s1", "s2"], "heading_path": ["P > One", "P > Two"],
                             "content": ["", "Tomato suckers grow fast."]})
    names = {"s1": ["RetryPolicy", "RetryPolicy"], "s9": ["Elsewhere"]}
    texts = embed_core.keyword_texts(sections, names)
    assert texts[0] == "RetryPolicy"
    assert texts[1].startswith("tomato suckers")


def test_the_keyword_vector_is_stored_with_the_manifests_dimension(built):
    build = built["with"] / "builds" / "b0001"
    manifest = json.loads((build / fmt.MANIFEST_FILE).read_text())
    assert manifest["format_version"] == fmt.FORMAT_VERSION >= 2
    assert manifest["keyword_vectors"]["present"] is True
    dim = manifest["keyword_vectors"]["dim"]
    assert dim == manifest["embedding"]["dim"] == 384
    sections = pl.read_parquet(build / fmt.TABLES_DIR / "sections.parquet")
    assert sections.schema[fmt.KEYWORD_EMBEDDING] == pl.Array(pl.Float32, dim)
    norms = np.linalg.norm(np.stack(sections[fmt.KEYWORD_EMBEDDING].to_list()), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-4)
    plain = json.loads((built["without"] / "builds" / "b0001" / fmt.MANIFEST_FILE).read_text())
    assert plain["keyword_vectors"]["present"] is False
    assert fmt.KEYWORD_EMBEDDING not in pl.read_parquet(
        built["without"] / "builds" / "b0001" / fmt.TABLES_DIR / "sections.parquet").columns


def _reference(build_dir, qvec, w):
    """Blend computed in numpy from the Parquet tables: (1-w)*content + w*keyword cosine."""
    sections = pl.read_parquet(build_dir / fmt.TABLES_DIR / "sections.parquet")
    c = np.stack(sections["embedding"].to_list()) @ qvec
    k = np.stack(sections[fmt.KEYWORD_EMBEDDING].to_list()) @ qvec
    return dict(zip(sections["id"], (1 - w) * c + w * k))


@pytest.mark.parametrize("weight", [0.5, 0.8])
def test_search_blends_both_vectors_like_the_reference(built, weight):
    # The blend's own ranking: no distinct pages first, no per-page cap (with 30 vector
    # candidates, those would bring in other pages' sections).
    plain = dict(hybrid=False, graph_rerank=False, multi_doc=False, quality_threshold=0.0,
                 distinct_first=0, per_article=0, use_cache=False, max_results=4)
    with KnowledgePack.open(built["with"]) as pack:
        q = "drip irrigation timer"
        ref = _reference(pack.path, pack.embed_query(q), weight)
        expected = sorted(ref, key=lambda i: -ref[i])[:4]
        for extra in ({}, {"url_prefix": "https://garden.test/"}):  # HNSW and filtered scan
            result = pack.search(q, keyword_vectors=True, keyword_weight=weight, **plain,
                                 **extra)
            assert [s.id for s in result.sections] == expected
            for s in result.sections:
                assert s.fusion_score == pytest.approx(ref[s.id], abs=1e-4)
            assert "section_kw_vec" in result.cypher_query or extra
        off = pack.search(q, **plain)
        assert "section_kw_vec" not in off.cypher_query


def test_packs_without_keyword_vectors_fall_back_with_a_warning(built):
    with KnowledgePack.open(built["without"]) as pack:
        result = pack.search("drip irrigation timer", keyword_vectors=True)
        assert result.sections
        assert any("no keyword vectors" in w for w in result.warnings)


def test_format_1_packs_are_still_readable(built, tmp_path):
    copy = tmp_path / "old"
    shutil.copytree(built["without"], copy)
    path = copy / "builds" / "b0001" / fmt.MANIFEST_FILE
    raw = json.loads(path.read_text())
    raw["format_version"] = 1
    raw.pop("keyword_vectors")
    path.write_text(json.dumps(raw))
    with KnowledgePack.open(copy) as pack:
        assert not pack.manifest.keyword_vectors.present
        result = pack.search("timer configuration", language="yaml", quality_threshold=0.0)
        assert [s.heading_path for s in result.sections] == ["Sensor API > Timer configuration"]


def test_keywords_stage_reuses_vectors_of_unchanged_texts(built, tmp_path):
    from flows.plan import build_context
    from tasks.shards import Shard
    from tasks.sources import load_source
    from tasks.stages.common import Record
    from tasks.stages.keywords import STAGE as keywords

    source = tmp_path / "garden"
    source.mkdir()
    (source / "urls.txt").write_text("https://example.org/a\n")
    (source / "pack.toml").write_text('embedding_model = "all-MiniLM-L6-v2"\nkeyword_vectors = true\n')
    ctx = build_context(load_source(source), "b1", tmp_path / "out", tmp_path / "work",
                        None, "offline", False, None)
    src = pl.read_parquet(built["with"] / "builds" / "b0001" / fmt.TABLES_DIR / "sections.parquet")
    folder = tmp_path / "in"
    folder.mkdir()
    src.drop("embedding", fmt.KEYWORD_EMBEDDING).write_parquet(folder / "sections.parquet")

    def extraction(section_with_entity: str) -> Record:
        rows = [{"section_id": sid, "request_key": None, "status": "ok", "reason": None,
                 "data": json.dumps({"entities": [{"name": "SoilSensor"}]
                                     if sid == section_with_entity else [],
                                     "relationships": [], "facts": []})}
                for sid in src["id"]]
        path = folder / f"ex-{section_with_entity}.parquet"
        pl.DataFrame(rows).write_parquet(path)
        return Record("extract", "k-extract", 0, {"extractions": str(path)}, {}, 0.0,
                      digest=section_with_entity)

    split = Record("split", "k-split", 0, {"sections": str(folder / "sections.parquet")}, {}, 0.0)
    shard = Shard(0, 1, "")
    first = keywords.run(ctx, shard, {"split": split, "extract": extraction(src["id"][0])})
    out = pl.read_parquet(first.paths["keywords"])
    assert out.columns == ["id", "keyword_key", fmt.KEYWORD_EMBEDDING]
    assert out["id"].to_list() == src["id"].to_list()
    assert first.work["computed"] == 6
    again = keywords.run(ctx, shard, {"split": split, "extract": extraction(src["id"][0])})
    assert again.key == first.key and again.work == {}  # the output was there
    # The entity moved to another section: the shard's last output serves the rest.
    moved = Shard(0, 1, "", (("keywords", (first.paths["keywords"],)),))
    changed = keywords.run(ctx, moved, {"split": split, "extract": extraction(src["id"][1])})
    assert changed.key != first.key
    # Only the two sections whose keyword text changed were encoded.
    assert changed.work["computed"] == 2
