"""Every answer unit's vector, made in the build, so that the reader scores every unit of
the sections it reads by its similarity to the question at the cost of a dot product.

The build's `unit_vectors` stage (tasks/stages/unit_vectors.py) embeds each candidate of
each distinct section text (packs/retrieval/units.py, `embedded_text`) with the
pack's own model; publish writes them here as two files in tables/:

- unit_vectors.npy: a float16 matrix, one row per unit, read memory-mapped;
- unit_vectors.json: {"format": FORMAT, "version": the unit rules' version
  (unit_store.VERSION), "embed_words": EMBED_WORDS, "model": the model, "dim": its
  dimension, "index": {section text key: [first row, number of units]}}.

A pack without them (built before 2026-12-05), or made under other unit rules, has none to
give: the reader then scores with its model that does without (reader.Reader.plain). The
similarity features (FEATURES, `features`) are each unit's cosine similarity to the
question as a standard score among the question's units, and that less the best's.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from packs.retrieval import unit_store
from packs.retrieval.segment import Unit

FORMAT = "unit-vectors-v1"
MATRIX_FILE = "unit_vectors.npy"
INDEX_FILE = "unit_vectors.json"
FEATURES = ("unit_sim_z", "unit_sim_z_rel")
log = logging.getLogger("kpack.units")


EMBED_WORDS = 64  # a unit is embedded by its first words (a long list costs no more)


def embedded_text(u: Unit) -> str:
    """What of a unit is embedded for its similarity to the question."""
    return " ".join(u.display.split()[:EMBED_WORDS])


def _version() -> tuple[str, int]:
    return unit_store.VERSION, EMBED_WORDS


def write(tables_dir: Path, keys: Sequence[str], positions: Sequence[int], matrix: np.ndarray,
          model: str) -> int:
    """Write the two files from rows sorted by key, then position (each key's positions
    0..n-1); returns how many section texts they hold."""
    index: dict[str, list[int]] = {}
    for row, (key, position) in enumerate(zip(keys, positions)):
        if position == 0:
            index[key] = [row, 0]
        if key not in index or index[key][0] + position != row:
            raise ValueError(f"unit vectors out of order at row {row} (text {key})")
        index[key][1] += 1
    rules, words = _version()
    np.save(tables_dir / MATRIX_FILE, np.asarray(matrix, dtype=np.float16))
    (tables_dir / INDEX_FILE).write_text(json.dumps(
        {"format": FORMAT, "version": rules, "embed_words": words, "model": model,
         "dim": int(matrix.shape[1]) if matrix.ndim == 2 else 0, "index": index},
        separators=(",", ":")), encoding="utf-8")
    return len(index)


class Store:
    """One pack's unit vectors, read on first use; `usable` is False when the pack has none
    or has them under other unit rules."""

    def __init__(self, tables_dir: Path) -> None:
        self.tables_dir = tables_dir
        self._loaded = False
        self._index: dict[str, list[int]] = {}
        self._matrix: np.ndarray | None = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            path = self.tables_dir / INDEX_FILE
            if not path.is_file():
                return
            try:
                head = json.loads(path.read_text(encoding="utf-8"))
                matrix = np.load(self.tables_dir / MATRIX_FILE, mmap_mode="r")
            except (OSError, ValueError) as exc:
                log.warning("%s: unit vectors unreadable (%s); read without them", path, exc)
                return
            rules, words = _version()
            if (head.get("format"), head.get("version"), head.get("embed_words")) != (
                    FORMAT, rules, words):
                log.info("%s: unit vectors made under other unit rules; read without them",
                         path)
                return
            self._index, self._matrix = head.get("index", {}), matrix

    @property
    def usable(self) -> bool:
        self._load()
        return self._matrix is not None

    def vectors(self, content: str) -> np.ndarray | None:
        """The vectors of `content`'s units in candidate order, or None when it has none."""
        self._load()
        found = self._index.get(unit_store.key(content))
        if found is None or self._matrix is None:
            return None
        start, count = found
        return np.asarray(self._matrix[start:start + count], dtype=np.float32)


def features(sims: np.ndarray) -> np.ndarray:
    """The FEATURES of a question's units from their similarities to it: each one's
    standard score among them, and that less the best's. Free of the encoder's scale (one
    model's cosines spread wider than another's), so weights fitted on one model's vectors
    read another's alike; a fit on all-MiniLM-L6-v2 vectors by 5-fold CV by page did as well
    as with the raw cosines (benchmarks/results/issue47_session14.md)."""
    s = np.asarray(sims, dtype=np.float64)
    if not len(s):
        return np.zeros((0, len(FEATURES)))
    z = (s - s.mean()) / (s.std() + 1e-3)
    return np.stack([z, z - z.max()], axis=1)


def similarity(members: Sequence[tuple[str | None, Any, Any]]
               ) -> Callable[[Any], np.ndarray | None]:
    """section → the cosine similarities of its units (in candidate order) to the question,
    from the vectors of the pack it comes from (`members`: (label, pack, the question's
    vector for it), packs.answer._members), or None when that pack has none for it or no
    vector of the question."""
    by_label = {label: (member, None if qvec is None else np.asarray(qvec, dtype=np.float32))
                for label, member, qvec in members}

    def sims(section: Any) -> np.ndarray | None:
        label = getattr(section, "pack", None) if len(by_label) > 1 else next(iter(by_label))
        member, qvec = by_label.get(label, (None, None))
        store = getattr(member, "unit_vectors", None)
        found = store.vectors(section.content) if store is not None else None
        if found is None or qvec is None:
            return None
        return found @ qvec
    return sims


def aligned(units: Sequence[tuple[int, Any]], of_passage: Callable[[int], np.ndarray | None]
            ) -> np.ndarray | None:
    """Each unit's similarity, in the order of `units` ((passage index, unit), every
    candidate of each passage in turn, as extractive.units_of gives them), from
    `of_passage(i)` (passage i's units' similarities); None unless every passage has them,
    one per unit."""
    counts: dict[int, int] = {}
    for i, _ in units:
        counts[i] = counts.get(i, 0) + 1
    out = []
    for i, n in counts.items():
        found = of_passage(i)
        if found is None or len(found) != n:
            return None
        out.append(found)
    return np.concatenate(out).astype(np.float32) if out else np.zeros(0, dtype=np.float32)
