"""The query encoder a pack carries: load it, after checking it is the one the build wrote.

A build writes `encoder/model.onnx` (the fp32 ONNX export of its embedding model)
and `encoder/tokenizer.json`, and records each file's sha256 and size in the manifest's
`encoder` block (`tasks/encoder_export.py`). `load_shipped` checks both against the manifest and
returns an `Embedder` running on ONNX Runtime with the manifest's prefixes, pooling and
window: the same vectors the build's query side would compute, with no model hub, no
cache, no torch and no sentence-transformers.

Failures are `EmbeddingModelError`s with one line saying what to do: a file that is
missing or does not match its digest (a damaged copy: reinstall or rebuild), or a pack
that carries no encoder (`no_encoder_message`: what to install, or which model to pass).
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from packs import format as fmt
from packs.embedding import Embedder, EmbeddingModelError, ModelSpec
from packs.extras import BUILD_INSTALL
from packs.manifest import Manifest

_LOCK = threading.Lock()
# (model file, its sha256) → loaded encoder: packs opened again in one process share it.
_LOADED: dict[tuple[str, str], object] = {}
_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def verify(build_dir: Path, manifest: Manifest) -> None:
    """Check every encoder file against its size and sha256 in the manifest."""
    files = manifest.encoder.files
    for rel in (fmt.ENCODER_MODEL, fmt.ENCODER_TOKENIZER):
        if rel not in files:
            raise EmbeddingModelError(
                f"{build_dir}: the manifest lists no {rel}; the pack is damaged: reinstall "
                "or rebuild it")
    for rel, digest in files.items():
        path = build_dir / rel
        if not path.is_file():
            raise EmbeddingModelError(
                f"{build_dir}: {rel} is missing; the pack is incomplete: reinstall or rebuild it")
        if path.stat().st_size != digest.bytes or sha256_file(path) != digest.sha256:
            raise EmbeddingModelError(
                f"{path}: does not match its sha256 in the manifest; the pack is damaged: "
                "reinstall or rebuild it")


def load_shipped(build_dir: Path, manifest: Manifest) -> Embedder:
    """The pack's own query encoder as an Embedder (backend "onnx"); verified once per
    file digest per process. EmbeddingModelError for a damaged encoder, ImportError never
    (onnxruntime and tokenizers are runtime requirements)."""
    enc, emb = manifest.encoder, manifest.embedding
    model_file = build_dir / fmt.ENCODER_MODEL
    digest = enc.files.get(fmt.ENCODER_MODEL)
    key = (str(model_file.resolve()), digest.sha256 if digest else "")
    with _LOCK:
        encoder = _LOADED.get(key)
        if encoder is None:
            verify(build_dir, manifest)
            from packs.onnx_backend import OnnxEncoder

            encoder = OnnxEncoder.from_files(model_file, build_dir / fmt.ENCODER_DIR,
                                             enc.pooling, enc.max_seq_length)
            _LOADED[key] = encoder
    if encoder.dim != emb.dim:
        raise EmbeddingModelError(
            f"{build_dir}: the shipped encoder gives {encoder.dim}-dim vectors, the pack holds "
            f"{emb.dim}-dim ones; the pack is damaged: rebuild it")
    spec = ModelSpec(id=emb.model, query_prefix=emb.query_prefix,
                     document_prefix=emb.document_prefix, gate_threshold=emb.gate_threshold)
    return Embedder.from_encoder(spec, encoder, load_from=str(model_file))


def no_encoder_message(build_dir: Path, manifest: Manifest, cause: str) -> str:
    """One line for a pack without an encoder whose model cannot be loaded here."""
    why = manifest.encoder.reason or "built before packs carried their query encoder"
    return (f"{build_dir}: this pack carries no query encoder ({why}) and its model "
            f"{manifest.embedding.model!r} cannot be loaded here ({cause}): install "
            f"sentence-transformers with {BUILD_INSTALL}, or pass embedding_model= "
            "(--embedding-model) a local folder holding that model")
