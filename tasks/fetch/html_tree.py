"""HTML trees before trafilatura reads them, and the title of a page (tasks/fetch/parse.py).

Fix-ups that keep what trafilatura would lose or garble: a page served as an HTML fragment
read as the main content of a document (`as_document`), code blocks with line numbers
unwrapped, each <pre> one code block and inline code on one line (`plain_code`), a
definition list's term joined to its definition, empty anchors dropped; and `title`: the
page's own title, not its site's or its chrome's.
"""

from __future__ import annotations

import html as html_lib
import json
import re
from urllib.parse import urljoin

import lxml.html
from lxml import etree

# What a heading's or term's permalink shows: no text of the page.
PERMALINK_TEXT = frozenset({"", "¶", "#", "§", "🔗", "link", "permalink", "anchor"})
_H1 = re.compile(r"#[ \t]+(.+?)[ \t#]*")
_SITE_SUFFIX = re.compile(r"(.+?)\s+[-|—–·]\s+[^-|—–·]{1,40}")


def title(markdown: str, tree: lxml.html.HtmlElement, guess: str | None) -> str | None:
    """The page's title: the `#` heading its main content opens with, when the <title>
    names it ("Configuration" in "Configuration - The Cargo Book") and it is not the site's
    name that the <title> ends with; else trafilatura's
    `guess` when a <meta> tag gives it (og:title and the like); else the <title>, less
    what follows its last " - ", " | " or " — " (mostly the site's name). Without
    a <meta> tag the guess is the first heading anywhere in the page: mdBook's hidden help
    box ("Keyboard shortcuts") opens every page of every book."""
    heads = tree.xpath("//head/title") or tree.xpath("//title")  # not an <svg>'s <title>
    names = " ".join(heads[0].text_content().split()) if heads else ""
    site = _SITE_SUFFIX.fullmatch(names)  # "cargo build - The Cargo Book": the page's part
    first = next((line for line in markdown.splitlines() if line.strip()), "")
    m = _H1.fullmatch(first.strip())
    heading = " ".join(m.group(1).split()).casefold() if m else ""
    # The site's own name as the heading its content opens with (Node.js's docs open every
    # page with "# Node.js v20 documentation", titled "File system | Node.js v20 ..."): not
    # the page's title.
    brand = site is not None and heading == names[site.end(1):].strip(" -|—–·").casefold()
    if heading and heading in names.casefold() and not brand:
        return m.group(1).strip()
    if guess and not (brand and " ".join(guess.split()).casefold() == heading):
        meta = {" ".join((c or "").split()) for c in tree.xpath("//meta/@content")}
        if " ".join(guess.split()) in meta or not names:
            return guess
    return (site.group(1) if site else names) or _fallback_title(tree)


# A fragment's front matter, a JSON object in a comment that opens it (Go's site:
# <!--{ "Title": "Effective Go", "Template": true }-->).
_FRONT_MATTER = re.compile(r"\A\s*<!--\s*(\{.*?\})\s*-->", re.S)
_DOCUMENT_TAG = re.compile(r"<(html|head|body)[\s>/]", re.I)
_XML_DECLARATION = re.compile(r"\A\ufeff?\s*<\?xml\b[^>]*\?>")


def as_document(html: str) -> str:
    """`html` as a whole document. A page served as a fragment (no <html>, <head> or
    <body>: a front-matter comment, a <style> block, then <h2> sections, as a site's
    templates would wrap it) becomes the body of one, its content in a <main> and its
    front matter's "Title" (or "title") as its <title>: trafilatura reads a page whose
    headings sit directly in <body> as loose text and drops every heading, so each
    fragment page came out as one section. A document comes back as it is, less an XML
    declaration that opens it (XHTML, as DocBook and gtk-doc write it): lxml refuses text
    that declares its encoding, so such a page came out empty."""
    html = _XML_DECLARATION.sub("", html, count=1)
    if _DOCUMENT_TAG.search(html):
        return html
    name = None
    m = _FRONT_MATTER.match(html)
    if m:
        try:
            meta = json.loads(m.group(1))
        except json.JSONDecodeError:
            meta = None
        if isinstance(meta, dict):
            found = meta.get("Title", meta.get("title"))
            name = found.strip() if isinstance(found, str) and found.strip() else None
        html = html[m.end():]
    head = f"<title>{html_lib.escape(name)}</title>" if name else ""
    return f"<html><head>{head}</head><body><main>{html}</main></body></html>"


