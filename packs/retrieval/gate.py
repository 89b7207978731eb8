"""Confidence gate: when the best vector similarity is below the pack's threshold, the
question is answered without pack context (`query_type: "confidence_gated_fallback"`).

The threshold is per embedding model (manifest.embedding.gate_threshold, calibrated by the
evaluation); an explicit option overrides it; 0.5 when neither is known.
"""

from __future__ import annotations

DEFAULT_THRESHOLD = 0.5


def threshold(option: float | None, manifest_value: float | None) -> float:
    if option is not None:
        return float(option)
    if manifest_value is not None:
        return float(manifest_value)
    return DEFAULT_THRESHOLD


def passes(best_similarity: float | None, limit: float) -> bool:
    """True when retrieval is confident enough to use the pack's content."""
    return best_similarity is not None and best_similarity >= limit
