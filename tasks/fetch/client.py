"""The fetch stage's polite HTTP client: one GET at a time, per-host limits, retries.

`PoliteClient.get` is a GET with retries on transient failures (the statuses of
`packs.retry`, network errors; its jittered backoff, Retry-After honoured); `get_once` is
one attempt, holding one of the host's connection slots and keeping the per-host delay
between request starts. Bodies are streamed and capped. Whether a URL may be requested at
all is `tasks.fetch.admission`.

Per-URL problems are raised as `Outcome` (terminal: status + reason) or `Transient`
(retried); the crawler (`tasks.fetch.crawler`) turns them into a Page.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from packs.retry import RetryPolicy, async_retrying, is_retryable, retry_after_s
from tasks.fetch.parse import is_text_type, media_type
from tasks.fetch.policy import REDIRECT_STATUS, format_size
from tasks.fetch.secret_urls import request_urls
from tasks.fetch.types import AuthError, FetchConfig, Sleep

ACCEPT = "text/html, application/xhtml+xml, text/markdown, text/plain;q=0.9, */*;q=0.1"
log = logging.getLogger("kpack.fetch")

# The wall-clock cap of the URL this task is fetching (the crawler's asyncio.timeout), so
# that waiting for one of the host's connection slots pauses it: a URL queued behind slow
# or hanging URLs of its host must not spend its time waiting (see `paused_deadline`).
url_deadline: ContextVar[asyncio.Timeout | None] = ContextVar("url_deadline", default=None)


@asynccontextmanager
async def paused_deadline() -> AsyncIterator[None]:
    """Stop the current URL's deadline clock (`url_deadline`) for the body; on leaving it,
    the URL has the time it had left when the body began."""
    deadline = url_deadline.get()
    when = deadline.when() if deadline is not None else None
    if deadline is None or when is None or deadline.expired():
        yield
        return
    loop = asyncio.get_running_loop()
    left = when - loop.time()
    deadline.reschedule(None)
    try:
        yield
    finally:
        deadline.reschedule(loop.time() + left)


class Outcome(Exception):
    """A per-URL result that is not a page of content: status + reason. Terminal."""

    def __init__(
        self,
        status: str,
        reason: str,
        http_status: int | None = None,
        content_type: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.http_status = http_status
        self.content_type = content_type


class Transient(Outcome):
    """A failure worth retrying (network error, 429, 5xx); may carry Retry-After seconds."""

    def __init__(
        self, reason: str, http_status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__("failed", reason, http_status)
        self.retry_after = retry_after


@dataclass
class Hop:
    """One HTTP response: status, headers we keep, and the body for a 2xx."""

    status: int
    headers: httpx.Headers
    body: bytes = b""


def new_async_client(
    config: FetchConfig, transport: httpx.AsyncBaseTransport | None
) -> httpx.AsyncClient:
    """The httpx client of one fetch: no automatic redirects (each hop is checked), the
    configured timeouts, user agent and connection limits."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(config.timeout_s),
        follow_redirects=False,
        headers={"User-Agent": config.user_agent, "Accept": ACCEPT},
        limits=httpx.Limits(
            max_connections=2 * config.concurrency, max_keepalive_connections=config.concurrency
        ),
        transport=transport,
    )


