"""Markdown handling for the fetch stage (pure): front matter, Hugo shortcodes, links.

Also the link helpers that `tasks.fetch.parse` uses on trafilatura's Markdown. Fences and
headings are read by `packs.markdown`.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from urllib.parse import urljoin, urlsplit, urlunsplit

import frontmatter
import yaml

from packs.markdown import heading, line_kinds
from tasks.fetch.markdown_blocks import plain_callouts

# [text](href "title"); not an image (!) and not an escaped \[ that trafilatura writes for a
# literal bracket. Group 1 text, 2 href, 3 optional title.
LINK = re.compile(
    r"(?<![\\!])\[((?:\\.|[^\]\\])*)\]\(\s*<?([^()\s<>]+(?:\([^()\s]*\))?)>?(\s+\"[^\"]*\")?\s*\)"
)
INLINE_CODE = re.compile(r"(`+)(.+?)\1")  # `code` spans: links inside are not links


def resolve_link(href: str, base: str) -> str | None:
    """`href` resolved against `base`, or None when it is not a web (or local file) link."""
    href = href.strip()
    if not href:
        return None
    absolute = urljoin(base, href)
    scheme = urlsplit(absolute).scheme.lower()
    if scheme in ("http", "https") or (scheme == "file" and urlsplit(base).scheme == "file"):
        return absolute
    return None


def collect_link(href: str, page_url: str, links: list[str]) -> None:
    """Append `href` to `links` unless already there or a link back to `page_url` itself."""
    if _defrag(href) == _defrag(page_url) or href in links:
        return
    links.append(href)


def _defrag(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(fragment=""))


_SHORTCODE = re.compile(r"\{\{([<%])\s*(/?)\s*([\w./-]*)(.*?)\s*[>%]\}\}", re.S)
_TEXT_PARAM = re.compile(r"""\btext\s*=\s*(?:"([^"]*)"|'([^']*)'|(\S+))""")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
# An empty link target kept for old headings (mdBook, GitHub): <a id="old-name"></a>. It has
# no text, and left in place it stands before the page's first heading, which then is not
# taken as the title (18 of the Rust book's 112 chapters).
_EMPTY_ANCHOR = re.compile(r"""<(a|span)\s[^>]*?\b(?:id|name)\s*=[^>]*>\s*</\1\s*>""", re.I)
_A_HREF = re.compile(r"""<a\s[^>]*?href\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)
# The title after the destination stays on its line: "\s+" there took the next definition
# as this one's title, so every other line of a block of definitions was lost.
_REF_DEF = re.compile(r"^[ \t]{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:[ \t]+.*)?$", re.M)
_AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")


def strip_shortcodes(text: str) -> str:
    """Remove Hugo shortcodes: a shortcode with a text="..." parameter becomes that text
    (glossary_tooltip), every other tag ({{< note >}}, {{< /note >}}, {{% ... %}}) goes,
    and the text between paired tags stays."""

    def replace(m: re.Match[str]) -> str:
        if m.group(2):  # closing tag
            return ""
        param = _TEXT_PARAM.search(m.group(4))
        return next((g for g in param.groups() if g is not None), "") if param else ""

    return _SHORTCODE.sub(replace, text)


def split_front_matter(text: str) -> tuple[dict[str, object], str]:
    """(metadata, body) for YAML (---) or TOML (+++) front matter. Unreadable front matter
    is still stripped, with empty metadata; text without front matter comes back whole."""
    text = text.lstrip("\ufeff")
    if text.startswith("+++"):
        m = re.match(r"\+\+\+[ \t]*\r?\n(.*?)\r?\n\+\+\+[ \t]*(?:\r?\n|$)", text, re.S)
        if not m:
            return {}, text
        try:
            return tomllib.loads(m.group(1)), text[m.end() :]
        except tomllib.TOMLDecodeError:
            return {}, text[m.end() :]
    if text.startswith("---"):
        m = re.match(r"---[ \t]*\r?\n(.*?\r?\n)?(?:---|\.\.\.)[ \t]*(?:\r?\n|$)", text, re.S)
        if not m:
            return {}, text
        try:
            meta, _ = frontmatter.parse(text, handler=frontmatter.YAMLHandler())
        except yaml.YAMLError:
            meta = {}
        return (meta if isinstance(meta, dict) else {}), text[m.end() :]
    return {}, text


def markdown_document(text: str, url: str) -> tuple[str | None, str, list[str]]:
    """A Markdown file as (title, markdown, links): front matter parsed (its `title`) and
    removed, Hugo shortcodes, HTML comments and empty anchors cleaned, callouts and tabs
    written plainly (tasks/fetch/markdown_blocks.py), links ([t](href),
    <a href>, reference definitions, <autolinks>) resolved against `url`. Without a front-matter
    title, the first `# ` heading is the title. A file that is front matter only gets
    its `description` (else its title) as text."""
    meta, body = split_front_matter(text)
    body = plain_callouts(strip_shortcodes(body))
    body = _outside_fences(body, lambda chunk: _EMPTY_ANCHOR.sub(
        "", _HTML_COMMENT.sub("", chunk)))
    body = re.sub(r"\n{3,}", "\n\n", body).strip()
    title = meta.get("title")
    if not isinstance(title, str) or not title.strip():
        title = _first_h1(body)
    if not body:
        # Section index pages (Hugo `_index.md`) are often front matter only: keep them as
        # pages (other pages link to them) with their description, else their title.
        description = meta.get("description")
        fallback = description if isinstance(description, str) and description.strip() else title
        body = fallback.strip() if isinstance(fallback, str) else ""
    hrefs: list[str] = []
    _outside_fences(body, lambda chunk: _gather_hrefs(chunk, hrefs))
    links: list[str] = []
    for href in hrefs:
        if resolved := resolve_link(href, url):
            collect_link(resolved, url, links)
    return (title.strip() if title else None), body, links


def _gather_hrefs(chunk: str, hrefs: list[str]) -> str:
    """Append the link targets in `chunk` to `hrefs` in document order; return `chunk`."""
    masked = INLINE_CODE.sub(lambda m: " " * len(m.group(0)), chunk)
    found: list[tuple[int, str]] = []
    for pattern in (LINK, _A_HREF, _REF_DEF, _AUTOLINK):
        for m in pattern.finditer(masked):
            href = m.group(2) if pattern is LINK else next(g for g in m.groups() if g is not None)
            found.append((m.start(), href))
    hrefs.extend(href for _, href in sorted(found))
    return chunk


def _outside_fences(text: str, fn: Callable[[str], str]) -> str:
    """Apply `fn` to each run of lines outside ``` / ~~~ fences; fenced code is kept."""
    out: list[str] = []
    run: list[str] = []
    for line, kind, _ in line_kinds(text.split("\n")):
        if kind != "text":
            if run:
                out.append(fn("\n".join(run)))
                run = []
            out.append(line)
        else:
            run.append(line)
    if run:
        out.append(fn("\n".join(run)))
    return "\n".join(out)


def _first_h1(body: str) -> str | None:
    for line, kind, _ in line_kinds(body.splitlines()):
        if kind == "text" and (h := heading(line)) and h.level == 1 and h.text:
            return strip_shortcodes(h.text).strip() or None
    return None
