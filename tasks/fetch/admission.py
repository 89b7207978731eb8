"""May this URL be requested? The fetch stage's guards, checked before every hop.

`UrlGuard.check` refuses, as an `Outcome`: a scheme other than http(s), a host outside
`allowed_hosts`, a host that resolves to a refused address (private, loopback, link-local;
metadata endpoints always), and a path that the origin's robots.txt disallows for our user
agent. Resolved addresses and parsed robots.txt files are cached for the whole fetch; a
robots.txt is fetched once per origin even when many URLs ask for it at the same time, and
with `FetchConfig.robots_cache` set, once per build (tasks/fetch/robots_cache.py: the
build's other fetch shards read it from there).

Known limit: the address guard resolves the host itself and httpx resolves it again when
connecting, so a DNS server that answers differently within that window (DNS rebinding)
is not caught.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import urllib.robotparser
from urllib.parse import urljoin, urlsplit

from tasks.fetch import robots_cache
from tasks.fetch.client import Outcome, PoliteClient, url_deadline
from tasks.fetch.policy import (
    REDIRECT_STATUS,
    check_addresses,
    effective_allowed_hosts,
    host_allowed,
    ip_literal,
    legacy_ipv4,
    redact,
)
from tasks.fetch.types import FetchConfig

ROBOTS_MAX_BYTES = 512 * 1024  # RFC 9309 asks crawlers to read at least 500 KiB
log = logging.getLogger("kpack.fetch")


class UrlGuard:
    """The allowed hosts, the DNS cache and the robots.txt cache of one fetch."""

    def __init__(self, config: FetchConfig, http: PoliteClient) -> None:
        self.config = config
        self.http = http
        self.allowed = effective_allowed_hosts(config.allowed_hosts, config.github_raw_base)
        self.robots: dict[str, asyncio.Task[urllib.robotparser.RobotFileParser | None]] = {}
        self.addresses: dict[tuple[str, int], list[str]] = {}

    async def close(self) -> None:
        """Cancel robots.txt fetches still running (their URLs have all finished)."""
        pending = [t for t in self.robots.values() if not t.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def check(self, url: str, *, robots: bool = True, robots_for: str | None = None) -> None:
        """Raise an Outcome unless `url` may be requested: scheme, allowed host, resolved
        addresses, robots.txt (of `robots_for` when given, else of `url`)."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise Outcome(
                "failed",
                f"refused {scheme or 'scheme-less'} URL {redact(url)}: only http(s) is fetched",
            )
        host = (parts.hostname or "").rstrip(".")
        if not host:
            raise Outcome("failed", f"URL {redact(url)} has no host")
        if (canonical := legacy_ipv4(host)) is not None:
            raise Outcome("failed", f"host {host} is an IPv4 address in a legacy form (octal, "
                                    f"hex or short), which clients read differently; write "
                                    f"it as {canonical}")
        if not host_allowed(host, self.allowed):
            raise Outcome(
                "failed",
                f"host {host} is not in allowed_hosts ({', '.join(self.config.allowed_hosts)}); "
                "add it to allowed_hosts in pack.toml",
            )
        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError:
            raise Outcome("failed", f"URL {redact(url)} has an invalid port") from None
        addresses = await self._resolve(host, port)
        if reason := check_addresses(
            host, addresses, allow_private=self.config.allow_private_hosts
        ):
            raise Outcome("failed", reason)
        robots_url = robots_for or url
        if robots and self.config.respect_robots and not await self._robots_allow(robots_url):
            origin = "{0.scheme}://{0.netloc}".format(urlsplit(robots_url))
            raise Outcome(
                "disallowed",
                f"disallowed by {origin}/robots.txt for user agent {self.config.user_agent!r}",
            )

    async def _resolve(self, host: str, port: int) -> list[str]:
        if (literal := ip_literal(host)) is not None:
            return [literal]
        key = (host.lower(), port)
        if key not in self.addresses:
            loop = asyncio.get_running_loop()
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except socket.gaierror as exc:
                raise Outcome("failed", f"could not resolve host {host}: {exc.strerror}") from None
            except UnicodeError:  # IDNA rejects the name (empty or over-long label)
                raise Outcome("failed", f"invalid host name {host!r}") from None
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
        5xx, unreachable or refused; the last three are logged); read from the build's
        robots cache when another fetch of the build stored it, stored there otherwise."""
        shared = self.config.robots_cache
        found, text = robots_cache.get(shared, origin) if shared else (False, None)
        if not found:
            text = await self._fetch_robots(origin)
            if shared:
                robots_cache.put(shared, origin, text)
        if text is None:
            return None
        parser = urllib.robotparser.RobotFileParser(f"{origin}/robots.txt")
        parser.parse(text.splitlines())
        return parser

    async def _fetch_robots(self, origin: str) -> str | None:
        """The text of `origin`'s robots.txt, or None meaning "allow all"."""
        url = f"{origin}/robots.txt"
        url_deadline.set(None)  # this task has its own cap, not the deadline of the URL
        try:                    # that happened to start it
            async with asyncio.timeout(self.config.total_timeout_s):
                for _ in range(self.config.max_redirects + 1):
                    await self.check(url, robots=False)
                    hop = await self.http.get_once(url, {}, max_bytes=ROBOTS_MAX_BYTES, typed=False)
                    if hop.status not in REDIRECT_STATUS:
                        break
                    url = urljoin(url, hop.headers.get("location", "/robots.txt"))
                else:
                    raise Outcome("failed", "too many redirects")
        except Outcome as outcome:
            if outcome.http_status is not None and 400 <= outcome.http_status < 500:
                return None
            log.warning(
                "robots.txt for %s unavailable (%s); allowing all", redact(origin), outcome.reason
            )
            return None
        except TimeoutError:
            log.warning("robots.txt for %s timed out; allowing all", redact(origin))
            return None
        if not 200 <= hop.status < 300:
            return None
        return hop.body.decode("utf-8", errors="replace")
