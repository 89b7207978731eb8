"""`KnowledgePack`: open a pack directory read-only and query it.

    with KnowledgePack.open("out/kestrel") as pack:
        result = pack.search("how are jobs retried?")       # SearchResult
        answer = pack.ask("how are jobs retried?")          # dict, the seed's fields

`open` accepts a pack folder (follows its `current` file) or one build folder, checks the
manifest's format version, and opens pack.db read-only. The question embedder is the
encoder the build ships (`encoder/`, checked against its sha256; packs/encoder.py), or for
a pack without one the manifest's model loaded by name, on the first query; asking for
another model fails at open.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from packs import filters, integrity, pipeline, rollback, signing, vocabulary
from packs import format as fmt
from packs.browse import Browse
from packs.db import PackDB
from packs.embedding import (
    BACKEND_ENV,
    Embedder,
    EmbeddingModelError,
    canonical_model_id,
)
from packs.layout import resolve_build_dir
from packs.manifest import Manifest, read_manifest
from packs.options import SearchOptions
from packs.result import SearchResult
from packs.retrieval import analysis, fewshot, gate, titles, unit_store, unit_vectors
from packs.retrieval.cache import TTLCache

EMBEDDING_MODEL_ENV = "KPACK_EMBEDDING_MODEL"
log = logging.getLogger("kpack.pack")
PackFormatError = fmt.PackFormatError


class KnowledgePack:
    """One open pack build. Thread-safe for queries; close() (or `with`) when done."""

    def __init__(self, build_dir: Path, manifest: Manifest, db: PackDB,
                 embedding_model: str, cache: TTLCache | None = None) -> None:
        self.path = build_dir
        self.manifest = manifest
        self.db = db
        self._model_name = embedding_model
        self._embedder: Embedder | None = None
        self._lock = threading.Lock()
        self._entity_index: dict[str, str] | None = None
        self._path_prefixes = None
        self._fewshot: tuple[list[fewshot.Example], np.ndarray] | None = None
        self._vocabulary: gate.Vocabulary | None = None
        self._titles: titles.TitleIndex | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._browse: Browse | None = None
        self.unit_vectors = unit_vectors.Store(build_dir / fmt.TABLES_DIR)  # for the reader
        self.cache: TTLCache = cache if cache is not None else TTLCache()
        # {"key_id", "checked"} when the build is signed (checked: against `trust`)
        self.signature: dict | None = None

    # --- opening ------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike[str], *,
             embedding_model: str | None = None, verify: bool = True,
             trust: signing.Trust | None = None,
             allow_downgrade: bool = False) -> KnowledgePack:
        """Open a pack read-only.

        `embedding_model` (or env KPACK_EMBEDDING_MODEL) may name the manifest's model or
        a local copy of it; a different model raises EmbeddingModelError naming the one the
        pack needs. The build's files are checked against its manifest's checksums
        (packs/integrity.py); `verify=False` opens a pack without them, unchecked (a damaged
        database may then crash the process). `trust`: a public key (file or key object)
        or several; the manifest must carry a signature by one of them (packs/signing.py),
        and a pack folder whose `current` names a build older than another build beside it
        signed by a trusted key is refused (a rollback, packs/rollback.py) unless
        `allow_downgrade`. A signed pack opened without `trust` logs one warning, "signed
        by key ..., not checked" (`signature` says the same). PackFormatError (or a
        subclass) for a missing, unreadable, unknown-format, damaged, unverifiable,
        untrusted or rolled-back pack.
        """
        if trust is not None and not verify:
            raise ValueError("trust= checks the manifest's checksums: it cannot go with "
                             "verify=False")
        build_dir = resolve_build_dir(path)
        manifest = (signing.read_trusted_manifest(build_dir, trust) if trust is not None
                    else read_manifest(build_dir))
        if trust is not None and not allow_downgrade \
                and Path(path).expanduser().resolve() != build_dir.resolve():
            rollback.newer_trusted(build_dir, manifest, trust)  # a pack folder's current
        db_path = build_dir / fmt.DB_FILE
        if not db_path.exists():
            raise PackFormatError(f"{build_dir}: no {fmt.DB_FILE}; the build is incomplete")
        needed = manifest.embedding.model
        requested = embedding_model or os.environ.get(EMBEDDING_MODEL_ENV) or None
        if requested:
            given = canonical_model_id(requested)
            if given != needed:
                also = f" (a copy of {given})" if given != requested else ""
                source = ("the embedding model asked for" if embedding_model
                          else f"${EMBEDDING_MODEL_ENV}")
                raise EmbeddingModelError(
                    f"{build_dir}: this pack was built with embedding model {needed} "
                    f"(dim {manifest.embedding.dim}), not {requested}{also} ({source}); "
                    f"give {needed} or a local copy of it, or leave it out")
        if verify:
            integrity.check_on_open(build_dir, manifest.checksums)
        try:
            db = PackDB(db_path, has_languages=manifest.format_version >= 2,
                        keyword_vectors=manifest.keyword_vectors.present,
                        has_graph=manifest.format_version >= 3)
        except RuntimeError as exc:
            raise PackFormatError(f"{db_path}: cannot open the database: {exc}") from exc
        pack = cls(build_dir, manifest, db, requested or needed)
        unit_store.register(build_dir / fmt.TABLES_DIR / fmt.UNITS_FILE)
        pack.signature = signing.signature_status(build_dir, trust is not None)
        if pack.signature and not pack.signature["checked"]:
            log.warning("%s", signing.unchecked_note(build_dir, pack.signature))
        return pack

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        unit_store.unregister(self.path / fmt.TABLES_DIR / fmt.UNITS_FILE)
        self.db.close()
        self.cache.clear()

    def __enter__(self) -> KnowledgePack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- lazily loaded query-time state --------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        """The question encoder: the pack's shipped encoder (packs/encoder.py) unless
        KPACK_EMBED_BACKEND=torch, else the model loaded by name (embedding_model=, or the
        manifest's id). Loaded on first use; EmbeddingModelError says what to install."""
        with self._lock:
            if self._embedder is None:
                self._embedder = self._load_embedder()
            return self._embedder

    def _load_embedder(self) -> Embedder:
        if self.manifest.encoder.present and os.environ.get(BACKEND_ENV) != "torch":
            from packs.encoder import load_shipped

            return load_shipped(self.path, self.manifest)
        try:
            emb = Embedder(self._model_name)
        except EmbeddingModelError as exc:
            if self.manifest.encoder.present:
                raise
            from packs.encoder import no_encoder_message

            cause = (str(exc.__cause__ or exc).strip().splitlines() or ["unknown"])[0]
            raise EmbeddingModelError(no_encoder_message(self.path, self.manifest, cause)) from exc
        if emb.dim != self.manifest.embedding.dim:
            raise EmbeddingModelError(
                f"{self.path}: model {self._model_name!r} gives {emb.dim}-dim vectors; "
                f"the pack needs {self.manifest.embedding.model!r} "
                f"(dim {self.manifest.embedding.dim})")
        return emb

    @property
    def browse(self) -> Browse:
        """Read-only lookups for looking inside the pack (packs/browse.py): a section by id
        with its entities, facts and linked pages; an entity with its mentions and its
        neighbours, page by page. What `kpack explore` shows."""
        with self._lock:
            if self._browse is None:
                self._browse = Browse(self.db)
            return self._browse

    def embed_query(self, text: str) -> np.ndarray:
        """The question's unit vector (ONNX Runtime when the model allows; see
        packs.embedding)."""
        return self.embedder.encode_query(text)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """`embed_query` for several texts at once, one row each."""
        return self.embedder.encode_queries(texts)

    def background(self, fn, *args) -> Future:
        """Run fn(*args) in the pack's worker threads (a query's full-text search while
        its question is embedded); the Future raises what fn raised."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kpack")
            return self._pool.submit(fn, *args)

    def path_prefixes(self):
        """Directory prefixes of the pack's article URLs → article count (for the
        analyzer's path filter suggestions; loaded once)."""
        if self._path_prefixes is None:
            self._path_prefixes = filters.path_prefixes(self.db.article_urls())
        return self._path_prefixes

    def entity_index(self) -> dict[str, str]:
        if self._entity_index is None:
            self._entity_index = analysis.build_entity_index(self.db.entity_names())
        return self._entity_index

    def vocabulary(self) -> gate.Vocabulary:
        """The sections' vocabulary for the confidence gate (loaded once): tables/terms.json
        (format 3), else counted from the database's sections (older packs, and packs whose
        terms.json predates the pair hashes or was counted with other text rules than
        packs/text.py's TEXT_RULES_VERSION). A terms.json from before the code count gets
        it from the sections."""
        with self._lock:
            if self._vocabulary is None:
                self._vocabulary = self._read_vocabulary()
            return self._vocabulary

    def _read_vocabulary(self) -> gate.Vocabulary:
        """See packs/vocabulary.py: terms.json, or a recount kept per database checksum."""
        db_sum = self.manifest.checksums.get(fmt.DB_FILE, {}).get("sha256")
        return vocabulary.load(self.path / fmt.TABLES_DIR / fmt.TERMS_FILE,
                               self.db.section_texts, db_sum if isinstance(db_sum, str) else None)

    def title_index(self) -> titles.TitleIndex:
        """The pages' titles, for the title match (loaded once)."""
        with self._lock:
            if self._titles is None:
                self._titles = titles.TitleIndex(self.db.article_titles())
            return self._titles

    def fewshot_examples(self, qvec: np.ndarray, k: int) -> list[fewshot.Example]:
        """The k examples of fewshot/examples.jsonl most similar to the question."""
        if self._fewshot is None:
            examples = fewshot.load_examples(self.path / fmt.FEWSHOT_EXAMPLES)
            matrix = (np.stack([self.embed_query(e.question) for e in examples])
                      if examples else np.zeros((0, self.manifest.embedding.dim), np.float32))
            self._fewshot = (examples, matrix)
        examples, matrix = self._fewshot
        return fewshot.select(qvec, matrix, examples, k)

    # --- queries ------------------------------------------------------------------------
    def search(self, question: str, options: SearchOptions | None = None,
               **overrides: object) -> SearchResult:
        """Ranked sections, related sections, graph facts and the assembled context.

        Options: a SearchOptions and/or keyword overrides (see packs.options).
        Raises QuestionError for an empty question, OptionsError for unknown options.
        """
        opts = SearchOptions.build(options, **overrides)
        key = ("search", self.manifest.build_id, " ".join(question.split()), opts)
        if opts.use_cache:
            hit = self.cache.get(key)
            if hit is not None:
                return hit
        result = pipeline.search(self, question, opts)
        if opts.use_cache and not result.warnings:
            self.cache.put(key, result)
        return result

    def ask(self, question: str, options: SearchOptions | None = None, *,
            stream: bool = False, **overrides: object
            ) -> dict[str, object] | Iterator[str | dict[str, object]]:
        """Answer a question: a dict with answer, sources, citations (one per [n], each a
        verified span of its section: packs/citations.py), entities, facts, cypher_query,
        query_type and token_usage. Claude answers when ANTHROPIC_API_KEY is set; without it
        the answer is extractive (`query_type: "retrieval_only"`). With `stream=True`,
        returns an iterator of text chunks followed by that dict.
        Raises packs.llm.errors.SynthesisError when Claude rejects the request (auth, model).
        """
        opts = SearchOptions.build(options, **overrides)
        result = self.search(question, opts)
        if stream:
            return pipeline.ask_stream(self, result, opts)
        from packs.llm import client as llm_client

        key = ("ask", self.manifest.build_id, " ".join(question.split()), opts,
               llm_client.api_key() is not None, os.environ.get(llm_client.BASE_URL_ENV))
        if opts.use_cache:
            hit = self.cache.get(key)
            if hit is not None:
                return _copy_answer(hit)
        answer, cacheable = pipeline.ask(self, result, opts)
        if opts.use_cache and cacheable:
            self.cache.put(key, _copy_answer(answer))
        return answer

    def __repr__(self) -> str:
        m = self.manifest
        return (f"KnowledgePack({m.name!r}, build={m.build_id!r}, "
                f"sections={m.counts.sections}, model={m.embedding.model!r})")


def _copy_answer(answer: dict[str, object]) -> dict[str, object]:
    import copy

    return copy.deepcopy(answer)
