"""Evaluation questions: the questions file, gold sources and how a section matches one.

Questions file: JSONL, one `{id, question, gold_sources[], answer?, kind?}` per line. A gold
source is a string, `URL` (page level) or `URL#heading` (section level), or an object
`{"source": "URL[#heading]", "grade": 2}` for graded relevance (a string has grade 1).

Matching (`matches`): a section matches a gold source when their canonical URLs are equal
(scheme and host lower-cased, default port, fragment, trailing slash and index/extension
suffixes dropped) and, for `URL#heading`, the heading's slug equals the slug of the
section's title or of a suffix of its heading path ("Pruning > Suckers" and "suckers" both
match the section "Growing tomatoes > Pruning > Suckers"; slugs make "#soil-preparation"
and "Soil preparation" the same).

Few-shot leakage: `check_no_leak` refuses a questions file any of whose questions is in
the pack's fewshot/examples.jsonl (compared after case and whitespace folding).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from packs import format as fmt
from packs import text as text_rules
from packs.urls import canonical_url


class QuestionsFileError(ValueError):
    """The questions file is missing or malformed; the message names file:line."""


class EvalLeakError(ValueError):
    """Eval questions appear in the pack's few-shot pool: their answers would leak."""


# --- gold sources and matching -------------------------------------------------------

_SLUG = re.compile(r"[^\w]+")
HEADING_SEP = " > "


def slug(text: str) -> str:
    """Lower-case words joined by '-': "Soil Preparation" and "soil-preparation" agree."""
    return _SLUG.sub("-", text.casefold()).strip("-_")


@dataclass(frozen=True)
class Gold:
    source: str  # as written
    url: str  # canonical
    heading: tuple[str, ...] | None  # slugs of the heading path suffix, None = page level
    grade: float = 1.0


def parse_gold(entry: object) -> Gold:
    """A gold source from a string or {"source", "grade"}; ValueError says what's wrong."""
    grade: object = 1.0
    if isinstance(entry, dict):
        source, grade = entry.get("source"), entry.get("grade", 1.0)
    else:
        source = entry
    if not isinstance(source, str) or not urlsplit(source).scheme:
        raise ValueError(f"gold source {entry!r} is not a URL or URL#heading")
    if not isinstance(grade, (int, float)) or isinstance(grade, bool) or grade <= 0:
        raise ValueError(f"gold source {source!r}: grade must be a positive number")
    url, _, heading = source.partition("#")
    parts = tuple(slug(p) for p in heading.split(">")) if heading.strip() else None
    return Gold(source=source, url=canonical_url(url), heading=parts, grade=float(grade))


def matches(url: str, title: str, heading_path: str, gold: Gold) -> bool:
    """Whether a section (its URL, title, heading path) is the gold source (module doc)."""
    if canonical_url(url) != gold.url:
        return False
    if gold.heading is None:
        return True
    path = [slug(p) for p in heading_path.split(HEADING_SEP)] if heading_path else []
    n = len(gold.heading)
    return (n == 1 and slug(title) == gold.heading[0]) or tuple(path[-n:]) == gold.heading


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    gold: tuple[Gold, ...]
    answer: str | None = None
    kind: str | None = None

    @property
    def section_level(self) -> bool:
        return any(g.heading is not None for g in self.gold)


def parse_question(raw: object) -> Question:
    """One question object; ValueError says which field is wrong."""
    if not isinstance(raw, dict):
        raise ValueError("each line must be a JSON object")
    qid, text, golds = raw.get("id"), raw.get("question"), raw.get("gold_sources")
    if not isinstance(qid, (str, int)) or isinstance(qid, bool) or str(qid) == "":
        raise ValueError("'id' must be a non-empty string or number")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("'question' must be a non-empty string")
    if not isinstance(golds, list):
        raise ValueError("'gold_sources' must be a list of URL or URL#heading strings")
    for name in ("answer", "kind"):
        if raw.get(name) is not None and not isinstance(raw[name], str):
            raise ValueError(f"'{name}' must be a string when given")
    return Question(id=str(qid), question=text.strip(),
                    gold=tuple(parse_gold(g) for g in golds),
                    answer=raw.get("answer") or None, kind=raw.get("kind") or None)


def load_questions(path: str | os.PathLike[str]) -> list[Question]:
    """Questions of a JSONL file (blank lines skipped). QuestionsFileError names file:line
    for bad JSON, a bad field, a duplicate id, or a file with no question."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise QuestionsFileError(f"{p}: cannot read the questions file: {exc}") from exc
    out: list[Question] = []
    seen: set[str] = set()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            q = parse_question(json.loads(line))
        except (json.JSONDecodeError, ValueError) as exc:
            raise QuestionsFileError(
                f"{p}:{lineno}: {exc}. Expected {{\"id\", \"question\", \"gold_sources\": "
                "[\"URL\" or \"URL#heading\"], \"answer\"?, \"kind\"?}") from exc
        if q.id in seen:
            raise QuestionsFileError(f"{p}:{lineno}: duplicate id {q.id!r}")
        seen.add(q.id)
        out.append(q)
    if not out:
        raise QuestionsFileError(f"{p}: no questions")
    return out


def check_no_leak(build_dir: Path, questions: Iterable[Question]) -> None:
    """Raise EvalLeakError naming the eval questions found in the pack's few-shot pool."""
    pool_file = Path(build_dir) / fmt.FEWSHOT_EXAMPLES
    if not pool_file.is_file():
        return
    pool = set()
    for line in pool_file.read_text(encoding="utf-8").splitlines():
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(raw, dict) and isinstance(raw.get("question"), str):
            pool.add(text_rules.fold(raw["question"]))
    leaked = [q.id for q in questions if text_rules.fold(q.question) in pool]
    if leaked:
        raise EvalLeakError(
            f"{len(leaked)} eval question(s) are in {pool_file} (ids {leaked[:10]}): scoring "
            "them would leak their answers through the few-shot prompt. Remove them from the "
            "few-shot pool (or the questions file) and rebuild")