def base_href(tree: lxml.html.HtmlElement, url: str) -> str:
    hrefs = tree.xpath("//head/base/@href")
    return urljoin(url, hrefs[0].strip()) if hrefs else url


def unwrap_numbered_code(tree: lxml.html.HtmlElement) -> None:
    # A code block with line numbers is often a one-row table (Pygments "table" line
    # numbers in Sphinx, Jekyll's Rouge, Hugo): a cell of numbers beside a cell of code.
    # trafilatura turns that table into one Markdown row with the code's lines run
    # together; the code's <pre> alone replaces the table.
    for table in list(tree.iter("table")):
        rows = table.xpath("./tr | ./tbody/tr")
        cells = rows[0].xpath("./td") if len(rows) == 1 else []
        pres = [cell.xpath(".//pre") for cell in cells]
        if len(cells) != 2 or not all(len(p) == 1 for p in pres):
            continue
        numbers, code = pres[0][0], pres[1][0]
        if not re.fullmatch(r"[\d\s]+", numbers.text_content()) or table.getparent() is None:
            continue
        code.tail = table.tail
        table.getparent().replace(table, code)


# A <pre>'s class that says it holds code, whatever links it has (DocBook and gtk-doc:
# "programlisting", "synopsis", "screen"; highlighters: "language-c", "sourceCode").
_CODE_CLASS = re.compile(r"\b(programlisting|synopsis|screen|code|source\w*|highlight\w*|"
                         r"lang(uage)?-[\w+#-]+)\b", re.I)


def plain_code(tree: lxml.html.HtmlElement) -> None:
    """Code as the page shows it: each <pre> a code block (`_code_blocks`), and inline code
    in a sentence on one line (`_inline_code`)."""
    _code_blocks(tree)
    _inline_code(tree)


def _inline_code(tree: lxml.html.HtmlElement) -> None:
    # Inline code whose text breaks across lines in the source (DocBook: "(identical to
    # <code class="computeroutput">valgrind\n --tool=none</code>)") came out of trafilatura
    # as a fenced block opened after the words before it. The splitter then read its
    # closing fence as an opening one, and the rest of the page as code, every heading
    # included. Code inside a sentence (text beside it) keeps its words on one line; a
    # <code> alone in its block may be a code block and is left as it is.
    for code in tree.iter("code", "tt", "kbd", "samp"):
        if "\n" not in code.text_content() or next(code.iterancestors("pre"), None) is not None:
            continue
        before = code.getprevious()
        beside = ((before.tail if before is not None else code.getparent().text) or "").strip()
        if not (beside or (code.tail or "").strip()):
            continue
        on_one_line(code)


def on_one_line(element: lxml.html.HtmlElement) -> None:
    """Each line break in `element`'s text (its own tail aside) and the spaces around it
    become one space."""
    for inner in element.iter():
        if inner.text and "\n" in inner.text:
            inner.text = _LINE_BREAK.sub(" ", inner.text)
        if inner is not element and inner.tail and "\n" in inner.tail:
            inner.tail = _LINE_BREAK.sub(" ", inner.tail)


_LINE_BREAK = re.compile(r"\s*\n\s*")


def _code_blocks(tree: lxml.html.HtmlElement) -> None:
    # trafilatura fences <pre><code> but often turns a bare <pre> into a quote, and the
    # inline markup inside one (texinfo's <var>, <span class="roman">) into inline code
    # that breaks the block apart. A <pre> holding links is left alone: that is a
    # preformatted document (an RFC), not code, unless its class says it is code:
    # gtk-doc's and DocBook's signatures link every type and mark each parameter with an
    # inline <code>, and trafilatura pulled those out of the block. Any other <pre> is its
    # text, in one <code>, each <br> a line break.
    for pre in list(tree.iter("pre")):
        whole = (len(pre) == 1 and pre[0].tag == "code" and not (pre.text or "").strip()
                 and not (pre[0].tail or "").strip())
        if whole:
            continue
        marked = pre.find(".//code") is not None or pre.find(".//a") is not None
        if marked and not _CODE_CLASS.search(pre.get("class", "")):
            continue
        for br in pre.iter("br"):
            if not (br.tail or "").startswith("\n"):
                br.tail = "\n" + (br.tail or "")
        text = pre.text_content()
        for child in list(pre):
            pre.remove(child)
        pre.text = None
        etree.SubElement(pre, "code").text = text
    # A code block of one line with no line break after it ("<pre><code>kubectl get pods
    # </code></pre>", the usual install command) came out as inline code run into the next
    # paragraph: it ends with one. (Not in a table's cell, which shows it as inline code.)
    for pre in tree.iter("pre"):
        if (not pre.text_content().endswith("\n")
                and next(pre.iterancestors("td", "th"), None) is None):
            inner = pre[-1] if len(pre) and pre[-1].tag == "code" and not pre[-1].tail else pre
            if len(inner):
                inner[-1].tail = (inner[-1].tail or "") + "\n"
            else:
                inner.text = (inner.text or "") + "\n"


