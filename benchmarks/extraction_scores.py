"""Scores of extracted page text against gold text (benchmarks/html_extraction.py):
Markdown syntax removed, word-bag precision/recall/F1, the article-extraction-benchmark's
shingle F1, and how many of a page's gold blocks an extraction kept."""

from __future__ import annotations

import re
import statistics
from collections import Counter

from packs.markdown import line_kinds

_WORD = re.compile(r"\w+")
_MD_LINK = re.compile(r"!?\[((?:\\.|[^\]\\])*)\]\([^()\s]*(?:\([^()\s]*\))?(?:\s+\"[^\"]*\")?\s*\)")
_ORDERED = re.compile(r"^(\s*)\d+[.)]\s+", re.M)
_UNDERSCORE_EMPHASIS = re.compile(r"(?<!\w)_+|_+(?!\w)")


def markdown_text(markdown: str) -> str:
    """Markdown with its syntax removed, for scoring (see the module docstring)."""
    lines = [line for line, kind, _ in line_kinds(markdown.splitlines())
             if kind not in ("open", "close")]
    text = _MD_LINK.sub(lambda m: m.group(1), "\n".join(lines))
    text = _ORDERED.sub(r"\1", text)
    return _UNDERSCORE_EMPHASIS.sub("", text)


def tokens(text: str) -> list[str]:
    return [t.lower() for t in _WORD.findall(text)]


def bag_scores(pred: list[str], gold: list[str]) -> tuple[float, float, float]:
    """(precision, recall, F1) of multiset token overlap; all 0 when either side is empty."""
    if not pred or not gold:
        return 0.0, 0.0, 0.0
    tp = sum((Counter(pred) & Counter(gold)).values())
    p, r = tp / len(pred), tp / len(gold)
    return p, r, (2 * p * r / (p + r) if tp else 0.0)


def _shingles(text: str, n: int = 4) -> Counter:
    toks = _WORD.findall(text)  # case-sensitive, as in the benchmark's evaluate.py
    return Counter(tuple(toks[i : i + n]) for i in range(max(1, len(toks) - n + 1)) if toks[i : i + n])


def aeb_tp_fp_fn(pred: str, gold: str) -> tuple[float, float, float]:
    """The benchmark's per-page shingle counts, normalised to sum to 1."""
    ps, gs = _shingles(pred), _shingles(gold)
    tp = sum((ps & gs).values())
    fp = sum((ps - gs).values())
    fn = sum((gs - ps).values())
    total = tp + fp + fn
    return (tp / total, fp / total, fn / total) if total else (0.0, 0.0, 0.0)


def aeb_f1(rows: list[tuple[float, float, float]]) -> float:
    def prec(tp: float, fp: float, fn: float) -> float:
        return 1.0 if fp == fn == 0 else (0.0 if tp == fp == 0 else tp / (tp + fp))

    def rec(tp: float, fp: float, fn: float) -> float:
        return 1.0 if fp == fn == 0 else (0.0 if tp == fn == 0 else tp / (tp + fn))

    precisions = [prec(*row) for row in rows if row[0] + row[1] > 0]
    recalls = [rec(*row) for row in rows if row[0] + row[2] > 0]
    p = statistics.mean(precisions) if precisions else 0.0
    r = statistics.mean(recalls) if recalls else 0.0
    return 2 * p * r / (p + r) if p + r else 0.0


def markdown_blocks(markdown: str) -> tuple[list[str], list[str]]:
    """(heading texts of any level, fenced code block contents), fences excluded from headings."""
    headings: list[str] = []
    fences: list[str] = []
    block: list[str] | None = None
    for line, kind, _ in line_kinds(markdown.splitlines()):
        if kind == "open":
            block = []
        elif kind == "close" and block is not None:
            fences.append("\n".join(block))
            block = None
        elif block is not None:
            block.append(line)
        elif m := re.match(r"#{1,6} (.*)", line):
            headings.append(m.group(1))
    if block is not None:
        fences.append("\n".join(block))
    return headings, fences


def _key(text: str) -> str:
    return " ".join(tokens(markdown_text(text)))


def kept(expected: list[str], found: list[str], *, inside: bool) -> int:
    """How many `expected` texts reappear in `found` (as equal token sequences; or, with
    `inside`, contained in one), each found item used once."""
    pool = [f" {_key(f)} " for f in found]
    count = 0
    for text in expected:
        key = f" {_key(text)} "
        for i, cand in enumerate(pool):
            if key.strip() and (key in cand if inside else key == cand):
                count += 1
                del pool[i]
                break
    return count


# --- runs ----------------------------------------------------------------------------------
