"""The Topics page: `/topics`, the map of a pack's topics (packs/topics.py), each with its
title, top entities (linked to their pages), top sections (linked) and a digest whose every
line links to the section it quotes, highlighted there (`/section/<id>?start=&end=`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse

from packs.explore.web import explorer, page, param
from packs.topics import has_topics, pack_topics

MAX_TOPICS = 100


def topics(request: Request) -> HTMLResponse:
    served = explorer(request).get(param(request, "pack"))
    present = has_topics(served.pack.db)
    found = pack_topics(served.pack, MAX_TOPICS) if present else []
    return page(request, "topics.html", {"served": served, "topics": found,
                                         "present": present}, switch="/topics")
