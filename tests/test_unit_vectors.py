"""Every answer unit's vector, made in the build and read by the reader
(packs/retrieval/unit_vectors.py, tasks/stages/unit_vectors.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from query_fixtures import build_pack, embedder  # noqa: F401 (fixtures)

from packs.retrieval import reader, unit_store, unit_vectors, units
from packs.retrieval import reader_features as rf
from tasks import vectors as embed_core
from tasks.publish.tables import write_unit_vectors

TEXTS = [
    "Pods are the smallest deployable units. A pod holds one or more containers.\n\n"
    "- `kubectl get pods` lists them\n- `kubectl delete pod NAME` removes one",
    "The kubelet restarts a container whose liveness probe fails. A readiness probe that "
    "fails removes the pod from the Service's endpoints.",
]


class _Vectors:
    """An encoder at the network boundary's place: a vector per text from its words."""

    dim = 8

    def encode_documents(self, texts, batch_size=64):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for k, t in enumerate(texts):
            for w in t.split():
                out[k, hash(w) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def _tables(tmp_path: Path, texts=TEXTS) -> Path:
    rows = embed_core.unit_rows([*texts, texts[0]])  # a repeated text is embedded once
    df, stats = embed_core.embed_units(rows, _Vectors())
    assert stats.computed == len(set(rows.hashes))
    part = tmp_path / "unitvectors-shard.parquet"
    df.write_parquet(part)
    tables = tmp_path / "tables"
    tables.mkdir()
    write_unit_vectors(tables, [str(part)], "test-model")
    return tables


def test_the_build_writes_a_vector_for_every_unit_in_candidate_order(tmp_path) -> None:
    store = unit_vectors.Store(_tables(tmp_path))
    assert store.usable
    for text in TEXTS:
        found = store.vectors(text)
        wanted = _Vectors().encode_documents(
            [unit_vectors.embedded_text(u) for u in units.candidates(text)])
        assert found is not None and found.shape == wanted.shape
        assert np.allclose(found, wanted, atol=1e-2)  # stored as float16
    assert store.vectors("a text the pack does not hold") is None
    head = json.loads((tmp_path / "tables" / unit_vectors.INDEX_FILE).read_text())
    assert head["model"] == "test-model" and head["version"] == unit_store.VERSION
    assert len(head["index"]) == len(TEXTS)


def test_vectors_made_under_other_unit_rules_are_not_read(tmp_path) -> None:
    tables = _tables(tmp_path)
    path = tables / unit_vectors.INDEX_FILE
    head = json.loads(path.read_text())
    path.write_text(json.dumps({**head, "version": "older-rules"}))
    store = unit_vectors.Store(tables)
    assert not store.usable and store.vectors(TEXTS[0]) is None
    assert not unit_vectors.Store(tmp_path / "no-such-tables").usable


def test_a_rebuild_reuses_the_vectors_of_unchanged_units(tmp_path) -> None:
    rows = embed_core.unit_rows(TEXTS)
    first, _ = embed_core.embed_units(rows, _Vectors())
    known = dict(zip(first["text_hash"].to_list(), first["embedding"].to_numpy()))
    changed = embed_core.unit_rows([TEXTS[0], TEXTS[1] + " It waits for the period."])
    _, stats = embed_core.embed_units(changed, _Vectors(), known)
    assert stats.cached > 0 and 0 < stats.computed < len(set(changed.hashes))


def test_out_of_order_rows_are_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="out of order"):
        unit_vectors.write(tmp_path, ["a", "b", "a"], [0, 0, 1], np.zeros((3, 2)), "m")


def test_similarities_line_up_with_the_units_or_are_none() -> None:
    units_ = [(0, "u"), (0, "v"), (1, "w")]
    got = unit_vectors.aligned(units_, lambda i: np.asarray([0.1, 0.2] if i == 0 else [0.3]))
    assert got is not None and np.allclose(got, [0.1, 0.2, 0.3])
    assert unit_vectors.aligned(units_, lambda i: None if i else np.asarray([0.1, 0.2])) is None
    assert unit_vectors.aligned(units_, lambda i: np.asarray([0.1])) is None  # a count off


def _model(features, weights) -> reader.Model:
    n = len(features)
    return reader.Model(tuple(features), np.zeros(n), np.ones(n), np.asarray(weights, float))


def _reader(sim_weight: float) -> reader.Reader:
    names = (*rf.FEATURES, *unit_vectors.FEATURES)
    return reader.Reader("test", _model(names, [0.0] * len(rf.FEATURES) + [sim_weight, 0.0]),
                         None, reader.Limits(), _model(rf.FEATURES, [0.0] * len(rf.FEATURES)))


def test_the_reader_scores_with_the_unit_similarities_or_its_plain_model() -> None:
    model = _reader(5.0)
    x = np.zeros((3, len(rf.FEATURES)))
    sims = np.asarray([0.2, 0.9, 0.4])
    used, xs, _ = reader.with_units(model, x, [], sims)
    units_ = [(0, SimpleNamespace(start=k)) for k in range(3)]
    assert [s.index for s in reader.ranked(used, xs, units_)] == [1, 2, 0]
    plain, xp, _ = reader.with_units(model, x, [], None)
    assert plain.first is model.plain and xp.shape == x.shape


def test_weights_that_read_unit_vectors_need_a_plain_model() -> None:
    d = _reader(1.0).to_json("test", {})
    assert reader.parse(json.dumps(d).encode()).reads_units
    with pytest.raises(reader.ReaderWeightsError, match="plain"):
        reader.parse(json.dumps({**d, "plain": None}).encode())


def test_a_pack_built_without_unit_vectors_answers_with_the_plain_model(tmp_path, embedder,
                                                                         monkeypatch) -> None:
    from packs import KnowledgePack

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    question = "What is the default value of max_attempts?"
    answers = {}
    for name, vectors in (("with", True), ("without", False)):
        with KnowledgePack.open(build_pack(tmp_path / name, embedder, unit_vectors=vectors)) as pack:
            assert pack.unit_vectors.usable is vectors
            answers[name] = pack.ask(question, use_cache=False)
    for answer in answers.values():  # both offline answers cite the pack, verified
        assert answer["query_type"] == "retrieval_only"
        assert answer["citations"] and all(c["verified"] for c in answer["citations"])
