"""Pure content handling for the fetch stage: typing a body, choosing its charset, and
turning HTML, Markdown, reStructuredText, AsciiDoc or plain text into (title, markdown,
links). No network, no disk.

HTML goes through trafilatura (main content only, as Markdown) and is then tidied so that
headings are ATX headings without permalink clutter, code blocks are ``` fences set off by
blank lines, and links are absolute. Markdown goes through `tasks.fetch.markdown_source`,
reStructuredText (.rst, text/x-rst) through `tasks.fetch.rst_source` first, AsciiDoc (.adoc)
through `tasks.fetch.asciidoc_source`.
"""

from __future__ import annotations

import codecs
import copy
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import charset_normalizer
import lxml.html
from lxml import etree

from packs.markdown import Fence, line_kinds
from tasks.fetch.asciidoc_source import asciidoc_document
from tasks.fetch.html_blocks import extract_keeping_headings, plain_blocks, plain_signature_headings
from tasks.fetch.html_math import math_as_text
from tasks.fetch.html_tree import (
    PERMALINK_TEXT,
    as_document,
    base_href,
    drop_edit_links,
    drop_empty_anchors,
    join_definitions,
    plain_code,
    preformatted_headings,
    title,
    unwrap_numbered_code,
)
from tasks.fetch.markdown_source import (
    INLINE_CODE,
    LINK,
    collect_link,
    markdown_document,
    resolve_link,
)
from tasks.fetch.rst_source import rst_document

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})
GENERIC_TYPES = frozenset({"", "text/plain", "application/octet-stream", "binary/octet-stream"})
MARKDOWN_EXTS = (".md", ".markdown", ".mdx")
HTML_EXTS = (".html", ".htm", ".xhtml")
TEXT_EXTS = (".txt", ".text")
RST_EXTS = (".rst", ".rest")
RST_TYPES = frozenset({"text/x-rst", "text/prs.fallenstein.rst"})
ASCIIDOC_EXTS = (".adoc", ".asciidoc", ".asc")
ASCIIDOC_TYPES = frozenset({"text/asciidoc", "text/x-asciidoc"})


@dataclass(frozen=True)
class Markup:
    """A text format read as Markdown: its media types, its file extensions (a page served
    as text/plain or with no type, as GitHub's raw host and local files are, is typed by
    them), the type a page so typed is said to be, and its reader (text, url) → (title,
    markdown, links)."""

    types: frozenset[str]
    exts: tuple[str, ...]
    mtype: str
    read: Callable[[str, str], tuple[str | None, str, list[str]]]


MARKUPS = {
    "markdown": Markup(MARKDOWN_TYPES, MARKDOWN_EXTS, "text/markdown", markdown_document),
    "rst": Markup(RST_TYPES, RST_EXTS, "text/x-rst", rst_document),
    "asciidoc": Markup(ASCIIDOC_TYPES, ASCIIDOC_EXTS, "text/asciidoc", asciidoc_document),
}

