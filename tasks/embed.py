"""Embed stage: section texts → unit vectors, with a persistent per-section cache.

What gets embedded is the heading path and the content ("Pods > Lifecycle\n\n..."), so a
section that says "it restarts" still lands near questions about pods. Vectors are cached
in SQLite keyed on (model id, section content hash): a rebuild embeds only new or changed
sections, and two packs sharing pages share the work.
"""

from __future__ import annotations

import re
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


def _encode_cached(
    embedder: Embedder,
    cache: EmbeddingCache,
    keys: list[str],
    text_of: Callable[[str], str],
    batch_size: int,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, int, int]:
    """One row per key: cached vectors, the rest encoded and cached batch by batch (so an
    interrupted run keeps its work). Returns (matrix, computed, cached) over unique keys.

    The texts to encode are sorted by length over the whole stage, not only within each
    cached batch, so that batches of similar lengths carry little padding (as in one
    `encode()` of all the texts)."""
    unique = list(dict.fromkeys(keys))
    vectors = cache.get_many(embedder.model_id, unique, embedder.dim)
    todo = sorted((k for k in unique if k not in vectors), key=lambda k: -len(text_of(k)))
    step = max(batch_size * 4, 256)
    for i in range(0, len(todo), step):
        batch = todo[i : i + step]
        encoded = embedder.encode_documents([text_of(k) for k in batch], batch_size=batch_size)
        new = list(zip(batch, encoded, strict=True))
        cache.put_many(embedder.model_id, new)
        vectors.update(new)
        if progress:
            progress(min(i + step, len(todo)), len(todo))
    matrix = np.stack([vectors[k] for k in keys]) if keys else np.zeros((0, embedder.dim))
    return matrix.astype(np.float32), len(todo), len(unique) - len(todo)


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
    texts = dict(zip(keys, (embedding_text(h, c) for h, c in
                            zip(sections["heading_path"], sections["content"]))))
    matrix, computed, cached = _encode_cached(embedder, cache, keys, texts.__getitem__,
                                              batch_size, progress)
    out = pl.DataFrame({
        "id": sections["id"],
        "embedding": pl.Series(matrix).cast(pl.Array(pl.Float32, embedder.dim)),
    })
    return out, EmbedStats(computed, cached, time.perf_counter() - start)


# --- keyword vectors ------------------------------------------------------------------------
#
# A second vector per section: its extracted entity names and its key phrases, embedded
# with the same model. It needs the extraction output, so it runs after extraction and
# embedding (the flow's "keywords" stage). Vectors share the embedding cache under a key
# hashed from the keyword text, so a rebuild re-encodes only sections whose text changed.

KEYWORD_VERSION = "kw-v1"  # bump when the keyword text recipe changes
MAX_KEY_PHRASES = 8
MAX_KEYWORD_ENTITIES = 16

_FENCED = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.S)
_PHRASE_SPLIT = re.compile(r"[.,;:!?()\[\]{}\"'`|<>=*#/\\]+|\s-\s|\n")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*")


def key_phrases(text: str, k: int = MAX_KEY_PHRASES) -> list[str]:
    """The text's top-k key phrases, RAKE-style: runs of 1–3 non-stop words between stop
    words and punctuation, scored by the sum of their words' degree/frequency; fenced code
    is skipped. Deterministic; ties keep first-occurrence order."""
    from packs.retrieval.quality import STOP_WORDS

    prose = _FENCED.sub(" ", text or "")
    candidates: list[tuple[str, ...]] = []
    for chunk in _PHRASE_SPLIT.split(prose):
        run: list[str] = []
        for word in [*_WORD.findall(chunk), ""]:
            w = word.lower()
            if w and w not in STOP_WORDS and len(w) > 2:
                run.append(w)
                continue
            for i in range(0, len(run), 3):
                candidates.append(tuple(run[i:i + 3]))
            run = []
    freq: dict[str, int] = {}
    degree: dict[str, int] = {}
    for phrase in candidates:
        for w in phrase:
            freq[w] = freq.get(w, 0) + 1
            degree[w] = degree.get(w, 0) + len(phrase)
    scored: dict[str, float] = {}
    for phrase in candidates:
        scored.setdefault(" ".join(phrase), sum(degree[w] / freq[w] for w in phrase)
                          + sum(freq[w] for w in phrase) / 10)
    ranked = sorted(scored, key=lambda p: -scored[p])  # stable: first occurrence on ties
    return ranked[:k]


def keyword_text(heading_path: str, entity_names: list[str], phrases: list[str]) -> str:
    """What the keyword vector encodes: entity names, then key phrases ('; '-separated).
    A section with neither falls back to its heading path, so every section has one."""
    parts = list(dict.fromkeys([*entity_names[:MAX_KEYWORD_ENTITIES], *phrases]))
    return "; ".join(parts) if parts else heading_path


def keyword_texts(sections: pl.DataFrame, entities: pl.DataFrame,
                  mentions: pl.DataFrame) -> list[str]:
    """One keyword text per section row (same order): mentioned entities + key phrases."""
    names = dict(zip(entities["id"].to_list(), entities["name"].to_list())) \
        if entities.height else {}
    by_section: dict[str, list[str]] = {}
    if mentions.height:
        for sid, eid in mentions.select("section_id", "entity_id").iter_rows():
            if eid in names:
                by_section.setdefault(sid, []).append(names[eid])
    return [
        keyword_text(row["heading_path"], by_section.get(row["id"], []),
                     key_phrases(row["content"]))
        for row in sections.select("id", "heading_path", "content").iter_rows(named=True)
    ]


def embed_keywords(
    sections: pl.DataFrame,
    entities: pl.DataFrame,
    mentions: pl.DataFrame,
    embedder: Embedder,
    cache: EmbeddingCache,
    *,
    batch_size: int = 64,
) -> tuple[pl.DataFrame, EmbedStats]:
    """Sections (id, heading_path, content) + extraction tables → (id, keyword_embedding)."""
    from packs.format import content_hash

    start = time.perf_counter()
    texts = keyword_texts(sections, entities, mentions)
    keys = [content_hash(f"{KEYWORD_VERSION}\x00{t}") for t in texts]
    by_key = dict(zip(keys, texts))
    matrix, computed, cached = _encode_cached(embedder, cache, keys, by_key.__getitem__,
                                              batch_size)
    out = pl.DataFrame({
        "id": sections["id"],
        "keyword_embedding": pl.Series(matrix).cast(pl.Array(pl.Float32, embedder.dim)),
    })
    return out, EmbedStats(computed, cached, time.perf_counter() - start)
