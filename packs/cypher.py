"""Every Cypher statement the query side runs, as constants with `$parameters` (user text
never becomes Cypher). packs/db.py runs them; the tests run each on a real database.
"""

from __future__ import annotations

from pathlib import Path

from packs import format as fmt

SECTION_COLS = ("s.id, s.article_id, s.url, s.title, s.heading_path, s.content, "
                 "s.word_count, s.position")

VECTOR_SEARCH = (
    f"CALL QUERY_VECTOR_INDEX('Section', '{fmt.VECTOR_INDEX}', $q, $k) "
    "WITH node AS s, distance "
    f"RETURN {SECTION_COLS}, distance ORDER BY distance"
)
FTS_SEARCH = (
    f"CALL QUERY_FTS_INDEX('Section', '{fmt.FTS_INDEX}', $q, top := $k) "
    "WITH node AS s, score "
    f"RETURN {SECTION_COLS}, score, s.embedding ORDER BY score DESC"
)
FTS_FLOOR = (
    f"CALL QUERY_FTS_INDEX('Section', '{fmt.FTS_INDEX}', $q, top := $k) "
    "WITH node AS s, score "
    f"RETURN {SECTION_COLS}, score ORDER BY score DESC"
)
SECTIONS_BY_ID = (
    f"MATCH (s:Section) WHERE s.id IN $ids RETURN {SECTION_COLS}, s.embedding"
)
# SECTIONS_BY_ID reads each returned column of every section; packs/db.py looks a few ids
# up by primary key instead (PK_LOOKUPS) and uses it for more.
# Every section of some articles with its similarity to the question ($q), computed by
# Kuzu: an answer reads the cited pages' other sections (~130 rows a question on the
# Kubernetes pack), and returning their vectors to compute it here took 18 ms p50, this
# 10 ms.
ARTICLE_SECTIONS = (
    f"MATCH (a:Article)-[:HAS_SECTION]->(s:Section) WHERE a.id IN $ids "
    f"RETURN {SECTION_COLS}, array_inner_product(s.embedding, $q) "
    "ORDER BY s.article_id, s.position"
)


def article_similarities(n: int) -> str:
    """The id of every section of some articles ($ids) with its similarity to each of `n`
    vectors ($q0 ... $q{n-1}), computed by Kuzu: an answer to a question about several
    things ranks the cited pages' sections for each of them (~180 sections; their columns
    and vectors fetched by id, once a part, took 62 ms for two parts, this 9 ms)."""
    scores = ", ".join(f"array_inner_product(s.embedding, $q{i})" for i in range(n))
    return ("MATCH (a:Article)-[:HAS_SECTION]->(s:Section) WHERE a.id IN $ids "
            f"RETURN s.id, {scores}")


_LINKED = ("MATCH (a:Article)-[:LINKS_TO]->(b:Article)-[:HAS_SECTION]->(s:Section) "
           "WHERE a.id IN $ids ")
LINKED_SECTIONS = f"{_LINKED}RETURN a.id, {SECTION_COLS}, s.embedding"
# The same sections' ids, articles and similarity to the question ($q), computed by Kuzu:
# multi-document expansion keeps only the best section of a few articles, so it fetches
# columns and vectors for those alone (LINKED_SECTIONS: 8.9 ms p50 on the Kubernetes pack,
# this 5.3 ms, returning ~100 rows).
LINKED_SCORES = (f"{_LINKED}RETURN s.id, s.article_id, "
                 "array_inner_product(s.embedding, $q)")
