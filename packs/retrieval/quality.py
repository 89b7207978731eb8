"""Content quality filter, always on when a question is given.

score = 0.0 under 20 words; otherwise
    min(0.8, 0.2 + words/200 * 0.6) + min(0.2, keyword_overlap * 0.2)
where keyword_overlap is the fraction of the question's keywords (stop words excluded) that
occur in the text. Sections below the threshold (0.3) are left out of the context; if that
leaves nothing, the caller falls back to the full text of the selected articles (a global
fallback only, never per section). The pipeline keeps the section of a page the question
names by title whatever its score (packs.retrieval.titles).
"""

from __future__ import annotations

from packs import text as text_rules

MIN_WORDS = 20
DEFAULT_THRESHOLD = 0.3

# The stop words are one list for the query side (packs/text.py).
STOP_WORDS = text_rules.STOP_WORDS

def keywords(text: str) -> set[str]:
    """The text's plain tokens (packs/text.py `tokens`) that are not stop words."""
    return {t for t in text_rules.tokens(text) if t not in STOP_WORDS}


# The keyword part of the score: the share of the question's keywords in the text, times
# this, so at most this.
KEYWORD_PART = 0.2


def _length_score(words: int) -> float:
    return min(0.8, 0.2 + words / 200 * 0.6)


def quality_score(text: str, question: str | set[str], word_count: int | None = None) -> float:
    """The score above; `word_count` (precomputed at build time) saves a split, and the
    question may be given as its `keywords` (one tokenisation for many sections)."""
    words = word_count if word_count is not None else len(text.split())
    if words < MIN_WORDS:
        return 0.0
    q = keywords(question) if isinstance(question, str) else question
    overlap = len(q & keywords(text)) / len(q) if q else 0.0
    return _length_score(words) + min(KEYWORD_PART, overlap * KEYWORD_PART)


def passes(score: float, threshold: float = DEFAULT_THRESHOLD) -> bool:
    return score >= threshold


def keeps(text: str, question_keywords: set[str], word_count: int,
          threshold: float = DEFAULT_THRESHOLD) -> bool:
    """passes(quality_score(...)), reading the text only when its length alone does not
    decide (20-33 words at the default threshold): a search checks every candidate."""
    if word_count < MIN_WORDS:
        return passes(0.0, threshold)
    length = _length_score(word_count)
    if passes(length, threshold):
        return True
    if not passes(length + KEYWORD_PART, threshold):
        return False
    return passes(quality_score(text, question_keywords, word_count), threshold)
