"""The fetch stage's network engine: one `Crawler` per `fetch_pages` call.

For each URL, in order: scheme check → GitHub rewrite → [per hop: allowed host → address
guard (resolved addresses; metadata endpoints always refused) → robots.txt → GET with
retries → redirect?] → size-capped body → parse (in a worker thread). The whole URL runs
under one wall-clock cap (`total_timeout_s`), so retries and redirects cannot stretch it.

Per-URL problems are raised inside as `_Outcome` (terminal) or `_Transient` (retried by
tenacity) and turned into a Page at the top of `Crawler.page`; nothing else is caught.

Known limit: the address guard resolves the host itself and httpx resolves it again when
connecting, so a DNS server that answers differently within that window (DNS rebinding)
is not caught.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import urllib.robotparser
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urljoin, urlsplit
from urllib.request import url2pathname

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from packs.format import content_hash
from tasks.fetch_model import FetchConfig, Page, Sleep
from tasks.fetch_parse import is_text_type, media_type, parse_document
from tasks.fetch_policy import (
    REDIRECT_STATUS,
    RETRYABLE_STATUS,
    check_addresses,
    effective_allowed_hosts,
    format_size,
    github_rewrite,
    host_allowed,
    ip_literal,
    parse_retry_after,
    redact,
    retry_delay,
)

ACCEPT = "text/html, application/xhtml+xml, text/markdown, text/plain;q=0.9, */*;q=0.1"
ROBOTS_MAX_BYTES = 512 * 1024  # RFC 9309 asks crawlers to read at least 500 KiB
log = logging.getLogger("kpack.fetch")


async def fetch_all(
    urls: list[str],
    config: FetchConfig,
    previous: dict[str, dict],
    progress: Callable[[int, int, Page], None] | None,
    sleep: Sleep,
    transport: httpx.AsyncBaseTransport | None,
) -> list[Page]:
    """Fetch `urls` concurrently with one client; Pages in input order (see fetch_pages)."""
    client = httpx.AsyncClient(
        timeout=httpx.Timeout(config.timeout_s),
        follow_redirects=False,
        headers={"User-Agent": config.user_agent, "Accept": ACCEPT},
        limits=httpx.Limits(max_connections=2 * config.concurrency, max_keepalive_connections=config.concurrency),
        transport=transport,
    )
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


class _Outcome(Exception):
    """A per-URL result that is not a page of content: status + reason. Terminal."""

    def __init__(
        self, status: str, reason: str, http_status: int | None = None, content_type: str | None = None
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.http_status = http_status
        self.content_type = content_type


class _Transient(_Outcome):
    """A failure worth retrying (network error, 429, 5xx); may carry Retry-After seconds."""

    def __init__(self, reason: str, http_status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__("failed", reason, http_status)
        self.retry_after = retry_after


@dataclass
class _Hop:
    """One HTTP response: status, headers we keep, and the body for a 2xx."""

    status: int
    headers: httpx.Headers
    body: bytes = b""


@dataclass
class _Trace:
    """What is known about a URL so far, so a failure mid-way still reports it."""

    url: str
    fetched_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
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
    """State shared by one fetch_pages call: client, limits, per-host schedules, robots
    and DNS caches."""

    def __init__(self, config: FetchConfig, client: httpx.AsyncClient, sleep: Sleep, previous: dict[str, dict]) -> None:
        self.config = config
        self.client = client
        self.sleep = sleep
        self.previous = previous
        self.allowed = effective_allowed_hosts(config.allowed_hosts, config.github_raw_base)
        self.slots = asyncio.Semaphore(config.concurrency)
        self.host_slots: dict[str, asyncio.Semaphore] = {}
        self.host_next: dict[str, float] = {}
        self.robots: dict[str, asyncio.Task[urllib.robotparser.RobotFileParser | None]] = {}
        self.addresses: dict[tuple[str, int], list[str]] = {}

    async def close(self) -> None:
        pending = [t for t in self.robots.values() if not t.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def page(self, url: str) -> Page:
        cap = self.config.total_timeout_s
        async with self.slots:
            trace = _Trace(url)  # fetched_at: when work on the URL starts, not when it queued
            try:
                async with asyncio.timeout(cap):
                    return await self._page(url, trace)
            except TimeoutError:
                return trace.page("failed", f"timed out after {cap:g} s")
            except _Outcome as outcome:
                trace.http_status = outcome.http_status or trace.http_status
                trace.content_type = outcome.content_type or trace.content_type
                return trace.page(outcome.status, outcome.reason)

    async def _page(self, url: str, trace: _Trace) -> Page:
        scheme = urlsplit(url).scheme.lower()
        if scheme == "file":
            return await self._local(url, trace)
        if scheme not in ("http", "https"):
            raise _Outcome("failed", f"unsupported URL scheme {scheme!r}: only http(s) and file:// URLs are fetched")
        target = self._rewrite(url, trace)
        # A GitHub page rewritten to its raw file is judged by the robots.txt of the page
        # the user listed: the raw host's robots.txt disallows crawlers wholesale, yet a
        # listed file is what a person would open with GitHub's own "Raw" button.
        robots_for = url if target != url else None
        prev = self.previous.get(url) or {}
        headers = _conditional_headers(prev)
        visited: set[str] = set()
        for _ in range(self.config.max_redirects + 1):
            await self._check(target, robots_for=robots_for)
            robots_for = None
            hop = await self._get(target, headers)
            trace.http_status = hop.status
            if hop.status not in REDIRECT_STATUS:
                return await self._finish(hop, target, trace, prev, bool(headers))
            visited.add(target.split("#", 1)[0])
            location = hop.headers.get("location")
            if not location:
                raise _Outcome("failed", f"HTTP {hop.status} redirect without a Location header")
            target = urljoin(target, location.strip())
            if target.split("#", 1)[0] in visited:
                raise _Outcome("failed", f"redirect loop: {redact(target)} was already visited")
            target = self._rewrite(target, trace)
        raise _Outcome("failed", f"too many redirects (more than {self.config.max_redirects})")

    def _rewrite(self, url: str, trace: _Trace) -> str:
        rewrite = github_rewrite(url, self.config.github_raw_base)
        if rewrite.unsupported:
            raise _Outcome("unsupported", rewrite.unsupported)
        trace.final_url = rewrite.url
        return rewrite.url

    async def _finish(self, hop: _Hop, target: str, trace: _Trace, prev: dict, conditional: bool) -> Page:
        etag = hop.headers.get("etag")
        last_modified = hop.headers.get("last-modified")
        if hop.status == 304:
            if not conditional:
                raise _Outcome("failed", "HTTP 304 Not Modified without a conditional request", 304)
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
            links=parsed.links,
        )

    async def _local(self, url: str, trace: _Trace) -> Page:
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise _Outcome("failed", f"file URL with a remote host {parts.netloc!r} is not supported")
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
            links=parsed.links,
        )

    # --- guards ---------------------------------------------------------------------

    async def _check(self, url: str, *, robots: bool = True, robots_for: str | None = None) -> None:
        """Raise an _Outcome unless `url` may be requested: scheme, allowed host, resolved
        addresses, robots.txt (of `robots_for` when given, else of `url`)."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise _Outcome("failed", f"refused {scheme or 'scheme-less'} URL {redact(url)}: only http(s) is fetched")
        host = (parts.hostname or "").rstrip(".")
        if not host:
            raise _Outcome("failed", f"URL {redact(url)} has no host")
        if not host_allowed(host, self.allowed):
            raise _Outcome(
                "failed",
                f"host {host} is not in allowed_hosts ({', '.join(self.config.allowed_hosts)}); "
                "add it to allowed_hosts in pack.toml",
            )
        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError:
            raise _Outcome("failed", f"URL {redact(url)} has an invalid port") from None
        addresses = await self._resolve(host, port)
        if reason := check_addresses(host, addresses, allow_private=self.config.allow_private_hosts):
            raise _Outcome("failed", reason)
        robots_url = robots_for or url
        if robots and self.config.respect_robots and not await self._robots_allow(robots_url):
            origin = "{0.scheme}://{0.netloc}".format(urlsplit(robots_url))
            raise _Outcome("disallowed", f"disallowed by {origin}/robots.txt for user agent {self.config.user_agent!r}")

    async def _resolve(self, host: str, port: int) -> list[str]:
        if (literal := ip_literal(host)) is not None:
            return [literal]
        key = (host.lower(), port)
        if key not in self.addresses:
            loop = asyncio.get_running_loop()
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except socket.gaierror as exc:
                raise _Outcome("failed", f"could not resolve host {host}: {exc.strerror}") from None
            except UnicodeError:  # IDNA rejects the name (empty or over-long label)
                raise _Outcome("failed", f"invalid host name {host!r}") from None
            self.addresses[key] = sorted({str(info[4][0]) for info in infos})
        return self.addresses[key]

    async def _robots_allow(self, url: str) -> bool:
        parts = urlsplit(url)
        origin = f"{parts.scheme.lower()}://{parts.netloc.lower()}"
        task = self.robots.get(origin)
        if task is None:
            task = self.robots[origin] = asyncio.ensure_future(self._load_robots(origin))
        # shield: a URL that times out waiting must not cancel the fetch other URLs share.
        parser = await asyncio.shield(task)
        return parser is None or parser.can_fetch(self.config.user_agent, url)

    async def _load_robots(self, origin: str) -> urllib.robotparser.RobotFileParser | None:
        """The parsed robots.txt of `origin`, or None meaning "allow all" (missing, 4xx,
        5xx, unreachable or refused; the last three are logged)."""
        url = f"{origin}/robots.txt"
        try:
            async with asyncio.timeout(self.config.total_timeout_s):
                for _ in range(self.config.max_redirects + 1):
                    await self._check(url, robots=False)
                    hop = await self._get_once(url, {}, max_bytes=ROBOTS_MAX_BYTES, typed=False)
                    if hop.status not in REDIRECT_STATUS:
                        break
                    url = urljoin(url, hop.headers.get("location", "/robots.txt"))
                else:
                    raise _Outcome("failed", "too many redirects")
        except _Outcome as outcome:
            if outcome.http_status is not None and 400 <= outcome.http_status < 500:
                return None
            log.warning("robots.txt for %s unavailable (%s); allowing all", redact(origin), outcome.reason)
            return None
        except TimeoutError:
            log.warning("robots.txt for %s timed out; allowing all", redact(origin))
            return None
        if not 200 <= hop.status < 300:
            return None
        parser = urllib.robotparser.RobotFileParser(url)
        parser.parse(hop.body.decode("utf-8", errors="replace").splitlines())
        return parser

    # --- requests -------------------------------------------------------------------

    async def _get(self, url: str, headers: dict[str, str]) -> _Hop:
        """GET with retries on transient failures (jittered backoff, Retry-After honoured)."""
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.config.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception_type(_Transient),
            sleep=self.sleep,
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            return await retrying(self._get_once, url, headers, max_bytes=self.config.max_bytes, typed=True)
        except _Transient as exc:
            attempts = self.config.max_retries + 1
            reason = f"{exc.reason} (after {attempts} attempts)" if attempts > 1 else exc.reason
            raise _Outcome("failed", reason, exc.http_status) from None

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        retry_after = exc.retry_after if isinstance(exc, _Transient) else None
        return retry_delay(state.attempt_number, retry_after, random.random(), cap=self.config.max_retry_after_s)

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.info("retrying in %.1f s after attempt %d: %s", wait, state.attempt_number, exc)

    async def _get_once(self, url: str, headers: dict[str, str], *, max_bytes: int, typed: bool) -> _Hop:
        """One GET. Redirects and 304 come back as hops; 429/5xx and network errors raise
        _Transient; other 4xx, oversize bodies and (when `typed`) unsupported types raise
        _Outcome."""
        async with self._host_slot((urlsplit(url).hostname or "").lower()):
            try:
                async with self.client.stream("GET", url, headers=headers) as response:
                    return await _read_response(response, max_bytes, typed)
            except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                if _is_certificate_error(exc):
                    raise _Outcome("failed", f"TLS certificate rejected: {exc}") from None
                raise _Transient(_describe(exc, self.config.timeout_s)) from None
            except httpx.HTTPError as exc:  # unsupported protocol, bad encoding, proxy
                raise _Outcome("failed", _describe(exc, self.config.timeout_s)) from None

    @asynccontextmanager
    async def _host_slot(self, host: str) -> AsyncIterator[None]:
        """Hold one of the host's connections; with a per-host delay, reserve the next
        start time under the semaphore so concurrent requests space out."""
        slot = self.host_slots.get(host)
        if slot is None:
            slot = self.host_slots[host] = asyncio.Semaphore(self.config.per_host_concurrency)
        async with slot:
            delay = self.config.per_host_delay_s
            if delay > 0:
                now = asyncio.get_running_loop().time()
                start = max(now, self.host_next.get(host, now))
                self.host_next[host] = start + delay
                if start > now:
                    await self.sleep(start - now)
            yield


