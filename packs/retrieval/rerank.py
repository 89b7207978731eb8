"""Cross-encoder rerank (opt-in): a sentence-transformers CrossEncoder scores
(question, section) pairs. Models are loaded once per name and shared by every pack; a load
failure turns the stage into a passthrough and warns once per model name.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

log = logging.getLogger("kpack.query")

_lock = threading.Lock()
_models: dict[str, object] = {}
_failed: dict[str, str] = {}


def load(name: str):
    """The shared CrossEncoder for `name`, or None if it cannot be loaded (warned once)."""
    with _lock:
        if name in _models:
            return _models[name]
        if name in _failed:
            return None
        try:
            from sentence_transformers import CrossEncoder

            model = CrossEncoder(name, device="cpu")
        except (OSError, ValueError, RuntimeError, ImportError) as exc:
            _failed[name] = f"{type(exc).__name__}: {exc}"
            log.warning("cross-encoder %r could not be loaded (%s); reranking is a passthrough",
                        name, _failed[name].splitlines()[0][:200])
            return None
        _models[name] = model
        return model


def load_error(name: str) -> str | None:
    return _failed.get(name)


def scores(model, question: str, texts: Sequence[str], batch_size: int = 32) -> list[float]:
    """One relevance score per text (higher is better)."""
    if not texts:
        return []
    out = model.predict([(question, t) for t in texts], batch_size=batch_size,
                        show_progress_bar=False)
    return [float(x) for x in out]


def order(score_list: Sequence[float]) -> list[int]:
    """Indices by descending score, stable on ties."""
    return sorted(range(len(score_list)), key=lambda i: -score_list[i])