LINKING_SECTIONS = (
    "MATCH (a:Article)<-[:LINKS_TO]-(b:Article)-[:HAS_SECTION]->(s:Section) "
    f"WHERE a.id IN $ids RETURN a.id, {SECTION_COLS}, s.embedding"
)
ENTITY_SECTIONS = (
    "MATCH (x:Section)-[:MENTIONS]->(e:Entity)<-[:MENTIONS]-(s:Section) "
    f"WHERE x.id IN $ids AND s.id <> x.id RETURN x.id, {SECTION_COLS}, s.embedding"
)
# Keyword vectors (format 2): candidates from both indexes, then both similarities of the
# union, computed in the database.
KEYWORD_VECTOR_SEARCH = (
    f"CALL QUERY_VECTOR_INDEX('Section', '{fmt.KEYWORD_VECTOR_INDEX}', $q, $k) "
    "WITH node AS s, distance "
    f"RETURN {SECTION_COLS}, distance ORDER BY distance"
)
SECTION_SIMILARITIES = (
    f"MATCH (s:Section) WHERE s.id IN $ids RETURN {SECTION_COLS}, "
    "array_cosine_similarity(s.embedding, $q), "
    f"array_cosine_similarity(s.{fmt.KEYWORD_EMBEDDING}, $q)"
)
# Filtered searches scan the sections the filter admits, exactly (no HNSW): a filter then
# narrows the candidates before any ranking or truncation. `{where}` is built by
# packs.filters.where from constant fragments; every value is a parameter.
FILTERED_VECTOR_SEARCH = (
    "MATCH (s:Section) WHERE {where} "
    f"WITH s, array_cosine_similarity(s.embedding, $q) AS sim "
    f"RETURN {SECTION_COLS}, sim ORDER BY sim DESC LIMIT $k"
)
FILTERED_KEYWORD_VECTOR_SEARCH = (
    "MATCH (s:Section) WHERE {where} "
    "WITH s, array_cosine_similarity(s.embedding, $q) AS sim, "
    f"array_cosine_similarity(s.{fmt.KEYWORD_EMBEDDING}, $q) AS ksim "
    f"RETURN {SECTION_COLS}, sim, ksim ORDER BY (1.0 - $w) * sim + $w * ksim DESC LIMIT $k"
)
FILTERED_FTS_SEARCH = (
    f"CALL QUERY_FTS_INDEX('Section', '{fmt.FTS_INDEX}', $q) "
    "WITH node AS s, score WHERE {where} "
    f"RETURN {SECTION_COLS}, score, s.embedding ORDER BY score DESC LIMIT $k"
)
ARTICLE_URLS = "MATCH (a:Article) RETURN a.url"
ARTICLE_TITLES = "MATCH (a:Article) RETURN a.id, a.title"
SECTION_TEXTS = "MATCH (s:Section) RETURN s.heading_path, s.content"
SECTION_LANGUAGES = ("MATCH (s:Section) UNWIND s.languages AS lang "
                     "RETURN DISTINCT lang")
CENTRALITY = "MATCH (a:Article) RETURN a.id, a.centrality"
ENTITY_NAMES = "MATCH (e:Entity) RETURN e.name, e.aliases"
SECTION_ENTITIES = (
    "MATCH (s:Section)-[:MENTIONS]->(e:Entity) WHERE s.id IN $ids "
    "OPTIONAL MATCH (e)-[:HAS_FACT]->(f:Fact) "
    "RETURN s.id, e.id, e.name, e.type, f.text"
)
# Format 3: the graph facts of each section, precomputed at build time (packs.format).
SECTION_GRAPHS = "MATCH (s:Section) WHERE s.id IN $ids RETURN s.id, s.graph"
SECTION_TRIPLES = (
    "MATCH (s:Section)-[:MENTIONS]->(e:Entity)-[r:RELATED_TO]->(o:Entity) "
    "WHERE s.id IN $ids RETURN s.id, e.name, r.relation, o.name "
    "UNION MATCH (s:Section)-[:MENTIONS]->(e:Entity)<-[r:RELATED_TO]-(o:Entity) "
    "WHERE s.id IN $ids RETURN s.id, o.name, r.relation, e.name"
)


def file_literal(path: Path | str) -> str:
    """`path` as a Cypher string literal, for the statements that take no parameter for
    their file (COPY ... FROM, LOAD FROM): backslashes and quotes escaped, so a folder
    named like "it's" still loads."""
    return "'" + Path(path).as_posix().replace("\\", "\\\\").replace("'", "\\'") + "'"
