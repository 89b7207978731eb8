"""A map of the pack's topics: communities of the entity graph (pure; no I/O).

    tables = topics(entities, mentions, relationships, sections)

The graph: one node per entity mentioned in at least MIN_MENTIONS sections and in at most
MAX_SHARE of them (an entity every page names, "Pod", glues everything into one topic); an
edge between two entities for each section that mentions both, weighted 1 / log2(1 + n)
for a section mentioning n of them (a long list says less about each pair), plus
RELATION_WEIGHT for each relation a sentence states between them. Communities are found by
the Leiden algorithm (igraph + leidenalg, modularity, seeded: the same tables give the same
topics; chosen over networkx's Louvain on the Kubernetes pack, see BENCHMARKS.md). A
community of fewer than MIN_ENTITIES entities is no topic.

For each topic: its entities ranked by their weighted degree inside it (TOP_ENTITIES
kept), its sections ranked by how many of the topic's entities they mention (weighted by
rank; TOP_SECTIONS kept), a title (the page title most of its top sections share, else its
top entity names), and a digest: the representative sentences of its top sections (the
sentence of a section that names most of the topic's entities), each a verbatim span of its
section (`citations`: section id, start, end), so a reader checks it like any citation.
A Claude digest, when the build has a key, replaces the text and keeps the same kind of
citations (tasks/topic_digest.py).

Output tables (names and columns in packs/format.py): TOPICS (id, title, rank, size,
sections, entity_names, digest, digest_kind, citations JSON), TOPIC_ENTITIES (topic_id,
entity_id, rank, weight), TOPIC_SECTIONS (topic_id, section_id, rank, weight).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict

import polars as pl

from packs import format as fmt
from packs import text as text_rules
from tasks.extract.offline_text import is_fact

TOPICS_VERSION = "topics-v1"
MIN_MENTIONS = 2
MAX_SHARE = 0.05
MIN_SHARE_FLOOR = 10  # a small pack's entities may be in up to this many sections
RELATION_WEIGHT = 1.0
MIN_ENTITIES = 4
TOP_ENTITIES = 12
TOP_SECTIONS = 12
DIGEST_SENTENCES = 4
RESOLUTION = 1.0
SEED = 48

SCHEMAS = {
    fmt.TOPICS: {"id": pl.Utf8, "title": pl.Utf8, "rank": pl.Int64, "size": pl.Int64,
                 "sections": pl.Int64, "entity_names": pl.List(pl.Utf8), "digest": pl.Utf8,
                 "digest_kind": pl.Utf8, "citations": pl.Utf8},
    fmt.TOPIC_ENTITIES: {"topic_id": pl.Utf8, "entity_id": pl.Utf8, "rank": pl.Int64,
                         "weight": pl.Float64},
    fmt.TOPIC_SECTIONS: {"topic_id": pl.Utf8, "section_id": pl.Utf8, "rank": pl.Int64,
                         "weight": pl.Float64},
}
assert all(tuple(SCHEMAS[t]) == fmt.TABLE_COLUMNS[t] for t in SCHEMAS), "columns drifted"


def empty_tables() -> dict[str, pl.DataFrame]:
    return {t: pl.DataFrame(schema=s) for t, s in SCHEMAS.items()}


def entity_graph(mentions: pl.DataFrame, relationships: pl.DataFrame, n_sections: int
                 ) -> tuple[list[str], dict[tuple[int, int], float]]:
    """(node entity ids, {(i, j): weight} with i < j) of the co-mention graph (see the
    module docstring)."""
    counts = Counter(mentions["entity_id"].to_list())
    cap = max(MIN_SHARE_FLOOR, int(MAX_SHARE * max(n_sections, 1)))
    kept = sorted(e for e, n in counts.items() if MIN_MENTIONS <= n <= cap)
    index = {e: i for i, e in enumerate(kept)}
    by_section: dict[str, list[int]] = defaultdict(list)
    for sid, eid in mentions.select("section_id", "entity_id").iter_rows():
        if eid in index:
            by_section[sid].append(index[eid])
    weights: dict[tuple[int, int], float] = defaultdict(float)
    for members in by_section.values():
        members = sorted(set(members))
        if len(members) < 2:
            continue
        w = 1.0 / math.log2(1 + len(members))
        for a in range(len(members)):
            for b in range(a + 1, len(members)):
                weights[(members[a], members[b])] += w
    for src, dst, rel in relationships.select("source_id", "target_id", "relation").iter_rows():
        if src in index and dst in index and src != dst and rel != "CO_OCCURS_WITH":
            i, j = sorted((index[src], index[dst]))
            weights[(i, j)] += RELATION_WEIGHT
    return kept, dict(weights)


def communities(n: int, weights: dict[tuple[int, int], float], method: str = "leiden"
                ) -> list[list[int]]:
    """Communities of the weighted graph on nodes 0..n-1, largest first (`method`:
    "leiden", or "louvain" with networkx, kept for the benchmark that chose)."""
    if n == 0 or not weights:
        return []
    edges = list(weights)
    if method == "louvain":
        import networkx as nx

        g = nx.Graph()
        g.add_nodes_from(range(n))
        g.add_weighted_edges_from((i, j, weights[(i, j)]) for i, j in edges)
        parts = nx.community.louvain_communities(g, weight="weight", resolution=RESOLUTION,
                                                 seed=SEED)
        groups = [sorted(p) for p in parts]
    else:
        import igraph as ig
        import leidenalg

        g = ig.Graph(n=n, edges=edges)
        g.es["weight"] = [weights[e] for e in edges]
        part = leidenalg.find_partition(g, leidenalg.RBConfigurationVertexPartition,
                                        weights="weight", resolution_parameter=RESOLUTION,
                                        seed=SEED)
        groups = [sorted(c) for c in part]
    return sorted(groups, key=lambda c: (-len(c), c))


def modularity(n: int, weights: dict[tuple[int, int], float], groups: list[list[int]]) -> float:
    """Newman modularity of `groups` on the weighted graph (for the benchmark)."""
    degree = [0.0] * n
    total = 0.0
    for (i, j), w in weights.items():
        degree[i] += w
        degree[j] += w
        total += w
    if total == 0:
        return 0.0
    where = {v: k for k, g in enumerate(groups) for v in g}
    inside = sum(w for (i, j), w in weights.items() if where.get(i) == where.get(j) is not None)
    sums = Counter()
    for v, k in where.items():
        sums[k] += degree[v]
    return inside / total - sum((s / (2 * total)) ** 2 for s in sums.values())


def _sentence_span(content: str, wanted: list[str]) -> tuple[int, int] | None:
    """(start, end) of the sentence of `content` (prose, outside code) that names most of
    `wanted` (lower-cased names), a verbatim span; None when none names any."""
    best, best_hits = None, 0
    for m in re.finditer(r"[^\n]+", content):
        line = m.group(0)
        if line.lstrip().startswith(("```", "~~~", "|", "#", "<", "    ", "-", "*", ">")):
            continue
        for sentence in text_rules.sentences(line):
            if not is_fact(sentence):
                continue
            low = sentence.lower()
            hits = sum(name in low for name in wanted)
            if hits > best_hits:
                start = content.find(sentence, m.start())
                if start >= 0:
                    best, best_hits = (start, start + len(sentence)), hits
    return best


def topics(entities: pl.DataFrame, mentions: pl.DataFrame, relationships: pl.DataFrame,
           sections: pl.DataFrame, method: str = "leiden") -> dict[str, pl.DataFrame]:
    """The topic tables of a pack (see the module docstring). `sections` needs id, content
    and the page title (`title`, or `page_title` as the splitter writes it). Deterministic
    for given tables; empty tables when the graph has no community of MIN_ENTITIES."""
    kept, weights = entity_graph(mentions, relationships, sections.height)
    groups = [g for g in communities(len(kept), weights, method) if len(g) >= MIN_ENTITIES]
    if not groups:
        return empty_tables()
    names = dict(entities.select("id", "name").iter_rows())
    degree: dict[int, float] = defaultdict(float)
    neighbours: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for (i, j), w in weights.items():
        neighbours[i].append((j, w))
        neighbours[j].append((i, w))
    by_entity: dict[str, list[str]] = defaultdict(list)
    for sid, eid in mentions.select("section_id", "entity_id").iter_rows():
        by_entity[eid].append(sid)
    title_col = "title" if "title" in sections.columns else "page_title"
    info = {sid: (title or "", content or "") for sid, title, content in
            sections.select("id", title_col, "content").iter_rows()}
    rows: dict[str, list[dict]] = {t: [] for t in SCHEMAS}
    for rank, group in enumerate(groups):
        members = set(group)
        for v in group:
            degree[v] = sum(w for u, w in neighbours[v] if u in members)
        ranked = sorted(group, key=lambda v: (-degree[v], names.get(kept[v], ""), kept[v]))
        top = [kept[v] for v in ranked[:TOP_ENTITIES]]
        tid = fmt.short_hash("topic", *sorted(kept[v] for v in group))
        section_weight: dict[str, float] = defaultdict(float)
        for k, eid in enumerate(top):
            for sid in by_entity.get(eid, ()):
                section_weight[sid] += 1.0 / (1 + k)
        top_sections = sorted(section_weight,
                              key=lambda s: (-section_weight[s], s))[:TOP_SECTIONS]
        titles = Counter(info[s][0] for s in top_sections[:6] if s in info and info[s][0])
        title, n_title = titles.most_common(1)[0] if titles else ("", 0)
        if n_title < 2:
            title = ", ".join(names.get(e, "") for e in top[:3])
        wanted = [names.get(e, "").lower() for e in top if names.get(e)]
        citations, lines = [], []
        for sid in top_sections:
            if len(citations) >= DIGEST_SENTENCES or sid not in info:
                continue
            span = _sentence_span(info[sid][1], wanted)
            if span:
                quote = info[sid][1][span[0]:span[1]]
                if quote not in lines:
                    lines.append(quote)
                    citations.append({"n": len(citations) + 1, "section_id": sid,
                                      "start": span[0], "end": span[1]})
        digest = "\n".join(f"- {q} [{c['n']}]" for q, c in zip(lines, citations))
        rows[fmt.TOPICS].append({
            "id": tid, "title": title, "rank": rank, "size": len(group),
            "sections": len(section_weight), "entity_names": [names.get(e, "") for e in top],
            "digest": digest, "digest_kind": "sentences",
            "citations": json.dumps(citations, separators=(",", ":"))})
        rows[fmt.TOPIC_ENTITIES] += [{"topic_id": tid, "entity_id": kept[v], "rank": k,
                                      "weight": round(degree[v], 6)}
                                     for k, v in enumerate(ranked)]
        rows[fmt.TOPIC_SECTIONS] += [{"topic_id": tid, "section_id": s, "rank": k,
                                      "weight": round(section_weight[s], 6)}
                                     for k, s in enumerate(top_sections)]
    return {t: pl.DataFrame(rows[t], schema=SCHEMAS[t]) for t in SCHEMAS}
