"""Few-shot examples from the pack's fewshot/examples.jsonl (never eval/questions.jsonl).

Each line is {"question": ..., "answer": ...}. The k examples whose question embedding is
most similar to the question's are put in the synthesis prompt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from packs.integrity import PackCorruptError


@dataclass(frozen=True)
class Example:
    question: str
    answer: str


def load_examples(path: Path) -> list[Example]:
    """Examples of a JSONL file; [] when absent. Lines without both fields are skipped.
    PackCorruptError when the file is not UTF-8 (a damaged pack opened unverified)."""
    if not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PackCorruptError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}): "
                               "the pack is damaged; reinstall or rebuild it") from exc
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(raw, dict) and raw.get("question") and raw.get("answer"):
            out.append(Example(str(raw["question"]), str(raw["answer"])))
    return out


def select(qvec: np.ndarray, matrix: np.ndarray, examples: list[Example], k: int) -> list[Example]:
    """The k examples with the highest dot product (vectors are unit-normalised)."""
    if k <= 0 or not examples:
        return []
    sims = matrix @ qvec
    order = np.argsort(-sims, kind="stable")[:k]
    return [examples[i] for i in order]


def format_block(examples: list[Example]) -> str:
    if not examples:
        return ""
    parts = [f"<example>\nQuestion: {e.question}\nAnswer: {e.answer}\n</example>"
             for e in examples]
    return "<examples>\n" + "\n".join(parts) + "\n</examples>"
