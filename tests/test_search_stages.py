"""The query side's stage lists (issue 46): dedupe, readable scores and the context are
the last stages of SEARCH, a PackSet's fan-out ends with the same TAIL, and a gated search
runs that tail only. Plain functions on hand-made sections; no pack is opened."""

from __future__ import annotations

from packs import pipeline
from packs.options import SearchOptions
from packs.packset import FAN_OUT
from packs.result import RankedSection
from packs.retrieval.state import QueryState


def _section(n: int, score: float, url: str = "https://x.test/a", heading: str = "A") -> RankedSection:
    return RankedSection(id=f"s{n}", article_id="a", url=url, title="T", heading_path=heading,
                         content=f"Section {n} says something useful.", score=score,
                         similarity=0.6, word_count=5)


def test_search_ends_with_dedupe_scores_and_context() -> None:
    names = [s.name for s in pipeline.SEARCH]
    assert names[-3:] == ["dedupe", "scores", "context"]
    assert pipeline.SEARCH[-3:] == pipeline.TAIL
    assert names.index("gate") < names.index("primary") < names.index("dedupe")
    # only the tail finishes a gated search
    assert [s.name for s in pipeline.SEARCH if s.finishes] == ["dedupe", "scores", "context"]


def test_a_packset_fans_out_then_ends_with_the_same_tail() -> None:
    assert [s.name for s in FAN_OUT] == ["packs", "gate", "fusion", "dedupe", "scores",
                                         "context"]
    assert FAN_OUT[-3:] == pipeline.TAIL


def _state(gated: bool) -> QueryState:
    st = QueryState("what does it say?", SearchOptions())
    st.verdict = {"confidence": 0.8}
    st.primary = [_section(1, 0.03), _section(2, 0.02),  # s2: s1's page and heading again
                  _section(3, 0.015, heading="B")]
    st.related = [_section(4, 0.5, heading="B")]  # already a primary section
    st.gated = gated
    return st


def test_the_tail_dedupes_scores_and_assembles_the_context() -> None:
    st = pipeline.run(_state(gated=False), None, pipeline.TAIL)
    assert [s.id for s in st.primary] == ["s1", "s3"] and st.related == []
    assert st.primary[0].score == 0.8  # the gate's confidence for the first section
    assert st.primary[1].score == 0.8 * 0.015 / 0.03
    assert st.primary[0].fusion_score == 0.03  # the raw score, kept
    assert "Section 1 says" in st.context.text and "Section 3 says" in st.context.text
    assert set(st.timer.ms) == {"dedupe", "scores", "context"}


def test_a_gated_search_skips_to_the_tail() -> None:
    ran: list[str] = []

    def gate(st: QueryState, reader: object) -> None:
        ran.append("gate")
        st.gated = True

    stages = (pipeline.Stage("gate", gate),
              pipeline.Stage("after", lambda st, reader: ran.append("after")),
              *pipeline.TAIL)
    st = _state(gated=False)
    pipeline.run(st, None, stages)
    assert ran == ["gate"]  # the stage after the gate did not run ...
    assert set(st.timer.ms) == {"gate", "dedupe", "scores", "context"}  # ... the tail did
    assert st.context.text == "" and st.context.tokens == 0
