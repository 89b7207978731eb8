"""Scores a person can read, and one entry per section in a result list.

The fused ranking's own score is a reciprocal-rank sum (RRF: about 0.016-0.033 for the
first result whatever the question), which reads as "very unsure", and the order a reader
sees is not its order (distinct pages first, per-page caps, related sections after). So:

- `fusion_score` keeps the raw score each section was ranked by: the fused score for
  primary sections (RRF by default, min-max or weighted fusion when asked, the cross-pack
  RRF in a PackSet), the cosine similarity for related sections reached through links;
- `score` is a 0-1 value that means the same across questions and packs:

      score_i = confidence x relative_i, then made non-increasing in the order shown

  where `confidence` is the calibrated probability of the confidence gate that the pack
  holds the answer (`SearchResult.gate["confidence"]`, computed for every search, also
  when a plain similarity threshold decides), and `relative_i` is the section's raw score
  over the best primary section's (for a related section: its similarity over the best
  primary section's similarity), capped at 1. So the first result shows the gate's
  confidence ("0.93: the pack very likely answers this") and later ones no more than it.

`dedupe` keeps one entry per section: a long section is stored as several chunks with the
same page and heading path, which a reader sees as the same section twice; only its best
ranked chunk stays (a related section already among the primary ones goes too).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from packs.result import RankedSection


def _key(s: RankedSection) -> tuple[str | None, str, str]:
    return (s.pack, s.url, s.heading_path)


def dedupe(primary: Sequence[RankedSection], related: Sequence[RankedSection]
           ) -> tuple[list[RankedSection], list[RankedSection]]:
    """(primary, related) with each section (pack, page and heading path) once, at its
    first place: primary before related."""
    seen: set[tuple[str | None, str, str]] = set()
    out: tuple[list[RankedSection], list[RankedSection]] = ([], [])
    for part, sections in zip(out, (primary, related)):
        for s in sections:
            if _key(s) not in seen:
                seen.add(_key(s))
                part.append(s)
    return out


def readable(primary: Sequence[RankedSection], related: Sequence[RankedSection],
             confidence: Callable[[RankedSection], float | None]) -> None:
    """Set `fusion_score` (the raw score, kept when already set) and the 0-1 `score` of
    every section, in place (see the module docstring). `confidence(section)` is the gate
    confidence of the section's pack; None (no verdict) counts as 1."""
    for s in primary:
        if s.fusion_score is None:
            s.fusion_score = float(s.score)
    for s in related:
        if s.fusion_score is None:
            s.fusion_score = float(s.similarity if s.similarity is not None else s.score)
    top = max((s.fusion_score or 0.0 for s in primary), default=0.0)
    top_sim = max((s.similarity or 0.0 for s in primary), default=0.0)
    ceiling = 1.0
    shown = [(s, False) for s in primary] + [(s, True) for s in related]
    for s, is_related in shown:
        if is_related:
            rel = (s.similarity or 0.0) / top_sim if top_sim > 0 else 0.0
        else:
            rel = (s.fusion_score or 0.0) / top if top > 0 else 0.0
        conf = confidence(s)
        value = (1.0 if conf is None else float(conf)) * max(0.0, min(1.0, rel))
        ceiling = min(ceiling, value)
        s.score = round(ceiling, 4)
