"""Embed stage: section texts → unit vectors, with a persistent per-section cache.

What gets embedded is the heading path and the content ("Pods > Lifecycle\n\n..."), so a
section that says "it restarts" still lands near questions about pods. Vectors are cached
in SQLite keyed on (model id, section content hash): a rebuild embeds only new or changed
sections, and two packs sharing pages share the work.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from packs.embedding import Embedder

CACHE_FILE = "embeddings.sqlite"


def embedding_text(heading_path: str, content: str) -> str:
    return f"{heading_path}\n\n{content}"


class EmbeddingCache:
    """SQLite store of float32 vectors keyed on (model, content hash)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        with closing(self._connect()) as db, db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, key TEXT NOT NULL, "
                "dim INTEGER NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (model, key))"
            )

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    def get_many(self, model: str, keys: list[str], dim: int) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with closing(self._connect()) as db:
            for i in range(0, len(keys), 500):
                batch = keys[i : i + 500]
                marks = ",".join("?" * len(batch))
                rows = db.execute(
                    f"SELECT key, vec FROM vectors WHERE model = ? AND dim = ? AND key IN ({marks})",
                    [model, dim, *batch],
                )
                for key, blob in rows:
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, model: str, items: list[tuple[str, np.ndarray]]) -> None:
        with closing(self._connect()) as db, db:
            db.executemany(
                "INSERT OR REPLACE INTO vectors (model, key, dim, vec) VALUES (?, ?, ?, ?)",
                [(model, k, int(v.shape[0]), v.astype(np.float32).tobytes()) for k, v in items],
            )


@dataclass
class EmbedStats:
    computed: int
    cached: int
    seconds: float


def embed_sections(
    sections: pl.DataFrame,
    embedder: Embedder,
    cache: EmbeddingCache,
    *,
    batch_size: int = 64,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[pl.DataFrame, EmbedStats]:
    """Sections (id, heading_path, content, content_hash) → (id, embedding) and stats.

    Only sections whose content hash is not cached for this model are encoded; results
    are written to the cache batch by batch, so an interrupted run keeps its work.
    """
    start = time.perf_counter()
    keys = sections["content_hash"].to_list()
    unique_keys = list(dict.fromkeys(keys))
    vectors = cache.get_many(embedder.model_id, unique_keys, embedder.dim)
    todo = [k for k in unique_keys if k not in vectors]
    texts = {
        row["content_hash"]: embedding_text(row["heading_path"], row["content"])
        for row in sections.select("content_hash", "heading_path", "content").iter_rows(named=True)
        if row["content_hash"] not in vectors
    }
    step = max(batch_size * 4, 256)
    for i in range(0, len(todo), step):
        batch = todo[i : i + step]
        encoded = embedder.encode_documents([texts[k] for k in batch], batch_size=batch_size)
        new = list(zip(batch, encoded, strict=True))
        cache.put_many(embedder.model_id, new)
        vectors.update(new)
        if progress:
            progress(min(i + step, len(todo)), len(todo))
    matrix = np.stack([vectors[k] for k in keys]) if keys else np.zeros((0, embedder.dim))
    out = pl.DataFrame({
        "id": sections["id"],
        "embedding": pl.Series(matrix.astype(np.float32)).cast(pl.Array(pl.Float32, embedder.dim)),
    })
    stats = EmbedStats(len(todo), len(unique_keys) - len(todo), time.perf_counter() - start)
    return out, stats
