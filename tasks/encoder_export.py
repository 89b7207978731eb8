"""Put the query encoder into a build: the ONNX export of its model and the tokenizer.

`write_encoder(build_dir, model, precision)` makes sure the model's ONNX export exists
(exported once with torch into the cache, as the embed stage does), copies it to
`encoder/model.onnx` and the model's `tokenizer.json` to
`encoder/tokenizer.json`, and returns the manifest's `EncoderInfo` with each file's sha256.
Files are hard-linked from the cache when it is on the same file system (a pack's
encoder is 90 MB for MiniLM, 440 MB for BGE-base, written once per build otherwise); the
cache replaces files with `os.replace`, never in place, so a link never changes under a
published build.

precision: "fp32" (default) or "none" (pack.toml opt-out for teams that share one model
across packs: the manifest says so and the query side loads the model by name). An int8
query encoder was measured and is not offered (see PRECISIONS). A model that does not fit
the ONNX recipe (extra modules such as Dense layers) gets no encoder; the manifest says why
and the query side needs sentence-transformers.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from packs import format as fmt
from packs.embedding import local_folder, resolve_model
from packs.encoder import sha256_file
from packs.manifest import EncoderFile, EncoderInfo
from packs.onnx_backend import cache_root, ensure_export, layout

log = logging.getLogger("kpack.publish")

# int8 (dynamic quantization) was measured and not offered: it changed the top-10 of the
# Kubernetes questions too much (benchmarks/query_encoder.py, BENCHMARKS.md).
PRECISIONS = ("fp32", "none")
OPT_OUT_REASON = ('opted out in pack.toml (query_encoder = "none"): the query side loads '
                  "the model by name")


def _place(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dest)
    except OSError:  # another file system, or links not allowed: copy
        shutil.copyfile(src, dest)


def write_encoder(build_dir: Path, model: str, precision: str = "fp32") -> EncoderInfo:
    """Write `build_dir/encoder/` for `model` (an id or local folder) and describe it.

    Raises ValueError for an unknown precision, or when the shipped encoder does not
    reproduce the build's vectors. A model that cannot be exported here (no torch/onnx,
    the exporter fails) gets no encoder, with the reason in the manifest and a warning:
    the pack still works where sentence-transformers is installed.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"query_encoder {precision!r}: use one of {', '.join(PRECISIONS)}")
    if precision == "none":
        return EncoderInfo(reason=OPT_OUT_REASON)
    resolved = resolve_model(model)
    folder = local_folder(resolved.load_from)
    fits = layout(folder) if folder is not None else None
    if fits is None:
        reason = (f"{resolved.spec.id} does not fit the ONNX recipe (Transformer, mean or CLS "
                  "pooling, Normalize, tokenizer.json): the query side needs sentence-transformers")
        log.warning("no query encoder shipped: %s", reason)
        return EncoderInfo(reason=reason)
    pooling, max_len = fits
    try:
        source = ensure_export(folder)
    except (ImportError, RuntimeError, ValueError, OSError) as exc:  # e.g. OnnxExporterError
        reason = (f"the ONNX export of {resolved.spec.id} failed ({type(exc).__name__}: "
                  f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}): the query "
                  "side needs sentence-transformers")
        log.warning("no query encoder shipped: %s", reason)
        return EncoderInfo(reason=reason)
    _place(source, build_dir / fmt.ENCODER_MODEL)
    _place(folder / "tokenizer.json", build_dir / fmt.ENCODER_TOKENIZER)
    files = {rel: EncoderFile(sha256=sha256_file(build_dir / rel),
                              bytes=(build_dir / rel).stat().st_size)
             for rel in (fmt.ENCODER_MODEL, fmt.ENCODER_TOKENIZER)}
    info = EncoderInfo(present=True, runtime="onnxruntime", precision=precision,
                       pooling=pooling, max_seq_length=max_len, files=files)
    _check_same_vectors(build_dir, info, model)
    return info


PROBE = "How do I roll back a deployment when the new version fails its health checks?"


def _check_same_vectors(build_dir: Path, info: EncoderInfo, model: str) -> None:
    """The shipped encoder must give the vectors the build embedded with (to ONNX/torch
    rounding); a mismatch would silently degrade every query of the pack."""
    import numpy as np

    from packs.embedding import Embedder
    from packs.onnx_backend import OnnxEncoder

    built = Embedder(model)
    shipped = OnnxEncoder.from_files(build_dir / fmt.ENCODER_MODEL, build_dir / fmt.ENCODER_DIR,
                                     info.pooling, info.max_seq_length)
    text = built.spec.query_prefix + PROBE
    gap = float(np.abs(shipped.encode([text])[0] - built.encode_query(PROBE)).max())
    if gap > 1e-3:
        raise ValueError(f"the shipped query encoder differs from the build's model "
                         f"{built.model_id!r} (max |diff| {gap:.2e}); delete the ONNX cache "
                         f"{cache_root() / 'onnx'} and rebuild")
