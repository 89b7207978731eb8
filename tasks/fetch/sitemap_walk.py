"""Walking the sitemaps of a source: every `sitemap:` line of urls.txt, the sitemap index
files it leads to (to `max_depth`), and the entries of each file.

Each sitemap file is requested as a page is (`tasks.fetch.admission` first: allowed hosts,
the address guard, robots.txt; then `tasks.fetch.client`: per-host limits, retries, the
`max_page_bytes` cap), conditionally when the last expansion saw it (ETag /
Last-Modified), and read as a stream (`tasks.fetch.sitemap`). Files are fetched a few at
a time (the fetch's global and per-host limits), one body in memory per request in flight;
pages are never requested here.

A file that cannot be had (a network error, a refusal, not a sitemap, a loop, too deep)
becomes a `FileResult` with its reason, never an exception; its entries from the last
expansion are kept in its place, so a sitemap that is down for a night does not drop its
pages from the pack. As in the crawler, an error no rule foresaw (a location httpx cannot
parse) is that file's failure, logged with its traceback: a file from the internet must
not fail the build.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit
from urllib.request import url2pathname

import httpx

from packs.urls import strip_userinfo
from tasks.fetch.admission import UrlGuard
from tasks.fetch.client import Hop, Outcome, PoliteClient, new_async_client, url_deadline
from tasks.fetch.policy import REDIRECT_STATUS, format_size, redact
from tasks.fetch.sitemap import MAX_UNCOMPRESSED, SitemapError, read_sitemap
from tasks.fetch.types import FetchConfig, Sleep

log = logging.getLogger("kpack.fetch")
MAX_FILES = 1000  # sitemap files one source may lead to (50,000 pages each at most)
# Entries held at most, as a multiple of the pages kept ([sitemap] max_urls): include and
# exclude are applied after the walk, so it reads more than it keeps, but not without end.
ENTRIES_PER_KEPT_PAGE = 4
MIN_ENTRIES = 200_000


@dataclass(frozen=True)
class Listed:
    """One entry of a sitemap file: a page, or (kind "sitemap") a file of an index."""

    url: str
    lastmod: str | None
    kind: str  # "page" | "sitemap"
    parent: str  # the sitemap file that listed it


@dataclass
class FileResult:
    """What became of one sitemap file."""

    url: str
    root: str  # the sitemap line of urls.txt it was reached from
    depth: int  # 0 for the file urls.txt names
    status: str  # "ok" | "not_modified" | "failed"
    error: str | None = None
    entries: int = 0
    bytes: int = 0
    etag: str | None = None
    last_modified: str | None = None
    kept_previous: bool = False  # its entries are the last expansion's (304 or failure)


@dataclass
class Previous:
    """The last expansion: each file's validators and entries (empty on a first build)."""

    files: dict[str, dict] = field(default_factory=dict)  # url → {"etag", "last_modified"}
    entries: dict[str, list[Listed]] = field(default_factory=dict)  # parent → its entries


@dataclass
class Walk:
    """The result: every file's entries in document order, and what became of each file."""

    entries: dict[str, list[Listed]]  # file url → its entries
    files: list[FileResult]

    def pages(self, roots: list[str]) -> list[tuple[Listed, str]]:
        """(page entry, root) in document order: roots as listed, an index's files in the
        order it names them."""
        out: list[tuple[Listed, str]] = []
        seen: set[str] = set()

        def visit(url: str, root: str) -> None:
            if url in seen:
                return
            seen.add(url)
            for entry in self.entries.get(url, ()):
                if entry.kind == "page":
                    out.append((entry, root))
                else:
                    visit(entry.url, root)

        for root in roots:
            visit(root, root)
        return out


