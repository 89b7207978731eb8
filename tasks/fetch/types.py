"""The fetch stage's public types: `FetchConfig` (how to fetch) and `Page` (one result).

Kept apart from `tasks.fetch.pages` so the network engine (`tasks.fetch.crawler` and the modules
it uses) can build Pages without importing the module that drives it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tasks.fetch.policy import DEFAULT_GITHUB_RAW_BASE

if TYPE_CHECKING:
    from tasks.sources import PackConfig

VERSION = "0.1.0"
USER_AGENT = f"knowledge-packs/{VERSION} (+https://github.com/knowledge-packs)"

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class FetchConfig:
    """How to fetch. Defaults live here; `from_pack` maps pack.toml fields onto it."""

    timeout_s: float = 20.0  # per connect/read/write timeout
    total_timeout_s: float = 60.0  # wall cap per URL, retries and redirects included
    max_bytes: int = 10 * 1024 * 1024  # streamed; aborted past the cap
    concurrency: int = 8  # global
    per_host_concurrency: int = 2
    per_host_delay_s: float = 0.0
    max_redirects: int = 5
    max_retries: int = 3  # transient failures only
    max_retry_after_s: float = 30.0  # Retry-After (and backoff) honoured up to this cap
    allowed_hosts: tuple[str, ...] = ()  # empty = any public host
    allow_private_hosts: bool = False
    respect_robots: bool = True
    user_agent: str = USER_AGENT
    github_raw_base: str = DEFAULT_GITHUB_RAW_BASE  # tests point this at a loopback server

    def __post_init__(self) -> None:
        for name in (
            "timeout_s",
            "total_timeout_s",
            "max_bytes",
            "concurrency",
            "per_host_concurrency",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(
                    f"FetchConfig.{name} must be positive, got {getattr(self, name)!r}"
                )
        for name in ("per_host_delay_s", "max_redirects", "max_retries", "max_retry_after_s"):
            if getattr(self, name) < 0:
                raise ValueError(
                    f"FetchConfig.{name} must be zero or more, got {getattr(self, name)!r}"
                )
        if isinstance(self.allowed_hosts, str):
            raise ValueError(
                "FetchConfig.allowed_hosts must be a tuple of host names, not a string"
            )

    @classmethod
    def from_pack(cls, pack: PackConfig, **overrides: object) -> FetchConfig:
        """A FetchConfig from a `tasks.sources.PackConfig` (fetch_* fields, allowed_hosts,
        allow_private_hosts, max_page_bytes), with keyword overrides on top."""
        values: dict[str, object] = {
            "timeout_s": pack.fetch_timeout_s,
            "max_bytes": pack.max_page_bytes,
            "concurrency": pack.fetch_concurrency,
            "per_host_concurrency": pack.per_host_concurrency,
            "allowed_hosts": tuple(pack.allowed_hosts),
            "allow_private_hosts": pack.allow_private_hosts,
        }
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]


@dataclass
class Page:
    """One fetched URL. `text` is Markdown and set only when status is "ok"."""

    url: str  # as listed in urls.txt (file:// for local files)
    status: str  # "ok" | "not_modified" | "failed" | "unsupported" | "disallowed"
    http_status: int | None
    final_url: str | None  # after redirects and the GitHub raw rewrite
    content_type: str | None
    etag: str | None
    last_modified: str | None
    content_hash: str | None  # sha256 hex of the raw bytes
    error: str | None
    title: str | None
    text: str | None
    links: list[str]
    fetched_at: str  # ISO UTC
