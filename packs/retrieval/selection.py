"""The search stages after the candidates are found: the confidence gate, then choosing
and ordering the sections shown (cross-encoder, per-page diversification, graph rerank),
related sections through links, the quality filter, graph facts and few-shot examples
(packs/pipeline.py runs them in order).

Each is a function of (state, pack) that reads and writes the `QueryState`; the pure
rules they apply live in the sibling modules (gate, graph, quality, rerank).
"""

from __future__ import annotations

from packs.db import QueryLog
from packs.result import Facts, RankedSection
from packs.retrieval import gate, graph, hybrid, quality, rerank
from packs.retrieval.state import PackReader, QueryState, ranked


def confidence_gate(st: QueryState, pack: PackReader) -> None:
    """Whether the pack can answer (on the fused candidates, before any reranking); when
    it cannot, the search ends here with no sections."""
    top = [f"{st.rows[i].heading_path}\n{st.rows[i].content}"
           for i in st.order[:gate.TOP_SECTIONS]]
    st.verdict = gate.decide(st.question, st.sims, top, pack.vocabulary,
                             gate.params_of(pack.manifest), st.opts.gate_threshold,
                             pack.manifest.embedding.gate_threshold)
    st.gated = not st.verdict["passed"]


def pool(st: QueryState, pack: PackReader) -> None:
    """The candidates the choice is made from. The first `distinct` results come from as
    many pages; those may lie past the first n_candidates of the fusion (one long page can
    fill them all), so such a search keeps the whole fused pool (at most the vector and
    BM25 candidates together); any other keeps the first n_candidates."""
    st.distinct = (graph.distinct_count(st.opts.distinct_first, pack.vocabulary().technical)
                   if st.opts.use_enhancements else 0)
    if not st.distinct:
        st.order = st.order[:st.n_candidates]


def cross_encoder(st: QueryState, pack: PackReader) -> None:
    """A cross-encoder scores every candidate against the question and reorders them."""
    model = rerank.load(st.opts.cross_encoder_model)
    if model is None:
        st.warnings.append(f"cross-encoder {st.opts.cross_encoder_model!r} unavailable; "
                           "passthrough")
        return
    texts = [f"{st.rows[i].heading_path}\n{st.rows[i].content}" for i in st.order]
    ce = rerank.scores(model, st.question, texts)
    st.scores = dict(zip(st.order, ce))
    st.order = [st.order[j] for j in rerank.order(ce)]
    for i in st.order:
        st.stages.setdefault(i, []).append("cross_encoder")


def diversify(st: QueryState, pack: PackReader) -> None:
    """One long page must not fill the results: at most `per_article` sections of a page
    before the next page's, and the first `distinct` from as many pages. It counts, and
    picks from, the sections the quality filter keeps (unless it keeps none: see
    `quality_filter`), so a page whose first sections are too short to show still gets its
    place. The section of a page the question names by title is kept whatever its length:
    it is the page asked for (an index page, a glossary). Then the first `max_results`."""
    opts, rows = st.opts, st.rows
    if opts.use_enhancements:
        keywords = quality.keywords(st.question)
        order = [i for i in st.order
                 if "title" in st.stages.get(i, ()) or quality.keeps(
                     rows[i].content, keywords, rows[i].word_count, opts.quality_threshold)]
        order = graph.diversify(order or st.order, lambda i: rows[i].article_id,
                                opts.per_article)
        # Which sections make the results counts the distinct articles first; their order
        # stays by score until the quality filter has run.
        picked = set(graph.distinct_first(order, lambda i: rows[i].article_id,
                                          st.distinct)[: opts.max_results])
        st.order = [i for i in order if i in picked]
    st.order = st.order[: opts.max_results]


def graph_rerank(st: QueryState, pack: PackReader) -> None:
    """Rerank by the centrality of each section's page (precomputed at build time)."""
    cent = pack.db.centrality()
    cs = [cent.get(st.rows[i].article_id, 0.0) for i in st.order]
    if st.opts.graph_rerank_mode == "rrf":
        gs = graph.rrf_scores(cs)
    else:
        gs = graph.weighted_scores([st.rows[i].similarity or 0.0 for i in st.order], cs)
    st.scores = dict(zip(st.order, gs))
    st.order = hybrid.ranked(st.scores)
    for i in st.order:
        st.stages[i].append("graph_rerank")


def primary(st: QueryState, pack: PackReader) -> None:
    """The chosen candidates, from at most `max_articles` pages, as result sections."""
    st.order = graph.cap_articles(st.order, lambda i: st.rows[i].article_id,
                                  st.opts.max_articles)
    st.primary = [st.ranked(i) for i in st.order]


def multi_doc(st: QueryState, pack: PackReader) -> None:
    """Related sections reached through the graph from the top result: its linked pages'
    best sections (`expansion_mode="neighbours"`), or a 2-hop walk labelling each section
    by how it was reached."""
    top, opts = st.primary[0], st.opts
    have_articles = {s.article_id for s in st.primary}
    room = max(opts.max_articles - len(have_articles), 0)
    if opts.expansion_mode == "neighbours":
        st.related = _neighbours(st, pack, top, have_articles, min(opts.linked_articles, room))
        return
    labelled = _walk(st, pack, top)
    capped = graph.cap_articles(labelled, lambda t: t[1].article_id,
                                room + len(have_articles))
    st.related = [ranked(r, r.similarity or 0.0, ["bfs"], relation=label.removesuffix("_2"),
                         hops=2 if label.endswith("_2") else 1)
                  for label, r in capped[: opts.max_related]]