async def walk(roots: list[str], config: FetchConfig, max_depth: int, previous: Previous, *,
               max_urls: int = 50_000, sleep: Sleep = asyncio.sleep,
               transport: httpx.AsyncBaseTransport | None = None) -> Walk:
    """Read every sitemap reachable from `roots` (see the module docstring). Memory stays
    bounded: past max(ENTRIES_PER_KEPT_PAGE x `max_urls`, MIN_ENTRIES) entries, further
    files are not read (each says so)."""
    client = new_async_client(config, transport)
    walker = _Walker(config, client, sleep, max_depth, previous,
                     max(ENTRIES_PER_KEPT_PAGE * max_urls, MIN_ENTRIES))
    async with client:
        try:
            await asyncio.gather(*(walker.file(url, url, 0) for url in roots))
        finally:
            await walker.guard.close()
    secret = sum(e.url in walker.http.requests for es in walker.entries.values() for e in es
                 if e.kind != "sitemap")
    if secret:
        log.warning("%d pages the sitemaps list carry secret-looking query values: the build "
                    "records and requests them with REDACTED in their place (a sitemap's "
                    "secrets are kept nowhere, the fetch shards included); a site that needs "
                    "one gets it as a header from an environment variable with [[auth]] in "
                    "pack.toml", secret)
    return Walk(walker.entries, walker.files)


class _Walker:
    def __init__(self, config: FetchConfig, client: httpx.AsyncClient, sleep: Sleep,
                 max_depth: int, previous: Previous, max_entries: int) -> None:
        self.config = config
        self.http = PoliteClient(config, client, sleep)
        self.guard = UrlGuard(config, self.http)
        self.slots = asyncio.Semaphore(config.concurrency)
        self.max_depth = max_depth
        self.previous = previous
        self.visited: set[str] = set()
        self.entries: dict[str, list[Listed]] = {}
        self.files: list[FileResult] = []
        self.max_entries = max_entries
        self.held = 0  # entries kept so far

    async def file(self, url: str, root: str, depth: int) -> None:
        if url in self.visited:
            return  # named twice (or a loop): read once
        self.visited.add(url)
        result = FileResult(url, root, depth, "failed")
        self.files.append(result)
        if len(self.visited) > MAX_FILES:
            result.error = f"more than {MAX_FILES} sitemap files; the rest were not read"
            return
        if self.held >= self.max_entries:
            result.error = (f"not read: the sitemaps already list {self.held:,} entries "
                            "(raise [sitemap] max_urls to read more)")
            return
        prev = self.previous.files.get(url) or {}
        try:
            async with self.slots:
                async with asyncio.timeout(self.config.total_timeout_s) as deadline:
                    url_deadline.set(deadline)  # paused while queueing for a host slot
                    entries = await self._read(url, prev, result)
        except (Outcome, SitemapError, TimeoutError) as exc:
            reason = (exc.reason if isinstance(exc, Outcome) else str(exc)
                      or f"timed out after {self.config.total_timeout_s:g} s")
            entries = self._keep_previous(url, result, reason)
        except Exception as exc:  # the per-file edge (see the module docstring)
            log.warning("unexpected error reading sitemap %s", redact(url), exc_info=True)
            detail = redact(str(exc).strip().splitlines()[0] if str(exc).strip() else "")
            entries = self._keep_previous(url, result, f"unexpected error: {type(exc).__name__}"
                                          + (f": {detail[:300]}" if detail else ""))
        room = max(self.max_entries - self.held, 0)
        if len(entries) > room:
            note = (f"{len(entries) - room:,} of its entries left out: the sitemaps already "
                    f"list {self.max_entries:,} (raise [sitemap] max_urls to read more)")
            result.error = f"{result.error}; {note}" if result.error else note
            entries = entries[:room]
        self.held += len(entries)
        self.entries[url] = entries
        result.entries = len(entries)
        children = [e.url for e in entries if e.kind == "sitemap"]
        if children and depth >= self.max_depth:
            note = (f"a sitemap index nested deeper than max_depth = {self.max_depth}: its "
                    f"{len(children)} sitemaps were not read (raise [sitemap] max_depth)")
            result.error = f"{result.error}; {note}" if result.error else note
            return
        await asyncio.gather(*(self.file(child, root, depth + 1) for child in children))

    def _keep_previous(self, url: str, result: FileResult, reason: str) -> list[Listed]:
        kept = self.previous.entries.get(url, [])
        result.status = "failed"
        result.error = reason + (f"; its {len(kept)} entries from the last build are kept"
                                 if kept else "")
        result.kept_previous = bool(kept)
        return kept

    async def _read(self, url: str, prev: dict, result: FileResult) -> list[Listed]:
        if urlsplit(url).scheme.lower() == "file":
            body = await asyncio.to_thread(_read_local, url, self.config.max_bytes)
        else:
            hop = await self._get(url, prev)
            result.etag = hop.headers.get("etag")
            result.last_modified = hop.headers.get("last-modified")
            if hop.status == 304:
                result.status = "not_modified"
                result.kept_previous = True
                result.etag = result.etag or prev.get("etag")
                result.last_modified = result.last_modified or prev.get("last_modified")
                return self.previous.entries.get(url, [])
            body = hop.body
        result.bytes = len(body)
        parsed, requests = await asyncio.to_thread(_entries, body, url,
                                                   self.config.secret_params)
        self.http.requests.update(requests)  # a child sitemap is read as listed
        result.status = "ok"
        return parsed

    async def _get(self, url: str, prev: dict) -> Hop:
        headers = {}
        if url in self.previous.entries:  # a 304 is only of use with entries to keep
            if prev.get("etag"):
                headers["If-None-Match"] = str(prev["etag"])
            if prev.get("last_modified"):
                headers["If-Modified-Since"] = str(prev["last_modified"])
        target = url
        for _ in range(self.config.max_redirects + 1):
            await self.guard.check(target)
            hop = await self.http.get(target, headers, typed=False)
            if hop.status not in REDIRECT_STATUS:
                if hop.status == 304 and not headers:
                    raise Outcome("failed", "HTTP 304 Not Modified without a conditional "
                                            "request", 304)
                return hop
            location = hop.headers.get("location")
            if not location:
                raise Outcome("failed", f"HTTP {hop.status} redirect without a Location header")
            target = urljoin(target, location.strip())
        raise Outcome("failed", f"too many redirects (more than {self.config.max_redirects})")


