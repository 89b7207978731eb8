"""The last stages of every search, one pack's or a PackSet's fan-out: each section once,
scores a person can read, and the context under the token budget (packs/pipeline.py's
TAIL). They run on a gated search too, which they finish with no sections and an empty
context.

Each is a function of (state, reader) like the other stages; none reads the pack, so a
PackSet (packs/packset.py) runs them on its fused state unchanged.
"""

from __future__ import annotations

from packs.retrieval import context as context_mod
from packs.retrieval import scores as shown_scores
from packs.retrieval.state import QueryState


def dedupe(st: QueryState, reader: object) -> None:
    """Each section (pack, page and heading path) once, at its first place."""
    st.primary, st.related = shown_scores.dedupe(st.primary, st.related)


def scores(st: QueryState, reader: object) -> None:
    """Scores a person can read (packs/retrieval/scores.py): the gate's confidence of the
    section's pack (`st.confidence`, a PackSet's per pack; else this search's verdict)
    times its score relative to the first section's."""
    confidence = st.confidence
    if confidence is None:
        verdict = st.verdict.get("confidence")
        confidence = lambda _: verdict  # noqa: E731 - one pack, one verdict
    shown_scores.readable(st.primary, st.related, confidence)


def empty_context() -> context_mod.Context:
    """The context of a gated search: none."""
    return context_mod.Context(text="", tokens=0, truncated=False)


def context(st: QueryState, reader: object) -> None:
    """The context of the chosen sections, related sections and facts under the token
    budget; none for a gated search."""
    if st.gated:
        st.context = empty_context()
    else:
        st.context = context_mod.assemble(st.primary, st.related, st.facts,
                                          st.opts.token_budget, st.opts.answer_reserve)
