"""The house rules that a reader can check by counting (issue 39): no module of packs/,
tasks/, flows/ or benchmarks/ over 400 lines, no function of packs/ over 80. A module that
grows past them is split along a seam, not exempted here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80  # packs/: the query side, read most often by people
FOLDERS = ("packs", "tasks", "flows", "benchmarks")


def _modules(folder: str) -> list[Path]:
    found = sorted((ROOT / folder).rglob("*.py"))
    assert found, f"no Python modules under {folder}/"
    return found


def test_no_module_is_over_400_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for folder in FOLDERS for p in _modules(folder)
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_function_of_packs_is_over_80_lines() -> None:
    long = {}
    for path in _modules("packs"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = lines
    assert not long, f"functions of packs/ over {MAX_FUNCTION_LINES} lines: {long}"
