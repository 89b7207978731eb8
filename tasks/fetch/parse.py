"""Pure content handling for the fetch stage: typing a body, choosing its charset, and
turning HTML, Markdown or plain text into (title, markdown, links). No network, no disk.

HTML goes through trafilatura (main content only, as Markdown) and is then tidied so that
headings are ATX headings without permalink clutter, code blocks are ``` fences set off by
blank lines, and links are absolute. Markdown goes through `tasks.fetch.markdown_source`.
"""

from __future__ import annotations

import codecs
import copy
import re
import threading
from dataclasses import dataclass, field
from urllib.parse import urljoin

import charset_normalizer
import lxml.html
from lxml import etree

from packs.markdown import Fence, line_kinds
from tasks.fetch.markdown_source import (
    INLINE_CODE,
    LINK,
    collect_link,
    markdown_document,
    resolve_link,
)

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})
GENERIC_TYPES = frozenset({"", "text/plain", "application/octet-stream", "binary/octet-stream"})
MARKDOWN_EXTS = (".md", ".markdown")
HTML_EXTS = (".html", ".htm", ".xhtml")
TEXT_EXTS = (".txt", ".text", ".rst")

# Leading bytes of common binary formats (a PNG named .html must not reach the parser).
MAGIC = (
    (b"%PDF-", "PDF document"),
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"PK\x03\x04", "ZIP archive"),
    (b"\x1f\x8b", "gzip data"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"\x7fELF", "ELF executable"),
    (b"\x00asm", "WebAssembly module"),
    (b"7z\xbc\xaf\x27\x1c", "7z archive"),
    (b"Rar!\x1a\x07", "RAR archive"),
    (b"BZh", "bzip2 data"),
    (b"\xfd7zXZ\x00", "xz data"),
    (b"OggS", "Ogg media"),
    (b"ID3", "MP3 audio"),
)
# WHATWG: a page labelled Latin-1 or ASCII is decoded as windows-1252 (curly quotes etc.).
_CHARSET_ALIASES = {"iso8859-1": "cp1252", "latin-1": "cp1252", "ascii": "cp1252"}
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


@dataclass(frozen=True)
class Parsed:
    """What a body turned into: status "ok" with content, or "unsupported"/"failed" + error."""

    status: str
    content_type: str | None
    error: str | None = None
    title: str | None = None
    text: str | None = None
    links: list[str] = field(default_factory=list)


