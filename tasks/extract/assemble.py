"""Per-section extractions → the pack's four extraction tables (pure).

`assemble` resolves entities across all the sections it is given (tasks.extract.entities)
and builds the entities, mentions, relationships and facts tables with the column names of
packs.format.TABLE_COLUMNS. `assemble_judged` (the offline extractor's) lets the entity
model (tasks/extract/judge.py) judge the resolved entities first and leaves out those it
rejects, with the facts and relationships that name them, then the fact model
(tasks/extract/judge_facts.py) the facts that do not read on their own.
"""

from __future__ import annotations

import polars as pl

from packs.format import ENTITIES, FACTS, MENTIONS, RELATIONSHIPS, TABLE_COLUMNS, fact_id
from tasks.extract.entities import RawEntity, resolve_entities
from tasks.extract.judge import PackText, entity_scores, load_model
from tasks.extract.judge_facts import fact_scores
from tasks.extract.names import rendered
from tasks.extract.schema import Extraction

_SCHEMAS = {
    ENTITIES: {"id": pl.Utf8, "name": pl.Utf8, "type": pl.Utf8, "description": pl.Utf8,
               "aliases": pl.List(pl.Utf8)},
    MENTIONS: {"section_id": pl.Utf8, "entity_id": pl.Utf8},
    RELATIONSHIPS: {"source_id": pl.Utf8, "target_id": pl.Utf8, "relation": pl.Utf8,
                    "evidence": pl.Utf8, "section_id": pl.Utf8},
    FACTS: {"id": pl.Utf8, "text": pl.Utf8, "entity_id": pl.Utf8, "section_id": pl.Utf8},
}
assert all(tuple(_SCHEMAS[t]) == TABLE_COLUMNS[t] for t in _SCHEMAS), "columns drifted"


def _frame(table: str, rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=_SCHEMAS[table])


def _without(ex: Extraction, stop: set[str] | frozenset[str]) -> Extraction:
    """`ex` less the entities named in `stop` and what refers to them."""
    def kept(name: str) -> bool:
        return rendered(name).strip("`") not in stop

    return Extraction.model_construct(
        entities=[e for e in ex.entities if kept(e.name)],
        relationships=[r for r in ex.relationships if kept(r.source) and kept(r.target)],
        facts=[f for f in ex.facts if kept(f.entity)])


def assemble(extractions: list[tuple[str, Extraction]],
             stop_names: set[str] | frozenset[str] = frozenset()) -> dict[str, pl.DataFrame]:
    """Resolve entities across all sections and build the entities, mentions, relationships
    and facts tables (deterministic for a given input; sorted rows).

    Names used by a relationship or fact but missing from the section's entity list become
    entities of type "other" rather than being dropped. `stop_names`: names left out
    wherever they occur, with the relationships and facts that need them (the offline
    extractor's examples' own names: tasks/extract/offline_names.py `bound_names`).
    """
    if stop_names:
        extractions = [(sid, _without(ex, stop_names)) for sid, ex in extractions]
    raws: list[RawEntity] = []
    for sid, ex in extractions:
        declared = set()
        for e in ex.entities:
            raws.append(RawEntity(e.name, e.type, e.description, tuple(e.aliases), sid))
            declared.add(e.name.lower())
        extra = [r.source for r in ex.relationships] + [r.target for r in ex.relationships]
        extra += [f.entity for f in ex.facts]
        for name in extra:
            if name.lower() not in declared:
                declared.add(name.lower())
                raws.append(RawEntity(name, "other", "", (), sid))
    res = resolve_entities(raws)

    mentions = sorted({(r.section_id, res.lookup(r.name)) for r in raws
                       if res.lookup(r.name) is not None})
    rels: dict[tuple, dict] = {}
    facts: dict[str, dict] = {}
    for sid, ex in extractions:
        for r in ex.relationships:
            src, tgt = res.lookup(r.source), res.lookup(r.target)
            if src is None or tgt is None or src == tgt:
                continue
            rels.setdefault((src, tgt, r.relation, sid), {
                "source_id": src, "target_id": tgt, "relation": r.relation,
                "evidence": r.evidence, "section_id": sid})
        for f in ex.facts:
            eid = res.lookup(f.entity)
            if eid is None:
                continue
            fid = fact_id(f.text, sid)
            facts.setdefault(fid, {"id": fid, "text": f.text, "entity_id": eid,
                                   "section_id": sid})
    return {
        ENTITIES: _frame(ENTITIES, [
            {"id": e.id, "name": e.name, "type": e.type, "description": e.description,
             "aliases": e.aliases} for e in res.entities]),
        MENTIONS: _frame(MENTIONS, [{"section_id": s, "entity_id": e} for s, e in mentions]),
        RELATIONSHIPS: _frame(RELATIONSHIPS, [rels[k] for k in sorted(rels)]),
        FACTS: _frame(FACTS, [facts[k] for k in sorted(facts)]),
    }


# The entity model reads how many pages name a thing. It was fitted on packs of tens to
# hundreds of pages (Kubernetes, the Rust book, the Cargo book); in a pack of a few pages
# every name is on one page, and it rejected them all (a 3-page pack came out with no
# entities). Below this size the rules' entities stand unjudged.
MIN_JUDGED_PAGES = 20


def rejected_names(entities: pl.DataFrame, text: PackText, model: dict) -> set[str]:
    """The names and aliases of the `entities` (an entities table) that the entity model
    of `model` scores under its threshold in the pack `text`."""
    scores = entity_scores(list(zip(entities["name"], entities["type"])), text, model)
    rejected: set[str] = set()
    for name, aliases, p in zip(entities["name"], entities["aliases"].to_list(), scores):
        if p < model["entity"]["threshold"]:
            rejected |= {name, *(aliases or [])}
    return rejected


def assemble_judged(extractions: list[tuple[str, Extraction]],
                    stop_names: set[str] | frozenset[str], text: PackText,
                    model: dict | None = None,
                    sections: dict[str, tuple[str, str]] | None = None
                    ) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """(tables, the names left out): `assemble`, then the entity model's verdict on every
    resolved entity in the pack `text`; those under its threshold are left out wherever
    they occur (their names and aliases join `stop_names`). Then the fact model
    (tasks/extract/judge_facts.py) leaves out the facts under its threshold, each read in
    its section (`sections`: section id → (heading path, content))."""
    tables = assemble(extractions, stop_names)
    if text.pages < MIN_JUDGED_PAGES:
        return tables, []
    model = model or load_model()
    rejected = rejected_names(tables[ENTITIES], text, model)
    if rejected:
        tables = assemble(extractions, set(stop_names) | rejected)
    # A fact that quotes a rejected name as code was left out here before the fact model
    # judged facts; of the labelled facts the model keeps, those read on their own about
    # as often as the rest (Kubernetes 0.93 against 0.91, the Rust book 0.90 against
    # 0.94: benchmarks/graph_model.py --quoted-rejected), so the fact model alone decides.
    if "fact" in model and sections is not None:
        facts = tables[FACTS]
        where = [sections.get(sid, ("", "")) for sid in facts["section_id"]]
        probs = fact_scores([(t, h, c) for t, (h, c) in zip(facts["text"], where)], text,
                            model["fact"])
        tables[FACTS] = facts.filter(pl.Series([p >= model["fact"]["threshold"] for p in probs],
                                               dtype=pl.Boolean))
    return tables, sorted(rejected)
