"""The fetch stage's crawler: one `Crawler` per `fetch_pages` call, one Page per URL.

For each URL, in order: scheme check → GitHub rewrite → [per hop: allowed host → address
guard (resolved addresses; metadata endpoints always refused) → robots.txt → GET with
retries → redirect?] → size-capped body → parse (in a worker thread). The whole URL runs
under one wall-clock cap (`total_timeout_s`), so retries and redirects cannot stretch it.
The guards are `tasks.fetch.admission`; the GET, its retries and the per-host limits are
`tasks.fetch.client`; this module walks one URL through them and builds its Page.

Per-URL problems are raised inside as `Outcome` (terminal) or `Transient` (retried by
tenacity) and turned into a Page at the top of `Crawler.page`; nothing else is caught.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urljoin, urlsplit
from urllib.request import url2pathname

import httpx

from packs.format import content_hash
from packs.urls import REDACTED, secret_values, strip_userinfo
from tasks.fetch.admission import UrlGuard
from tasks.fetch.client import Hop, Outcome, PoliteClient, new_async_client, url_deadline
from tasks.fetch.parse import parse_document
from tasks.fetch.policy import REDIRECT_STATUS, format_size, github_rewrite, redact
from tasks.fetch.types import FetchConfig, Page, Sleep

log = logging.getLogger("kpack.fetch")
MIN_SECRET_CHARS = 4  # shorter values are not scrubbed from pages (too common to be one)


async def fetch_all(
    urls: list[str],
    config: FetchConfig,
    previous: dict[str, dict],
    progress: Callable[[int, int, Page], None] | None,
    sleep: Sleep,
    transport: httpx.AsyncBaseTransport | None,
) -> list[Page]:
    """Fetch `urls` concurrently with one client; Pages in input order (see fetch_pages)."""
    client = new_async_client(config, transport)
    run = Crawler(config, client, sleep, previous)
    done = 0

    async def one(url: str) -> Page:
        nonlocal done
        page = await run.page(url)
        done += 1
        _log_page(page)
        if progress is not None:
            progress(done, len(urls), page)
        return page

    async with client:
        try:
            return list(await asyncio.gather(*(one(u) for u in urls)))
        finally:
            await run.close()


def _log_page(page: Page) -> None:
    # A good page is a debug line: at INFO a 100k-page build would send 100k log records
    # to the Prefect API; progress lines say how far the fetch has got.
    if page.status in ("ok", "not_modified"):
        log.debug("%s %s", page.status, redact(page.url))
    else:
        log.warning("%s %s: %s", page.status, redact(page.url), page.error)


@dataclass
class _Trace:
    """What is known about a URL so far, so a failure mid-way still reports it."""

    url: str
    fetched_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    final_url: str | None = None
    http_status: int | None = None
    content_type: str | None = None

    def page(self, status: str, error: str | None = None, **values: object) -> Page:
        fields: dict[str, object] = {
            "http_status": self.http_status,
            "final_url": self.final_url,
            "content_type": self.content_type,
            "etag": None,
            "last_modified": None,
            "content_hash": None,
            "title": None,
            "text": None,
            "links": [],
        }
        fields.update(values)
        return Page(url=self.url, status=status, error=error, fetched_at=self.fetched_at, **fields)  # type: ignore[arg-type]


class Crawler:
    """State shared by one fetch_pages call: the polite client (per-host schedules), the
    guard (robots and DNS caches) and the overall concurrency limit."""

    def __init__(
        self,
        config: FetchConfig,
        client: httpx.AsyncClient,
        sleep: Sleep,
        previous: dict[str, dict],
    ) -> None:
        self.config = config
        self.previous = previous
        self.http = PoliteClient(config, client, sleep)
        self.guard = UrlGuard(config, self.http)
        self.slots = asyncio.Semaphore(config.concurrency)
        # the secret values of the URLs requested in place of recorded ones: a site may
        # echo its token into its links or text, and nothing stored may hold it
        self.secrets = sorted({v for real in self.http.requests.values()
                               for v in secret_values(real, config.secret_params)
                               if len(v) >= MIN_SECRET_CHARS}, key=len, reverse=True)

    async def close(self) -> None:
        await self.guard.close()

    async def page(self, url: str) -> Page:
        """The URL's Page, with no secret of the URL requested in its text, title,
        links, final URL or reason. Never raises for one URL: its problems, expected or
        not, are its status and reason, so that no URL can fail the shard it is in."""
        return self._scrub(await self._one(url))

    def _learn(self, url: str) -> None:
        """Scrub the secret values of a URL this crawl requests (a redirect to a signed
        URL) from what it stores, like those of urls.txt."""
        new = {v for v in secret_values(url, self.config.secret_params)
               if len(v) >= MIN_SECRET_CHARS} - set(self.secrets)
        if new:
            self.secrets = sorted({*self.secrets, *new}, key=len, reverse=True)

    def _scrub(self, page: Page) -> Page:
        if not self.secrets:
            return page
        for name in ("text", "title", "final_url", "error"):
            value = getattr(page, name)
            if value:
                setattr(page, name, _without(value, self.secrets))
        page.links = [_without(link, self.secrets) for link in page.links]
        return page

    async def _one(self, url: str) -> Page:
        cap = self.config.total_timeout_s
        async with self.slots:
            trace = _Trace(url)  # fetched_at: when work on the URL starts, not when it queued
            try:
                async with asyncio.timeout(cap) as deadline:
                    url_deadline.set(deadline)  # paused while queueing for a host slot
                    return await self._page(url, trace)
            except TimeoutError:
                return trace.page("failed", f"timed out after {cap:g} s")
            except Outcome as outcome:
                trace.http_status = outcome.http_status or trace.http_status
                trace.content_type = outcome.content_type or trace.content_type
                return trace.page(outcome.status, outcome.reason)
            except Exception as exc:  # the per-URL edge (see the docstring)
                # An error no rule above foresaw (a URL httpx cannot parse, a parser bug):
                # this URL's failure, logged with its traceback, reported with its reason.
                log.warning("unexpected error fetching %s", redact(url), exc_info=True)
                detail = _without(redact(str(exc).strip().splitlines()[0]
                                         if str(exc).strip() else ""), self.secrets)
                return trace.page("failed", f"unexpected error: {type(exc).__name__}"
                                            + (f": {detail[:300]}" if detail else ""))

    async def _page(self, url: str, trace: _Trace) -> Page:
        scheme = urlsplit(url).scheme.lower()
        if scheme == "file":
            return await self._local(url, trace)
        if scheme not in ("http", "https"):
            raise Outcome(
                "failed",
                f"unsupported URL scheme {scheme!r}: only http(s) and file:// URLs are fetched",
            )
        target = self._rewrite(url, trace)
        # A GitHub page rewritten to its raw file is judged by the robots.txt of the page
        # the user listed: the raw host's robots.txt disallows crawlers wholesale, yet a
        # listed file is what a person would open with GitHub's own "Raw" button.
        robots_for = url if target != url else None
        prev = self.previous.get(url) or {}
        headers = _conditional_headers(prev)
        visited: set[str] = set()
        for _ in range(self.config.max_redirects + 1):
            await self.guard.check(target, robots_for=robots_for)
            robots_for = None
            hop = await self.http.get(target, headers)
            trace.http_status = hop.status
            if hop.status not in REDIRECT_STATUS:
                return await self._finish(hop, target, trace, prev, bool(headers))
            visited.add(target.split("#", 1)[0])
            location = hop.headers.get("location")
            if not location:
                raise Outcome("failed", f"HTTP {hop.status} redirect without a Location header")
            # Credentials in a redirect are neither followed nor recorded (final_url); a
            # secret query value is followed but recorded REDACTED (_rewrite).
            target = strip_userinfo(urljoin(target, location.strip()))
            self._learn(target)
            if target.split("#", 1)[0] in visited:
                raise Outcome("failed", f"redirect loop: {self._redact(target)} was already "
                                        "visited")
            target = self._rewrite(target, trace)
        raise Outcome("failed", f"too many redirects (more than {self.config.max_redirects})")

    def _rewrite(self, url: str, trace: _Trace) -> str:
        rewrite = github_rewrite(url, self.config.github_raw_base)
        if rewrite.unsupported:
            raise Outcome("unsupported", rewrite.unsupported)
        trace.final_url = self._redact(rewrite.url)
        return rewrite.url

    def _redact(self, url: str) -> str:
        return redact(url, self.config.secret_params)

    async def _finish(
        self, hop: Hop, target: str, trace: _Trace, prev: dict, conditional: bool
    ) -> Page:
        etag = hop.headers.get("etag")
        last_modified = hop.headers.get("last-modified")
        if hop.status == 304:
            if not conditional:
                raise Outcome("failed", "HTTP 304 Not Modified without a conditional request", 304)
            return trace.page(
                "not_modified",
                content_hash=prev.get("content_hash"),
                etag=etag or prev.get("etag"),
                last_modified=last_modified or prev.get("last_modified"),
            )
        parsed = await asyncio.to_thread(
            parse_document, hop.body, hop.headers.get("content-type"), target, urlsplit(target).path
        )
        trace.content_type = parsed.content_type
        return trace.page(
            parsed.status,
            parsed.error,
            content_hash=content_hash(hop.body),
            etag=etag,
            last_modified=last_modified,
            title=parsed.title,
            text=parsed.text,
            links=[self._redact(link) for link in parsed.links],
        )

    async def _local(self, url: str, trace: _Trace) -> Page:
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise Outcome(
                "failed", f"file URL with a remote host {parts.netloc!r} is not supported"
            )
        path = Path(url2pathname(parts.path))
        body = await asyncio.to_thread(_read_capped, path, self.config.max_bytes)
        parsed = await asyncio.to_thread(parse_document, body, None, url, path.name)
        trace.content_type = parsed.content_type
        return trace.page(
            parsed.status,
            parsed.error,
            final_url=url,
            content_hash=content_hash(body),
            title=parsed.title,
            text=parsed.text,
            links=[self._redact(link) for link in parsed.links],
        )


def _without(text: str, secrets: list[str]) -> str:
    """`text` with every one of `secrets` replaced by REDACTED."""
    for value in secrets:
        text = text.replace(value, REDACTED)
    return text


def _conditional_headers(prev: dict) -> dict[str, str]:
    # Without the previous content hash a 304 would leave nothing to reuse.
    if not prev.get("content_hash"):
        return {}
    headers = {}
    if prev.get("etag"):
        headers["If-None-Match"] = str(prev["etag"])
    if prev.get("last_modified"):
        headers["If-Modified-Since"] = str(prev["last_modified"])
    return headers


def _read_capped(path: Path, max_bytes: int) -> bytes:
    try:
        with path.open("rb") as f:
            body = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise Outcome("failed", f"file not found: {path}") from None
    except IsADirectoryError:
        raise Outcome("failed", f"{path} is a directory, not a file") from None
    except PermissionError:
        raise Outcome("failed", f"permission denied reading {path}") from None
    except OSError as exc:
        raise Outcome("failed", f"could not read {path}: {exc.strerror or exc}") from None
    if len(body) > max_bytes:
        raise Outcome("failed", f"larger than {format_size(max_bytes)} cap")
    return body