def media_type(content_type: str | None) -> str:
    """'text/HTML; charset=x' → 'text/html'; None → ''."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def sniff_binary(body: bytes) -> str | None:
    """A name for the binary format of `body` ("PNG image", "binary data"), or None if it
    looks like text. NUL bytes without a UTF-16 byte-order mark count as binary."""
    for magic, name in MAGIC:
        if body.startswith(magic):
            return name
    if body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return None
    if b"\x00" in body[:8192]:
        return "binary data"
    return None


def classify(content_type: str | None, path: str, body: bytes) -> tuple[str, str | None]:
    """Decide how to read a body: ("html" | "markdown" | "text", None) or
    ("unsupported", reason). `path` is the URL path or file name (for its extension)."""
    mtype = media_type(content_type)
    lower = path.lower()
    if not is_text_type(mtype):
        return "unsupported", f"unsupported content type {mtype}"
    binary = sniff_binary(body)
    if binary is not None:
        served = f" served as {mtype}" if mtype else ""
        return "unsupported", f"binary content ({binary}){served}"
    if mtype in HTML_TYPES:
        return "html", None
    if mtype in MARKDOWN_TYPES:
        return "markdown", None
    if mtype in GENERIC_TYPES:
        if lower.endswith(MARKDOWN_EXTS):
            return "markdown", None
        if mtype == "text/plain":
            return "text", None
        if lower.endswith(HTML_EXTS) or _looks_like_html(body):
            return "html", None
        if lower.endswith(TEXT_EXTS):
            return "text", None
        return "unsupported", f"unknown content type for {path or 'this file'}"
    return "text", None  # another text/* type (text/x-rst, text/csv...): read as plain text


def is_text_type(mtype: str) -> bool:
    """True for media types we can read (HTML, Markdown, text/*) or cannot judge yet
    (none, octet-stream: decided by extension and sniffing)."""
    return mtype in HTML_TYPES | MARKDOWN_TYPES | GENERIC_TYPES or mtype.startswith("text/")


def _looks_like_html(body: bytes) -> bool:
    head = body[:1024].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html"))


def _valid_codec(label: str | None) -> str | None:
    if not label:
        return None
    try:
        name = codecs.lookup(label.strip().strip("\"'")).name
    except LookupError:
        return None
    return _CHARSET_ALIASES.get(name, name)


def header_charset(content_type: str | None) -> str | None:
    """The charset parameter of a Content-Type header, if any (as given)."""
    for param in (content_type or "").split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip("\"'")
    return None


def choose_charset(content_type: str | None, body: bytes, *, html: bool) -> str:
    """The codec to decode `body` with: a byte-order mark, else a valid charset in the
    Content-Type header, else (HTML) a <meta charset>, else UTF-8 if it decodes cleanly,
    else charset_normalizer's guess, else windows-1252. Always returns a Python codec name."""
    if body.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    if found := _valid_codec(header_charset(content_type)):
        return found
    if html:
        match = _META_CHARSET.search(body[:8192])
        if match and (found := _valid_codec(match.group(1).decode("ascii", "replace"))):
            return found
    try:
        body.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    best = charset_normalizer.from_bytes(body[:65536]).best()
    return _valid_codec(best.encoding if best else None) or "cp1252"


def decode(body: bytes, content_type: str | None, *, html: bool) -> str:
    """`body` as text; invalid bytes become U+FFFD, never an error."""
    return body.decode(choose_charset(content_type, body, html=html), errors="replace")


# --- HTML -------------------------------------------------------------------------------

# lxml and trafilatura in several threads at once corrupt the heap now and then (glibc
# aborts the process: "double free or corruption", about once in 3,000 pages with 16 fetch
# threads on the Cargo book); one page at a time they never did in 30,000 (lxml 6.1.3,
# libxml2 2.14.6, trafilatura 2.3.1). The fetch threads parse HTML one at a time.
_HTML_LOCK = threading.Lock()
_PERMALINK_TEXT = frozenset({"", "¶", "#", "§", "🔗", "link", "permalink", "anchor"})


def html_to_markdown(html: str | bytes, url: str) -> tuple[str | None, str, list[str]]:
    """Main content of an HTML page as Markdown: (title, markdown, links).

    `url` is the page's final URL; relative links are resolved against it (a <base href>
    wins). Navigation, headers, footers and sidebars are dropped by trafilatura. The
    markdown is "" when no main content was found. Never raises on bad markup or bytes.
    """
    if isinstance(html, bytes):
        html = decode(html, None, html=True)
    if not html.strip():
        return None, "", []
    with _HTML_LOCK:
        return _html_to_markdown(html, url)


def _html_to_markdown(html: str, url: str) -> tuple[str | None, str, list[str]]:
    try:
        tree = lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return None, "", []
    import trafilatura  # here, not at module level: a no-change rebuild never parses HTML

    base = _base_href(tree, url)
    _unwrap_numbered_code(tree)
    _wrap_bare_pre(tree)
    _join_definitions(tree)
    _drop_empty_anchors(tree)
    meta = trafilatura.extract_metadata(copy.deepcopy(tree), default_url=url)
    extracted = trafilatura.extract(
        tree,
        output_format="markdown",
        include_links=True,  # hrefs come back as written; we resolve them against `base`
        include_tables=True,
        include_images=False,
        include_comments=False,
        deduplicate=False,
    )
    markdown, links = tidy_markdown(extracted or "", base, page_url=url)
    return _title(markdown, tree, meta.title if meta else None), markdown, links


_H1 = re.compile(r"#[ \t]+(.+?)[ \t#]*")
_SITE_SUFFIX = re.compile(r"(.+?)\s+[-|—–·]\s+[^-|—–·]{1,40}")


def _title(markdown: str, tree: lxml.html.HtmlElement, guess: str | None) -> str | None:
    """The page's title: the `#` heading its main content opens with, when the <title>
    names it ("Configuration" in "Configuration - The Cargo Book"); else trafilatura's
    `guess` when a <meta> tag gives it (og:title and the like); else the <title>, less
    what follows its last " - ", " | " or " — " (mostly the site's name). Without
    a <meta> tag the guess is the first heading anywhere in the page: mdBook's hidden help
    box ("Keyboard shortcuts") opens every page of every book."""
    heads = tree.xpath("//head/title") or tree.xpath("//title")  # not an <svg>'s <title>
    names = " ".join(heads[0].text_content().split()) if heads else ""
    first = next((line for line in markdown.splitlines() if line.strip()), "")
    m = _H1.fullmatch(first.strip())
    if m and " ".join(m.group(1).split()).casefold() in names.casefold():
        return m.group(1).strip()
    if guess:
        meta = {" ".join((c or "").split()) for c in tree.xpath("//meta/@content")}
        if " ".join(guess.split()) in meta or not names:
            return guess
    site = _SITE_SUFFIX.fullmatch(names)  # "cargo build - The Cargo Book": the page's part
    return (site.group(1) if site else names) or _fallback_title(tree)


def _base_href(tree: lxml.html.HtmlElement, url: str) -> str:
    hrefs = tree.xpath("//head/base/@href")
    return urljoin(url, hrefs[0].strip()) if hrefs else url


def _unwrap_numbered_code(tree: lxml.html.HtmlElement) -> None:
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


def _wrap_bare_pre(tree: lxml.html.HtmlElement) -> None:
    # trafilatura fences <pre><code> but often turns a bare <pre> into a quote. A <pre>
    # holding links is left alone: that is a preformatted document (an RFC), not code.
    for pre in tree.iter("pre"):
        if pre.find(".//code") is not None or pre.find(".//a") is not None:
            continue
        code = etree.SubElement(pre, "code")
        code.text, pre.text = pre.text, None
        for child in list(pre):
            if child is not code:
                code.append(child)  # moves the child (and its tail) into <code>


def _drop_empty_anchors(tree: lxml.html.HtmlElement) -> None:
    # An anchor with neither text nor href (an index-term or jump target: <a id="x"></a>)
    # makes trafilatura bracket the rest of its paragraph: "[The four golden signals ...]".
    for a in list(tree.iter("a")):
        if a.get("href") is None and len(a) == 0 and not (a.text or "").strip():
            a.drop_tree()  # its tail stays


# A term that is code: a Sphinx signature ("sig" classes, "pre" spans) or a <code> term.
_CODE_TERM = re.compile(r"\b(sig|pre|option|property|descname)\b")


def _join_definitions(tree: lxml.html.HtmlElement) -> None:
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
        if a.text_content().strip().lower() in _PERMALINK_TEXT and a.getparent() is not None:
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


def tidy_markdown(markdown: str, base: str, *, page_url: str) -> tuple[str, list[str]]:
    """Normalise trafilatura's Markdown and collect its links (absolute, deduplicated,
    http(s)/file only, links back to the page itself left out). Headings lose their
    permalink anchors; fences get blank lines around them; link targets become absolute."""
    out: list[str] = []
    links: list[str] = []
    open_fence: Fence | None = None
    after_fence = False
    for line, kind, fence in line_kinds(markdown.splitlines()):
        if kind in ("open", "close"):
            if kind == "open" and out and out[-1].strip():
                out.append("")
            out.append(line.strip())
            open_fence = fence if kind == "open" else None
            after_fence = kind == "close"
            continue
        if kind == "code":
            out.append(line)
            continue
        line = line.rstrip()
        if after_fence:
            # trafilatura can indent the paragraph after a fence, making it a code block.
            line = line.lstrip()
            if line:
                out.append("")
            after_fence = False
        if line.startswith("#"):
            line = _tidy_heading(line)
        else:
            line = _absolutise_links(line, base, page_url, links)
        out.append(line)
    if open_fence is not None:
        out.append(open_fence.run)
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()
    return text, links


_SELF_LINK = re.compile(r"^\[(.+)\]\(\s*#[^()\s]*\s*\)$")


def _tidy_heading(line: str) -> str:
    hashes, _, rest = line.partition(" ")
    if not rest or set(hashes) != {"#"} or len(hashes) > 6:
        return line

    def unwrap(m: re.Match[str]) -> str:
        return "" if m.group(1).strip().lower() in _PERMALINK_TEXT else m.group(1)

    rest = LINK.sub(unwrap, rest)
    # A heading that is wholly a link to itself ("[`[alias]`](#alias)", whose brackets
    # LINK does not take) is its text.
    rest = _SELF_LINK.sub(r"\1", rest.strip())
    rest = rest.strip().rstrip("¶§#🔗").strip()
    return f"{hashes} {rest}" if rest else ""


def _absolutise_links(line: str, base: str, page_url: str, links: list[str]) -> str:
    # Inline code spans are left alone: `[a](b)` there is code, not a link.
    pieces = INLINE_CODE.split(line)
    # split() with one group pair yields [text, ticks, code, text, ticks, code, ...]
    result: list[str] = []
    for i in range(0, len(pieces), 3):
        result.append(LINK.sub(lambda m: _link_sub(m, base, page_url, links), pieces[i]))
        if i + 2 < len(pieces):
            result.append(f"{pieces[i + 1]}{pieces[i + 2]}{pieces[i + 1]}")
    return "".join(result)


def _link_sub(m: re.Match[str], base: str, page_url: str, links: list[str]) -> str:
    href = resolve_link(m.group(2), base)
    if href is None:
        return m.group(1)  # javascript:, mailto: and the like: keep the text only
    collect_link(href, page_url, links)
    return f"[{m.group(1)}]({href}{m.group(3) or ''})"


# --- dispatch ----------------------------------------------------------------------------


def parse_document(body: bytes, content_type: str | None, url: str, path: str) -> Parsed:
    """Turn a fetched body into a Parsed page. `content_type` is the header (None for local
    files), `url` the final URL (base for links), `path` the URL path or file name (used for
    extension-based typing). Unsupported or binary bodies and pages with no readable
    content come back as not-ok with a reason; never raises on bad input."""
    kind, reason = classify(content_type, path, body)
    mtype = media_type(content_type)
    if mtype in GENERIC_TYPES and kind != "unsupported":
        mtype = _type_for(kind)  # typed by extension or sniffing: say what it was read as
    if kind == "unsupported":
        return Parsed("unsupported", mtype or None, error=reason)
    if kind == "html":
        title, text, links = html_to_markdown(decode(body, content_type, html=True), url)
    elif kind == "markdown":
        title, text, links = markdown_document(decode(body, content_type, html=False), url)
    else:
        title, text, links = None, decode(body, content_type, html=False).strip(), []
    if not text.strip():
        return Parsed("failed", mtype, error=f"no readable content in this {kind} page")
    return Parsed("ok", mtype, title=title, text=text, links=links)


def _type_for(kind: str) -> str:
    return {"html": "text/html", "markdown": "text/markdown", "text": "text/plain"}.get(kind, "")
