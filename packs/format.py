"""The pack format: every name a pack directory, its tables and its database use.

One module owns the format so that the build (which writes packs) and the query side
(which reads them) cannot drift apart. Bump FORMAT_VERSION whenever a reader of the
previous version would misread a new pack; the query module refuses formats it does not
know (see `check_format`).

A pack folder (what `kpack build --out DIR` produces as DIR/<name>/) looks like::

    <name>/
      current                 text file: the build id readers should open
      builds/<build_id>/
        manifest.json
        manifest.sig          optional: the manifest's signature (packs/signing.py)
        pack.db               Kuzu database (node + rel tables, HNSW + FTS indexes)
        tables/*.parquet      the same data as plain Parquet (no Kuzu needed), plus
                              terms.json (the sections' vocabulary, format 3)
        eval/questions.jsonl  optional, copied from the source folder
        fewshot/examples.jsonl optional, copied from the source folder
        packs.pyz             the query module that built it (see packs/vendor.py)
        encoder/model.onnx    the query encoder (ONNX export of the embedding model)
        encoder/tokenizer.json  its tokenizer (both listed with sha256 in the manifest)

`KnowledgePack.open` accepts the pack folder (follows `current`) or one build folder.
"""

from __future__ import annotations

import hashlib
import re

# 2: Section.languages (code-fence languages) and the optional keyword vector
#    (Section.keyword_embedding + its HNSW index, manifest.keyword_vectors).
# 3: Section.graph (the section's entities, facts and triples as JSON, precomputed at build
#    time so a query reads them with one lookup) and manifest.gate (the confidence gate).
FORMAT_VERSION = 3
# Version of the query module (`packs`) itself; recorded in every manifest it builds.
QUERY_MODULE_VERSION = "0.1.0"
# Readers accept every format version listed here. Format 1 packs have neither languages
# nor keyword vectors, formats 1-2 no Section.graph; readers fall back (see packs.filters,
# packs.db).
READABLE_FORMATS = frozenset({1, 2, 3})

MANIFEST_FILE = "manifest.json"
# The detached Ed25519 signature of manifest.json (packs/signing.py); optional, and the
# one file of a build besides the manifest that the manifest's checksums do not list.
SIGNATURE_FILE = "manifest.sig"
DB_FILE = "pack.db"
TABLES_DIR = "tables"
BUILDS_DIR = "builds"
CURRENT_FILE = "current"
EVAL_QUESTIONS = "eval/questions.jsonl"
FEWSHOT_EXAMPLES = "fewshot/examples.jsonl"
VENDORED_MODULE = "packs.pyz"
# The query encoder a build carries (see packs/encoder.py): the ONNX export of the pack's
# embedding model and its tokenizer, each with a sha256 in the manifest.
ENCODER_DIR = "encoder"
ENCODER_MODEL = "encoder/model.onnx"
ENCODER_TOKENIZER = "encoder/tokenizer.json"

# --- Parquet tables (file stem -> columns). Embeddings are float32 lists. ---------------
ARTICLES = "articles"
SECTIONS = "sections"
ENTITIES = "entities"
MENTIONS = "mentions"
RELATIONSHIPS = "relationships"
FACTS = "facts"
LINKS = "links"
# The map of the pack's topics (tasks/topics.py; packs/topics.py reads it): communities of
# the entity graph. Packs built before it have none of the three (`manifest.topics`).
TOPICS = "topics"
TOPIC_ENTITIES = "topic_entities"
TOPIC_SECTIONS = "topic_sections"

TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    ARTICLES: (
        "id", "url", "final_url", "title", "content_hash", "content_type",
        "word_count", "centrality",
    ),
    SECTIONS: (
        "id", "article_id", "url", "title", "heading_path", "level", "position",
        "chunk", "content", "content_hash", "word_count", "is_code", "languages", "graph",
        "embedding",
    ),
    ENTITIES: ("id", "name", "type", "description", "aliases"),
    MENTIONS: ("section_id", "entity_id"),
    RELATIONSHIPS: ("source_id", "target_id", "relation", "evidence", "section_id"),
    FACTS: ("id", "text", "entity_id", "section_id"),
    LINKS: ("source_id", "target_id"),
    # digest: Markdown lines citing [n]; citations: JSON [{n, section_id, start, end}], each
    # a span of that section's content; digest_kind: "sentences" (offline) or "claude".
    TOPICS: ("id", "title", "rank", "size", "sections", "entity_names", "digest",
             "digest_kind", "citations"),
    TOPIC_ENTITIES: ("topic_id", "entity_id", "rank", "weight"),
    TOPIC_SECTIONS: ("topic_id", "section_id", "rank", "weight"),
}
# Tables a build may lack (packs built before topics): readers check before reading them.
OPTIONAL_TABLES = (TOPICS, TOPIC_ENTITIES, TOPIC_SECTIONS)

