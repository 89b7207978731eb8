"""Reading one sitemap file (sitemaps.org protocol 0.9), as a stream; pure, no I/O.

`read_sitemap(body)` yields what a sitemap lists, entry by entry: ("page", Entry) for each
`<url>` of a `<urlset>`, ("sitemap", Entry) for each `<sitemap>` of a `<sitemapindex>`.
A gzip body (by its magic bytes, whatever the server called it) is inflated in chunks and
each chunk is fed to an incremental XML parser (lxml's XMLPullParser: no DTD, no
entities, no network), whose finished elements are dropped as they are read, so neither
the inflated document nor its tree is ever held whole. A body that is not XML is read as
a text sitemap (one URL a line), which the protocol also allows.

Raises SitemapError (its message is the reason, for the build report) for a body that is
neither, XML whose root is not a sitemap, or a body that inflates past `max_bytes`.
`normalise_lastmod` and `UrlFilter` are the other pure rules the walk applies.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from urllib.parse import urlsplit

from lxml import etree

GZIP_MAGIC = b"\x1f\x8b"
# The protocol's limits for one file: 50 MB uncompressed, 50,000 URLs.
MAX_UNCOMPRESSED = 50 * 1024 * 1024
MAX_ENTRIES = 50_000
CHUNK = 64 * 1024
ROOTS = {"urlset": "page", "sitemapindex": "sitemap"}


class SitemapError(ValueError):
    """This body cannot be read as a sitemap; the message says why."""


@dataclass(frozen=True)
class Entry:
    loc: str
    lastmod: str | None  # normalised (normalise_lastmod), None when absent or unreadable


def normalise_lastmod(text: str | None) -> str | None:
    """A W3C datetime (`2024-05-01`, `2024-05-01T12:00:00+02:00`, `...Z`) as ISO-8601 UTC
    to the second, so that equal instants compare equal; None for anything else."""
    raw = (text or "").strip()
    if not raw:
        return None
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        return None
    if when.tzinfo is None:  # a date alone, or a time without zone: read as UTC
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="seconds")


def _chunks(body: bytes, max_bytes: int) -> Iterator[bytes]:
    """The document's bytes in chunks, inflated when `body` is gzip (SitemapError past
    `max_bytes` inflated, or for a damaged gzip stream)."""
    if not body.startswith(GZIP_MAGIC):
        for start in range(0, len(body), CHUNK):
            yield body[start:start + CHUNK]
        return
    inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    total = 0
    try:
        for start in range(0, len(body), CHUNK):
            data = body[start:start + CHUNK]
            while data:
                out = inflate.decompress(data, CHUNK)
                total += len(out)
                if total > max_bytes:
                    raise SitemapError(f"inflates past {max_bytes // (1024 * 1024)} MB, the "
                                       "protocol's limit for one sitemap")
                yield out
                data = inflate.unconsumed_tail
        tail = inflate.flush()
    except zlib.error as exc:
        raise SitemapError(f"damaged gzip data ({exc})") from None
    if not inflate.eof:
        raise SitemapError("truncated gzip data")
    if tail:
        yield tail


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def read_sitemap(body: bytes, max_bytes: int = MAX_UNCOMPRESSED) -> Iterator[tuple[str, Entry]]:
    """Yield ("page" | "sitemap", Entry) for each entry of the sitemap in `body` (XML or
    text, gzip or not), in document order, at most MAX_ENTRIES of them. Raises
    SitemapError when `body` is not a sitemap (see the module docstring)."""
    chunks = _chunks(body, max_bytes)
    first = b""
    for chunk in chunks:
        first = chunk
        if chunk.strip():
            break
    head = first.lstrip().removeprefix(b"\xef\xbb\xbf").lstrip()
    if not head:
        raise SitemapError("empty document")
    if head.startswith(b"<"):
        yield from _read_xml(first, chunks)
    else:
        yield from _read_text(first, chunks)


def _read_xml(first: bytes, rest: Iterator[bytes]) -> Iterator[tuple[str, Entry]]:
    parser = etree.XMLPullParser(events=("start", "end"), resolve_entities=False,
                                 no_network=True, load_dtd=False, huge_tree=False)
    kind: str | None = None
    fields: dict[str, str] = {}
    count = 0

    def events(chunk: bytes | None) -> Iterator[tuple[str, Entry]]:
        nonlocal kind, count
        try:
            if chunk is None:
                parser.close()
            else:
                parser.feed(chunk)
        except etree.XMLSyntaxError as exc:
            raise SitemapError(f"not valid XML ({exc})") from None
        for event, elem in parser.read_events():
            name = _local(elem.tag)
            if kind is None:  # the root element decides what the file is
                if name not in ROOTS:
                    raise SitemapError(f"not a sitemap: the document is <{name}>, not "
                                       "<urlset> or <sitemapindex>")
                kind = ROOTS[name]
                continue
            if event != "end":
                continue
            if name in ("loc", "lastmod"):
                fields[name] = (elem.text or "").strip()
            elif name in ("url", "sitemap") and elem.getparent() is not None \
                    and elem.getparent().getparent() is None:
                if fields.get("loc") and count < MAX_ENTRIES:
                    count += 1
                    yield kind, Entry(fields["loc"], normalise_lastmod(fields.get("lastmod")))
                fields.clear()
                elem.clear()  # the entry is read: drop it and what came before it
                while elem.getprevious() is not None:
                    del elem.getparent()[0]

    yield from events(first)
    for chunk in rest:
        yield from events(chunk)
    yield from events(None)


def _read_text(first: bytes, rest: Iterator[bytes]) -> Iterator[tuple[str, Entry]]:
    carry = b""
    count = 0
    for chunk in _chain(first, rest):
        lines = (carry + chunk).split(b"\n")
        carry = lines.pop()
        for line in lines:
            entry = _text_entry(line)
            if entry is not None and count < MAX_ENTRIES:
                count += 1
                yield "page", entry
    entry = _text_entry(carry)
    if entry is not None and count < MAX_ENTRIES:
        yield "page", entry


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _text_entry(line: bytes) -> Entry | None:
    text = line.decode("utf-8", errors="replace").strip().removeprefix("\ufeff")
    if not text:
        return None
    if not text.lower().startswith(("http://", "https://")) or any(c.isspace() for c in text):
        raise SitemapError(f"not a sitemap: {text[:60]!r} is neither XML nor a URL line")
    return Entry(text, None)


class UrlFilter:
    """The `include` / `exclude` globs of pack.toml's [sitemap] table: a URL is kept when
    it matches one include pattern (or there are none) and no exclude pattern. A pattern
    starting with `/` is matched against the URL's path (with its query), any other
    against the whole URL; matching is case-sensitive, as URLs are."""

    def __init__(self, include: list[str] | tuple[str, ...] = (),
                 exclude: list[str] | tuple[str, ...] = ()) -> None:
        self.include = tuple(include)
        self.exclude = tuple(exclude)

    @staticmethod
    def _match(url: str, pattern: str) -> bool:
        if pattern.startswith("/"):
            parts = urlsplit(url)
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            return fnmatchcase(target or "/", pattern)
        return fnmatchcase(url, pattern)

    def keeps(self, url: str) -> bool:
        if self.include and not any(self._match(url, p) for p in self.include):
            return False
        return not any(self._match(url, p) for p in self.exclude)
