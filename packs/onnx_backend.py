"""ONNX Runtime encoder for sentence-transformers folders: same vectors, less overhead.

A sentence-transformers model is a transformer, a pooling step and a normalisation. Here
the transformer is exported once with `torch.onnx` to a cache folder and run with ONNX
Runtime; tokenisation uses the folder's `tokenizer.json` (the Rust `tokenizers` library),
and pooling (mean or CLS, from `1_Pooling/config.json`) and normalisation are numpy. Once
the export exists, encoding imports neither torch nor sentence-transformers, which cuts
start-up and per-query overhead on small CPUs. Vectors match the torch path to ~1e-6
(checked in tests/test_embedding.py).

`OnnxEncoder.load` returns None when a folder does not fit this recipe (no tokenizer.json,
an unsupported pooling mode, extra modules such as Dense layers), or when no export exists
and none can be made (no torch/onnx installed, or the exporter failed): the caller then uses
sentence-transformers itself. A published pack carries its export (`tasks/encoder_export.py`,
read back by `packs/encoder.py`), so the query side needs no export at all.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import warnings
from pathlib import Path

import numpy as np

log = logging.getLogger("kpack.embedding")

CACHE_ENV = "KPACK_CACHE_DIR"
# Intra-op threads of one encoder (0 or unset: ONNX Runtime's default, one per core). A
# local Dask cluster of N worker processes sets it to cores / N, so that the workers do
# not fight over the cores.
THREADS_ENV = "KPACK_EMBED_THREADS"
# Padded tokens per encoder call. Attention memory grows with batch x length^2: 64 texts of
# 256 tokens held ~1.9 GB and ran slower on 2 cores than batches of 8 (~0.4 GB), while
# short texts still go up to the caller's batch size at a time.
TOKENS_PER_BATCH = 2048
EXPORT_VERSION = "onnx-v1"
_EXPORT_LOCK = threading.Lock()
_SUPPORTED_MODULES = {
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
}


def cache_root() -> Path:
    base = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "knowledge-packs"
    )
    return Path(base)


def _weights_file(folder: Path) -> Path | None:
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (folder / name).is_file():
            return folder / name
    return None


def fingerprint(folder: Path) -> str:
    """Cheap identity of a model folder: config, weights size and their first megabyte."""
    weights = _weights_file(folder)
    h = hashlib.sha256(EXPORT_VERSION.encode())
    h.update((folder / "config.json").read_bytes())
    if weights is not None:
        h.update(str(weights.stat().st_size).encode())
        with weights.open("rb") as f:
            h.update(f.read(1 << 20))
    return h.hexdigest()[:16]


def _layout(folder: Path) -> tuple[str, int] | None:
    """(pooling mode, max_seq_length) when the folder fits the recipe, else None."""
    modules_file = folder / "modules.json"
    pooling_file = folder / "1_Pooling" / "config.json"
    if not (modules_file.is_file() and pooling_file.is_file()
            and (folder / "tokenizer.json").is_file() and _weights_file(folder)):
        return None
    modules = json.loads(modules_file.read_text())
    if not all(m.get("type") in _SUPPORTED_MODULES for m in modules):
        return None
    pooling = json.loads(pooling_file.read_text())
    if pooling.get("pooling_mode_mean_tokens"):
        mode = "mean"
    elif pooling.get("pooling_mode_cls_token"):
        mode = "cls"
    else:
        return None
    if sum(bool(v) for k, v in pooling.items() if k.startswith("pooling_mode_")) != 1:
        return None
    st_config = folder / "sentence_bert_config.json"
    max_len = (json.loads(st_config.read_text()).get("max_seq_length", 512)
               if st_config.is_file() else 512)
    return mode, int(max_len)


def export(folder: Path, target: Path) -> None:
    """Export the folder's transformer to `target` (written atomically)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(folder)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids")
             if n in tokenizer.model_input_names]
    sample = tokenizer(["an example", "a somewhat longer example sentence"], padding=True,
                       return_tensors="pt")

    class LastHidden(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: torch.Tensor) -> torch.Tensor:
            return self.inner(**dict(zip(names, args, strict=True))).last_hidden_state

    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / "model.onnx"
        dynamic = {n: {0: "batch", 1: "seq"} for n in (*names, "last_hidden_state")}
        with torch.no_grad(), warnings.catch_warnings():
            # Tracer warnings about shape-dependent branches: the dynamic axes cover them,
            # and tests/test_embedding.py checks the vectors against sentence-transformers.
            warnings.simplefilter("ignore")
            torch.onnx.export(
                LastHidden(model), tuple(sample[n] for n in names), str(out),
                input_names=names, output_names=["last_hidden_state"], dynamic_axes=dynamic,
                opset_version=17, dynamo=False,
            )
        os.replace(out, target)


