"""The reader's training data (benchmarks/reader_data.py) read on a real pack: with unit
vectors (the second model's similarity) or, for a fit of the first model alone, none."""

from __future__ import annotations

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