def _entries(body: bytes, url: str, secret_params: tuple[str, ...] = ()
             ) -> tuple[list[Listed], dict[str, str]]:
    """(the entries of one sitemap body, their locations made absolute and without
    credentials or secret query values (REDACTED: what the build records); {recorded
    location: location as listed} for those that had a secret). Entries that are not
    http(s) URLs (file:// ones too, unless the sitemap is a local file) are dropped."""
    local = urlsplit(url).scheme.lower() == "file"
    out, requests = [], {}
    for kind, entry in read_sitemap(body, max(MAX_UNCOMPRESSED, len(body))):
        try:
            loc = urljoin(url, entry.loc)
            parts = urlsplit(loc)
            host = parts.hostname
        except ValueError:  # e.g. an unclosed IPv6 bracket: not a URL
            continue
        if any(c.isspace() for c in loc):
            continue  # not a URL (and it would break the one-per-line plan files)
        scheme = parts.scheme.lower()
        if (scheme in ("http", "https") and host) or (local and scheme == "file"):
            recorded = redact(loc, secret_params)
            if recorded != loc:
                requests[recorded] = strip_userinfo(loc)
            out.append(Listed(recorded, entry.lastmod, kind, url))
    return out, requests


def _read_local(url: str, max_bytes: int) -> bytes:
    path = Path(url2pathname(urlsplit(url).path))
    try:
        with path.open("rb") as f:
            body = f.read(max_bytes + 1)
    except OSError as exc:
        raise Outcome("failed", f"could not read {path}: {exc.strerror or exc}") from None
    if len(body) > max_bytes:
        raise Outcome("failed", f"larger than {format_size(max_bytes)} cap")
    return body


def describe(result: FileResult) -> str:
    """One line for logs: the file, its status and why."""
    reason = f": {result.error}" if result.error else ""
    return f"sitemap {redact(result.url)} {result.status}, {result.entries} entries{reason}"
