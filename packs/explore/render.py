"""Pack text as safe HTML: the one place the explorer turns page text into markup.

Everything else in the templates is escaped by Jinja's autoescape. Markdown (a section's
text, an answer) goes through markdown-it-py with raw HTML off (a `<script>` in page text
is rendered as the text "<script>"), then through nh3 (the Ammonia sanitiser) with a short
list of tags and attributes and http(s)/mailto links only, so a `javascript:` link or an
`onerror=` attribute never comes through, whichever of the two would have missed it.
Relative links of a section resolve against its page's URL; an answer keeps only its
links to its own citations (`#cite-N`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(
    ["table", "strikethrough"])

TAGS = {"p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote",
        "pre", "code", "em", "strong", "del", "a", "table", "thead", "tbody", "tr", "th",
        "td"}
# No style attribute: the Content-Security-Policy refuses inline styles (markdown-it's
# table alignment is lost, nothing else).
ATTRIBUTES = {"a": {"href", "title", "class"}, "code": {"class"}, "ol": {"start"}}
SCHEMES = {"http", "https", "mailto"}

# A citation marker as packs/citations.py reads them ([n], [n, pack], [n, m], [n; m]),
# in rendered HTML: not after a word character or a backslash, not a link's text.
_MARKER = re.compile(r"(?<![\w\\])\[(\d{1,6})((?:\s*[,;]\s*[^\[\]<>\n]{1,120})?)\](?!\()")
_CODE = re.compile(r"(<pre\b.*?</pre>|<code\b.*?</code>)", re.S)


def safe_href(url: str | None) -> str | None:
    """`url` when it is an http(s) URL a page may link to, else None (shown as text)."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    return url.strip() if parts.scheme.lower() in ("http", "https") and parts.netloc else None


def _clean(html: str, relative) -> str:
    return nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, url_schemes=SCHEMES,
                     url_relative=relative,
                     link_rel="noopener noreferrer nofollow")


def markdown(text: str, base_url: str | None = None) -> Markup:
    """A section's Markdown as sanitised HTML; relative links resolve against
    `base_url` when it is an http(s) URL, and are dropped otherwise."""
    base = safe_href(base_url)
    relative = ("rewrite_with_base", base) if base else "deny"
    return Markup(_clean(_MD.render(text or ""), relative))


def answer_html(text: str, anchors: dict[int, list[str]]) -> Markup:
    """An answer's Markdown as sanitised HTML, each `[n]` marker outside code a link to
    its citation: the k-th marker of n to `#<anchors[n][k]>` (the citations of n come in
    marker order; a marker past the list links to n's last one; markers whose n has no
    citation stay text)."""
    seen: dict[int, int] = {}

    def link(match: re.Match[str]) -> str:
        numbers = [int(match.group(1)), *(int(x) for x in
                                          re.findall(r"(?<![\w])\d{1,6}(?![\w])",
                                                     match.group(2)))]
        targets = []
        for n in numbers:
            k = seen.get(n, 0)
            seen[n] = k + 1
            if anchors.get(n):
                targets.append(anchors[n][min(k, len(anchors[n]) - 1)])
        if not targets:
            return match.group(0)
        return f'<a class="cite-marker" href="#{targets[0]}">{match.group(0)}</a>'

    parts = _CODE.split(_MD.render(text or ""))
    linked = "".join(p if i % 2 else _MARKER.sub(link, p) for i, p in enumerate(parts))
    return Markup(_clean(linked, lambda url: url if url.startswith("#cite-") else None))


@dataclass
class Excerpt:
    """A quote inside its section's text: the text around it, cut to a window."""

    before: str
    quote: str
    after: str
    cut_before: bool
    cut_after: bool


def excerpt(content: str, start: int | None, end: int | None, window: int = 480
            ) -> Excerpt | None:
    """The span content[start:end] with up to `window` characters each side (cut at a
    space), or None when the span is not a valid one of `content`."""
    if start is None or end is None or not (0 <= start < end <= len(content)):
        return None
    lo = max(0, start - window)
    hi = min(len(content), end + window)
    if lo > 0:
        space = content.find(" ", lo, start)
        lo = space + 1 if space >= 0 else lo
    if hi < len(content):
        space = content.rfind(" ", end, hi)
        hi = space if space >= 0 else hi
    return Excerpt(before=content[lo:start], quote=content[start:end], after=content[end:hi],
                   cut_before=lo > 0, cut_after=hi < len(content))
