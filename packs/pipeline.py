"""The retrieval pipeline: composition of the stages in packs/retrieval, nothing else.

search: analysis (+ filters) → embed → vector (+ keyword vectors, multi-query)
        → BM25 + title match + fusion → gate → cross-encoder
        → per-article diversification (+ distinct articles first) → graph rerank
        → article cap → multi-document expansion → quality filter
        → graph facts → few-shot → context
ask:    search → packs/answer.py (Claude synthesis with verified citations, or the
        extractive / gated answers)

Each stage is timed into `SearchResult.timings_ms`; each stage that found or moved a section
is listed in its `stages`.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import TYPE_CHECKING

from packs import answer
from packs import filters as filters_mod
from packs.db import QueryLog, Row, fts_query_text
from packs.llm.usage import add_query_usage, zero_query_usage
from packs.options import MAX_QUESTION_CHARS, SearchOptions
from packs.result import Facts, RankedSection, SearchResult
from packs.retrieval import analysis as analysis_stage
from packs.retrieval import context as context_stage
from packs.retrieval import expansion, gate, graph, hybrid, quality, rerank, titles
from packs.retrieval import scores as shown_scores

if TYPE_CHECKING:
    from packs.pack import KnowledgePack

# ask() lives in packs/answer.py; these names stay importable from here.
ASK_FIELDS, ask, ask_stream = answer.ASK_FIELDS, answer.ask, answer.ask_stream


# However few results are asked for, the vector ranking brings CANDIDATES candidates and
# the BM25 ranking BM25_CANDIDATES, so that the first results do not depend on
# `max_results` (up to 10). Asked for 5, a pool of 5 + 5 held too few pages for
# `distinct_first`: Kubernetes multi-hop, both pages in the first 5 results for 7 of 13 dev
# questions, against 10 of 13 from this pool. The vector query's extra rows cost ~1 ms; 30
# full-text rows instead of 10 cost ~5 ms (the query runs beside the embedding on the same
# cores) for a gate and multi-hop within a question or two of these (BENCHMARKS.md).
CANDIDATES = 30
BM25_CANDIDATES = 10


class QuestionError(ValueError):
    """The question is empty (after trimming)."""


def clean_question(question: str) -> str:
    """Trimmed question, capped at MAX_QUESTION_CHARS characters."""
    if not isinstance(question, str) or not question.strip():
        raise QuestionError("the question is empty; ask something, e.g. \"how do I ...?\"")
    return " ".join(question.split())[:MAX_QUESTION_CHARS]


class _Timer:
    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def __call__(self, stage: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.ms[stage] = self.ms.get(stage, 0.0) + (time.perf_counter() - t0) * 1000


def _ranked(row: Row, score: float, stages: list[str], **kw) -> RankedSection:
    return RankedSection(id=row.id, article_id=row.article_id, url=row.url, title=row.title,
                         heading_path=row.heading_path, content=row.content, score=score,
                         similarity=row.similarity, stages=stages, word_count=row.word_count,
                         **kw)


def search(pack: KnowledgePack, question: str, opts: SearchOptions) -> SearchResult:
    """Run every enabled retrieval stage; see the module docstring for the order."""
    question = clean_question(question)
    timer, qlog, warnings = _Timer(), QueryLog(), []
    usage = zero_query_usage()
    db = pack.db

    with timer("analysis"):
        index = pack.entity_index() if opts.enabled("query_analysis") else None
        qa = analysis_stage.analyse(question, index)
        suggested = (filters_mod.suggest(question, pack.path_prefixes(), db.languages())
                     if opts.enabled("query_analysis") else filters_mod.Filters())
        explicit = filters_mod.Filters(opts.url_prefix, opts.content_kind, opts.language)
        active = _active_filters(explicit, suggested, opts.auto_filters)
    # The full-text query needs no question vector: it runs in the pack's worker thread
    # while the question is embedded (ONNX and Kuzu both release the GIL).
    wanted = opts.max_results * (2 if opts.enabled("cross_encoder") else 1)
    n_candidates, n_bm25 = max(wanted, CANDIDATES), max(wanted, BM25_CANDIDATES)
    fts_text = fts_query_text(list(qa.terms)) if opts.enabled("hybrid") else ""
    fts_log = QueryLog()
    fts_filters = active
    fts_job = (pack.background(db.fts_raw, fts_text, n_bm25, fts_log, active)
               if fts_text else None)
    with timer("embed"):
        qvec = pack.embed_query(question)

    kw = opts.keyword_weight if opts.enabled("keyword_vectors") else 0.0
    if kw > 0 and not db.keyword_vectors:
        warnings.append(f"pack {pack.manifest.name!r} has no keyword vectors (format "
                        f"{pack.manifest.format_version}); searched the content vectors only")
        kw = 0.0
    with timer("vector"):
        vec_rows = db.vector_candidates(qvec, n_candidates, active, kw, qlog)
        if not vec_rows and active != explicit:
            warnings.append(f"suggested filters {active.to_dict()} matched nothing; "
                            "searched without them")
            active = explicit
            vec_rows = db.vector_candidates(qvec, n_candidates, active, kw, qlog)
    sims = sorted((r.similarity for r in vec_rows if r.similarity is not None), reverse=True)
    best = sims[0] if sims else None
    stages: dict[str, list[str]] = {r.id: ["vector"] for r in vec_rows}

    if opts.enabled("multi_query"):
        with timer("multi_query"):
            alts, u, warning = expansion.alternatives(question, opts.expansion_model)
            add_query_usage(usage, u)
            if warning:
                warnings.append(warning)
            lists = [vec_rows]
            for alt in alts:
                rows = db.vector_candidates(pack.embed_query(alt), n_candidates, active, kw,
                                            qlog)
                for r in rows:
                    stages.setdefault(r.id, []).append("multi_query")
                lists.append(rows)
            if alts:
                vec_rows = expansion.merge_by_article(
                    lists, lambda r: r.article_id, lambda r: r.similarity or 0.0)

    limit = gate.threshold(opts.gate_threshold, pack.manifest.embedding.gate_threshold)
    base = dict(question=question,
                analysis={**qa.to_dict(), "suggested_filters": suggested.to_dict()},
                best_similarity=best, gate_threshold=limit, build_id=pack.manifest.build_id,
                warnings=warnings, token_usage=usage, filters=active.to_dict())

    # --- hybrid fusion ------------------------------------------------------------------
    rows: dict[str, Row] = {r.id: r for r in vec_rows}
    order = [r.id for r in vec_rows]
    scores = {r.id: _vscore(r) for r in vec_rows}
    if opts.enabled("hybrid"):
        with timer("bm25"):
            raw = fts_job.result() if fts_job is not None else []
            if fts_text and fts_filters != active:
                # The suggested filters matched nothing: the query again without them.
                fts_log = QueryLog()
                raw = db.fts_raw(fts_text, n_bm25, fts_log, active)
            bm_rows = db.score_fts(raw, qvec)
            for statement in fts_log.statements:  # after the vector ones: a stable order
                qlog.add(statement)
        with timer("fusion"):
            for r in bm_rows:
                rows.setdefault(r.id, r).bm25 = r.bm25
                stages.setdefault(r.id, []).append("bm25")
            rankings = [order, [r.id for r in bm_rows]]
            weights = [1.0, hybrid.bm25_weight([r.bm25 or 0.0 for r in bm_rows[:2]],
                                               _decisive_weight(pack, opts))]
            if opts.fusion == "rrf":
                scores = hybrid.rrf(rankings, k=opts.rrf_k, weights=weights)
            elif opts.fusion == "minmax":
                scores = hybrid.minmax(
                    {i: _vscore(r) for i, r in rows.items()},
                    {r.id: r.bm25 or 0.0 for r in bm_rows},
                    opts.vector_weight, opts.bm25_weight)
            else:
                scores = hybrid.weighted(
                    {i: _vscore(rows[i]) for i in order},
                    {r.id: r.bm25 or 0.0 for r in bm_rows},
                    opts.vector_weight, opts.bm25_weight)
            fused = hybrid.ranked(scores)
        if opts.enabled("title_match") and opts.fusion == "rrf":
            with timer("titles"):
                named = _title_rows(pack, question, [rows[i] for i in fused], qvec, active,
                                    qlog)
                if named:
                    for r in named:
                        rows.setdefault(r.id, r)
                        stages.setdefault(r.id, []).append("title")
                    scores = hybrid.rrf([*rankings, [r.id for r in named]], k=opts.rrf_k,
                                        weights=[*weights, titles.WEIGHT])
                    fused = hybrid.ranked(scores)
        # Every fused candidate stays for now (see `distinct` below).
        order = fused

    # --- confidence gate (on the fused candidates, before any reranking) ------------------
    with timer("gate"):
        verdict = gate.decide(question, sims, [f"{rows[i].heading_path}\n{rows[i].content}"
                                               for i in order[:gate.TOP_SECTIONS]],
                              pack.vocabulary, pack.manifest.gate, opts.gate_threshold,
                              pack.manifest.embedding.gate_threshold)
    base["gate"] = verdict
    if not verdict["passed"]:
        return _result(base, [], [], Facts(), None, timer, qlog, gated=True)

    # The first `distinct` results come from as many pages. Those may lie past the first
    # n_candidates of the fusion (one long page can fill them all), so such a search keeps
    # the whole fused pool (at most the vector and BM25 candidates together); any other
    # keeps the first n_candidates, as the ranking alone would.
    distinct = (graph.distinct_count(opts.distinct_first, pack.vocabulary().technical)
                if opts.use_enhancements else 0)
    if not distinct:
        order = order[:n_candidates]

    # --- cross-encoder ------------------------------------------------------------------
    if opts.enabled("cross_encoder"):
        with timer("cross_encoder"):
            model = rerank.load(opts.cross_encoder_model)
            if model is None:
                warnings.append(f"cross-encoder {opts.cross_encoder_model!r} unavailable; "
                                "passthrough")
            else:
                texts = [f"{rows[i].heading_path}\n{rows[i].content}" for i in order]
                ce = rerank.scores(model, question, texts)
                scores = dict(zip(order, ce))
                order = [order[j] for j in rerank.order(ce)]
                for i in order:
                    stages.setdefault(i, []).append("cross_encoder")
    # Per-article diversification: one long page must not fill the results. It counts,
    # and the results are picked from, the sections the quality filter keeps (unless it
    # keeps none: see the fallback below), so that a page whose first sections are too
    # short to show still gets its place, and a dropped section leaves no gap. The section
    # of a page the question names by title is kept whatever its length: it is the page
    # asked for (an index page, a glossary).
    question_keywords = quality.keywords(question)
    if opts.use_enhancements:
        order = [i for i in order
                 if "title" in stages.get(i, ()) or quality.keeps(
                     rows[i].content, question_keywords, rows[i].word_count,
                     opts.quality_threshold)] or order
        order = graph.diversify(order, lambda i: rows[i].article_id, opts.per_article)
        # Which sections make the results counts the distinct articles first; their order
        # stays by score until the quality filter has run (see below).
        picked = set(graph.distinct_first(order, lambda i: rows[i].article_id,
                                          distinct)[: opts.max_results])
        order = [i for i in order if i in picked]
    order = order[: opts.max_results]

    # --- graph rerank -------------------------------------------------------------------
    if opts.enabled("graph_rerank") and graph.enabled(pack.manifest.avg_links_per_article):
        with timer("graph_rerank"):
            cent = db.centrality()
            cs = [cent.get(rows[i].article_id, 0.0) for i in order]
            if opts.graph_rerank_mode == "rrf":
                gs = graph.rrf_scores(cs)
            else:
                gs = graph.weighted_scores([rows[i].similarity or 0.0 for i in order], cs)
            scores = dict(zip(order, gs))
            order = hybrid.ranked(scores)
            for i in order:
                stages[i].append("graph_rerank")
    order = graph.cap_articles(order, lambda i: rows[i].article_id, opts.max_articles)
    primary = [_ranked(rows[i], scores.get(i, 0.0), stages.get(i, [])) for i in order]

    # --- multi-document expansion ---------------------------------------------------------
    related: list[RankedSection] = []
    if (opts.enabled("multi_doc") and primary
            and graph.enabled(pack.manifest.avg_links_per_article)):
        with timer("multi_doc"):
            related = _expand(pack, primary, qvec, opts, qlog)

    # --- quality filter (always on) -------------------------------------------------------
    fallback = False
    with timer("quality"):
        for s in (*primary, *related):
            s.quality = quality.quality_score(s.content, question_keywords, s.word_count)
        kept_p = [s for s in primary if _shown(s.quality, s.stages, opts.quality_threshold)]
        kept_r = [s for s in related if _shown(s.quality, s.stages, opts.quality_threshold)]
        if primary and not kept_p and not kept_r:
            # Global fallback: every section was filtered, use the selected articles whole.
            fallback = True
            arts = list(dict.fromkeys(s.article_id for s in primary))
            full = db.article_sections(arts, qvec, qlog, filters=active)
            kept_p = [_ranked(r, r.similarity or 0.0, ["full_article_fallback"]) for r in full]
        primary, related = kept_p, kept_r
        # On what the filter kept: a first section it dropped leaves no gap.
        primary = graph.distinct_first(primary, lambda s: s.article_id, distinct)

    facts = Facts()
    # A pack without entities (offline extractor found none) has no facts to look up.
    if opts.enabled("graph_facts") and primary and pack.manifest.counts.entities:
        with timer("graph_facts"):
            facts = _facts(pack, [s.id for s in (*primary, *related)], opts.max_facts, qlog)

    examples = []
    if opts.enabled("fewshot") and opts.fewshot_k:
        with timer("fewshot"):
            examples = pack.fewshot_examples(qvec, opts.fewshot_k)
    base["fewshot"] = [{"question": e.question, "answer": e.answer} for e in examples]
    base["fallback_full_articles"] = fallback
    return _result(base, primary, related, facts, opts, timer, qlog, gated=False)


def _title_rows(pack, question: str, fused: list[Row], qvec, active: filters_mod.Filters,
                qlog: QueryLog) -> list[Row]:
    """One section of each page whose title the question names (packs.retrieval.titles),
    in match order: that page's first section in the fused ranking (`fused`, best first),
    else (no candidate, or only ones too short for the quality filter) the section of the
    page most similar to the question that the filters admit, fetched."""
    pages = pack.title_index().match(question)
    if not pages:
        return []
    best: dict[str, Row] = {}
    for r in fused:
        if r.article_id in pages and r.word_count >= quality.MIN_WORDS:
            best.setdefault(r.article_id, r)
    missing = [a for a in pages if a not in best]
    if missing:
        fetched = pack.db.article_sections(missing, qvec, qlog, filters=active)
        for r in sorted(fetched, key=lambda r: (r.word_count < quality.MIN_WORDS,
                                                -(r.similarity or 0.0))):
            best.setdefault(r.article_id, r)
    return [best[a] for a in pages if a in best]


def _shown(score: float, stages, threshold: float) -> bool:
    """Whether the quality filter keeps a section: it scores at least `threshold`, or it is
    the section of a page the question names by title (the page asked for, even an index
    page of a few words)."""
    return "title" in stages or quality.passes(score, threshold)


def _decisive_weight(pack, opts: SearchOptions) -> float:
    """The BM25 ranking's RRF weight on a decisive match: the option, else
    hybrid.DECISIVE_WEIGHT in a prose pack and 1 in a technical one."""
    if opts.bm25_decisive_weight is not None:
        return opts.bm25_decisive_weight
    return 1.0 if graph.is_technical(pack.vocabulary().technical) else hybrid.DECISIVE_WEIGHT


def _vscore(row: Row) -> float:
    return row.vscore if row.vscore is not None else (row.similarity or 0.0)


def _active_filters(explicit: filters_mod.Filters, suggested: filters_mod.Filters,
                    auto: bool) -> filters_mod.Filters:
    """The explicit filters, completed by the suggested ones when `auto`."""
    if not auto:
        return explicit
    return filters_mod.Filters(explicit.url_prefix or suggested.url_prefix,
                               explicit.content_kind or suggested.content_kind,
                               explicit.language or suggested.language)


def _result(base: dict, primary, related, facts: Facts, opts: SearchOptions | None,
            timer: _Timer, qlog: QueryLog, *, gated: bool) -> SearchResult:
    with timer("context"):
        primary, related = shown_scores.dedupe(primary, related)
        confidence = base.get("gate", {}).get("confidence")
        shown_scores.readable(primary, related, lambda _: confidence)
        if opts is None:
            ctx = context_stage.Context(text="", tokens=0, truncated=False)
        else:
            ctx = context_stage.assemble(primary, related, facts, opts.token_budget,
                                         opts.answer_reserve)
    return SearchResult(sections=primary, related=related, facts=facts, context=ctx.text,
                        context_tokens=ctx.tokens, truncated=ctx.truncated, gated=gated,
                        cypher_query=qlog.text(), timings_ms=dict(timer.ms), **base)


def _expand(pack, primary: list[RankedSection], qvec, opts: SearchOptions,
            qlog: QueryLog) -> list[RankedSection]:
    """Related sections reached through the graph from the top result."""
    db, top = pack.db, primary[0]
    have_sections = {s.id for s in primary}
    have_articles = {s.article_id for s in primary}
    room = max(opts.max_articles - len(have_articles), 0)
    sim = lambda r: r.similarity or 0.0  # noqa: E731
    if opts.expansion_mode == "neighbours":
        scored = db.linked_scores([top.article_id], qvec, qlog)
        picked = graph.best_per_article(scored, lambda t: t[1], lambda t: t[2], have_articles,
                                        min(opts.linked_articles, room))
        if not picked:
            return []
        rows = {r.id: r for r in db.sections_by_id([t[0] for t in picked], qvec, qlog)}
        return [_ranked(rows[sid], rows[sid].similarity or 0.0, ["multi_doc"],
                        relation="links_to", hops=1)
                for sid, _, _ in picked if sid in rows]
    # BFS, 2 hops from the top result's article, each section labelled by how it was reached.
    out1 = db.linked_sections([top.article_id], qvec, "out", qlog)
    in1 = db.linked_sections([top.article_id], qvec, "in", qlog)
    same = [r for r in db.article_sections([top.article_id], qvec, qlog) if r.id != top.id]
    shared = db.entity_sections([top.id], qvec, qlog)
    hop1_articles = list({r.article_id for r in (*out1, *in1)} - {top.article_id})
    out2 = db.linked_sections(hop1_articles, qvec, "out", qlog) if hop1_articles else []
    labelled = graph.label_related(
        {"same_page": same, "links_to": out1, "linked_from": in1, "shares_entity": shared,
         "links_to_2": [r for r in out2 if r.article_id != top.article_id]},
        lambda r: r.id, sim, have_sections)
    items = [(label, r) for label, r in labelled]
    capped = graph.cap_articles(items, lambda t: t[1].article_id,
                                max(opts.max_articles - len(have_articles), 0)
                                + len(have_articles))
    return [
        _ranked(r, sim(r), ["bfs"], relation=label.removesuffix("_2"),
                hops=2 if label.endswith("_2") else 1)
        for label, r in capped[: opts.max_related]
    ]


def _facts(pack, section_ids: list[str], cap: int, qlog: QueryLog) -> Facts:
    """Entities, facts and triples of the chosen sections, in section rank order.

    Format 3 packs: what was extracted from each section, precomputed at build time
    (Section.graph, one lookup). Older packs: walked at query time — the entities the
    sections mention, every fact of those entities and the triples touching them."""
    if pack.db.has_graph:
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
    # Kuzu returns rows in no set order: order them by the rank of their section, then
    # by text, so the same question always gives the same context.
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
