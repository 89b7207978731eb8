"""The reader's training data (benchmarks/reader_data.py) read on a real pack: with unit
vectors (the second model's similarity) or, for a fit of the first model alone, none."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from query_fixtures import embedder, pack, pack_dir  # noqa: F401 (fixtures)

from benchmarks import reader_data

ROW = {"id": "t-1", "question": "How many times does Kestrel retry a failed job?",
       "golds": [["RetryPolicy"]], "group": "retries", "kind": "number"}


def test_a_question_is_read_with_or_without_unit_vectors(pack):
    vectors: dict = {}
    embedded = reader_data.read_question(pack, ROW, "kestrel", vectors)
    plain = reader_data.read_question(pack, ROW, "kestrel", None)
    assert len(embedded.units) == len(plain.units) > 0
    # The same units, features and labels either way; only the similarities differ.
    assert np.array_equal(embedded.x, plain.x)
    assert np.array_equal(embedded.labels, plain.labels) and plain.labels.sum() > 0
    assert vectors and np.abs(embedded.sims).max() > 0.1
    assert not plain.sims.any() and plain.sims.shape == (len(plain.units),)


def test_the_question_cache_is_keyed_by_every_module_that_makes_the_features():
    """A study reads its questions from a cache keyed by the source of the modules that
    compute them: the rules that make the units and their facts (unit_store.RULES, the same
    set that keys a pack's stored units) among them, so that a change to unit_facts.py is
    a new key, never stale features."""
    from packs.retrieval import reader_features, unit_store

    keyed = {(reader_data.ROOT / rel).resolve() for rel in reader_data.READ_BY}
    assert all(p.is_file() for p in keyed)
    for module in (*unit_store.RULES, reader_features):
        assert Path(module.__file__).resolve() in keyed, module.__name__
