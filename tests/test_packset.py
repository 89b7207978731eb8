"""Several packs at once (packs.packset): two small real packs built here with the real
store and publish code, one of them with a second embedding model (a copy of the offline
MiniLM under another name, so another model id that only loads from its folder)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import polars as pl
import pytest

from packs import PackSet
from packs import format as fmt
from packs.embedding import Embedder
from packs.manifest import EmbeddingInfo, ExtractorInfo, Manifest
from tasks import vectors as embed_core
from tasks.publish.atomic import publish, write_build
from tasks.sections import code_fraction

os.environ.setdefault("HF_HUB_OFFLINE", "1")

GARDEN = [
    ("guides/watering", "Watering", [
        ("Watering > Seedlings",
         "Water tomato seedlings every morning so the soil stays evenly moist but never "
         "soggy. Young roots rot in standing water, so the pots need drainage holes and a "
         "saucer that you empty after each watering."),
        ("Watering > Drip irrigation",
         "A drip irrigation line delivers water straight to the roots of each plant. Lay "
         "the line along the bed, set the timer for twenty minutes at dawn, and check the "
         "emitters for clogs once a month during the growing season."),
    ]),
    ("guides/pruning", "Pruning", [
        ("Pruning > Tomatoes",
         "Pinch off the suckers that grow between the main stem and the branches of "
         "indeterminate tomatoes. Removing them keeps the plant open to air and sunlight "
         "and puts its energy into fruit rather than leaves."),
    ]),
    ("reference/sensors", "Sensor API", [
        ("Sensor API > Reading soil moisture in Python",
         "```python\nfrom garden import SoilSensor\nsensor = SoilSensor(pin=4)\n"
         "moisture = sensor.read_moisture()\nif moisture < 0.3:\n    print('water the bed')\n"
         "```"),
        ("Sensor API > Timer configuration",
         "```yaml\ntimer:\n  zone: tomatoes\n  start: '06:00'\n  minutes: 20\n"
         "  skip_if_rain: true\n```"),
        ("Sensor API > How readings work",
         "The soil moisture sensor reports the share of water in the soil between zero and "
         "one. Readings below 0.3 mean the bed is dry and the drip irrigation timer should "
         "run; readings above 0.7 mean the soil is saturated."),
    ]),
]
KITCHEN = [
    ("recipes/bread", "Bread", [
        ("Bread > Kneading",
         "Knead the bread dough for ten minutes by hand until it is smooth and elastic. "
         "The dough is ready when a small piece stretches thin enough to let light through "
         "without tearing, which shows the gluten has developed."),
        ("Bread > Proofing",
         "Let the shaped loaf proof in a warm place for about an hour, until it has "
         "doubled in size. An over-proofed loaf collapses in the oven, so press it gently: "
         "the dent should spring back slowly."),
    ]),
    ("recipes/soup", "Soup", [
        ("Soup > Stock",
         "Simmer the bones with onion, carrot and celery for four hours to make a stock. "
         "Skim the foam that rises in the first half hour and never let the pot boil hard, "
         "or the stock turns cloudy."),
    ]),
]


def section_rows(base: str, articles) -> list[dict]:
    rows = []
    for slug, title, secs in articles:
        url = f"{base}/{slug}/"
        aid = fmt.article_id(url)
        for pos, (path, content) in enumerate(secs):
            ch = fmt.content_hash(path + "\n" + content)
            rows.append({"id": fmt.section_id(url, path, ch, 0), "article_id": aid, "url": url,
                         "title": title, "heading_path": path, "level": path.count(">") + 1,
                         "position": pos, "chunk": 0, "content": content, "content_hash": ch,
                         "word_count": len(content.split()),
                         "is_code": code_fraction(content) > 0.5})
    return rows


def build_small_pack(root: Path, name: str, base: str, articles, embedder: Embedder, *,
                     keyword_vectors: bool = True, gate_threshold: float = 0.2) -> Path:
    """A pack folder built with the real embed cores, store and publish code."""
    sections = pl.DataFrame(section_rows(base, articles))
    vectors, _ = embed_core.embed_sections(sections, embedder)
    sections = sections.join(vectors.drop("content_hash"), on="id")
    if keyword_vectors:
        kw, _ = embed_core.embed_keywords(sections, {}, embedder)
        sections = sections.join(kw.drop("keyword_key"), on="id")
    articles_df = pl.DataFrame([
        {"id": fmt.article_id(f"{base}/{slug}/"), "url": f"{base}/{slug}/",
         "final_url": f"{base}/{slug}/", "title": title, "content_hash": fmt.content_hash(slug),
         "content_type": "text/markdown", "word_count": 0, "centrality": 0.0}
        for slug, title, _ in articles])
    tables = {
        fmt.ARTICLES: articles_df, fmt.SECTIONS: sections,
        fmt.ENTITIES: pl.DataFrame(schema={"id": pl.Utf8, "name": pl.Utf8, "type": pl.Utf8,
                                           "description": pl.Utf8,
                                           "aliases": pl.List(pl.Utf8)}),
        fmt.MENTIONS: pl.DataFrame(schema={"section_id": pl.Utf8, "entity_id": pl.Utf8}),
        fmt.RELATIONSHIPS: pl.DataFrame(schema={"source_id": pl.Utf8, "target_id": pl.Utf8,
                                                "relation": pl.Utf8, "evidence": pl.Utf8,
                                                "section_id": pl.Utf8}),
        fmt.FACTS: pl.DataFrame(schema={"id": pl.Utf8, "text": pl.Utf8, "entity_id": pl.Utf8,
                                        "section_id": pl.Utf8}),
        fmt.LINKS: pl.DataFrame(schema={"source_id": pl.Utf8, "target_id": pl.Utf8}),
    }
    manifest = Manifest(
        name=name, build_id="b0001", built_at="2026-01-01T00:00:00Z",
        embedding=EmbeddingInfo(model=embedder.model_id, dim=embedder.dim,
                                gate_threshold=gate_threshold),
        extractor=ExtractorInfo(kind="offline"), kuzu_version="0.11.3",
        query_module_version=fmt.QUERY_MODULE_VERSION)
    publish(root / name, "b0001", lambda tmp: write_build(tmp, tables, manifest))
    return root / name


def copy_model(dest: Path) -> Path:
    """The offline MiniLM under another folder name: another model id (hard links when the
    file system allows, so nothing large is copied)."""
    src = Path(Embedder("all-MiniLM-L6-v2").load_from)

    def link(s, d):
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)

    shutil.copytree(src, dest, copy_function=link)
    return dest


@pytest.fixture(scope="module")
def two_packs(tmp_path_factory):
    root = tmp_path_factory.mktemp("multi")
    minilm = Embedder("all-MiniLM-L6-v2")
    other = Embedder(str(copy_model(root / "models" / "minilm-copy")))
    garden = build_small_pack(root, "garden", "https://garden.test", GARDEN, minilm)
    kitchen = build_small_pack(root, "kitchen", "https://kitchen.test", KITCHEN, other)
    return {"garden": garden, "kitchen": kitchen, "model_dir": root / "models" / "minilm-copy"}


@pytest.fixture()
def packset(two_packs, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("KPACK_EMBEDDING_MODEL", raising=False)
    with PackSet.open(
            [two_packs["garden"], two_packs["kitchen"]],
            embedding_models={"minilm-copy": str(two_packs["model_dir"])}) as ps:
        yield ps


def test_each_pack_is_searched_with_its_own_model(packset, two_packs):
    garden, kitchen = packset.packs
    assert garden.manifest.embedding.model == "sentence-transformers/all-MiniLM-L6-v2"
    assert kitchen.manifest.embedding.model == "minilm-copy"
    result = packset.search("How long should bread dough be kneaded?")
    assert garden.embedder.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert kitchen.embedder.model_id == "minilm-copy"
    assert kitchen.embedder.load_from == str(two_packs["model_dir"].resolve())
    assert result.sections[0].pack == "kitchen"
    assert result.sections[0].heading_path == "Bread > Kneading"
    assert {p["model"] for p in result.packs} == {"sentence-transformers/all-MiniLM-L6-v2",
                                                 "minilm-copy"}


def test_a_pack_whose_model_cannot_load_fails_on_first_query(two_packs):
    # Without the folder mapping the copy's id is not loadable offline.
    from packs.embedding import EmbeddingModelError

    with PackSet.open([two_packs["kitchen"]]) as ps, pytest.raises(EmbeddingModelError):
        ps.search("kneading bread")


@pytest.mark.parametrize("question,pack,heading", [
    ("How often should I water tomato seedlings?", "garden", "Watering > Seedlings"),
    ("How long do I knead bread dough?", "kitchen", "Bread > Kneading"),
])
def test_general_mode_answers_from_the_right_pack(packset, question, pack, heading):
    result = packset.search(question, max_results=4)
    assert not result.gated
    assert len(result.sections) <= 4
    assert (result.sections[0].pack, result.sections[0].heading_path) == (pack, heading)
    assert all("pack_fusion" in s.stages for s in result.sections)
    scores = [s.score for s in result.sections]
    assert scores == sorted(scores, reverse=True) and all(0 <= x <= 1 for x in scores)
    raw = [s.fusion_score for s in result.sections]  # the cross-pack RRF, ranked by
    assert raw == sorted(raw, reverse=True)


def test_per_pack_mode_caps_each_pack(packset):
    result = packset.search("How long do I knead bread dough?", pack_mode="per_pack",
                            per_pack_results=2, max_results=10)
    by_pack: dict[str, int] = {}
    for s in result.sections:
        by_pack[s.pack] = by_pack.get(s.pack, 0) + 1
    assert all(n <= 2 for n in by_pack.values())
    assert result.sections[0].pack == "kitchen"
    assert result.sections[0].heading_path == "Bread > Kneading"
    general = packset.search("How long do I knead bread dough?", max_results=2)
    assert len(general.sections) == 2


def test_the_gate_applies_to_the_fused_result(packset):
    result = packset.search("quantum chromodynamics of neutron stars", gate_threshold=0.9)
    assert result.gated and result.sections == [] and result.context == ""
    assert [p["passed"] for p in result.packs] == [False, False]
    answer = packset.ask("quantum chromodynamics of neutron stars", gate_threshold=0.9)
    assert answer["query_type"] == "confidence_gated_fallback" and answer["sources"] == []
    # A pack under its own threshold contributes nothing while another passes.
    one = packset.search("How long do I knead bread dough?", gate_threshold=0.45)
    passed = {p["pack"] for p in one.packs if p["passed"]}
    assert passed == {"kitchen"}
    assert {s.pack for s in one.sections} == {"kitchen"}


def test_ask_has_the_single_pack_shape_with_pack_labels(packset):
    from packs.pipeline import ASK_FIELDS

    answer = packset.ask("How long do I knead bread dough?")
    assert tuple(answer) == ASK_FIELDS
    assert answer["query_type"] == "hybrid_search" or answer["query_type"] == "retrieval_only"
    assert answer["sources"] and all("pack" in s for s in answer["sources"])
    assert answer["sources"][0]["pack"] == "kitchen"
    assert "[1, kitchen]" in answer["answer"]
    # Every marker has its citation, naming the pack, checked against the section.
    assert answer["citations"] and all(c["pack"] == "kitchen" and c["verified"]
                                       for c in answer["citations"])
    result = packset.search("How long do I knead bread dough?")
    assert "Pack: kitchen" in result.context


def test_labels_are_unique_for_packs_with_the_same_name(two_packs):
    with PackSet.open([two_packs["garden"], two_packs["garden"]]) as ps:
        assert ps.labels == ["garden", "garden#2"]


def test_cli_single_and_several_packs(two_packs, monkeypatch):
    from typer.testing import CliRunner

    from packs.cli import make_app

    app = make_app()

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    runner = CliRunner()
    single = runner.invoke(app, ["search", str(two_packs["garden"]), "watering seedlings"])
    assert single.exit_code == 0, single.output
    assert "Watering > Seedlings" in single.output
    multi = runner.invoke(app, [
        "query", "--pack", str(two_packs["garden"]), "--pack", str(two_packs["kitchen"]),
        "--embedding-model", f"minilm-copy={two_packs['model_dir']}",
        "How long do I knead bread dough?", "--json"])
    assert multi.exit_code == 0, multi.output
    import json

    data = json.loads(multi.output)
    assert data["sources"][0]["pack"] == "kitchen"
    cits = data["citations"]  # kpack query --json carries them, one per [n]
    assert cits and all(c["verified"] and c["pack"] == "kitchen" and c["section_id"]
                        for c in cits)
    search = runner.invoke(app, [
        "search", "--pack", str(two_packs["garden"]), "--pack", str(two_packs["kitchen"]),
        "--embedding-model", f"minilm-copy={two_packs['model_dir']}", "--per-pack", "1",
        "knead bread dough"])
    assert search.exit_code == 0, search.output
    assert "[kitchen]" in search.output
    bad = runner.invoke(app, ["search", "--pack", str(two_packs["garden"]), "a", "b"])
    assert bad.exit_code == 2


def test_the_offline_answer_of_several_packs_reads_what_one_pack_reads(two_packs, monkeypatch):
    # Issue 47: a PackSet's offline answer read no page sections (no single database), no
    # pack IDF and no unit similarity. Now each pack's cited pages are read from that pack,
    # with its own model: one pack asked through a PackSet answers as it does alone.
    from packs import KnowledgePack
    from packs.answer import page_sections

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    question = "How often should I check the drip emitters for clogs?"
    with KnowledgePack.open(two_packs["garden"]) as alone, \
            PackSet.open([two_packs["garden"]]) as through_set:
        one = alone.search(question, max_results=1)
        several = through_set.search(question, max_results=1)
        assert [s.id for s in several.cited()] == [s.id for s in one.cited()]
        pages = page_sections(through_set, several)
        assert pages and [s.id for s in pages] == [s.id for s in page_sections(alone, one)]
        assert {s.pack for s in pages} == {"garden"}
        mine = alone.ask(question, max_results=1)
        theirs = through_set.ask(question, max_results=1)
    assert theirs["answer"].replace(", garden]", "]") == mine["answer"]
    assert theirs["reader"] == mine["reader"] and mine["reader"].startswith("reader-")


def test_the_offline_answer_embeds_each_packs_passages_with_its_model(packset):
    from packs.answer import _similarity

    result = packset.search("How long do I knead bread dough?")
    sections = result.cited()[:2]
    sims = _similarity(packset, result)(sections, [s.content for s in sections])
    for s, sim in zip(sections, sims):
        pack = packset.packs[packset.labels.index(s.pack)]
        want = pack.embedder.encode_documents([s.content])[0] @ result.question_vector[s.pack]
        assert abs(float(sim) - float(want)) < 1e-5