class PoliteClient:
    """GETs through one httpx client, with per-host concurrency and spacing, and retries."""

    def __init__(self, config: FetchConfig, client: httpx.AsyncClient, sleep: Sleep) -> None:
        self.config = config
        self.client = client
        self.sleep = sleep
        self.host_slots: dict[str, asyncio.Semaphore] = {}
        self.host_next: dict[str, float] = {}
        # The fetch caps its backoff where it caps Retry-After: a page is not worth a
        # longer wait than the server may ask for.
        self.policy = RetryPolicy(max_retries=config.max_retries,
                                  backoff_cap_s=config.max_retry_after_s,
                                  max_retry_after_s=config.max_retry_after_s)
        # URL as recorded (its secrets REDACTED) -> the URL to request (urls.txt's line, or
        # a sitemap index's entry); in memory only
        self.requests: dict[str, str] = {}
        if config.urls_file:
            self.requests = request_urls(config.urls_file, config.secret_params)

    async def get(self, url: str, headers: dict[str, str], *, typed: bool = True) -> Hop:
        """GET with retries on transient failures (jittered backoff, Retry-After honoured).
        `typed=False` takes any content type (a sitemap may come as gzip). Raises Outcome
        once the retries are spent or the failure is terminal."""
        retrying = async_retrying(
            self.policy, transient=lambda exc: isinstance(exc, Transient),
            retry_after=lambda exc: exc.retry_after, sleep=self.sleep,
            before_sleep=_log_retry)
        try:
            return await retrying(
                self.get_once, self.requests.get(url, url), headers,
                max_bytes=self.config.max_bytes, typed=typed
            )
        except Transient as exc:
            attempts = self.config.max_retries + 1
            reason = f"{exc.reason} (after {attempts} attempts)" if attempts > 1 else exc.reason
            raise Outcome("failed", reason, exc.http_status) from None

    async def get_once(
        self, url: str, headers: dict[str, str], *, max_bytes: int, typed: bool
    ) -> Hop:
        """One GET. Redirects and 304 come back as hops; 429/5xx and network errors raise
        Transient; other 4xx, oversize bodies and (when `typed`) unsupported types raise
        Outcome."""
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        headers = {**headers, **self._auth_headers(host, parts.scheme.lower())}
        async with self._host_slot(host):
            try:
                async with self.client.stream("GET", url, headers=headers) as response:
                    return await _read_response(response, max_bytes, typed)
            except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                if _is_certificate_error(exc):
                    raise Outcome("failed", f"TLS certificate rejected: {exc}") from None
                raise Transient(_describe(exc, self.config.timeout_s)) from None
            except httpx.HTTPError as exc:  # unsupported protocol, bad encoding, proxy
                raise Outcome("failed", _describe(exc, self.config.timeout_s)) from None

    def _auth_headers(self, host: str, scheme: str) -> dict[str, str]:
        """The pack.toml [[auth]] headers for this host (values from the environment, read
        per request and kept nowhere); an unset variable fails the URL with its name."""
        try:
            return {a.header: a.value() for a in self.config.auth if a.applies(host, scheme)}
        except AuthError as exc:
            raise Outcome("failed", str(exc)) from None

    @asynccontextmanager
    async def _host_slot(self, host: str) -> AsyncIterator[None]:
        """Hold one of the host's connections; with a per-host delay, reserve the next
        start time under the semaphore so concurrent requests space out. Neither wait
        counts against the URL's deadline (`paused_deadline`)."""
        slot = self.host_slots.get(host)
        if slot is None:
            slot = self.host_slots[host] = asyncio.Semaphore(self.config.per_host_concurrency)
        async with paused_deadline():  # queueing for the host is not the URL's time
            await slot.acquire()
        try:
            delay = self.config.per_host_delay_s
            if delay > 0:
                now = asyncio.get_running_loop().time()
                start = max(now, self.host_next.get(host, now))
                self.host_next[host] = start + delay
                if start > now:
                    async with paused_deadline():
                        await self.sleep(start - now)
            yield
        finally:
            slot.release()


def _log_retry(attempt: int, exc: BaseException, wait: float) -> None:
    log.info("retrying in %.1f s after attempt %d: %s", wait, attempt, exc)


async def _read_response(response: httpx.Response, max_bytes: int, typed: bool) -> Hop:
    status = response.status_code
    if status in REDIRECT_STATUS or status == 304:
        return Hop(status, response.headers)
    reason = f"HTTP {status} {response.reason_phrase}".rstrip()
    if is_retryable(status):
        raise Transient(reason, status, retry_after_s(response.headers))
    if not 200 <= status < 300:  # other 4xx, and 3xx that are not redirects (300, 305)
        raise Outcome("failed", reason, status)
    mtype = media_type(response.headers.get("content-type"))
    if typed and not is_text_type(mtype):
        raise Outcome("unsupported", f"unsupported content type {mtype}", status, mtype)
    too_big = f"larger than {format_size(max_bytes)} cap"
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise Outcome("failed", too_big, status)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise Outcome("failed", too_big, status)
        chunks.append(chunk)
    return Hop(status, response.headers, b"".join(chunks))


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
