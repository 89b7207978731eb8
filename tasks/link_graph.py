"""Links stage: hyperlinks between pages of one pack → LINKS_TO edges and centrality.

A link matches a page when their canonical URLs are equal (`canonical_url`: scheme and
host lower-cased, default port, fragment, trailing slash and index/extension suffixes
dropped). Documentation sites often link to a page's published path while the pack
fetched its source file (`/docs/concepts/pods/` vs `.../concepts/pods.md`), so a link to
the same host that matches nothing exactly falls back to a unique match on the last path
segments (at least two). Self-links are dropped. Centrality is degree (in + out) over the
edges, precomputed here so queries only look it up.
"""

from __future__ import annotations

import re
from collections import defaultdict
from urllib.parse import urljoin, urlsplit

import polars as pl

from packs import format as fmt
from packs.urls import canonical_url

_MD_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")

__all__ = ["canonical_url", "degree_centrality", "links_in_markdown", "links_table",
           "resolve_links"]

def links_in_markdown(text: str, base_url: str) -> list[str]:
    """Absolute targets of Markdown `[text](href)` links, resolved against base_url."""
    out = []
    for href in _MD_LINK.findall(text or ""):
        if href.startswith(("mailto:", "javascript:", "tel:", "#")):
            continue
        out.append(urljoin(base_url, href))
    return out


def _segments(canon: str) -> tuple[str, ...]:
    return tuple(s for s in urlsplit(canon).path.split("/") if s)


def resolve_links(pages: list[dict]) -> list[tuple[str, str]]:
    """Edges (source article id, target article id) between pages of the pack.

    `pages` items have `url`, optional `final_url`, and `links` (absolute hrefs).
    """
    by_canon: dict[str, str] = {}
    by_tail: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for page in pages:
        art = fmt.article_id(canonical_url(page["url"]))
        for u in {page["url"], page.get("final_url") or page["url"]}:
            canon = canonical_url(u)
            by_canon[canon] = art
            segs = _segments(canon)
            for n in range(2, len(segs) + 1):
                by_tail[segs[-n:]].add(art)

    edges: set[tuple[str, str]] = set()
    for page in pages:
        src = fmt.article_id(canonical_url(page["url"]))
        for href in page.get("links") or []:
            if urlsplit(href).scheme not in ("http", "https", "file"):
                continue
            canon = canonical_url(href)
            dst = by_canon.get(canon)
            same_site = urlsplit(href).netloc == urlsplit(page["url"]).netloc
            if dst is None and same_site:
                segs = _segments(canon)
                for n in range(len(segs), 1, -1):
                    candidates = by_tail.get(segs[-n:], set())
                    if len(candidates) == 1:
                        dst = next(iter(candidates))
                        break
                    if len(candidates) > 1:
                        break
            if dst and dst != src:
                edges.add((src, dst))
    return sorted(edges)


def degree_centrality(article_ids: list[str], edges: list[tuple[str, str]]) -> dict[str, float]:
    """Degree (in + out) of each article over the edges, divided by (n - 1)."""
    degree = dict.fromkeys(article_ids, 0)
    for s, d in edges:
        if s in degree:
            degree[s] += 1
        if d in degree:
            degree[d] += 1
    norm = max(len(article_ids) - 1, 1)
    return {a: v / norm for a, v in degree.items()}


def links_table(pages: pl.DataFrame) -> pl.DataFrame:
    """Pages (url, final_url, links) → the links table (source_id, target_id)."""
    edges = resolve_links(pages.select("url", "final_url", "links").to_dicts())
    return pl.DataFrame(edges, schema={"source_id": pl.Utf8, "target_id": pl.Utf8}, orient="row")
