"""Small real packs for the query tests: hand-written sections, the real offline embedder,
published through the build's real publish path (tasks.publish.atomic).

`build_pack(root, embedder)` returns the pack folder (`root/<name>/` with `current` and
`builds/<id>/`). Everything is deterministic so tests can assert exact rankings.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from packs import format as fmt
from packs.embedding import Embedder
from packs.manifest import EmbeddingInfo, ExtractorInfo, GateInfo, Manifest
from tasks.publish.atomic import publish, write_build
from tasks.publish.tables import write_unit_vectors
from tasks.vectors import embed_units, unit_rows

BASE = "https://docs.kestrel.test"

# (article slug, title, [(heading_path, content)])
ARTICLES: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("overview", "Kestrel overview", [
        ("Kestrel overview",
         "Kestrel is a lightweight job scheduler for Python services. It runs background "
         "jobs on a pool of workers, keeps their state in a durable store, and exposes a "
         "small HTTP API to submit, inspect and cancel jobs."),
        ("Kestrel overview > Architecture",
         "A Kestrel deployment has three parts: the scheduler, which decides when a job is "
         "due; the broker, which holds queued jobs; and one or more Worker processes that "
         "execute jobs and report results back to the scheduler."),
        ("Kestrel overview > Installation",
         "Install Kestrel with pip install kestrel, then run kestrel init to create the "
         "configuration file kestrel.toml in the current directory. The scheduler starts "
         "with the command kestrel serve and listens on port 8400 by default."),
    ]),
    ("retries", "Configuring retries", [
        ("Configuring retries > Retry policy",
         "When a job raises an exception, Kestrel retries it according to its RetryPolicy. "
         "The max_attempts setting limits how many times a job runs in total, and the "
         "backoff setting controls the delay between attempts, doubling after each failure."),
        ("Configuring retries > The RetryPolicy class",
         "RetryPolicy is a Python class you attach to a job with the retry argument. Its "
         "fields are max_attempts, which defaults to 5, backoff in seconds, which defaults "
         "to 2, and retry_on, a tuple of exception types that should trigger a retry."),
    ]),
    ("queues", "Queues", [
        ("Queues > Priority queues",
         "Every job is placed on a named queue. Workers poll queues in priority order, so "
         "jobs on the high queue always run before jobs on the default queue when both "
         "have work waiting, which keeps urgent work fast under load."),
        ("Queues > Dead letter queue",
         "A job that exhausts its retry attempts is moved to the dead letter queue instead "
         "of being dropped. You can inspect failed jobs there with kestrel dlq list and "
         "send them back for another run with kestrel dlq requeue."),
    ]),
    ("troubleshooting", "Troubleshooting", [
        ("Troubleshooting > Jobs stuck in pending",
         "If jobs stay in the pending state, no Worker is polling their queue. Check that "
         "at least one worker was started with the queue name in its --queues option and "
         "that the broker URL in kestrel.toml points at the running broker."),
        ("Troubleshooting > Worker crash loops",
         "A Worker that restarts over and over usually fails while importing the job "
         "module. Run kestrel worker --check to import every registered job once and print "
         "the traceback of the first import error before the worker starts."),
    ]),
    ("glossary", "Glossary", [
        ("Glossary > Job", "A job is one call of a registered function."),
        ("Glossary > Broker", "The broker stores queued jobs until a worker takes them."),
    ]),
]

LINKS = [
    ("overview", "retries"), ("overview", "queues"), ("overview", "troubleshooting"),
    ("retries", "queues"), ("queues", "retries"), ("troubleshooting", "retries"),
    ("troubleshooting", "queues"), ("glossary", "overview"), ("queues", "troubleshooting"),
    ("retries", "troubleshooting"),
]

# (name, type, description, [section heading paths that mention it])
ENTITIES = [
    ("Kestrel", "product", "A job scheduler for Python", ["Kestrel overview"]),
    ("RetryPolicy", "class", "Retry settings of a job", [
        "Configuring retries > Retry policy", "Configuring retries > The RetryPolicy class"]),
    ("Worker", "component", "Process that executes jobs", [
        "Kestrel overview > Architecture", "Troubleshooting > Worker crash loops",
        "Troubleshooting > Jobs stuck in pending"]),
    ("dead letter queue", "concept", "Where failed jobs go", ["Queues > Dead letter queue"]),
]
RELATIONSHIPS = [
    ("RetryPolicy", "sends exhausted jobs to", "dead letter queue"),
    ("Worker", "applies", "RetryPolicy"),
]
FACTS = [
    ("RetryPolicy.max_attempts defaults to 5.", "RetryPolicy",
     "Configuring retries > The RetryPolicy class"),
    ("RetryPolicy.backoff defaults to 2 seconds.", "RetryPolicy",
     "Configuring retries > The RetryPolicy class"),
    ("Failed jobs can be requeued with kestrel dlq requeue.", "dead letter queue",
     "Queues > Dead letter queue"),
]

FEWSHOT = [
    {"question": "What port does the scheduler listen on?",
     "answer": "Port 8400 by default [1]."},
    {"question": "How do I see jobs that failed for good?",
     "answer": "List them with kestrel dlq list [1]."},
    {"question": "What is a broker?", "answer": "The component that holds queued jobs [1]."},
]


def url_of(slug: str) -> str:
    return f"{BASE}/{slug}/"


def _strings(table: str) -> dict[str, type[pl.String]]:
    """All-string schema of a table, so that an empty one keeps its columns."""
    return {c: pl.String for c in fmt.TABLE_COLUMNS[table]}


def make_tables(embedder: Embedder, links=LINKS, pages=ARTICLES) -> dict[str, pl.DataFrame]:
    """The seven pack tables for the Kestrel docs above (or for `pages`, in their layout:
    the entities and facts above then mention only the sections `pages` has)."""
    articles, sections = [], []
    by_path: dict[str, str] = {}
    for slug, title, secs in pages:
        aid = fmt.article_id(url_of(slug))
        articles.append({"id": aid, "url": url_of(slug), "final_url": url_of(slug),
                         "title": title, "content_hash": fmt.content_hash(slug),
                         "content_type": "text/markdown",
                         "word_count": sum(len(c.split()) for _, c in secs)})
        for pos, (path, content) in enumerate(secs):
            ch = fmt.content_hash(content)
            sid = fmt.section_id(url_of(slug), path, ch, 0)
            by_path[path] = sid
            sections.append({"id": sid, "article_id": aid, "url": url_of(slug),
                             "title": title, "heading_path": path,
                             "level": path.count(">") + 1, "position": pos, "chunk": 0,
                             "content": content, "content_hash": ch,
                             "word_count": len(content.split()), "is_code": False})
    vecs = embedder.encode_documents([f"{s['heading_path']}\n{s['content']}" for s in sections])
    for s, v in zip(sections, vecs):
        s["embedding"] = v.tolist()
    degree = Counter()
    link_rows = []
    for a, b in links:
        link_rows.append({"source_id": fmt.article_id(url_of(a)),
                          "target_id": fmt.article_id(url_of(b))})
        degree[a] += 1
        degree[b] += 1
    for art, (slug, _, _) in zip(articles, pages):
        art["centrality"] = float(degree[slug])
    ent_id = {n: fmt.entity_id(n.lower(), t) for n, t, _, _ in ENTITIES}
    entities = [{"id": ent_id[n], "name": n, "type": t, "description": d, "aliases": []}
                for n, t, d, _ in ENTITIES]
    mentions = [{"section_id": by_path[p], "entity_id": ent_id[n]}
                for n, _, _, paths in ENTITIES for p in paths if p in by_path]
    rels = [{"source_id": ent_id[a], "target_id": ent_id[b], "relation": r, "evidence": "",
             "section_id": None} for a, r, b in RELATIONSHIPS]
    facts = [{"id": fmt.fact_id(text, by_path[p]), "text": text, "entity_id": ent_id[e],
              "section_id": by_path[p]} for text, e, p in FACTS if p in by_path]
    return {
        fmt.ARTICLES: pl.DataFrame(articles),
        fmt.SECTIONS: pl.DataFrame(sections),
        fmt.ENTITIES: pl.DataFrame(entities, schema_overrides={"aliases": pl.List(pl.String)}),
        fmt.MENTIONS: pl.DataFrame(mentions, schema=_strings(fmt.MENTIONS)),
        fmt.RELATIONSHIPS: pl.DataFrame(rels, schema_overrides={"section_id": pl.String}),
        fmt.FACTS: pl.DataFrame(facts, schema=_strings(fmt.FACTS)),
        fmt.LINKS: pl.DataFrame(link_rows, schema=_strings(fmt.LINKS)),
    }


def build_pack(
    root: Path,
    embedder: Embedder,
    *,
    name: str = "kestrel",
    build_id: str = "b0001",
    links=LINKS,
    fewshot: list[dict] | None = FEWSHOT,
    gate_threshold: float = 0.2,
    pages=ARTICLES,
    extra=None,
    gate: GateInfo | None = None,
    unit_vectors: bool = True,
) -> Path:
    """Publish a complete pack under `root/name` through the build's own publish path
    (tables, Kuzu, manifest, checksums, verification, the `current` pointer); returns
    that folder. `extra(tables)`: more tables to publish (the topic map), from the others;
    `gate`: the manifest's gate parameters (none: the model's calibration); `unit_vectors`:
    every answer unit's vector, as a build makes them (False: a pack built before them)."""
    pack_dir = root / name
    tables = make_tables(embedder, links, pages)
    if extra is not None:
        tables.update(extra(tables))
    source = root / f".source-{name}"
    if fewshot is not None:
        path = source / fmt.FEWSHOT_EXAMPLES
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(e) + "\n" for e in fewshot), encoding="utf-8")
    manifest = Manifest(
        name=name,
        build_id=build_id,
        built_at="2026-01-01T00:00:00Z",
        embedding=EmbeddingInfo(model=embedder.model_id, dim=embedder.dim,
                                gate_threshold=gate_threshold),
        extractor=ExtractorInfo(kind="offline"),
        kuzu_version="0.11.3",
        query_module_version="0.1.0",
        avg_links_per_article=len(links) / tables[fmt.ARTICLES].height,
        gate=gate,
    )
    def fill(tmp: Path) -> None:
        write_build(tmp, tables, manifest, source)
        if unit_vectors:  # as the build's unit_vectors stage and publish write them
            rows = unit_rows(tables[fmt.SECTIONS]["content"].fill_null("").to_list())
            part = root / f".unit-vectors-{name}.parquet"
            embed_units(rows, embedder)[0].write_parquet(part)
            write_unit_vectors(tmp / fmt.TABLES_DIR, [str(part)], embedder.model_id)

    publish(pack_dir, build_id, fill)
    return pack_dir


# --- pytest fixtures (import them into a test module to use them) -----------------------


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The offline all-MiniLM-L6-v2, loaded once per process (packs.embedding caches it)."""
    return Embedder("all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def pack_dir(tmp_path_factory, embedder) -> Path:
    """The Kestrel pack, built once per test module that imports this fixture."""
    return build_pack(tmp_path_factory.mktemp("packs"), embedder)


@pytest.fixture()
def pack(pack_dir, monkeypatch):
    """The Kestrel pack opened as an app without Claude would open it (no API key, no model
    override), closed after the test."""
    from packs import KnowledgePack

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("KPACK_EMBEDDING_MODEL", raising=False)
    with KnowledgePack.open(pack_dir) as p:
        yield p
