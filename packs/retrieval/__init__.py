"""The retrieval stages, one module each, as pure functions on plain values.

`packs.pipeline` composes them in this order: analysis → (expansion) → hybrid → gate →
(rerank) → graph → quality → fewshot → context → synthesis; `cache` wraps the whole.
"""