def layout(folder: Path) -> tuple[str, int] | None:
    """(pooling mode, max_seq_length) when a sentence-transformers folder fits the recipe
    (Transformer → Pooling → Normalize, tokenizer.json, mean or CLS pooling), else None."""
    return _layout(folder)


def export_path(folder: Path) -> Path:
    """Where the ONNX export of `folder` lives in the cache (it may not exist yet)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", folder.name)[:40]
    return cache_root() / "onnx" / f"{slug}-{fingerprint(folder)}" / "model.onnx"


def ensure_export(folder: Path) -> Path:
    """The cached ONNX export of `folder`, exported now (with torch) if missing.
    ImportError when torch/transformers/onnx are not installed and no export exists."""
    target = export_path(folder)
    with _EXPORT_LOCK:
        if not target.is_file():
            log.info("exporting %s to ONNX at %s (once per model)", folder, target)
            export(folder, target)
    return target


class OnnxEncoder:
    """Tokenise → ONNX transformer → pool → normalise, in batches sorted by length."""

    def __init__(self, model_path: Path, folder: Path, pooling: str, max_len: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        threads = os.environ.get(THREADS_ENV, "").strip()
        if threads.isdigit() and int(threads) > 0:
            opts.intra_op_num_threads = int(threads)
        self.session = ort.InferenceSession(str(model_path), opts,
                                            providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_len)
        # A tokenizer.json may pad every text to a fixed length (all-MiniLM-L6-v2's pads
        # to 128 tokens, so a 15-token question cost 128 tokens of the model's time):
        # `_run` pads each batch to its longest text instead.
        self.tokenizer.no_padding()
        self.pooling = pooling
        self.max_seq_length = max_len
        self.dim = int(self.session.get_outputs()[0].shape[-1])

    @classmethod
    def load(cls, folder: Path) -> OnnxEncoder | None:
        """An encoder for `folder`, exporting it on first use; None if it doesn't fit, or
        if the export is not possible here (no torch/onnx, or the exporter failed: the
        caller then falls back to sentence-transformers, logged)."""
        layout = _layout(folder)
        if layout is None:
            return None
        try:
            import onnxruntime  # noqa: F401
            from tokenizers import Tokenizer  # noqa: F401
        except ImportError:
            return None
        try:
            target = ensure_export(folder)
        except ImportError as exc:  # the runtime install: no torch / onnx to export with
            log.info("no ONNX export of %s and none can be made here (%s)", folder, exc)
            return None
        except (RuntimeError, ValueError, OSError) as exc:  # e.g. OnnxExporterError
            log.warning("ONNX export of %s failed (%s: %s); using sentence-transformers",
                        folder, type(exc).__name__, exc)
            return None
        return cls(target, folder, *layout)

    @classmethod
    def from_files(cls, model_path: Path, tokenizer_folder: Path, pooling: str,
                   max_len: int) -> OnnxEncoder:
        """An encoder from an exported model and a folder holding tokenizer.json (a pack's
        shipped encoder). Raises ImportError without onnxruntime/tokenizers."""
        return cls(model_path, tokenizer_folder, pooling, max_len)

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Unit vectors, one row per text. Texts are tokenised once, sorted by length and
        cut into batches of at most `batch_size` texts and TOKENS_PER_BATCH padded
        tokens, so long texts go a few at a time (less memory, less time on a CPU) and
        short ones many at a time."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encs = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(encs[i].ids))
        start = 0
        while start < len(order):
            width = max(len(encs[order[start]].ids), 1)
            size = max(1, min(batch_size, TOKENS_PER_BATCH // width))
            idx = order[start : start + size]
            start += size
            out[idx] = self._run([encs[i] for i in idx])
        return out

    def _run(self, encs: list) -> np.ndarray:
        width = max(len(e.ids) for e in encs)
        feed = {name: np.zeros((len(encs), width), dtype=np.int64) for name in self.inputs}
        for row, e in enumerate(encs):
            n = len(e.ids)
            feed["input_ids"][row, :n] = e.ids
            feed["attention_mask"][row, :n] = e.attention_mask
            if "token_type_ids" in feed:
                feed["token_type_ids"][row, :n] = e.type_ids
        hidden = self.session.run(None, feed)[0]
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = feed["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)