async def _read_response(response: httpx.Response, max_bytes: int, typed: bool) -> _Hop:
    status = response.status_code
    if status in REDIRECT_STATUS or status == 304:
        return _Hop(status, response.headers)
    reason = f"HTTP {status} {response.reason_phrase}".rstrip()
    if status in RETRYABLE_STATUS:
        retry_after = parse_retry_after(response.headers.get("retry-after"), datetime.now(timezone.utc))
        raise _Transient(reason, status, retry_after)
    if not 200 <= status < 300:  # other 4xx, and 3xx that are not redirects (300, 305)
        raise _Outcome("failed", reason, status)
    mtype = media_type(response.headers.get("content-type"))
    if typed and not is_text_type(mtype):
        raise _Outcome("unsupported", f"unsupported content type {mtype}", status, mtype)
    too_big = f"larger than {format_size(max_bytes)} cap"
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise _Outcome("failed", too_big, status)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise _Outcome("failed", too_big, status)
        chunks.append(chunk)
    return _Hop(status, response.headers, b"".join(chunks))


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
        raise _Outcome("failed", f"file not found: {path}") from None
    except IsADirectoryError:
        raise _Outcome("failed", f"{path} is a directory, not a file") from None
    except PermissionError:
        raise _Outcome("failed", f"permission denied reading {path}") from None
    except OSError as exc:
        raise _Outcome("failed", f"could not read {path}: {exc.strerror or exc}") from None
    if len(body) > max_bytes:
        raise _Outcome("failed", f"larger than {format_size(max_bytes)} cap")
    return body


def _is_certificate_error(exc: httpx.HTTPError) -> bool:
    return isinstance(exc, httpx.ConnectError) and "CERTIFICATE_VERIFY_FAILED" in str(exc)


def _describe(exc: httpx.HTTPError, timeout_s: float) -> str:
    kinds = {
        httpx.ConnectTimeout: f"connect timed out after {timeout_s:g} s",
        httpx.ReadTimeout: f"read timed out after {timeout_s:g} s",
        httpx.WriteTimeout: f"write timed out after {timeout_s:g} s",
        httpx.PoolTimeout: "no free connection (pool timeout)",
    }
    for kind, text in kinds.items():
        if isinstance(exc, kind):
            return text
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError):
        return f"could not connect: {detail}"
    return f"{type(exc).__name__}: {detail}"
