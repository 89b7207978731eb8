"""Embed: section texts → unit vectors, reusing the vectors of unchanged sections.

What gets embedded is the heading path and the content ("Pods > Lifecycle\n\n..."), so a
section that says "it restarts" still lands near questions about pods. Vectors are keyed
on the section's content hash: the embed stage (`tasks.stages.embed`) hands in the
vectors its shard had in the last build (`known`), and only new or changed sections are
encoded.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import polars as pl

from packs.embedding import Embedder
from packs.markdown import replace_fences


def embedding_text(heading_path: str, content: str) -> str:
    return f"{heading_path}\n\n{content}"


@dataclass
class EmbedStats:
    computed: int
    cached: int
    seconds: float


def _encode_cached(
    embedder: Embedder,
    known: dict[str, np.ndarray],
    keys: list[str],
    text_of: Callable[[str], str],
    batch_size: int,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, int, int]:
    """One row per key: known vectors, the rest encoded. Returns (matrix, computed,
    reused) over unique keys.

    The texts to encode are sorted by length over the whole call, not only within each
    batch, so that batches of similar lengths carry little padding."""
    unique = list(dict.fromkeys(keys))
    vectors = {k: known[k] for k in unique
               if k in known and known[k].shape == (embedder.dim,)}
    todo = sorted((k for k in unique if k not in vectors), key=lambda k: -len(text_of(k)))
    step = max(batch_size * 4, 256)
    for i in range(0, len(todo), step):
        batch = todo[i : i + step]
        encoded = embedder.encode_documents([text_of(k) for k in batch], batch_size=batch_size)
        vectors.update(zip(batch, encoded, strict=True))
        if progress:
            progress(min(i + step, len(todo)), len(todo))
    matrix = np.stack([vectors[k] for k in keys]) if keys else np.zeros((0, embedder.dim))
    return matrix.astype(np.float32), len(todo), len(unique) - len(todo)


def vector_column(matrix: np.ndarray, dim: int) -> pl.Series:
    return pl.Series(matrix).cast(pl.Array(pl.Float32, dim))


def embed_sections(
    sections: pl.DataFrame,
    embedder: Embedder,
    known: dict[str, np.ndarray] | None = None,
    *,
    batch_size: int = 64,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[pl.DataFrame, EmbedStats]:
    """Sections (id, heading_path, content, content_hash) → (id, content_hash, embedding)
    and stats. Sections whose content hash is in `known` (hash → vector of this model)
    are not encoded again."""
    start = time.perf_counter()
    keys = sections["content_hash"].to_list()
    texts = dict(zip(keys, (embedding_text(h, c) for h, c in
                            zip(sections["heading_path"], sections["content"]))))
    matrix, computed, cached = _encode_cached(embedder, known or {}, keys, texts.__getitem__,
                                              batch_size, progress)
    out = pl.DataFrame({
        "id": sections["id"],
        "content_hash": sections["content_hash"],
        "embedding": vector_column(matrix, embedder.dim),
    })
    return out, EmbedStats(computed, cached, time.perf_counter() - start)


# --- keyword vectors ------------------------------------------------------------------------
#
# A second vector per section: its extracted entity names and its key phrases, embedded
# with the same model. It needs the extraction output, so it runs after extraction and
# embedding in each shard (the "keywords" stage). Vectors are keyed on a hash of the
# keyword text, so a rebuild re-encodes only sections whose text changed.

KEYWORD_VERSION = "kw-v2"  # bump when the keyword text recipe changes
# kw-v2: the entity names as extracted from the section (per shard), not the resolved ones
MAX_KEY_PHRASES = 8
MAX_KEYWORD_ENTITIES = 16

# RAKE's own phrase boundaries, not packs/text.py's words: they are part of the keyword
# text the keyword vectors embed (KEYWORD_VERSION), so changing them re-embeds every pack.
_PHRASE_SPLIT = re.compile(r"[.,;:!?()\[\]{}\"'`|<>=*#/\\]+|\s-\s|\n")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*")


def key_phrases(text: str, k: int = MAX_KEY_PHRASES) -> list[str]:
    """The text's top-k key phrases, RAKE-style: runs of 1–3 non-stop words between stop
    words and punctuation, scored by the sum of their words' degree/frequency; fenced code
    is skipped. Deterministic; ties keep first-occurrence order."""
    from packs.text import STOP_WORDS

    prose = replace_fences(text or "", " ")
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


def keyword_texts(sections: pl.DataFrame, names_by_section: dict[str, list[str]]) -> list[str]:
    """One keyword text per section row (same order): the entity names extracted from it
    (`names_by_section`: section id → names, in extraction order) + its key phrases."""
    return [
        keyword_text(row["heading_path"], list(dict.fromkeys(names_by_section.get(row["id"], []))),
                     key_phrases(row["content"]))
        for row in sections.select("id", "heading_path", "content").iter_rows(named=True)
    ]


def keyword_key(text: str) -> str:
    from packs.format import content_hash

    return content_hash(f"{KEYWORD_VERSION}\x00{text}")


def embed_keywords(
    sections: pl.DataFrame,
    names_by_section: dict[str, list[str]],
    embedder: Embedder,
    known: dict[str, np.ndarray] | None = None,
    *,
    batch_size: int = 64,
) -> tuple[pl.DataFrame, EmbedStats]:
    """Sections (id, heading_path, content) + their entity names → (id, keyword_key,
    keyword_embedding); keyword texts whose key is in `known` are not encoded again."""
    start = time.perf_counter()
    texts = keyword_texts(sections, names_by_section)
    keys = [keyword_key(t) for t in texts]
    by_key = dict(zip(keys, texts))
    matrix, computed, cached = _encode_cached(embedder, known or {}, keys, by_key.__getitem__,
                                              batch_size)
    out = pl.DataFrame({
        "id": sections["id"],
        "keyword_key": pl.Series(keys, dtype=pl.Utf8),
        "keyword_embedding": vector_column(matrix, embedder.dim),
    })
    return out, EmbedStats(computed, cached, time.perf_counter() - start)


# --- unit vectors ---------------------------------------------------------------------------
#
# Every answer unit of every distinct section text (packs/retrieval/units.py, as the reader
# reads them: `unit_vectors.embedded_text`), embedded with the pack's model in the build, so that
# the reader scores every unit by its similarity to the question at the cost of a dot
# product (packs/retrieval/unit_vectors.py). Vectors are keyed on a hash of the unit's
# text: a rebuild encodes only the units of new or changed sections.


@dataclass
class UnitRows:
    """The units of distinct section texts, in order: each one's section text key, its
    position among that text's candidates, its text's hash; `texts` by hash."""

    keys: list[str]
    positions: list[int]
    hashes: list[str]
    texts: dict[str, str]


def unit_rows(contents: Iterable[str]) -> UnitRows:
    """The rows of every distinct text of `contents`, its candidates in order."""
    from packs.retrieval import unit_store, unit_vectors, units

    rows = UnitRows([], [], [], {})
    for content in dict.fromkeys(contents):
        key = unit_store.key(content)
        for position, u in enumerate(units.candidates(content)):
            text = unit_vectors.embedded_text(u)
            digest = unit_store.key(text)
            rows.keys.append(key)
            rows.positions.append(position)
            rows.hashes.append(digest)
            rows.texts[digest] = text
    return rows


def embed_units(rows: UnitRows, embedder: Embedder, known: dict[str, np.ndarray] | None = None,
                *, batch_size: int = 64, progress: Callable[[int, int], None] | None = None
                ) -> tuple[pl.DataFrame, EmbedStats]:
    """`rows` → (key, position, text_hash, embedding) and stats; units whose text hash is in
    `known` (hash → vector of this model) are not encoded again."""
    start = time.perf_counter()
    matrix, computed, cached = _encode_cached(embedder, known or {}, rows.hashes,
                                              rows.texts.__getitem__, batch_size, progress)
    out = pl.DataFrame({
        "key": pl.Series(rows.keys, dtype=pl.Utf8),
        "position": pl.Series(rows.positions, dtype=pl.Int32),
        "text_hash": pl.Series(rows.hashes, dtype=pl.Utf8),
        "embedding": vector_column(matrix, embedder.dim),
    })
    return out, EmbedStats(computed, cached, time.perf_counter() - start)