# Leading bytes of common binary formats (a PNG named .html must not reach the parser).
MAGIC = (
    (b"%PDF-", "PDF document"), (b"\x89PNG\r\n\x1a\n", "PNG image"), (b"PK\x03\x04", "ZIP archive"),
    (b"\x1f\x8b", "gzip data"), (b"\xff\xd8\xff", "JPEG image"), (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"), (b"\x7fELF", "ELF executable"), (b"\x00asm", "WebAssembly module"),
    (b"7z\xbc\xaf\x27\x1c", "7z archive"), (b"Rar!\x1a\x07", "RAR archive"), (b"BZh", "bzip2 data"),
    (b"\xfd7zXZ\x00", "xz data"), (b"OggS", "Ogg media"), (b"ID3", "MP3 audio"),
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
    """Decide how to read a body: ("html", a kind of MARKUPS or "text", None) or
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
    for kind, markup in MARKUPS.items():
        if mtype in markup.types:
            return kind, None
    if mtype in GENERIC_TYPES:
        for kind, markup in MARKUPS.items():  # GitHub's raw host serves .rst as text/plain
            if lower.endswith(markup.exts):
                return kind, None
        if mtype == "text/plain":
            return "text", None
        if lower.endswith(HTML_EXTS) or _looks_like_html(body):
            return "html", None
        if lower.endswith(TEXT_EXTS):
            return "text", None
        return "unsupported", f"unknown content type for {path or 'this file'}"
    return "text", None  # another text/* type (text/csv...): read as plain text


def is_text_type(mtype: str) -> bool:
    """True for media types we can read (HTML, Markdown, text/*) or cannot judge yet
    (none, octet-stream: decided by extension and sniffing)."""
    return mtype in HTML_TYPES | MARKDOWN_TYPES | GENERIC_TYPES or mtype.startswith("text/")


def _looks_like_html(body: bytes) -> bool:  # an XML declaration or comments may come first
    return _HTML_START.match(body[:4096]) is not None


_HTML_START = re.compile(rb"(?:\s|<\?xml[^>]*\?>|<!--.*?-->)*<(?:!doctype\s+html|html)\b",
                         re.I | re.S)


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
    Content-Type header, else (HTML) a <meta charset>, unless the bytes are UTF-8 that
    holds non-ASCII text (a page saved or mirrored as UTF-8 keeps the <meta> it was
    written with: a legacy charset's text is almost never valid UTF-8 beyond ASCII), else
    UTF-8 if it decodes cleanly, else charset_normalizer's guess, else windows-1252. Always
    returns a Python codec name."""
    if body.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    if found := _valid_codec(header_charset(content_type)):
        return found
    try:
        body.decode("utf-8")
        utf8 = True
    except UnicodeDecodeError:
        utf8 = False
    if html and (not utf8 or body.isascii()):
        match = _META_CHARSET.search(body[:8192])
        if match and (found := _valid_codec(match.group(1).decode("ascii", "replace"))):
            return found
    if utf8:
        return "utf-8"
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
        tree = lxml.html.document_fromstring(as_document(html))
    except (etree.ParserError, ValueError):
        return None, "", []
    import trafilatura  # here, not at module level: a no-change rebuild never parses HTML

    base = base_href(tree, url)
    unwrap_numbered_code(tree)
    math_as_text(tree)
    preformatted_headings(tree)
    plain_blocks(tree)  # layout tables, summaries, code tabs
    plain_code(tree)
    join_definitions(tree)
    drop_empty_anchors(tree)
    plain_signature_headings(tree)
    drop_edit_links(tree)
    meta = trafilatura.extract_metadata(copy.deepcopy(tree), default_url=url)
    extracted = extract_keeping_headings(tree, lambda t: trafilatura.extract(
        t,
        output_format="markdown",
        include_links=True,  # hrefs come back as written; we resolve them against `base`
        include_tables=True,
        include_images=False,
        include_comments=False,
        deduplicate=False,
    ))
    markdown, links = tidy_markdown(extracted or "", base, page_url=url)
    return title(markdown, tree, meta.title if meta else None), markdown, links


def tidy_markdown(markdown: str, base: str, *, page_url: str) -> tuple[str, list[str]]:
    """Normalise trafilatura's Markdown and collect its links (absolute, deduplicated,
    http(s)/file only, links back to the page itself left out). Headings lose their
    permalink anchors, and a heading that links elsewhere keeps the link (release notes'
    "#### [crypto/tls](/pkg/crypto/tls/)": the splitter shows its text, the target counts
    among the page's links); fences get blank lines around them; link targets become
    absolute."""
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
        if _RFC_PAGE_LINE.match(line):
            continue  # an RFC's page footer or running header, between two lines of text
        if after_fence:
            # trafilatura can indent the paragraph after a fence, making it a code block.
            line = line.lstrip()
            if line:
                out.append("")
            after_fence = False
        if line.startswith("#"):
            line = _tidy_heading(line)
        line = _absolutise_links(line, base, page_url, links)
        out.append(line)
    if open_fence is not None:
        out.append(open_fence.run)
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()
    return text, links


# An RFC or Internet-Draft laid out in pages: "de Jong    [Page 7]" ends a page and
# "Internet-Draft    remoteStorage    December 2014" (or "RFC 7230 ... June 2014") heads the
# next, in the middle of a paragraph.
_RFC_PAGE_LINE = re.compile(r"^\S.*\s{3,}\\?\[Page \d+\\?\]$|"
                            r"^(?:Internet[- ]Draft|RFC \d+)\s{3,}\S.*\s{3,}\S.*\b\d{4}$")
_SELF_LINK = re.compile(r"^\[(.+)\]\(\s*#[^()\s]*\s*\)$")


def _tidy_heading(line: str) -> str:
    hashes, _, rest = line.partition(" ")
    if not rest or set(hashes) != {"#"} or len(hashes) > 6:
        return line

    def unwrap(m: re.Match[str]) -> str:
        # A permalink goes, a link to an anchor is its text; a link to a page stays.
        if m.group(1).strip().lower() in PERMALINK_TEXT:
            return ""
        return m.group(1) if m.group(2).startswith("#") else m.group(0)

    rest = LINK.sub(unwrap, rest)
    # A heading that is wholly a link to itself ("[`[alias]`](#alias)", whose brackets
    # LINK does not take) is its text.
    rest = _SELF_LINK.sub(r"\1", rest.strip())
    rest = rest.strip().rstrip("¶§#🔗").strip()
    return f"{hashes} {rest}" if rest else ""


def _absolutise_links(line: str, base: str, page_url: str, links: list[str]) -> str:
    # Inline code spans are left alone: `[a](b)` there is code, not a link. Each stands
    # as a mark while the links are read, so that a link whose text is code
    # ("[`map`](enum.Option.html#method.map)", API docs' usual link) is one too.
    spans: list[str] = []

    def mark(m: re.Match[str]) -> str:
        spans.append(m.group(0))
        return f"\x00{len(spans) - 1}\x00"

    masked = LINK.sub(lambda m: _link_sub(m, base, page_url, links), INLINE_CODE.sub(mark, line))
    return re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m.group(1))], masked)


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
    elif kind in MARKUPS:
        title, text, links = MARKUPS[kind].read(decode(body, content_type, html=False), url)
    else:
        title, text, links = None, decode(body, content_type, html=False).strip(), []
    if not text.strip():
        return Parsed("failed", mtype, error=f"no readable content in this {kind} page")
    return Parsed("ok", mtype, title=title, text=text, links=links)


def _type_for(kind: str) -> str:
    if kind in MARKUPS:
        return MARKUPS[kind].mtype
    return {"html": "text/html", "text": "text/plain"}.get(kind, "")