# Derived at build time from the sections (format 3; absent before): tables/terms.json,
# {"sections": N, "text_rules": version, "terms": {term: number of sections using it},
# "pairs": base64, "code_sections": N} for every word term of the sections' heading paths
# and text (packs.retrieval.gate.terms), the sorted little-endian uint32 CRC-32 hashes of
# every adjacent content-word pair (gate.text_pairs) and the number of sections holding
# fenced code (gate.has_code), for the confidence gate. Terms and pairs are counted with
# the packs/text.py rules "text_rules" names (TEXT_RULES_VERSION): a file counted with
# other rules (or none named: packs built before "text-v1" folded plurals instead of
# stemming) is counted again from the sections by readers, as are packs built before
# "pairs" or "code_sections".
# JSON, not Parquet: the query runtime reads it without polars or pyarrow.
TERMS_FILE = "terms.json"
# Derived at build time from the sections (absent before 2026-12-02): tables/units.jsonl,
# each distinct section text's answer units and what the reader reads of each whatever
# the question (packs/retrieval/unit_store.py, which also reads it). Made by other rules
# than the reader's (its "version"), or missing, the units are worked out at query time.
UNITS_FILE = "units.jsonl"

# Section columns a pack may lack: derived when missing (languages, from the content; graph,
# from the entity tables) or present only when the build made them (keyword_embedding: a
# second vector per section from its entities and key phrases, same model and dimension as
# `embedding`).
SECTION_DERIVED_COLUMNS = ("languages", "graph")
# Section.graph: JSON {"entities": [[name, type]], "facts": [text], "triples": [[subject,
# relation, object]]} of what was extracted from that section (facts and triples whose
# evidence is the section), each list sorted and capped at GRAPH_CAP items; "" when the
# section has none.
GRAPH_CAP = 24
KEYWORD_EMBEDDING = "keyword_embedding"

# --- Kuzu schema ----------------------------------------------------------------------
VECTOR_INDEX = "section_vec"
KEYWORD_VECTOR_INDEX = "section_kw_vec"
FTS_INDEX = "section_fts"


def kuzu_schema(dim: int, keyword_vectors: bool = False) -> list[str]:
    """DDL statements for a pack database whose section embeddings have `dim` floats
    (plus the keyword vector column when `keyword_vectors`)."""
    if dim <= 0:
        raise ValueError(f"embedding dimension must be positive, got {dim}")
    keyword = f", {KEYWORD_EMBEDDING} FLOAT[{dim}]" if keyword_vectors else ""
    return [
        "CREATE NODE TABLE Article(id STRING, url STRING, final_url STRING, title STRING, "
        "content_hash STRING, content_type STRING, word_count INT64, centrality DOUBLE, "
        "PRIMARY KEY(id))",
        "CREATE NODE TABLE Section(id STRING, article_id STRING, url STRING, title STRING, "
        "heading_path STRING, level INT64, position INT64, chunk INT64, content STRING, "
        "content_hash STRING, word_count INT64, is_code BOOLEAN, languages STRING[], "
        f"graph STRING, embedding FLOAT[{dim}]{keyword}, PRIMARY KEY(id))",
        "CREATE NODE TABLE Entity(id STRING, name STRING, type STRING, description STRING, "
        "aliases STRING[], PRIMARY KEY(id))",
        "CREATE NODE TABLE Fact(id STRING, text STRING, entity_id STRING, section_id STRING, "
        "PRIMARY KEY(id))",
        "CREATE REL TABLE HAS_SECTION(FROM Article TO Section)",
        "CREATE REL TABLE MENTIONS(FROM Section TO Entity)",
        "CREATE REL TABLE RELATED_TO(FROM Entity TO Entity, relation STRING, evidence STRING, "
        "section_id STRING)",
        "CREATE REL TABLE HAS_FACT(FROM Entity TO Fact)",
        "CREATE REL TABLE LINKS_TO(FROM Article TO Article)",
        "CREATE NODE TABLE Topic(id STRING, title STRING, rank INT64, size INT64, "
        "sections INT64, entity_names STRING[], digest STRING, digest_kind STRING, "
        "citations STRING, PRIMARY KEY(id))",
        "CREATE REL TABLE IN_TOPIC(FROM Entity TO Topic, rank INT64, weight DOUBLE)",
        "CREATE REL TABLE COVERS(FROM Topic TO Section, rank INT64, weight DOUBLE)",
    ]


# --- Deterministic ids ---------------------------------------------------------------


def short_hash(*parts: str) -> str:
    """A 16-hex-digit sha256 of the parts joined by NUL: stable across runs and machines."""
    h = hashlib.sha256("\x00".join(parts).encode("utf-8"))
    return h.hexdigest()[:16]


def content_hash(text: str | bytes) -> str:
    """Full sha256 hex digest of text (UTF-8) or bytes."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def article_id(canonical_url: str) -> str:
    return short_hash("article", canonical_url)


def section_id(url: str, heading_path: str, section_content_hash: str, chunk: int) -> str:
    return short_hash("section", url, heading_path, section_content_hash, str(chunk))


_NON_WORD = re.compile(r"[^\w]+")


def entity_id(normalized_name: str, entity_type: str) -> str:
    return short_hash("entity", normalized_name, entity_type.lower())


def fact_id(text: str, section: str) -> str:
    return short_hash("fact", _NON_WORD.sub(" ", text.lower()).strip(), section)


class PackFormatError(RuntimeError):
    """A pack directory is missing, unreadable, or of a format this module cannot read."""


def check_format(version: object, where: str) -> None:
    """Raise PackFormatError unless `version` is a format this query module can read."""
    if version not in READABLE_FORMATS:
        raise PackFormatError(
            f"{where}: pack format {version!r} is not readable by this query module "
            f"(reads {sorted(READABLE_FORMATS)}); upgrade knowledge-packs or rebuild the pack"
        )
