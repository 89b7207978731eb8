"""Query filters (packs.filters): URL/path prefix, code vs prose, code language; applied in
the candidate queries before fusion; suggested by the analyzer from the question."""

from __future__ import annotations

import os

import pytest
from test_packset import GARDEN, build_small_pack

from packs import KnowledgePack, OptionsError, filters
from packs.db import PackDB
from packs.embedding import Embedder

os.environ.setdefault("HF_HUB_OFFLINE", "1")
BASE = "https://garden.test"


@pytest.fixture(scope="module")
def garden_dir(tmp_path_factory):
    return build_small_pack(tmp_path_factory.mktemp("filters"), "garden", BASE, GARDEN,
                            Embedder("all-MiniLM-L6-v2"))


@pytest.fixture()
def pack(garden_dir, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with KnowledgePack.open(garden_dir) as p:
        # These tests are about what the filters let through. Narrowed to sections that do
        # not answer the question, the calibrated gate (test_gate.py) rightly gates it, so
        # they use the plain similarity rule with a threshold of 0.
        search = p.search
        monkeypatch.setattr(p, "search", lambda q, options=None, **kw: search(
            q, options, **{"gate_threshold": 0.0, **kw}))
        yield p


# --- pure functions ---------------------------------------------------------------------

def test_fence_languages_are_normalised_and_deduplicated():
    text = "intro\n```py\nx = 1\n```\n\n~~~ bash\nls\n~~~\n```yaml title=a.yaml\na: 1\n```\n```\nplain\n```\n```python\n```"
    assert filters.fence_languages(text) == ["python", "shell", "yaml"]
    assert filters.fence_languages("no code here") == []


def test_fence_regex_matches_aliases_only():
    import re

    pattern = re.compile(filters.fence_regex("python").removeprefix("(?im)"), re.I | re.M)
    assert pattern.search("text\n```py\nx\n```")
    assert pattern.search("```python3\n")
    assert not pattern.search("```pyyaml\n") and not pattern.search("```yaml\n")


def test_where_uses_parameters_only():
    clause, params = filters.where(
        filters.Filters("/docs/tasks/' OR 1=1 --", "code", "python"), has_languages=True)
    assert "'" not in clause and "OR 1=1" not in clause
    assert clause == ("regexp_matches(s.url, $f_path) AND s.is_code = $f_code AND "
                      "list_contains(s.languages, $f_lang)")
    assert params["f_code"] is True and params["f_lang"] == "python"
    url_clause, url_params = filters.where(filters.Filters("https://x.test/a/"), True)
    assert url_clause == "s.url STARTS WITH $f_url" and url_params == {"f_url": "https://x.test/a/"}
    assert filters.where(filters.Filters(), True) == ("true", {})


def test_options_validate_filters():
    from packs.options import SearchOptions

    assert SearchOptions(language="Py").language == "python"
    assert SearchOptions(url_prefix="  ").url_prefix is None
    with pytest.raises(OptionsError, match="content_kind"):
        SearchOptions(content_kind="video")
    with pytest.raises(OptionsError, match="url_prefix"):
        SearchOptions(url_prefix="a b")


def test_suggestions_only_name_what_the_pack_has():
    prefixes = filters.path_prefixes([f"{BASE}/docs/tasks/a/", f"{BASE}/docs/tasks/b/",
                                      f"{BASE}/docs/concepts/c/"])
    s = filters.suggest("How do I drain a node in the tasks docs? Show a yaml example",
                        prefixes, ["yaml", "shell"])
    assert s == filters.Filters("/docs/tasks/", "code", "yaml")
    assert filters.suggest("in the tutorials docs, in Python", prefixes, ["yaml"]) == \
        filters.Filters()
    assert filters.suggest("Where should I go next?", prefixes, ["go"]).language is None
    assert filters.suggest("write it in Go please", prefixes, ["go"]).language == "go"
    assert filters.suggest("explain it without code", prefixes, []).content_kind == "prose"


# --- on a real pack ---------------------------------------------------------------------

def _urls(result):
    return {s.url for s in result.sections}


def test_build_marks_code_and_languages(garden_dir):
    import polars as pl

    sections = pl.read_parquet(garden_dir / "builds" / "b0001" / "tables" / "sections.parquet")
    langs = dict(zip(sections["heading_path"], sections["languages"].to_list()))
    assert langs["Sensor API > Reading soil moisture in Python"] == ["python"]
    assert langs["Sensor API > Timer configuration"] == ["yaml"]
    assert langs["Watering > Seedlings"] == []
    codes = dict(zip(sections["heading_path"], sections["is_code"]))
    assert codes["Sensor API > Timer configuration"] and not codes["Watering > Seedlings"]


def test_url_and_path_prefix_include_and_exclude(pack):
    q = "how much water does the soil need"
    unfiltered = pack.search(q, use_cache=False)
    assert f"{BASE}/guides/watering/" in _urls(unfiltered)
    by_path = pack.search(q, url_prefix="/reference/")
    assert by_path.sections and _urls(by_path) == {f"{BASE}/reference/sensors/"}
    assert by_path.filters == {"url_prefix": "/reference/"}
    by_url = pack.search(q, url_prefix=f"{BASE}/guides/")
    assert by_url.sections and all(u.startswith(f"{BASE}/guides/") for u in _urls(by_url))
    assert pack.search(q, url_prefix="https://elsewhere.test/").sections == []


def test_content_kind_and_language(pack):
    q = "drip irrigation timer for the tomatoes"
    code = pack.search(q, content_kind="code")
    assert code.sections and {s.heading_path for s in code.sections} <= {
        "Sensor API > Reading soil moisture in Python", "Sensor API > Timer configuration"}
    prose = pack.search(q, content_kind="prose")
    assert prose.sections and not {s.heading_path for s in prose.sections} & {
        "Sensor API > Reading soil moisture in Python", "Sensor API > Timer configuration"}
    yaml = pack.search(q, language="yml")
    assert [s.heading_path for s in yaml.sections] == ["Sensor API > Timer configuration"]
    assert pack.search(q, language="rust").sections == []


def test_filters_narrow_before_truncation(pack):
    # The best unfiltered hit is prose; with max_results=1 the filter must still find the
    # best code section, not filter an already-truncated list down to nothing.
    # (quality_threshold=0: short code sections would otherwise fall back to full articles)
    q = "how often to water tomato seedlings"
    top = pack.search(q, max_results=1, use_enhancements=False, quality_threshold=0.0)
    assert top.sections[0].heading_path == "Watering > Seedlings"
    code = pack.search(q, max_results=1, content_kind="code", use_enhancements=False,
                       quality_threshold=0.0)
    assert len(code.sections) == 1 and code.sections[0].heading_path.startswith("Sensor API")
    hybrid = pack.search(q, max_results=1, content_kind="code", quality_threshold=0.0)
    assert len(hybrid.sections) == 1 and hybrid.sections[0].heading_path.startswith("Sensor API")
    assert "WHERE s.is_code = $f_code" in hybrid.cypher_query
    assert "QUERY_FTS_INDEX" in hybrid.cypher_query


def test_analyzer_suggests_and_auto_filters_apply(pack):
    q = "Show me a Python code example for reading the sensor in the reference docs"
    plain = pack.search(q)
    assert plain.analysis["suggested_filters"] == {
        "url_prefix": "/reference/", "content_kind": "code", "language": "python"}
    assert plain.filters == {}
    auto = pack.search(q, auto_filters=True)
    assert auto.filters == plain.analysis["suggested_filters"]
    assert [s.heading_path for s in auto.sections] == [
        "Sensor API > Reading soil moisture in Python"]
    explicit = pack.search(q, auto_filters=True, language="yaml")
    assert explicit.filters["language"] == "yaml"


def test_format_1_packs_match_languages_in_the_content(garden_dir, pack):
    db = PackDB(garden_dir / "builds" / "b0001" / "pack.db", has_languages=False)
    try:
        qvec = pack.embed_query("timer configuration")
        rows = db.vector_candidates(qvec, 5, filters.Filters(language="yaml"))
        assert [r.heading_path for r in rows] == ["Sensor API > Timer configuration"]
        assert db.languages() == []
    finally:
        db.close()
