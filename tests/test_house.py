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


# --- import circles -------------------------------------------------------------------------

GRAPH_FOLDERS = ("flows", "tasks", "packs")


def import_graph(root: Path, folders: tuple[str, ...]) -> dict[str, set[str]]:
    """module → the modules of `folders` it imports, by ast: every import statement counts,
    those under `if TYPE_CHECKING:` and inside functions too. `from a import b` names the
    module a.b when there is one, else a."""
    modules: dict[str, tuple[Path, bool]] = {}
    for folder in folders:
        for path in (root / folder).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            package = parts[-1] == "__init__"
            modules[".".join(parts[:-1] if package else parts)] = (path, package)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, package) in modules.items():
        here = name if package else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps.update(filter(None, (known(a.name) for a in node.names)))
            elif isinstance(node, ast.ImportFrom):
                base = here
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                source = (f"{base}.{node.module}" if node.module else base) if node.level \
                    else node.module
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    dep = full if full in modules else known(source)
                    if dep:
                        deps.add(dep)
        graph[name] = deps - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles_type_only_imports_included() -> None:
    assert cycles(import_graph(ROOT, GRAPH_FOLDERS)) == []


def test_the_import_walk_sees_a_type_only_circle(tmp_path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import thing\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from pkg import a\n")
    (pkg / "c.py").write_text("def f():\n    from . import a\n")
    assert cycles(import_graph(tmp_path, ("pkg",))) == [["pkg.a", "pkg.b"]]


def test_the_import_contracts_ignore_no_import() -> None:
    """The acyclic contract holds between packages (packs.retrieval and packs.manifest are
    siblings), which the module walk above does not see: it must hold with no exceptions."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    ignored = {c["name"]: c["ignore_imports"] for c in config["tool"]["importlinter"]["contracts"]
               if c.get("ignore_imports")}
    assert not ignored, f"import contracts with ignored imports: {ignored}"
