"""The embedding layer: model resolution, and ONNX vectors equal to sentence-transformers'."""

from __future__ import annotations

import numpy as np
import pytest

from packs.embedding import (
    BGE_QUERY_PREFIX,
    Embedder,
    EmbeddingModelError,
    canonical_model_id,
    resolve_model,
)
from tests.conftest import OFFLINE_MODEL

TEXTS = [
    "Pods are the smallest deployable units of computing in Kubernetes.",
    "A Service exposes an application running on a set of Pods. " * 40,  # past the window
    "kubectl get pods --namespace kube-system",
    "",
    "Ünïcödé text, emoji 🙂 and CamelCaseIdentifiers_with_underscores.",
]


def test_aliases_and_packaged_folder_fold_to_one_id() -> None:
    folder = resolve_model("all-MiniLM-L6-v2").load_from
    assert canonical_model_id("all-MiniLM-L6-v2") == OFFLINE_MODEL
    assert canonical_model_id(folder) == OFFLINE_MODEL
    assert canonical_model_id("minilm") == OFFLINE_MODEL
    bge = resolve_model("BAAI/bge-base-en-v1.5")
    assert bge.spec.query_prefix == BGE_QUERY_PREFIX and bge.load_from == "BAAI/bge-base-en-v1.5"


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(EmbeddingModelError, match="use auto, onnx or torch"):
        Embedder(OFFLINE_MODEL, backend="tpu")


def test_onnx_vectors_match_sentence_transformers(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KPACK_CACHE_DIR", str(tmp_path))  # a fresh export
    onnx = Embedder(OFFLINE_MODEL, backend="onnx")
    torch = Embedder(OFFLINE_MODEL, backend="torch")
    assert (onnx.backend, torch.backend) == ("onnx", "torch")
    assert (onnx.dim, onnx.max_seq_length) == (torch.dim, torch.max_seq_length) == (384, 256)
    a = onnx.encode_documents(TEXTS, batch_size=2)
    b = torch.encode_documents(TEXTS, batch_size=2)
    assert a.dtype == np.float32 and a.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert np.abs(a - b).max() < 1e-4
    assert np.abs(onnx.encode_query("what is a pod") - torch.encode_query("what is a pod")).max() < 1e-4
    assert list((tmp_path / "onnx").glob("*/model.onnx"))
    # A question runs at its own length, not padded to the 128 tokens the model's
    # tokenizer.json asks for (8x the model's time, the same vector).
    assert len(onnx._model.tokenizer.encode("what is a pod").ids) < 16


def test_a_folder_that_does_not_fit_onnx_falls_back_or_fails_clearly(tmp_path) -> None:
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(resolve_model(OFFLINE_MODEL).load_from, folder)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(EmbeddingModelError, match="ONNX backend"):
        Embedder(str(folder), backend="onnx")
    assert Embedder(str(folder)).backend == "torch"  # auto falls back


def test_embed_vectors_equal_encode_in_key_order_and_known_ones_are_reused(tmp_path) -> None:
    import polars as pl

    from tasks.vectors import embed_sections, embedding_text

    embedder = Embedder(OFFLINE_MODEL)
    texts = [t for t in TEXTS if t] * 2  # duplicates share one vector
    sections = pl.DataFrame({
        "id": [f"s{i}" for i in range(len(texts))],
        "heading_path": ["Page > Part"] * len(texts),
        "content": texts,
        "content_hash": [f"h{i % 4}" for i in range(len(texts))],
    })
    # batch_size 1: the stage re-orders texts by length, the rows must not move
    out, stats = embed_sections(sections, embedder, batch_size=1)
    want = embedder.encode_documents([embedding_text("Page > Part", t) for t in texts])
    got = np.stack(out["embedding"].to_list())
    assert out["id"].to_list() == sections["id"].to_list()
    assert np.abs(got - want).max() < 1e-5
    assert (stats.computed, stats.cached) == (4, 0)
    known = dict(zip(out["content_hash"].to_list(), got))
    again, stats = embed_sections(sections, embedder, known)
    assert (stats.computed, stats.cached) == (0, 4)
    assert np.array_equal(np.stack(again["embedding"].to_list()), got)


def test_describe_reads_what_loading_the_model_reports() -> None:
    from packs.embedding import Embedder, describe

    info, loaded = describe("all-MiniLM-L6-v2"), Embedder("all-MiniLM-L6-v2")
    assert (info.model_id, info.dim, info.max_seq_length) == (
        loaded.model_id, loaded.dim, loaded.max_seq_length)
