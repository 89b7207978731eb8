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


# --- one home per text rule ---------------------------------------------------------------------

# Identifiers written in running text, and a plain sentence with none: a pattern that finds
# exactly the identifier in one of these, and no word of the plain sentence, is an
# identifier rule. packs/text.py owns those (SNAKE_CASE, TYPE_PATH, QUESTION_IDENTIFIER,
# CAMEL_CASE, ...); a classifier of one name already found (re.fullmatch, or a pattern
# anchored at both ends) finds nothing in running text and is not one.
IDENTIFIERS_IN_TEXT = {"set max_surge to 2": "max_surge", "call Vec::new here": "Vec::new",
                       "the NodePort type": "NodePort", "use getPodName now": "getPodName",
                       "see pkg.mod.func too": "pkg.mod.func"}
PLAIN_TEXT = "the configuration sets the value to two"
SENTENCES, ONE_SENTENCE = "Pods restart. Nodes stay.", "pods restart nodes stay"
TEXT_RULES_HOME = "packs/text.py"
MATCHERS = {"compile", "search", "findall", "finditer", "sub", "subn", "split", "match"}


def regex_literals(path: Path) -> list[tuple[int, str, int]]:
    """(line, pattern, flags) of every re.<matcher>(literal, ...) call of a module; flags
    only when written as re.I / re.M / re.S ... ."""
    import re

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                and node.func.attr in MATCHERS and node.args):
            continue
        try:
            pattern = ast.literal_eval(node.args[0])
        except ValueError:
            continue  # built at run time
        flags = 0
        for arg in node.args[1:] + [k.value for k in node.keywords if k.arg == "flags"]:
            for name in ast.walk(arg):
                if isinstance(name, ast.Attribute) and name.attr in ("I", "M", "S", "X"):
                    flags |= getattr(re, name.attr)
        if isinstance(pattern, str):
            found.append((node.lineno, pattern, flags))
    return found


def text_rule_kind(rx) -> str | None:
    """"identifier" or "sentence" when compiled pattern `rx` is such a rule, else None."""
    def finds(text: str, wanted: str) -> bool:
        return any(wanted in (m.group(0), *m.groups()) for m in rx.finditer(text))

    plain = {w for m in rx.finditer(PLAIN_TEXT) for w in (m.group(0), *m.groups()) if w}
    if not plain & set(PLAIN_TEXT.split()) and any(
            finds(text, ident) for text, ident in IDENTIFIERS_IN_TEXT.items()):
        return "identifier"
    gaps = [m for m in rx.finditer(SENTENCES) if not m.group(0).strip()
            and SENTENCES[:m.start()].endswith(".")]
    if gaps and not any(not m.group(0).strip() for m in rx.finditer(ONE_SENTENCE)
                        if m.end() > m.start()):
        return "sentence"
    return None


def test_identifier_and_sentence_rules_live_in_packs_text() -> None:
    """No module of packs/ or tasks/ but packs/text.py writes a pattern that finds
    identifiers in running text or cuts sentences: they read packs/text.py's."""
    import re

    found = {}
    for folder in ("packs", "tasks"):
        for path in _modules(folder):
            rel = str(path.relative_to(ROOT))
            if rel == TEXT_RULES_HOME:
                continue
            for line, pattern, flags in regex_literals(path):
                kind = text_rule_kind(re.compile(pattern, flags))
                if kind:
                    found[f"{rel}:{line}"] = f"{kind}: {pattern[:60]}"
    assert not found, f"text rules outside {TEXT_RULES_HOME}: {found}"


def test_the_text_rule_check_sees_its_rules() -> None:
    import re

    from packs import text

    for rule in (text.SNAKE_CASE, text.TYPE_PATH, text.CAMEL_CASE, text.QUESTION_IDENTIFIER):
        assert text_rule_kind(rule) == "identifier", rule.pattern
    # the build's cut before issue 46 (tasks/sections.py, split-v7)
    assert text_rule_kind(re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")) == "sentence"
    for generic in (r"\S+", r"[A-Za-z0-9_]+", r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$", r"\s+"):
        assert text_rule_kind(re.compile(generic)) is None, generic
