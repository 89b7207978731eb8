"""`/ask?q=...[&pack=...]`: an answer with its citations, the ranked sections behind it,
the gate's verdict, and the entities and facts it drew on.

The page asks through the app API (`KnowledgePack.ask`, or `PackSet.ask` when no pack is
named and several are served), then reads the same question's `search()` result, which the
ask has just cached (one pipeline run, not two), for what the answer dict leaves out: the
ranked sections with their text and scores, the gate verdict, the graph facts.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse

from packs.explore import render
from packs.explore.web import Explorer, explorer, page, param
from packs.llm.errors import SynthesisError
from packs.options import OptionsError
from packs.pipeline import QuestionError
from packs.result import SearchResult
from packs.retrieval import gate

# How the answer came about, by its query_type (packs/answer.py).
KINDS = {
    "hybrid_search": ("claude", "Answer by Claude from hybrid search"),
    "vector_search": ("claude", "Answer by Claude from vector search"),
    "retrieval_only": ("offline", "Offline answer: sentences quoted from the sections, no "
                                  "language model (ANTHROPIC_API_KEY unset or Claude "
                                  "unavailable)"),
    "confidence_gated_fallback": ("gated", "The pack abstained: nothing in it is relevant "
                                           "enough"),
}


def _target(ex: Explorer, label: str):
    """(what to ask, its label or None for every pack)."""
    if label or len(ex.served) == 1:
        served = ex.get(label)
        return served.pack, served.label
    return ex.packset, None


def _citations(ex: Explorer, label: str | None, answer: dict, result: SearchResult
               ) -> tuple[list[dict], dict[int, list[str]]]:
    """Each citation with its excerpt (the quote inside its section's text) and anchor;
    and n → the anchors of n's citations, in marker order. A verified quote of a section
    the search result does not hold (the offline answer also reads the other sections of
    the cited pages) is shown in that section's text, read from its pack."""
    content = {s.id: s.content for s in (*result.cited(), *result.related)}
    out: list[dict] = []
    anchors: dict[int, list[str]] = {}
    for i, c in enumerate(answer.get("citations") or []):
        anchor = f"cite-{i}"
        anchors.setdefault(int(c["n"]), []).append(anchor)
        sid = c.get("section_id") or ""
        text = content.get(sid)
        if text is None and c.get("verified") and sid:
            section = ex.get(label or c.get("pack")).pack.browse.section(sid)
            text = section.content if section is not None else None
        shown = (render.excerpt(text, c.get("start"), c.get("end"))
                 if c.get("verified") and text is not None else None)
        out.append({**c, "anchor": anchor, "excerpt": shown})
    return out, anchors


def _facts(ex: Explorer, label: str | None, result: SearchResult) -> list[dict]:
    """The graph facts the answer drew on, each with the pack and section it came from."""
    texts = list(result.facts.facts)
    found: dict[str, dict] = {}
    for served in ([ex.get(label)] if label else ex.served.values()):
        missing = [t for t in texts if t not in found]
        if not missing:
            break
        sections = [s.id for s in (*result.sections, *result.related)
                    if s.pack in (None, served.label)]
        for text, where in served.pack.browse.fact_sources(missing, sections).items():
            found[text] = {**where, "pack": served.label}
    return [{"text": t, **found.get(t, {})} for t in texts]


def ask(request: Request) -> HTMLResponse:
    ex = explorer(request)
    question = param(request, "q")
    label = param(request, "pack")
    context: dict = {"question": question, "ask_pack": label, "answer": None,
                     "served": ex.get(label) if label else None, "error": None}
    if not question:
        return page(request, "ask.html", context, switch="/ask")
    target, label_or_all = _target(ex, label)
    try:
        answer = target.ask(question)
        result = target.search(question)
    except (QuestionError, OptionsError) as exc:
        context["error"] = str(exc)
        return page(request, "ask.html", context, status=400, switch="/ask",
                    switch_params={"q": question})
    except SynthesisError as exc:  # Claude refused the request (auth, model): say so
        raise HTTPException(502, f"Claude refused the request: {exc}") from exc
    citations, anchors = _citations(ex, label_or_all, answer, result)
    kind, kind_label = KINDS.get(str(answer["query_type"]),
                                 ("other", str(answer["query_type"])))
    context.update(
        answer=answer, result=result, citations=citations, kind=kind, kind_label=kind_label,
        answer_html=render.answer_html(str(answer["answer"]), anchors),
        gate_reason=gate.reason(result) if result.gated else None,
        facts=_facts(ex, label_or_all, result), default_label=label_or_all,
        usage=answer.get("token_usage") or {},
    )
    return page(request, "ask.html", context, switch="/ask", switch_params={"q": question})