def preformatted_headings(tree: lxml.html.HtmlElement) -> None:
    # An RFC or Internet-Draft as the IETF's tools render it is one <pre> document whose
    # headings are <span class="h2">...</span> lines: as <h2> they split the page into its
    # sections ("## 4. Requests") instead of leaving it one section of 40 chunks.
    for pre in tree.iter("pre"):
        for span in list(pre.iter("span")):
            cls = (span.get("class") or "").strip()
            if len(cls) == 2 and cls[0] == "h" and cls[1] in "123456":
                del span.attrib["class"]
                span.tag = cls  # the class is the heading's level


def drop_edit_links(tree: lxml.html.HtmlElement) -> None:
    # A MediaWiki heading (Wikipedia, ArchWiki, a project wiki) carries its "[edit]" link
    # inside the heading: "History[edit]" would be the section's heading. Its "Jump to
    # navigation" and "Jump to search" links (class mw-jump-link, or in <div id=
    # "jump-to-nav">) opened the article's text.
    for element in list(tree.iter("span", "a", "div")):
        classes = (element.get("class") or "").split()
        if ("mw-editsection" in classes and element.tag == "span"
                or "mw-jump-link" in classes or element.get("id") == "jump-to-nav"):
            element.drop_tree()  # its tail stays


def drop_empty_anchors(tree: lxml.html.HtmlElement) -> None:
    # An anchor with no text makes trafilatura take the rest of its element for the link's
    # text: a jump target (<a id="x"></a>) brackets the rest of its paragraph ("[The four
    # golden signals ...]"), and a permalink icon before a heading's text (GitHub's and
    # many generators' <h2 id="x"><a href="#x" class="anchor"><svg>...</svg></a>Title</h2>)
    # loses the heading: "##" alone. Such an anchor shows nothing: it goes, its tail stays.
    # So does one beside it (GitHub: <div class="markdown-heading"><h2>Title</h2><a
    # class="anchor" href="#title"><svg>...</svg></a></div> lost the heading). Any empty
    # link elsewhere too changed which blocks trafilatura keeps on some pages: those stay.
    for a in list(tree.iter("a")):
        if a.get("href") is None and len(a) == 0 and not (a.text or "").strip():
            a.drop_tree()
    # A permalink beside a heading in its <section> (rustdoc: <section><a href="#variant.None"
    # class="anchor">§</a><h3>None</h3></section>) made the block read as links: each
    # variant and its description were dropped. A "§" or "¶" that links within the page
    # goes like an empty one.
    for h in list(tree.iter("h1", "h2", "h3", "h4", "h5", "h6")):
        wrapper = h.getparent()  # a heading's own wrapper, not the <pre> of an RFC's text
        beside = (wrapper.iterchildren("a")
                  if wrapper is not None and wrapper.tag in ("div", "section") else ())
        _drop_blank([*h.iter("a"), *beside], permalinks=True)
    # A code block whose lines are link targets (MkDocs Material's anchored line numbers:
    # <code><span><a id="__codelineno-0-1" href="#__codelineno-0-1"></a>export ...) was
    # dropped whole. (Only in a <code>: an RFC laid out in one <pre> keeps its anchors.)
    for code in list(tree.iter("code")):
        _drop_blank(list(code.iter("a")))


