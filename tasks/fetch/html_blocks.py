"""Blocks of an HTML page as its generator lays them out, made plain before trafilatura reads
the page (tasks/fetch/parse.py): what the page shows as a heading stays a heading, and what
it shows as a code block stays one.

- `drop_heading_ids`: a section's id made from its heading ("editing-and-navigation") goes,
  so that trafilatura does not take the section for the page's navigation;
- `unwrap_layout`: a table that lays the page out (LWN, a Tumblr theme) or boxes one code
  block (DocBook) is read as blocks;
- `extract_keeping_headings`: a page trafilatura finds no content frame in (plain <div>s,
  headings straight in <body>) is read again with the element holding its headings marked
  as its article; `fences_apart` puts back on its own line a fence trafilatura wrote after
  a list item's text;
- `open_summaries`: a <summary> holding a heading (rustdoc's methods) gives way to it, and
  one that only labels its toggle ("Expand description") goes;
- `plain_signature_headings`: a heading that is a code signature full of links (rustdoc)
  shows its text, and a heading broken across lines is one line;
- `split_code_tabs`: a <pre> holding several <code> blocks (Node.js's ES module and
  CommonJS examples) becomes one code block each.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Callable

import lxml.html

from packs.markdown import line_kinds
from tasks.fetch.html_tree import on_one_line

_TABLE_PARTS = ("thead", "tbody", "tfoot", "tr", "td", "th", "caption", "colgroup", "col")
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")


def plain_blocks(tree: lxml.html.HtmlElement) -> None:
    """The fix-ups of this module that run on the tree before anchors are dropped."""
    drop_heading_ids(tree)
    unwrap_layout(tree)
    open_summaries(tree)
    split_code_tabs(tree)


def drop_heading_ids(tree: lxml.html.HtmlElement) -> None:
    # A section's id made from its heading (Sphinx: <section id="editing-and-navigation">
    # <h2>Editing and Navigation</h2>) reads to trafilatura as the page's chrome when it
    # holds "menu", "navigation", "comment", "footer" ...: Python's IDLE page lost its
    # "Menus" and "Editing and Navigation" chapters, 1,800 of its 4,500 words. Such an id
    # names the heading, not a part of the layout: it goes.
    for element in tree.xpath("//*[@id][h1 or h2 or h3 or h4 or h5 or h6]"):
        # its first child that shows text (a label's empty <span id> may come before it)
        first = next((c for c in element if isinstance(c.tag, str)
                      and c.text_content().strip()), None)
        if first is None or first.tag not in _HEADINGS:
            continue
        heading = _slug(first.text_content())
        if heading and _slug(re.sub(r"-\d+$", "", element.get("id", ""))) == heading:
            del element.attrib["id"]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.casefold())


def unwrap_layout(tree: lxml.html.HtmlElement) -> None:
    # A table that lays a page out rather than holding data keeps its headings only as
    # <div>s: trafilatura can write such a table as Markdown rows, so a page laid out in a
    # table (LWN, a Tumblr theme, older generated docs) came out as rows of its chrome or as
    # one row holding every article, no heading left. A table holding a heading (or marked
    # role="presentation"), or of one cell holding a code block (DocBook boxes each code
    # block so, and a <pre> in a cell came out as inline code), becomes plain blocks; a
    # data table stays a table.
    for table in list(tree.iter("table")):
        cells = [c for c in table.iter("td", "th") if next(c.iterancestors("table")) is table]
        boxed = len(cells) == 1 and cells[0].find(".//pre") is not None
        if (table.get("role") == "presentation" or boxed
                or next(table.iter(*_HEADINGS), None) is not None):
            for part in table.iter(*_TABLE_PARTS):
                if next(part.iterancestors("table"), None) is table:
                    part.tag = "div"
            table.tag = "div"


# A Markdown heading line of trafilatura's output.
_MARKDOWN_HEADING = re.compile(r"^#{1,6} \S", re.M)
_CHROME = ("nav", "header", "footer", "aside")


def extract_keeping_headings(tree: lxml.html.HtmlElement,
                             extract: Callable[[lxml.html.HtmlElement], str | None]
                             ) -> str | None:
    """`extract(tree)` (trafilatura's Markdown), but a page that came out without a heading
    is read again with the element that holds its headings marked as its <article>, and
    that reading kept when it has headings and about as many words (0.8-1.25 times).
    trafilatura's recovery path, taken when no element looks like a content frame to it (a
    page of plain <div>s, as LWN's once laid out in tables), keeps paragraphs and drops
    every heading: such a page was one section however many headings it showed.
    A page whose headings sit straight in its <body> (gtk-doc and DocBook write them so)
    is read again with the body's content wrapped in an <article>. That reading is kept
    when it restores at least half of those headings, with at least 0.8 times the words
    (often more: the recovery path also drops much of such a page's text, and each of a
    gtk-doc page's signatures; GCC's release notes lost 2,500 of their 4,300 words).
    A news page's headings (menus, related stories) come back a few at most, and only
    chrome with them."""
    frame = heading_frame(tree)
    heads = len(_content_headings(tree.find("body")))
    if frame is None and heads >= 2:
        frame = tree.find("body")
    spare = None
    if frame is not None:  # a copy before trafilatura rewrites the tree
        path = tree.getroottree().getpath(frame)
        spare = copy.deepcopy(tree)
    first = fences_apart(extract(tree))
    if spare is None or not first or _has_heading(first):
        return first
    found = spare.getroottree().xpath(path)
    if not found:
        return first
    body = found[0].tag == "body"
    if body:
        article = lxml.html.Element("article")
        article.text, found[0].text = found[0].text, None
        article.extend(list(found[0]))
        found[0].append(article)
    else:
        found[0].tag = "article"
    again = fences_apart(extract(spare))
    restored = _headings(again or "")
    ratio = len((again or "").split()) / max(len(first.split()), 1)
    if body:
        return again if 2 * restored >= heads and ratio >= 0.8 else first
    return again if restored and 0.8 <= ratio <= 1.25 else first


# A fence that trafilatura opened at the end of a line of text: a code block in a list item
# ("1. Install it with: ```", the code on the lines after it).
_FENCE_AFTER_TEXT = re.compile(r"^(?P<text>.*?\S)[ \t]*(?P<fence>```+[\w+#.-]*)[ \t]*$")


def fences_apart(markdown: str | None) -> str | None:
    """`markdown` with each code fence that trafilatura wrote at the end of a line of text
    on a line of its own. A <pre> inside a list item came out as "1. Install it with:
    ```", its code on the lines after and its closing fence alone on a line: read as
    Markdown, that closing fence opened a block holding the rest of the page (its headings
    included), closed by a stray fence at its end."""
    if not markdown:
        return markdown
    lines = markdown.splitlines()
    start = 0  # outside any code block: the lines before it read as they did
    while True:  # one fence at a time: each changes how the lines after it read
        found = next((start + n for n, (line, kind, _)
                      in enumerate(line_kinds(itertools.islice(lines, start, None)))
                      if kind == "text" and _FENCE_AFTER_TEXT.match(line)), None)
        if found is None:
            return "\n".join(lines)
        m = _FENCE_AFTER_TEXT.match(lines[found])
        lines[found:found + 1] = [m.group("text"), "", m.group("fence")]
        start = found + 2  # the fence, now on a line of its own, opens the block


def _has_heading(markdown: str) -> bool:
    return _headings(markdown) > 0


def _headings(markdown: str) -> int:
    """The headings of `markdown` outside its code blocks (not a C "# define")."""
    return sum(kind == "text" and _MARKDOWN_HEADING.match(line) is not None
               for line, kind, _ in line_kinds(markdown.splitlines()))


def heading_frame(tree: lxml.html.HtmlElement) -> lxml.html.HtmlElement | None:
    """The innermost element holding every h2-h6 heading of the page outside its navigation,
    header, footer and asides, when there are at least two, it is not the <body> itself and
    it holds at least half of the words of the page's paragraphs; else None."""
    body = tree.find("body")
    heads = _content_headings(body)
    if len(heads) < 2:
        return None
    common = list(reversed(list(heads[0].iterancestors())))
    for h in heads[1:]:
        mine = set(h.iterancestors())
        common = [a for a in common if a in mine]
    frame = common[-1] if common else None
    if frame is None or frame is body or frame.tag in ("html", "body"):
        return None
    return frame if 2 * _paragraph_words(frame) >= _paragraph_words(body) else None


def _content_headings(body: lxml.html.HtmlElement | None) -> list[lxml.html.HtmlElement]:
    """The h2-h6 headings of `body` outside its navigation, header, footer and asides."""
    if body is None:
        return []
    return [h for h in body.iter(*_HEADINGS[1:])
            if next(h.iterancestors(*_CHROME), None) is None]


def _paragraph_words(element: lxml.html.HtmlElement) -> int:
    return sum(len(p.text_content().split()) for p in element.iter("p"))


def open_summaries(tree: lxml.html.HtmlElement) -> None:
    # trafilatura makes every <summary> a heading. One that holds a heading of its own
    # (rustdoc: <details><summary><section><span>1.0.0 · Source</span><h4>pub fn is_some
    # ...</h4></section></summary>) headed each method's section "1.0.0 · Source" with the
    # method's own heading below it: such a summary is replaced by its headings (its
    # version and source links go). A summary that only labels the toggle ("Expand
    # description") is no heading at all.
    for summary in list(tree.iter("summary")):
        heads = list(summary.iter(*_HEADINGS))
        if heads and summary.getparent() is not None:
            _replace_by(summary, heads)
        elif summary.text_content().strip().casefold() in _TOGGLE_LABELS:
            summary.drop_tree()


_TOGGLE_LABELS = frozenset({"expand description", "show description", "expand", "show more",
                            "details", "show details"})


def split_code_tabs(tree: lxml.html.HtmlElement) -> None:
    # One <pre> holding several <code> blocks shows one at a time (Node.js's docs: the same
    # example as an ES module and as CommonJS, behind a toggle): trafilatura ran them
    # together as inline code ("`import ...;``const fs = require(...);`"). Each becomes a
    # code block of its own, in order; the toggle goes.
    for pre in list(tree.iter("pre")):
        codes = pre.findall("code")
        if len(codes) >= 2 and pre.getparent() is not None:
            _replace_by(pre, [_in_pre(code) for code in codes])


def _in_pre(code: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    """A new <pre> holding `code` (moved into it, without its tail)."""
    block = lxml.html.Element("pre")
    code.tail = None
    block.append(code)
    return block


def _replace_by(old: lxml.html.HtmlElement, elements: list[lxml.html.HtmlElement]) -> None:
    """`old` replaced by `elements` in order (each moved there without its tail); the
    last takes `old`'s tail."""
    at = old
    for element in elements:
        element.tail = None
        at.addnext(element)
        at = element
    at.tail = old.tail
    old.tail = None
    old.getparent().remove(old)


def plain_signature_headings(tree: lxml.html.HtmlElement) -> None:
    # A heading that links to itself or holds several links is a signature (rustdoc's "pub
    # const fn is_some(&self) -> bool", its name linking to its own anchor and each type to
    # its page): trafilatura read such a block as links and dropped the method, heading and
    # description, for about one item in seven of the std pages that
    # benchmarks/generator_pages.py reads. Its links show their text. A heading of one link
    # to another page ("#### [crypto/tls](...)" in release notes) keeps it. (Run after the
    # permalinks beside headings are dropped.)
    # A heading's text broken across source lines (DocBook: "3. \nProgramming with
    # <code>libbzip2</code>") is one line too: trafilatura kept the break, and the heading
    # was "3." with its words in the body below it.
    for heading in tree.iter(*_HEADINGS):
        links = list(heading.iter("a"))
        if len(links) >= 2 or any((a.get("href") or "").startswith("#") for a in links):
            for a in links:
                a.drop_tag()
        for br in list(heading.iter("br")):  # "GCC 12 Release Series<br/>Changes, ..."
            br.tail = " " + (br.tail or "")
            br.drop_tag()
        on_one_line(heading)
