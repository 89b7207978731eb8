"""The search stages that find candidates: analysis, the vector and full-text rankings,
multi-query expansion, fusion and the title match (packs/pipeline.py runs them in order).

Each is a function of (state, pack) that reads and writes the `QueryState`; the pure
rules they apply live in the sibling modules (analysis, hybrid, titles, expansion).
"""

from __future__ import annotations

from packs import filters as filters_mod
from packs.db import QueryLog, Row, fts_query_text
from packs.llm.usage import add_query_usage
from packs.retrieval import analysis as analysis_mod
from packs.retrieval import expansion, graph, hybrid, quality, titles
from packs.retrieval.state import PackReader, QueryState

# However few results are asked for, the vector ranking brings CANDIDATES candidates and
# the BM25 ranking BM25_CANDIDATES, so that the first results do not depend on
# `max_results` (up to 10). Asked for 5, a pool of 5 + 5 held too few pages for
# `distinct_first`: Kubernetes multi-hop, both pages in the first 5 results for 7 of 13 dev
# questions, against 10 of 13 from this pool. The vector query's extra rows cost ~1 ms; 30
# full-text rows instead of 10 cost ~5 ms (the query runs beside the embedding on the same
# cores) for a gate and multi-hop within a question or two of these (BENCHMARKS.md).
CANDIDATES = 30
BM25_CANDIDATES = 10


def analyse(st: QueryState, pack: PackReader) -> None:
    """Intent, entities and expanded terms of the question; the filters in force (the
    explicit ones, completed by the suggested ones with `auto_filters`); how many
    candidates each ranking brings."""
    opts = st.opts
    on = opts.enabled("query_analysis")
    qa = analysis_mod.analyse(st.question, pack.entity_index() if on else None)
    suggested = (filters_mod.suggest(st.question, pack.path_prefixes(), pack.db.languages())
                 if on else filters_mod.Filters())
    st.analysis = {**qa.to_dict(), "suggested_filters": suggested.to_dict()}
    st.terms = list(qa.terms)
    st.explicit = filters_mod.Filters(opts.url_prefix, opts.content_kind, opts.language)
    st.active = (st.explicit if not opts.auto_filters else filters_mod.Filters(
        st.explicit.url_prefix or suggested.url_prefix,
        st.explicit.content_kind or suggested.content_kind,
        st.explicit.language or suggested.language))
    wanted = opts.max_results * (2 if opts.enabled("cross_encoder") else 1)
    st.n_candidates, st.n_bm25 = max(wanted, CANDIDATES), max(wanted, BM25_CANDIDATES)


def start_bm25(st: QueryState, pack: PackReader) -> None:
    """The full-text query needs no question vector: it runs in the pack's worker thread
    while the question is embedded (ONNX and Kuzu both release the GIL)."""
    text = fts_query_text(st.terms)
    if text:
        st.fts_filters = st.active
        st.fts_job = pack.background(pack.db.fts_raw, text, st.n_bm25, st.fts_log, st.active)


def embed(st: QueryState, pack: PackReader) -> None:
    st.qvec = pack.embed_query(st.question)


def vector(st: QueryState, pack: PackReader) -> None:
    """The vector ranking (content vectors, blended with keyword vectors when asked); with
    suggested filters that match nothing, the search again without them."""
    kw = st.opts.keyword_weight if st.opts.enabled("keyword_vectors") else 0.0
    if kw > 0 and not pack.db.keyword_vectors:
        st.warnings.append(f"pack {pack.manifest.name!r} has no keyword vectors (format "
                           f"{pack.manifest.format_version}); searched the content vectors only")
        kw = 0.0
    st.keyword_weight = kw
    rows = pack.db.vector_candidates(st.qvec, st.n_candidates, st.active, kw, st.qlog)
    if not rows and st.active != st.explicit:
        st.warnings.append(f"suggested filters {st.active.to_dict()} matched nothing; "
                           "searched without them")
        st.active = st.explicit
        rows = pack.db.vector_candidates(st.qvec, st.n_candidates, st.active, kw, st.qlog)
    # The gate judges the question's own similarities (not those of rephrasings).
    st.sims = sorted((r.similarity for r in rows if r.similarity is not None), reverse=True)
    st.stages = {r.id: ["vector"] for r in rows}
    _rank(st, rows)


def _rank(st: QueryState, rows: list[Row]) -> None:
    st.rows = {r.id: r for r in rows}
    st.order = [r.id for r in rows]
    st.scores = {r.id: _vscore(r) for r in rows}


