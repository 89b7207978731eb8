"""The pages inside a pack's graph: `/section/<id>` (a section, its page, entities, facts and
linked pages) and `/entity` (an entity, its mentions and its neighbourhood as a graph).

The neighbourhood is bounded on the server: a page of NEIGHBOURS_PAGE neighbours (the most
strongly tied first) and the relations among them, with `next_offset` to expand by one
more page (`/entity/graph`, JSON); the browser stops expanding at MAX_NODES. So the most
connected entity of a pack costs about what the least connected one does.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse

from packs.browse import Entity
from packs.explore.render import excerpt
from packs.explore.web import Explorer, Served, explorer, int_param, page, param

NEIGHBOURS_PAGE = 40
MENTIONS_PAGE = 20
MAX_NODES = 400  # the browser's cap on nodes drawn, expansions included
TOP_ENTITIES = 60


def section(request: Request) -> HTMLResponse:
    served = explorer(request).get(param(request, "pack"))
    section_id = request.path_params["section_id"]
    browse = served.pack.browse
    sec = browse.section(section_id)
    if sec is None:
        raise HTTPException(404, f"pack {served.label!r} has no section {section_id[:80]!r}")
    siblings = browse.page_sections(sec.article_id)
    at = next((i for i, (sid, _) in enumerate(siblings) if sid == sec.id), 0)
    start, end = int_param(request, "start", -1), int_param(request, "end", -1)
    cited = excerpt(sec.content, start, end) if start >= 0 and end >= 0 else None
    return page(request, "section.html", {
        "served": served, "sec": sec, "siblings": siblings,
        "prev": siblings[at - 1] if at > 0 else None,
        "next": siblings[at + 1] if at + 1 < len(siblings) else None,
        "entities": browse.section_entities(sec.id), "facts": browse.section_facts(sec.id),
        "links_out": browse.linked_pages(sec.article_id, "out"),
        "links_in": browse.linked_pages(sec.article_id, "in"), "cited": cited,
    }, switch="/")


def _candidates(ex: Explorer, label: str, name: str) -> list[tuple[Served, Entity]]:
    """Entities named `name` in the pack labelled `label`, or in every pack."""
    places = [ex.get(label)] if label else list(ex.served.values())
    return [(s, e) for s in places for e in s.pack.browse.entities_named(name)]


def graph_data(served: Served, entity: Entity, offset: int = 0) -> dict:
    """One page of an entity's neighbourhood for the graph view: the centre, up to
    NEIGHBOURS_PAGE neighbours (most strongly tied first), the relations among them, the
    total number of neighbours and the offset of the next page (None at the end)."""
    browse = served.pack.browse
    hood = browse.neighbours(entity.id, offset, NEIGHBOURS_PAGE)
    ids = [n["id"] for n in hood.items]
    edges = [[entity.id, n["id"], n["relation"]] for n in hood.items]
    edges += [list(e) for e in browse.edges_among(ids) if entity.id not in e[:2]]
    return {"center": {"id": entity.id, "name": entity.name, "type": entity.type},
            "nodes": hood.items, "edges": edges, "total": hood.total, "offset": offset,
            "next_offset": hood.next_offset, "max_nodes": MAX_NODES, "pack": served.label}


def entity(request: Request) -> HTMLResponse:
    ex = explorer(request)
    label, entity_id, name = param(request, "pack"), param(request, "id"), param(request, "name")
    context: dict = {"served": ex.get(label) if label else None, "name": name,
                     "entity": None, "candidates": [], "suggestions": [], "top": []}
    switch = {"name": name} if name else {}
    if entity_id:
        served = ex.get(label)
        found = served.pack.browse.entity(entity_id)
        if found is None:
            raise HTTPException(404, f"pack {served.label!r} has no entity {entity_id[:80]!r}")
        context["served"], chosen = served, found
        switch = {"name": found.name}
    elif name:
        candidates = _candidates(ex, label, name)
        if len(candidates) != 1:
            context["candidates"] = candidates
            if not candidates:
                places = [ex.get(label)] if label else list(ex.served.values())
                context["suggestions"] = [(s, e) for s in places
                                          for e in s.pack.browse.find_entities(name, 20)]
            return page(request, "entity.html", context, status=200 if candidates else 404,
                        switch="/entity", switch_params=switch)
        context["served"], chosen = candidates[0]
    else:
        served = ex.get(label)
        context["served"] = served
        context["top"] = served.pack.browse.degrees()[:TOP_ENTITIES]
        return page(request, "entity.html", context, switch="/entity")
    served = context["served"]
    browse = served.pack.browse
    moffset = int_param(request, "moffset")
    context.update(
        entity=chosen, facts=browse.entity_facts(chosen.id),
        mentions=browse.mentions(chosen.id, moffset, MENTIONS_PAGE),
        graph=graph_data(served, chosen),
        elsewhere=[s.label for s in ex.served.values() if s.label != served.label
                   and s.pack.browse.entities_named(chosen.name)],
    )
    return page(request, "entity.html", context, switch="/entity", switch_params=switch)


def _entity_of(request: Request) -> tuple[Served, Entity]:
    served = explorer(request).get(param(request, "pack"))
    entity_id = param(request, "id")
    found = served.pack.browse.entity(entity_id) if entity_id else None
    if found is None:
        raise HTTPException(404, f"pack {served.label!r} has no entity {entity_id[:80]!r}")
    return served, found


def entity_graph(request: Request) -> JSONResponse:
    """The next page of an entity's neighbourhood (`offset`), as JSON for the graph."""
    served, found = _entity_of(request)
    return JSONResponse(graph_data(served, found, int_param(request, "offset")))


def entity_mentions(request: Request) -> HTMLResponse:
    """The next page of an entity's mentions (`offset`), as list items (htmx swaps them
    in for the "more" item)."""
    served, found = _entity_of(request)
    mentions = served.pack.browse.mentions(found.id, int_param(request, "offset"),
                                           MENTIONS_PAGE)
    html = request.app.state.templates.get_template("_mentions.html").render(
        served=served, entity=found, mentions=mentions)
    return HTMLResponse(html)
