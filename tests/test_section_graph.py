"""Section.graph (format 3): each section's entities, facts and triples, precomputed by the
store stage, and what the query side reads from it."""

from __future__ import annotations

import json
import os

import polars as pl
from query_fixtures import FACTS, build_pack, embedder, pack, pack_dir  # noqa: F401 (fixtures)

from packs import format as fmt
from tasks.publish.tables import section_graphs, write_tables

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _tables(**over):
    tables = {
        fmt.ENTITIES: pl.DataFrame({"id": ["e1", "e2", "e3"], "name": ["Pod", "Node", "Kubelet"],
                                    "type": ["concept", "concept", "component"],
                                    "description": ["", "", ""], "aliases": [[], [], []]},
                                   schema_overrides={"aliases": pl.List(pl.String)}),
        fmt.MENTIONS: pl.DataFrame({"section_id": ["s1", "s1", "s1", "s2"],
                                    "entity_id": ["e2", "e1", "e1", "e3"]}),
        fmt.FACTS: pl.DataFrame({"id": ["f1", "f2"], "text": ["Pods run on nodes.", "A fact."],
                                 "entity_id": ["e1", "e3"], "section_id": ["s1", "s2"]}),
        fmt.RELATIONSHIPS: pl.DataFrame({"source_id": ["e3", "e1"], "target_id": ["e1", "e2"],
                                         "relation": ["starts", "runs on"],
                                         "evidence": ["", ""], "section_id": ["s2", None]}),
    }
    tables.update(over)
    return tables


def test_section_graphs_hold_what_was_extracted_from_each_section():
    graphs = {r["id"]: json.loads(r["graph"]) for r in section_graphs(_tables()).to_dicts()}
    assert graphs == {
        # entities sorted and deduplicated; a triple without an evidence section is nobody's
        "s1": {"entities": [["Node", "concept"], ["Pod", "concept"]],
               "facts": ["Pods run on nodes."], "triples": []},
        "s2": {"entities": [["Kubelet", "component"]], "facts": ["A fact."],
               "triples": [["Kubelet", "starts", "Pod"]]},
    }


def test_section_graphs_are_capped():
    many = pl.DataFrame({"id": [f"f{i}" for i in range(50)],
                         "text": [f"fact {i:02d}" for i in range(50)],
                         "entity_id": ["e1"] * 50, "section_id": ["s1"] * 50})
    graph = json.loads(section_graphs(_tables(**{fmt.FACTS: many}), cap=5)["graph"][0])
    assert graph["facts"] == [f"fact {i:02d}" for i in range(5)]


def test_write_tables_fills_graph_and_url_titles(tmp_path, embedder):
    from query_fixtures import make_tables

    tables = make_tables(embedder)
    arts = tables[fmt.ARTICLES]
    # The first article's page had no title: fetch named it by its URL, the splitter by
    # its leading heading.
    arts = arts.with_columns(pl.when(pl.int_range(pl.len()) == 0).then(pl.col("url"))
                             .otherwise(pl.col("title")).alias("title"))
    secs = tables[fmt.SECTIONS].with_columns(pl.col("title").alias("page_title"))
    write_tables({**tables, fmt.ARTICLES: arts, fmt.SECTIONS: secs}, tmp_path, embedder.dim)
    stored = pl.read_parquet(tmp_path / "articles.parquet")
    assert stored["title"].to_list() == tables[fmt.ARTICLES]["title"].to_list()
    sections = pl.read_parquet(tmp_path / "sections.parquet")
    assert sections.columns == list(fmt.TABLE_COLUMNS[fmt.SECTIONS])
    with_graph = sections.filter(pl.col("graph") != "")
    facts = {f for g in with_graph["graph"] for f in json.loads(g)["facts"]}
    assert facts == {text for text, _, _ in FACTS}


def test_graph_facts_are_one_lookup_of_the_chosen_sections(pack):
    assert pack.db.has_graph
    result = pack.search("What does RetryPolicy.max_attempts default to?", use_cache=False)
    assert result.facts.facts[:2] == ["RetryPolicy.backoff defaults to 2 seconds.",
                                      "RetryPolicy.max_attempts defaults to 5."]
    assert {"name": "RetryPolicy", "type": "class"} in result.facts.entities
    assert "s.graph" in result.cypher_query and "HAS_FACT" not in result.cypher_query


def test_packs_before_format_3_walk_the_graph(pack):
    pack.db.has_graph = False  # what a format-2 manifest gives (see KnowledgePack.open)
    result = pack.search("What does RetryPolicy.max_attempts default to?", use_cache=False)
    assert "RetryPolicy.max_attempts defaults to 5." in result.facts.facts
    assert "HAS_FACT" in result.cypher_query
