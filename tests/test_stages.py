"""The stage list as the flow reads it (issue 46): flows/ names no stage, the declarations
hang together, the README's stage table and task-run bound follow from them, and the
estimate runs on them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tasks import stages
from tasks.shards import MAX_SHARDS
from tasks.stages.base import PACK, SHARD, Stage
from tests.conftest import OFFLINE_MODEL

ROOT = Path(__file__).resolve().parents[1]


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of a module, its classes and functions."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def stage_literals(folder: Path, names: set[str]) -> list[str]:
    """`file:line: 'name'` for every string constant outside docstrings equal to a name."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        found += [f"{path.relative_to(folder.parent)}:{node.lineno}: {node.value!r}"
                  for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and node.value in names and id(node) not in docs]
    return found


def test_flows_name_no_stage() -> None:
    """The flow, plan, scheduler, estimate and summary read the stages' declarations; a
    stage's name as a string in flows/ (outside docstrings) is a stage special-cased."""
    assert stage_literals(ROOT / "flows", set(stages.names())) == []


def test_the_literal_check_finds_a_stage_name(tmp_path) -> None:
    (tmp_path / "f.py").write_text('"""publish: fine here."""\nif name == "publish":\n    pass\n')
    found = stage_literals(tmp_path, {"publish"})
    assert len(found) == 1 and found[0].endswith(":2: 'publish'")


def test_every_stage_reads_only_stages_before_it() -> None:
    names = stages.names()
    assert len(set(names)) == len(names) and all(isinstance(s, Stage) for s in stages.PIPELINE)
    for i, name in enumerate(names):
        stage = stages.get(name)
        assert stage.SCOPE in (SHARD, PACK), name
        assert set(stages.inputs_of(name)) <= set(names[:i]), name
        assert stage.PUBLISHES or set(stage.FLOW_INPUTS) == set(), name
    assert [s.NAME for s in stages.PIPELINE if s.PUBLISHES] == [stages.publisher().NAME]
    assert stages.inputs_of(stages.publisher().NAME) == names[:names.index(
        stages.publisher().NAME)]
    with pytest.raises(KeyError, match="no stage 'nope'"):
        stages.get("nope")


def test_the_task_run_bound_follows_from_the_declarations() -> None:
    per_shard = sum(s.SCOPE == SHARD for s in stages.PIPELINE)
    once = sum(s.SCOPE == PACK for s in stages.PIPELINE)
    assert stages.max_task_runs() == per_shard * MAX_SHARDS + once
    assert stages.max_task_runs(shards=4) == 4 * per_shard + once


# --- the README, from the declarations ---------------------------------------------------


README = (ROOT / "README.md").read_text(encoding="utf-8")


def readme_stage_rows() -> list[tuple[str, str]]:
    """(stage, "per shard" or "once") of each row of the README's stage table."""
    table = README[README.index("| stage | what it does |"):]
    rows = []
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        m = re.match(r"\| (\w+) \((per shard|once)\b", line)
        assert m, f"a stage row the test cannot read: {line[:80]}"
        rows.append((m.group(1), m.group(2)))
    return rows


def test_the_readme_stage_table_lists_the_pipeline() -> None:
    scope = {SHARD: "per shard", PACK: "once"}
    assert readme_stage_rows() == [(s.NAME, scope[s.SCOPE]) for s in stages.PIPELINE]


def test_the_readme_diagram_shows_every_stage() -> None:
    how = README[README.index("## How it works"):]
    diagram = how[how.index("```"):how.index("```", how.index("```") + 3)]
    missing = [n for n in stages.names() if not re.search(rf"\b{n}\b", diagram)]
    assert missing == []


def test_the_readme_task_run_bound_is_the_declared_one() -> None:
    text = " ".join(README.split())
    bound = re.search(r"at most ([\d,]+) task runs", text)
    assert bound and bound.group(1) == f"{stages.max_task_runs():,}"
    per_shard = sum(s.SCOPE == SHARD for s in stages.PIPELINE)
    once = sum(s.SCOPE == PACK for s in stages.PIPELINE)
    assert f"{per_shard} per-shard stages" in text and f"{once} that run once" in text
    assert f"at most {MAX_SHARDS} shards" in text
    optional = {s.NAME for s in stages.PIPELINE if type(s).enabled is not Stage.enabled}
    assert optional == {"keywords", "unit_vectors"}
    without = stages.max_task_runs() - MAX_SHARDS
    assert f"{without:,} without keyword vectors" in text
    assert f"{without - MAX_SHARDS:,} with `unit_vectors = false` too" in text


# --- the estimate, on the declarations -----------------------------------------------------


def test_the_estimate_prices_the_sections_without_calling_claude(prefect_harness, tmp_path,
                                                                 monkeypatch) -> None:
    from flows.estimate import run_estimate

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    source = tmp_path / "priced"
    source.mkdir()
    for i in range(3):
        (source / f"p{i}.md").write_text(f"# Page {i}\n\n" + "".join(
            f"## Part {j}\n\nThe Widget Controller {i}.{j} manages `spec.widgets`.\n\n"
            for j in range(4)))
    (source / "urls.txt").write_text("".join(f"p{i}.md\n" for i in range(3)))
    (source / "pack.toml").write_text(f'embedding_model = "{OFFLINE_MODEL}"\n')
    est = run_estimate(source, tmp_path / "out", work_dir=tmp_path / "work")
    assert list(est) == ["pack", "pages", "sections", "cached", "remembered", "to_call",
                         "calls", "input_tokens", "output_tokens", "cost_usd",
                         "usd_per_100_pages", "model", "mode", "price_known", "prices_as_of"]
    assert (est["pack"], est["pages"], est["sections"], est["cached"]) == ("priced", 3, 12, 0)
    assert est["to_call"] == 12 and est["calls"] >= 1 and est["cost_usd"] > 0
    assert est["usd_per_100_pages"] == round(100 * est["cost_usd"] / 3, 4)
    assert not (tmp_path / "out" / "priced").exists()  # nothing published


def test_publish_lists_the_sections_in_the_split_stages_order(tmp_path) -> None:
    """The published sections keep the split stage's order whatever order the vectors
    come in: a join that reorders them made two builds of the same pages list them (and
    so judge entities and break search ties) differently."""
    from types import SimpleNamespace

    import polars as pl

    from tasks.stages import publish

    n = 20_000  # enough rows for a multithreaded hash join to reorder them
    ids = [f"{(i * 2654435761) % 2**32:08x}{i:06d}" for i in range(n)]
    pl.DataFrame({"id": ids, "position": range(n)}).write_parquet(tmp_path / "sections.parquet")
    shuffled = sorted(ids, key=lambda s: s[::-1])
    pl.DataFrame({"id": shuffled, "embedding": [[0.0, 1.0]] * n}).write_parquet(
        tmp_path / "vectors.parquet")
    inputs = {"split": [SimpleNamespace(paths={"sections": tmp_path / "sections.parquet"})],
              "embed": [SimpleNamespace(paths={"embeddings": tmp_path / "vectors.parquet"})]}
    out = publish._sections(inputs).collect()
    assert out["id"].to_list() == ids and out["embedding"].null_count() == 0