def multi_query(st: QueryState, pack: PackReader) -> None:
    """Claude rephrases the question; each rephrasing's vector ranking is merged page by
    page with the question's own (packs.retrieval.expansion)."""
    alts, usage, warning = expansion.alternatives(st.question, st.opts.expansion_model)
    add_query_usage(st.usage, usage)
    if warning:
        st.warnings.append(warning)
    if not alts:
        return
    lists = [[st.rows[i] for i in st.order]]
    for alt in alts:
        rows = pack.db.vector_candidates(pack.embed_query(alt), st.n_candidates, st.active,
                                         st.keyword_weight, st.qlog)
        for r in rows:
            st.stages.setdefault(r.id, []).append("multi_query")
        lists.append(rows)
    _rank(st, expansion.merge_by_article(lists, lambda r: r.article_id,
                                         lambda r: r.similarity or 0.0))


def bm25(st: QueryState, pack: PackReader) -> None:
    """The BM25 ranking (the query started beside the embedding), scored for fusion."""
    text = fts_query_text(st.terms)
    raw = st.fts_job.result() if st.fts_job is not None else []
    if text and st.fts_filters != st.active:
        # The suggested filters matched nothing: the query again without them.
        st.fts_log = QueryLog()
        raw = pack.db.fts_raw(text, st.n_bm25, st.fts_log, st.active)
    st.bm25_rows = pack.db.score_fts(raw, st.qvec)
    for statement in st.fts_log.statements:  # after the vector ones: a stable order
        st.qlog.add(statement)


def fuse(st: QueryState, pack: PackReader) -> None:
    """The vector and BM25 rankings fused (RRF by default; see packs.retrieval.hybrid).
    Every fused candidate stays for now (see selection.pool)."""
    opts, bm_rows = st.opts, st.bm25_rows
    for r in bm_rows:
        st.rows.setdefault(r.id, r).bm25 = r.bm25
        st.stages.setdefault(r.id, []).append("bm25")
    st.rankings = [st.order, [r.id for r in bm_rows]]
    st.weights = [1.0, hybrid.bm25_weight([r.bm25 or 0.0 for r in bm_rows[:2]],
                                          _decisive_weight(pack, st))]
    if opts.fusion == "rrf":
        st.scores = hybrid.rrf(st.rankings, k=opts.rrf_k, weights=st.weights)
    elif opts.fusion == "minmax":
        st.scores = hybrid.minmax({i: _vscore(r) for i, r in st.rows.items()},
                                  {r.id: r.bm25 or 0.0 for r in bm_rows},
                                  opts.vector_weight, opts.bm25_weight)
    else:
        st.scores = hybrid.weighted({i: _vscore(st.rows[i]) for i in st.order},
                                    {r.id: r.bm25 or 0.0 for r in bm_rows},
                                    opts.vector_weight, opts.bm25_weight)
    st.order = hybrid.ranked(st.scores)


def title_match(st: QueryState, pack: PackReader) -> None:
    """A page whose title the question names joins the fusion as a third ranking."""
    named = _title_rows(pack, st)
    if not named:
        return
    for r in named:
        st.rows.setdefault(r.id, r)
        st.stages.setdefault(r.id, []).append("title")
    st.scores = hybrid.rrf([*st.rankings, [r.id for r in named]], k=st.opts.rrf_k,
                           weights=[*st.weights, titles.WEIGHT])
    st.order = hybrid.ranked(st.scores)


def _title_rows(pack: PackReader, st: QueryState) -> list[Row]:
    """One section of each page whose title the question names (packs.retrieval.titles),
    in match order: that page's first section in the fused ranking, else (no candidate, or
    only ones too short for the quality filter) the section of the page most similar to
    the question that the filters admit, fetched."""
    pages = pack.title_index().match(st.question)
    if not pages:
        return []
    best: dict[str, Row] = {}
    for i in st.order:
        r = st.rows[i]
        if r.article_id in pages and r.word_count >= quality.MIN_WORDS:
            best.setdefault(r.article_id, r)
    missing = [a for a in pages if a not in best]
    if missing:
        fetched = pack.db.article_sections(missing, st.qvec, st.qlog, filters=st.active)
        for r in sorted(fetched, key=lambda r: (r.word_count < quality.MIN_WORDS,
                                                -(r.similarity or 0.0))):
            best.setdefault(r.article_id, r)
    return [best[a] for a in pages if a in best]


def _decisive_weight(pack: PackReader, st: QueryState) -> float:
    """The BM25 ranking's RRF weight on a decisive match: the option, else
    hybrid.DECISIVE_WEIGHT in a prose pack and 1 in a technical one."""
    if st.opts.bm25_decisive_weight is not None:
        return st.opts.bm25_decisive_weight
    return 1.0 if graph.is_technical(pack.vocabulary().technical) else hybrid.DECISIVE_WEIGHT


def _vscore(row: Row) -> float:
    return row.vscore if row.vscore is not None else (row.similarity or 0.0)