def _drop_blank(anchors: list[lxml.html.HtmlElement], permalinks: bool = False) -> None:
    """Drop each of `anchors` that shows no text (its tail stays); with `permalinks`, also
    each that links within the page and shows only a permalink's mark (PERMALINK_TEXT)."""
    for a in anchors:
        shown = a.text_content().strip()
        if not shown or (permalinks and shown in PERMALINK_TEXT
                         and (a.get("href") or "").startswith("#")):
            a.drop_tree()


# A term that is code: a Sphinx signature ("sig" classes, "pre" spans) or a <code> term.
_CODE_TERM = re.compile(r"\b(sig|pre|option|property|descname)\b")


def join_definitions(tree: lxml.html.HtmlElement) -> None:
    # trafilatura writes a definition list's terms and definitions as separate bullets, so
    # "- --timeout" and "- How long to wait..." come apart and an answer quoting the
    # definition cannot say what it defines (Sphinx documents every option, function and
    # glossary term this way). Each term and its definitions become one list item:
    # "- `--timeout SECONDS`: How long to wait...". Inner lists first.
    for dl in reversed(list(tree.iter("dl"))):
        parent = dl.getparent()
        if parent is None:
            continue
        entries = [c for c in dl if isinstance(c.tag, str)]
        entries = [g for c in entries
                   for g in ([x for x in c if isinstance(x.tag, str)] if c.tag == "div" else [c])]
        if not any(e.tag == "dd" for e in entries):
            continue
        ul = etree.Element("ul")
        terms: list[lxml.html.HtmlElement] = []
        item = None
        for e in entries:
            if e.tag == "dt":
                if item is not None:
                    terms, item = [], None
                terms.append(e)
            elif e.tag == "dd":
                if item is None:
                    item = etree.SubElement(ul, "li")
                    _start_item(item, terms, e)
                else:
                    _append_definition(item, e)
        if terms and item is None:  # terms the list never defines: kept, as an item
            etree.SubElement(ul, "li").text = ", ".join(filter(None, map(_term_text, terms)))
        ul.tail = dl.tail
        parent.replace(dl, ul)


def _term_text(dt: lxml.html.HtmlElement) -> str:
    for a in dt.xpath(".//a"):
        if a.text_content().strip().lower() in PERMALINK_TEXT and a.getparent() is not None:
            a.drop_tree()  # a permalink ("¶")
    return " ".join(dt.text_content().split()).rstrip(":").strip()


def _is_code_term(dt: lxml.html.HtmlElement) -> bool:
    classes = " ".join(e.get("class", "") for e in dt.iter() if isinstance(e.tag, str))
    return (_CODE_TERM.search(classes) is not None or dt.find(".//code") is not None
            or dt.find(".//tt") is not None)


_BLOCKS = frozenset({"p", "div", "ul", "ol", "pre", "table", "dl", "blockquote", "section",
                     "h1", "h2", "h3", "h4", "h5", "h6", "figure"})


def _start_item(item: lxml.html.HtmlElement, terms: list, dd: lxml.html.HtmlElement) -> None:
    """Item `item` opens with the `terms`, then ": " and definition `dd`'s content."""
    names = [t for t in (_term_text(dt) for dt in terms) if t]
    children = list(dd)
    if children and children[0].tag == "p" and not (dd.text or "").strip():
        lead = children[0]
        text, rest = lead.text, children
    else:  # inline content first: it goes into a paragraph of its own
        lead = etree.SubElement(item, "p")
        text = dd.text
        rest = []
        for c in children:
            if rest or (isinstance(c.tag, str) and c.tag in _BLOCKS):
                rest.append(c)
            else:
                lead.append(c)
    if names:
        head = etree.Element("code" if any(map(_is_code_term, terms)) else "strong")
        head.text = ", ".join(names)
        head.tail = ": " + (text or "").lstrip()
        lead.text = None
        lead.insert(0, head)
    else:
        lead.text = text
    for c in rest:
        item.append(c)


def _append_definition(item: lxml.html.HtmlElement, dd: lxml.html.HtmlElement) -> None:
    """A further definition of the same term: its content after the first's."""
    if (dd.text or "").strip():
        etree.SubElement(item, "p").text = dd.text
    for c in list(dd):
        item.append(c)


def _fallback_title(tree: lxml.html.HtmlElement) -> str | None:
    for xpath in ("//title", "//h1"):
        for node in tree.xpath(xpath):
            text = " ".join(node.text_content().split())
            if text:
                return text
    return None
