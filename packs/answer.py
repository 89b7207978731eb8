"""ask: a search result → an answer dict with sources and verified citations.

Claude answers when ANTHROPIC_API_KEY is set (packs/retrieval/synthesis.py: a forced tool
call returns the answer and a quote per [n]); when Claude says the excerpts do not answer
the question, the result is labelled `query_type: "insufficient_context"` and its answer
says only that (Claude's text is not shown: no invented answer); without a key, or when
Claude is unavailable, the answer is extractive and labelled (`query_type:
"retrieval_only"`: packs/retrieval/extractive.py's learned reader quotes the passages of
the cited sections and of the other sections of their pages, and `reader` names its
weights); a gated question gets the gated fallback. Every answer's `citations` come from
packs/citations.py, one per [n] marker, each checked against the cited section's stored
text; when any is unverified, a line saying so ends the answer, and `unsupported` is true
when an answer that should cite the pack has no verified citation at all.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from packs import citations as cite_mod
from packs import text as text_rules
from packs.llm import client as llm_client
from packs.llm import errors as llm_errors
from packs.llm.usage import add_query_usage, zero_query_usage
from packs.options import SearchOptions
from packs.result import RankedSection, SearchResult
from packs.retrieval import (
    extractive,
    fewshot,
    gate,
    question_kinds,
    reader,
    synthesis,
    unit_vectors,
    whole_pack,
    whole_pack_claude,
    whole_pack_offline,
    whole_pack_rank,
)

ASK_FIELDS = ("answer", "sources", "citations", "unsupported", "entities", "facts",
              "cypher_query", "query_type", "token_usage", "reader")
GATED, INSUFFICIENT = "confidence_gated_fallback", "insufficient_context"


def insufficient_text(result: SearchResult) -> str:
    """The answer of an `insufficient_context` result: what was searched, no answer."""
    n = len(result.cited())
    return (f"The pack's passages do not answer this question: Claude read the {n} most "
            "relevant excerpts and found no answer in them, so it gives none rather than "
            "guess. The sources list what was searched.")


def _pack_name(pack: Any) -> str | None:
    manifest = getattr(pack, "manifest", None)  # a PackSet labels each section instead
    return getattr(manifest, "name", None)


def _sources(result: SearchResult) -> list[dict[str, object]]:
    out = []
    for s in result.cited():
        src: dict[str, object] = {"n": s.citation, "url": s.url, "title": s.title,
                                  "heading_path": s.heading_path,
                                  "score": round(float(s.score), 4),
                                  "fusion_score": round(float(s.fusion_score if s.fusion_score
                                                              is not None else s.score), 6)}
        if s.pack is not None:  # results of several packs name the pack of each source
            src["pack"] = s.pack
        out.append(src)
    return out


def _finish(result: SearchResult, answer: str, quotes: synthesis.Quotes,
            pack_name: str | None) -> tuple[str, list[dict]]:
    """(answer, citations): the citations of the answer's markers, and the answer with a
    closing line when any of them is unverified."""
    gated = result.gated
    sections = {} if gated else {s.citation: s for s in result.cited()}
    cits = cite_mod.cite(answer, sections, quotes, pack_name)
    note = cite_mod.unverified_note(cits)
    return (f"{answer.rstrip()}\n\n{note}" if note else answer), cits


def _answer_dict(result: SearchResult, answer: str, citations: list[dict], query_type: str,
                 usage: dict[str, Any]) -> dict[str, object]:
    gated = query_type == GATED
    return {
        "answer": answer,
        "sources": [] if gated else _sources(result),
        "citations": citations,
        # An answer drawn from the pack none of whose citations verifies (or that cites
        # nothing): nothing in it is checked against the pack.
        "unsupported": (query_type not in (GATED, INSUFFICIENT)
                        and not any(c["verified"] for c in citations)),
        "entities": [] if gated else [e["name"] for e in result.facts.entities],
        "facts": [] if gated else result.facts.lines(),
        "cypher_query": result.cypher_query,
        "query_type": query_type,
        "token_usage": usage,
        # The offline answer's learned reader (its weights' version and hash), when it
        # chose the passages, and for a list the item model's and the question-kind model's
        # that read it as one; None when Claude answered
        # or the pack abstained.
        "reader": _reader_version(query_type),
    }


def _reader_version(query_type: str) -> str | None:
    if query_type == whole_pack.QUERY_TYPE:
        return (f"{reader.load().version}; items {whole_pack_rank.load().version}; "
                f"kinds {question_kinds.load().version}")
    return reader.load().version if query_type == "retrieval_only" else None


def _retrieval_type(result: SearchResult) -> str:
    return "hybrid_search" if "QUERY_FTS_INDEX" in result.cypher_query else "vector_search"


def _plan(result: SearchResult) -> tuple[str, str, str]:
    """(query_type, system prompt, user message) for Claude."""
    if result.gated:
        return (GATED, synthesis.SYSTEM_NO_CONTEXT,
                f"<question>\n{synthesis.neutralise(result.question)}\n</question>")
    # The few-shot pool is the pack's own file, but it is page-like text too.
    block = fewshot.format_block([
        fewshot.Example(synthesis.neutralise(e["question"]), synthesis.neutralise(e["answer"]))
        for e in result.fewshot])
    return (_retrieval_type(result), synthesis.SYSTEM,
            synthesis.user_message(result.question, result.context, block))


def _members(pack: Any, result: SearchResult) -> list[tuple[str | None, Any, Any]]:
    """(label, pack, the question's vector for it) of each pack a result's sections come
    from: the pack itself (label None), or each pack of a PackSet (its label, its own
    encoder's vector of the question)."""
    if hasattr(pack, "packs"):  # a PackSet: each pack embeds the question with its model
        vectors = result.question_vector if isinstance(result.question_vector, dict) else {}
        return [(label, p, vectors.get(label)) for label, p in zip(pack.labels, pack.packs)]
    return [(None, pack, result.question_vector)]


def _vector(member: Any, question: str, qvec: Any) -> Any:
    return qvec if qvec is not None else member.embed_query(question)


def page_sections(pack: Any, result: SearchResult, pages: int | None = None
                  ) -> list[RankedSection]:
    """The sections of the cited pages (the first `pages` of them; None: all) that the
    context does not hold, each with its similarity to the question: the page a question
    is about is usually cited, the section that answers it not always. With several packs
    (a PackSet), each pack's cited pages, read from that pack, labelled with it."""
    cited = result.cited()
    if not cited or pages == 0 or getattr(pack, "db", None) is None and not hasattr(pack, "packs"):
        return []
    articles = list(dict.fromkeys((s.pack, s.article_id) for s in cited))[:pages]
    have = {(s.pack, s.id) for s in cited}
    out = []
    for label, member, qvec in _members(pack, result):
        mine = [a for lab, a in articles if lab == label]
        if not mine:
            continue
        qvec = _vector(member, result.question, qvec)
        out += [RankedSection(id=r.id, article_id=r.article_id, url=r.url, title=r.title,
                              heading_path=r.heading_path, content=r.content, score=0.0,
                              similarity=r.similarity, word_count=r.word_count,
                              relation="same_page", pack=label)
                for r in member.db.article_sections(mine, qvec) if (label, r.id) not in have]
    return out


def idf(pack: Any):
    """A word's IDF over the pack's sections (over every pack's, for several), or None."""
    if hasattr(pack, "packs"):
        vocabularies = [p.vocabulary() for p in pack.packs]
        total = sum(v.sections for v in vocabularies) + 1
        return lambda word: max((math.log(total / (sum(v.df.get(t, 0) for v in vocabularies)
                                                    + 0.5))
                                 for t in text_rules.gate_terms(word)), default=0.0)
    vocabulary = getattr(pack, "vocabulary", None)
    return extractive.idf_of(vocabulary()) if vocabulary is not None else None


def _similarity(pack: Any, result: SearchResult):
    """(sections, texts) → each text's cosine similarity to the question, embedded with
    the encoder of its section's pack (the reader's second model reads it)."""
    members = {label: (member, qvec) for label, member, qvec in _members(pack, result)}

    def similarity(sections: list[RankedSection], texts: list[str]) -> np.ndarray:
        out = np.zeros(len(texts), dtype=np.float32)
        for label, (member, qvec) in members.items():
            idx = [k for k, s in enumerate(sections) if s.pack == label or len(members) == 1]
            if idx:
                vectors = member.embedder.encode_documents([texts[k] for k in idx])
                out[idx] = vectors @ np.asarray(_vector(member, result.question, qvec),
                                                dtype=np.float32)
        return out
    return similarity


def _part_similarity(pack: Any, result: SearchResult):
    """(sections, parts) → for each part (of a question about several things), each
    section's cosine similarity to it: the parts embedded together by each section's
    pack, their similarities to every section of the sections' pages computed by Kuzu in
    one statement."""
    members = {label: member for label, member, _ in _members(pack, result)}

    def similarity(sections: list[RankedSection], parts: list[str]
                   ) -> list[list[float | None]]:
        out: list[list[float | None]] = [[None] * len(sections) for _ in parts]
        for label, member in members.items():
            idx = [k for k, s in enumerate(sections) if s.pack == label or len(members) == 1]
            if not idx or not parts:
                continue
            found = member.db.article_similarities(
                list(dict.fromkeys(sections[k].article_id for k in idx)),
                member.embed_queries(parts))
            for k in idx:
                sims = found.get(sections[k].id)
                for p, row in enumerate(out):
                    row[k] = sims[p] if sims is not None else None
        return out
    return similarity


def _offline(pack: Any, result: SearchResult, note: str | None = None, why: str | None = None,
             whole: bool = True) -> tuple[str, synthesis.Quotes, str, SearchResult]:
    """(answer, quotes, query_type, the result its sources are listed from) without a
    language model. `note`: the line that heads the extractive answer; `why`: why none was
    used though one is configured (its failure, told in the gated answer). A section of
    a cited page that the answer quotes but the context lacks joins the sources (after
    the context's, as a related section of a copy of `result`). A question about the pack
    itself is answered by its topic map, gated or not (whole_pack_offline.topic_maps)."""
    topics = whole_pack_offline.topic_maps(pack, result) if whole else None
    if topics is not None:
        return topics
    if result.gated:
        return (f"The pack has nothing relevant enough to answer this ({gate.reason(result)}),"
                f" and {why or 'no language model is configured (ANTHROPIC_API_KEY unset)'}.",
                [], GATED, result)
    # Issue 48: a list, across or overview question also gets a list of cited items
    # gathered through the graph (packs/retrieval/whole_pack_offline.py), after these
    # passages; from each pack of a PackSet. A list or across question's passages are
    # chosen first with a larger budget (whole_pack_offline.LIST_PASSAGES); when those
    # already quote the whole list asked for, again with the reader's own (a narrow list
    # question keeps its short answer).
    budget = whole_pack_offline.passage_budget(result.question) if whole else {}
    for limits in ((budget, {}) if budget else ({},)):
        answer, quotes, used = passages(pack, result, note, **limits)
        shown = dataclasses.replace(result, related=[*result.related, *used])
        listed = (whole_pack_offline.offline_answer(pack, shown, (answer, quotes)) if whole
                  else None)
        if listed is not None:
            return listed
    return answer, quotes, "retrieval_only", shown


def passages(pack: Any, result: SearchResult, note: str | None = None,
             max_units: int | None = None, max_words: int | None = None,
             reach: float = extractive.EXTRA_REACH
             ) -> tuple[str, list[tuple[int, str]], list[RankedSection]]:
    """The offline answer's passages (packs/retrieval/extractive.py): (text, quotes, the
    sections it quotes that the context lacks); at most `max_units` units in `max_words`
    words (the reader's limits by default), the other sections of the cited pages read
    within `reach` of the best similarity. A whole-pack answer lists its items after
    them (benchmarks/train_items.py fits the item model on what they already say)."""
    kw = {"note": note} if note else {}
    return extractive.answer(result.question, result.cited(), pack_idf=idf(pack),
                             extra=page_sections(pack, result),
                             similarity=_similarity(pack, result),
                             part_similarity=_part_similarity(pack, result),
                             unit_similarity=unit_vectors.similarity(_members(pack, result)),
                             max_units=max_units, max_words=max_words, reach=reach, **kw)


def _offline_dict(pack: Any, result: SearchResult, usage: dict[str, Any],
                  note: str | None = None, why: str | None = None,
                  whole: bool = True) -> dict[str, object]:
    answer, quotes, qtype, result = _offline(pack, result, note, why, whole)
    answer, cits = _finish(result, answer, quotes, _pack_name(pack))
    return _answer_dict(result, answer, cits, qtype, usage)


def ask(pack: Any, result: SearchResult, opts: SearchOptions
        ) -> tuple[dict[str, object], bool]:
    """(answer dict, cacheable). Transient Claude failures and unusable replies degrade to
    the extractive answer (not cacheable); terminal ones raise `packs.llm.errors.SynthesisError`."""
    usage = zero_query_usage()
    add_query_usage(usage, result.token_usage)  # search's own calls (multi-query)
    api = llm_client.shared_client()
    if api is None:
        return _offline_dict(pack, result, usage, whole=opts.enabled("whole_pack")), True
    try:  # issue 48: a whole-pack question, as a map-reduce over its region's sections
        whole = _whole_pack_dict(pack, result, api, opts, usage)
    except Exception as exc:
        return _degrade(pack, result, usage, exc), False
    if whole is not None:
        return whole, True
    qtype, system, user = _plan(result)
    try:
        if result.gated:
            text, u = synthesis.complete(api, opts.model, opts.max_tokens, system, user)
            quotes: synthesis.Quotes = []
        else:
            text, quotes, u, ok = synthesis.complete_cited(api, opts.model, opts.max_tokens,
                                                           system, user)
            if not ok:
                text, quotes, qtype = insufficient_text(result), [], INSUFFICIENT
    except Exception as exc:
        return _degrade(pack, result, usage, exc), False
    add_query_usage(usage, u)
    answer, cits = _finish(result, text, quotes, _pack_name(pack))
    return _answer_dict(result, answer, cits, qtype, usage), True


def _whole_pack_dict(pack: Any, result: SearchResult, api: Any, opts: SearchOptions,
                     usage: dict[str, Any]) -> dict[str, object] | None:
    """The answer dict of a whole-pack question with Claude (packs/retrieval/
    whole_pack_claude.py), or None for a question about one thing."""
    whole = (whole_pack_claude.answer(pack, result, api, opts.model, usage)
             if opts.enabled("whole_pack") else None)
    if whole is None:
        return None
    text, quotes, qtype, listed = whole
    if qtype == INSUFFICIENT:
        text = insufficient_text(listed)
    answer, cits = _finish(listed, text, quotes, _pack_name(pack))
    return _answer_dict(listed, answer, cits, qtype, usage)


def _degrade(pack: Any, result: SearchResult, usage: dict[str, Any],
             exc: Exception) -> dict[str, object]:
    if not (llm_errors.is_api_error(exc) or isinstance(exc, synthesis.UnusableReply)):
        raise exc
    usage["api_calls"] += 1
    if llm_errors.is_terminal(exc):
        raise llm_errors.SynthesisError(
            f"Claude refused the request ({type(exc).__name__}): "
            f"{str(exc).splitlines()[0][:300]}. Check ANTHROPIC_API_KEY and the model name"
        ) from exc
    why = ("its reply had no usable answer" if isinstance(exc, synthesis.UnusableReply)
           else f"Claude was unavailable ({type(exc).__name__})")
    note = (f"{why[0].upper()}{why[1:]}; retrieval-only answer (no language model was "
            "used). The most relevant passages in the pack:")
    return _offline_dict(pack, result, usage, note, why)


def ask_stream(pack: Any, result: SearchResult, opts: SearchOptions
               ) -> Iterator[str | dict[str, object]]:
    """Yield answer text chunks, then the final answer dict (same fields as `ask`); the
    chunks join to the dict's `answer`."""
    usage = zero_query_usage()
    add_query_usage(usage, result.token_usage)  # search's own calls (multi-query)
    api = llm_client.shared_client()
    if api is None:
        final = _offline_dict(pack, result, usage, whole=opts.enabled("whole_pack"))
        yield str(final["answer"])
        yield final
        return
    try:  # a whole-pack answer is a list made after its map calls: yielded whole
        whole = _whole_pack_dict(pack, result, api, opts, usage)
    except Exception as exc:
        whole = _degrade(pack, result, usage, exc)
    if whole is not None:
        yield str(whole["answer"])
        yield whole
        return
    qtype, system, user = _plan(result)
    chunks: list[str] = []
    out: dict[str, Any] = {}
    try:
        if result.gated:
            out["usage"] = {}  # filled when the stream ends
            parts = synthesis.stream(api, opts.model, opts.max_tokens, system, user,
                                     out["usage"])
        else:
            parts = synthesis.stream_cited(api, opts.model, opts.max_tokens, system, user, out)
        for chunk in parts:
            chunks.append(chunk)
            yield chunk
    except Exception as exc:
        if chunks:
            raise
        final = _degrade(pack, result, usage, exc)
        yield str(final["answer"])
        yield final
        return
    add_query_usage(usage, out.get("usage", {}))
    text = out.get("answer", "".join(chunks))
    if out.get("answerable") is False:  # nothing of Claude's answer was streamed
        text, out["quotes"], qtype = insufficient_text(result), [], INSUFFICIENT
        yield text
    answer, cits = _finish(result, text, out.get("quotes", []), _pack_name(pack))
    if len(answer) > len(text):  # the line flagging unverified citations
        yield answer[len(text):]
    yield _answer_dict(result, answer, cits, qtype, usage)
