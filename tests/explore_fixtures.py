"""Packs for the explorer's tests, published through the build's real publish path:

- "kestrel" (tests/query_fixtures.py's docs) with two builds for /diff: the second edits
  one section, drops the glossary page, adds a page and re-describes one entity; its
  history holds a refused, a failed and a crashed run between them; the second build has
  a saved `kpack eval` scorecard, made by the real evaluation.
- "hostile": pages whose titles, headings, text, URLs and entity names carry `<script>`,
  `onerror=` and `javascript:` links, a tag inside a code span, a description with markup,
  and a hub entity with more neighbours than one page of the graph shows.

`explorer_packs(root, embedder)` builds both and returns {name: pack folder}.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from query_fixtures import ARTICLES, BASE, LINKS, make_tables

from packs import format as fmt
from packs import layout
from packs.embedding import Embedder
from packs.manifest import EmbeddingInfo, ExtractorInfo, Manifest
from tasks.publish.atomic import publish, write_build

PWNED = "window.__pwned"  # what a hostile script would set, were it ever run
EVIL_URL = "javascript:alert(document.domain)//evil"
EVIL_TITLE = f"<script>{PWNED} = 'title'</script> Evil kettles"
EVIL_HEADING = f"Evil kettles > Descaling <img src=x onerror=\"{PWNED}='heading'\">"
EVIL_TEXT = (
    "Descale the kettle monthly with white vinegar in hard-water areas. "
    f"<script>{PWNED} = 'text'</script> Read [the descaling guide](javascript:alert(1)) or "
    f"<a href=\"javascript:alert(2)\">this one</a>. <img src=x onerror=\"{PWNED}='img'\"> "
    "Rinse the kettle twice before boiling water for tea again."
)
# A tag inside a code span is code: the offline answer quotes it as the page writes it.
EVIL_CODE = f"<img src=x onerror=\"{PWNED}='code'\">"
EVIL_CODE_TEXT = (f"The kettle's label printer handles `{EVIL_CODE}` payloads by escaping "
                  "every angle bracket before it prints a label.")
EVIL_ENTITY = f"<script>{PWNED}='entity'</script>"
EVIL_DESCRIPTION = f"<img src=x onerror=\"{PWNED}='description'\"> a bad entity"
EVIL_PACK_DESCRIPTION = f"Tea things <script>{PWNED}='pack'</script>"
HUB = "Kettle"
HUB_NEIGHBOURS = 45  # more than one page of the graph (views_graph.NEIGHBOURS_PAGE = 40)

HOSTILE_PAGES = [
    ("kettles", EVIL_TITLE, [
        ("Evil kettles", "A kettle boils water for tea. Electric kettles switch off by "
                         "themselves when the water boils."),
        (EVIL_HEADING, EVIL_TEXT),
        ("Evil kettles > Labels", EVIL_CODE_TEXT),
    ]),
    ("teapots", "Teapots", [
        ("Teapots > Warming the pot", "Warm the teapot with hot water before brewing so the "
                                      "tea stays hot longer."),
    ]),
]
EDITED = "Queues > Priority queues"


def publish_tables(root: Path, name: str, build_id: str, tables: dict[str, pl.DataFrame],
                   embedder: Embedder, description: str = "",
                   previous: str | None = None) -> Path:
    """Publish `tables` as build `build_id` of `root/name` (the build's publish path)."""
    pack_dir = root / name
    manifest = Manifest(
        name=name, description=description, build_id=build_id,
        built_at=f"2026-01-0{build_id[-1]}T00:00:00Z",
        embedding=EmbeddingInfo(model=embedder.model_id, dim=embedder.dim, gate_threshold=0.2),
        extractor=ExtractorInfo(kind="offline", note="offline heuristic extractor"),
        kuzu_version="0.11.3", query_module_version="0.1.0",
        durations={"fetch": 1.5, "split": 0.2, "extract": 3.0, "embed": 2.5},
        avg_links_per_article=len(tables[fmt.LINKS]) / len(tables[fmt.ARTICLES]),
        extra={"extract_stats": {"calls": 4, "cost_usd": 0.0123, "cache_hits": 2},
               "guard": "passed", "previous_build": previous},
    )
    publish(pack_dir, build_id, lambda tmp: write_build(tmp, tables, manifest))
    return pack_dir


def _second_kestrel_build(embedder: Embedder) -> dict[str, pl.DataFrame]:
    pages = [(slug, title, [(path, content + " Priority is set per queue in kestrel.toml."
                             if path == EDITED else content) for path, content in secs])
             for slug, title, secs in ARTICLES if slug != "glossary"]
    pages.append(("scheduling", "Scheduling", [
        ("Scheduling > Cron jobs", "Kestrel runs a job on a cron schedule when it is "
                                   "registered with the schedule argument.")]))
    links = [(a, b) for a, b in LINKS if "glossary" not in (a, b)] + [("overview", "scheduling")]
    tables = make_tables(embedder, links, pages)
    queues = fmt.article_id(f"{BASE}/queues/")
    tables[fmt.ARTICLES] = tables[fmt.ARTICLES].with_columns(
        pl.when(pl.col("id") == queues).then(pl.lit(fmt.content_hash("queues, edited")))
        .otherwise(pl.col("content_hash")).alias("content_hash"))
    tables[fmt.ENTITIES] = tables[fmt.ENTITIES].with_columns(
        pl.when(pl.col("name") == "Worker").then(pl.lit("A process that runs jobs"))
        .otherwise(pl.col("description")).alias("description"))
    return tables


def _hostile_tables(embedder: Embedder) -> dict[str, pl.DataFrame]:
    tables = make_tables(embedder, [("kettles", "teapots")], HOSTILE_PAGES)
    evil_article = fmt.article_id(f"{BASE}/kettles/")
    tables[fmt.ARTICLES] = tables[fmt.ARTICLES].with_columns(
        pl.when(pl.col("id") == evil_article).then(pl.lit(EVIL_URL))
        .otherwise(pl.col("url")).alias("url"))
    tables[fmt.SECTIONS] = tables[fmt.SECTIONS].with_columns(
        pl.when(pl.col("article_id") == evil_article).then(pl.lit(EVIL_URL))
        .otherwise(pl.col("url")).alias("url"))
    sections = tables[fmt.SECTIONS]
    evil_section = sections.filter(pl.col("heading_path") == EVIL_HEADING)["id"][0]
    names = [(EVIL_ENTITY, "code", EVIL_DESCRIPTION), (HUB, "concept", "Boils water")]
    names += [(f"Kettle part {i:02d}", "concept", f"Part {i} of a kettle")
              for i in range(HUB_NEIGHBOURS)]
    ids = {n: fmt.entity_id(n.lower(), t) for n, t, _ in names}
    entities = pl.DataFrame([{"id": ids[n], "name": n, "type": t, "description": d,
                              "aliases": []} for n, t, d in names],
                            schema_overrides={"aliases": pl.List(pl.String)})
    mentions = pl.DataFrame([{"section_id": evil_section, "entity_id": ids[n]}
                             for n, _, _ in names])
    rels = pl.DataFrame([{"source_id": ids[HUB], "target_id": ids[n], "relation": "has part",
                          "evidence": "", "section_id": evil_section}
                         for n, _, _ in names if n != HUB],
                        schema_overrides={"section_id": pl.String})
    facts = pl.DataFrame([{"id": fmt.fact_id(EVIL_DESCRIPTION, evil_section),
                           "text": f"{EVIL_ENTITY} descales kettles.",
                           "entity_id": ids[EVIL_ENTITY], "section_id": evil_section}])
    tables.update({fmt.ENTITIES: entities, fmt.MENTIONS: mentions, fmt.RELATIONSHIPS: rels,
                   fmt.FACTS: facts})
    return tables


def _saved_scorecard(pack_dir: Path) -> None:
    """Run the real evaluation on the pack and keep its scorecard as `kpack eval` does."""
    from packs import KnowledgePack
    from packs.eval_questions import Question, parse_gold
    from packs.evaluation import evaluate, save_report

    questions = [
        Question(id="q-retry", question="How many times is a failed job retried?",
                 gold=(parse_gold({"source": f"{BASE}/retries/"}),), kind="howto"),
        Question(id="q-dlq", question="Where do jobs go after their last failed attempt?",
                 gold=(parse_gold({"source": f"{BASE}/queues/"}),), kind="concept"),
    ]
    with KnowledgePack.open(pack_dir) as pack:
        report = evaluate(pack, questions, answers=True)
        save_report(report, pack.path, "tests/questions.jsonl")


def explorer_packs(root: Path, embedder: Embedder) -> dict[str, Path]:
    """Build the "kestrel" (two builds and a history) and "hostile" packs under `root`."""
    kestrel = publish_tables(root, "kestrel", "b0001", make_tables(embedder), embedder,
                             "Kestrel job scheduler docs")
    layout.append_history(kestrel, "b0001", "published", "pages +5 ~0 -0 (0 unchanged)")
    layout.append_history(kestrel, "b0002", "refused",
                          "GuardError: 5 of 11 sections (45%) failed extraction")
    layout.append_history(kestrel, "b0003", "failed", "BuildError: none of the URLs could be "
                                                      "fetched")
    layout.append_history(kestrel, "b0004", "crashed", "its process died holding the lock")
    publish_tables(root, "kestrel", "b0005", _second_kestrel_build(embedder), embedder,
                   "Kestrel job scheduler docs", previous="b0001")
    layout.append_history(kestrel, "b0005", "published", "pages +1 ~1 -1 (3 unchanged)")
    _saved_scorecard(kestrel)
    hostile = publish_tables(root, "hostile", "b0001", _hostile_tables(embedder), embedder,
                             EVIL_PACK_DESCRIPTION)
    return {"kestrel": kestrel, "hostile": hostile}
