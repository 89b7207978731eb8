"""The topic map's core (tasks/topics.py) on tiny hand-made tables, and the whole-pack
question router (packs/retrieval/whole_pack.py)."""

from __future__ import annotations

import json

import polars as pl

from packs import format as fmt
from packs.retrieval.whole_pack import question_kind
from tasks.topics import MIN_ENTITIES, topics


def _tables():
    # Two groups of entities, each mentioned together in its own sections.
    groups = {"storage": ["PersistentVolume", "PersistentVolumeClaim", "StorageClass",
                          "volumeMode", "emptyDir"],
              "network": ["Service", "Ingress", "EndpointSlice", "NetworkPolicy", "kube-proxy"]}
    entities, mentions, sections = [], [], []
    for g, names in groups.items():
        for n in names:
            entities.append({"id": f"e-{n}", "name": n})
        for k in range(4):
            sid = f"{g}-{k}"
            text = (f"The {names[k]} works with the {names[k + 1]} and the {names[0]} in a "
                    "cluster of nodes.")
            sections.append({"id": sid, "page_title": g.title(), "content": text})
            for n in names:
                mentions.append({"section_id": sid, "entity_id": f"e-{n}"})
    # 40 filler sections keep each entity under the share cap.
    sections += [{"id": f"x{i}", "page_title": "X", "content": "Nothing here."}
                 for i in range(200)]
    rels = pl.DataFrame(schema={"source_id": pl.Utf8, "target_id": pl.Utf8,
                                "relation": pl.Utf8})
    return (pl.DataFrame(entities), pl.DataFrame(mentions), rels, pl.DataFrame(sections))


def test_communities_become_topics_with_cited_digests():
    ents, mentions, rels, sections = _tables()
    out = topics(ents, mentions, rels, sections)
    t = out[fmt.TOPICS]
    assert t.height == 2 and set(t.columns) == set(fmt.TABLE_COLUMNS[fmt.TOPICS])
    assert sorted(t["title"]) == ["Network", "Storage"]  # the page most sections share
    assert all(size >= MIN_ENTITIES for size in t["size"])
    content = dict(sections.select("id", "content").iter_rows())
    for row in t.iter_rows(named=True):
        cits = json.loads(row["citations"])
        assert cits and row["digest"].count("[") == len(cits)
        for c in cits:  # every digest line is a verbatim span of its section
            assert content[c["section_id"]][c["start"]:c["end"]] in row["digest"]
    members = out[fmt.TOPIC_ENTITIES].group_by("topic_id").agg(pl.col("entity_id"))
    assert sorted(len(m) for m in members["entity_id"]) == [5, 5]
    # Deterministic: the same tables give the same topics.
    assert topics(ents, mentions, rels, sections)[fmt.TOPICS].equals(t)


def test_no_topics_from_an_empty_graph():
    ents, mentions, rels, sections = _tables()
    out = topics(ents, mentions.head(0), rels, sections)
    assert all(df.height == 0 for df in out.values())


def test_whole_pack_questions_are_recognised():
    assert question_kind("What are the main topics of the storage concepts?") == "overview"
    assert question_kind("What does the chapter on closures cover?") == "overview"
    assert question_kind("How do you enable autocompletion in each supported shell?") == "across"
    assert question_kind("Which kubectl subcommands do the debugging pages use?") == "list"
    assert question_kind("What kinds of containers can run inside a Pod?") == "list"
    for single in ("How do I drain a node?", "Which flag sets the grace period?",
                   "What happens when a probe fails?", "What is a Pod?"):
        assert question_kind(single) is None, single