def _neighbours(st: QueryState, pack: PackReader, top: RankedSection,
                have_articles: set[str], n: int) -> list[RankedSection]:
    scored = pack.db.linked_scores([top.article_id], st.qvec, st.qlog)
    picked = graph.best_per_article(scored, lambda t: t[1], lambda t: t[2], have_articles, n)
    if not picked:
        return []
    rows = {r.id: r for r in pack.db.sections_by_id([t[0] for t in picked], st.qvec, st.qlog)}
    return [ranked(rows[sid], rows[sid].similarity or 0.0, ["multi_doc"],
                   relation="links_to", hops=1)
            for sid, _, _ in picked if sid in rows]


def _walk(st: QueryState, pack: PackReader, top: RankedSection) -> list:
    """(label, row) of the sections 2 hops around the top result's page, best first."""
    db, qvec, qlog = pack.db, st.qvec, st.qlog
    out1 = db.linked_sections([top.article_id], qvec, "out", qlog)
    in1 = db.linked_sections([top.article_id], qvec, "in", qlog)
    same = [r for r in db.article_sections([top.article_id], qvec, qlog) if r.id != top.id]
    shared = db.entity_sections([top.id], qvec, qlog)
    hop1 = list({r.article_id for r in (*out1, *in1)} - {top.article_id})
    out2 = db.linked_sections(hop1, qvec, "out", qlog) if hop1 else []
    return graph.label_related(
        {"same_page": same, "links_to": out1, "linked_from": in1, "shares_entity": shared,
         "links_to_2": [r for r in out2 if r.article_id != top.article_id]},
        lambda r: r.id, lambda r: r.similarity or 0.0, {s.id for s in st.primary})


def quality_filter(st: QueryState, pack: PackReader) -> None:
    """Always on: sections too short or off the question are dropped (the section of a
    page named by title stays). When nothing is left, the chosen pages are shown whole."""
    keywords = quality.keywords(st.question)
    for s in (*st.primary, *st.related):
        s.quality = quality.quality_score(s.content, keywords, s.word_count)
    kept_p = [s for s in st.primary if _shown(s, st.opts.quality_threshold)]
    kept_r = [s for s in st.related if _shown(s, st.opts.quality_threshold)]
    if st.primary and not kept_p and not kept_r:
        st.fallback = True
        articles = list(dict.fromkeys(s.article_id for s in st.primary))
        full = pack.db.article_sections(articles, st.qvec, st.qlog, filters=st.active)
        kept_p = [ranked(r, r.similarity or 0.0, ["full_article_fallback"]) for r in full]
    # On what the filter kept: a first section it dropped leaves no gap.
    st.primary = graph.distinct_first(kept_p, lambda s: s.article_id, st.distinct)
    st.related = kept_r


def _shown(section: RankedSection, threshold: float) -> bool:
    """Whether the quality filter keeps a section: it scores at least `threshold`, or it is
    the section of a page the question names by title (the page asked for, even an index
    page of a few words)."""
    return "title" in section.stages or quality.passes(section.quality, threshold)


def graph_facts(st: QueryState, pack: PackReader) -> None:
    """The entities, facts and triples of the chosen sections."""
    ids = [s.id for s in (*st.primary, *st.related)]
    st.facts = section_facts(pack, ids, st.opts.max_facts, st.qlog)


def fewshot(st: QueryState, pack: PackReader) -> None:
    """The pack's few-shot examples most similar to the question."""
    st.examples = pack.fewshot_examples(st.qvec, st.opts.fewshot_k)


def section_facts(pack: PackReader, section_ids: list[str], cap: int, qlog: QueryLog) -> Facts:
    """Entities, facts and triples of the given sections, in section rank order.

    Format 3 packs: what was extracted from each section, precomputed at build time
    (Section.graph, one lookup). Older packs: walked at query time (`_walked_facts`)."""
    if not pack.db.has_graph:
        return _walked_facts(pack, section_ids, cap, qlog)
    graphs = pack.db.section_graphs(section_ids, qlog)
    ents: dict[str, dict[str, str]] = {}
    facts: dict[str, None] = {}
    triples: dict[tuple[str, str, str], None] = {}
    for sid in section_ids:
        g = graphs.get(sid, {})
        for name, etype in g.get("entities", []):
            ents.setdefault(name, {"name": name, "type": etype or ""})
        facts.update(dict.fromkeys(g.get("facts", [])))
        triples.update(dict.fromkeys(tuple(t) for t in g.get("triples", [])))
    kept = list(facts)[:cap]
    return Facts(entities=list(ents.values()), facts=kept,
                 triples=list(triples)[: max(cap - len(kept), 0)])


def _walked_facts(pack: PackReader, section_ids: list[str], cap: int, qlog: QueryLog) -> Facts:
    """The entities the sections mention, every fact of those entities and the triples
    touching them. Kuzu returns rows in no set order: they are ordered by the rank of their
    section, then by text, so the same question always gives the same context."""
    rank = {sid: i for i, sid in enumerate(section_ids)}
    ents: dict[str, dict[str, str]] = {}
    facts: dict[str, None] = {}
    rows = sorted(pack.db.section_entities(section_ids, qlog),
                  key=lambda r: (rank.get(r[0], len(rank)), r[2] or "", r[4] or ""))
    for _sid, _eid, name, etype, fact in rows:
        ents.setdefault(name, {"name": name, "type": etype or ""})
        if fact:
            facts.setdefault(fact, None)
    triple_rows = sorted(pack.db.section_triples(section_ids, qlog),
                         key=lambda r: (rank.get(r[0], len(rank)), *(x or "" for x in r[1:])))
    triples = list(dict.fromkeys(tuple(r[1:]) for r in triple_rows))
    return Facts(entities=list(ents.values()), facts=list(facts)[:cap],
                 triples=[tuple(t) for t in triples][: max(cap - len(facts), 0)])
