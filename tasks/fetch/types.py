"""The fetch stage's public types: `FetchConfig` (how to fetch), `HostAuth` (a header a
host gets, from an environment variable) and `Page` (one result).

Kept apart from `tasks.fetch.pages` so the network engine (`tasks.fetch.crawler` and the modules
it uses) can build Pages without importing the module that drives it.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, field_validator

from tasks.fetch.policy import DEFAULT_GITHUB_RAW_BASE, host_allowed

VERSION = "0.1.0"
USER_AGENT = f"knowledge-packs/{VERSION} (+https://github.com/knowledge-packs)"

Sleep = Callable[[float], Awaitable[None]]


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")
_HOST = re.compile(r"^(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
_RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


class AuthError(ValueError):
    """An auth header cannot be sent: its variable is unset or holds an unusable value.
    The message names the variable, never its value."""


class HostAuth(BaseModel):
    """One `[[auth]]` entry of pack.toml: a header sent with every request to `host`, its
    value read from the environment variable `env` when the request is made. The value is
    never stored: not in pack.toml, the pack, its manifest, the work folder, logs or
    Prefect (only the variable's name travels with the build's settings). Credentials in a
    URL (`https://user:password@host/`) are stripped when urls.txt is read; this is how a
    site that needs them gets them.

    `scheme`: "raw" sends the variable as the header's whole value, "bearer" as
    `Bearer <value>`, "basic" reads `user:password` and sends HTTP Basic. `host` matches
    exactly (case-insensitive) or, as `*.example.com`, its subdomains too. With
    `https_only` (the default) the header goes over https only, so a redirect to http
    cannot leak it."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    host: str
    env: str
    header: str = "Authorization"
    scheme: Literal["raw", "bearer", "basic"] = "raw"
    https_only: bool = True

    @field_validator("host")
    @classmethod
    def _valid_host(cls, v: str) -> str:
        if not _HOST.match(v):
            raise ValueError("a host name such as docs.example.com or *.example.com (no "
                             "scheme, port or path)")
        return v.lower()

    @field_validator("env")
    @classmethod
    def _valid_env(cls, v: str) -> str:
        if not _ENV_NAME.match(v):
            raise ValueError("the name of an environment variable, such as DOCS_TOKEN")
        return v

    @field_validator("header")
    @classmethod
    def _valid_header(cls, v: str) -> str:
        if not _HEADER_NAME.match(v) or v.lower() in _RESERVED_HEADERS:
            raise ValueError("an HTTP header name such as Authorization or X-Api-Key")
        return v

    def applies(self, host: str, scheme: str) -> bool:
        return host_allowed(host, (self.host,)) and (scheme == "https" or not self.https_only)

    def value(self) -> str:
        """The header's value from the environment; AuthError (naming the variable, not
        its value) when it is unset or holds a line break."""
        raw = os.environ.get(self.env)
        if not raw:
            raise AuthError(f"pack.toml [[auth]] for {self.host} reads ${self.env}, which is "
                            "not set here; set it where the build (and every worker) runs")
        if any(c in raw for c in "\r\n\x00"):
            raise AuthError(f"${self.env} (pack.toml [[auth]] for {self.host}) holds a line "
                            "break; set it to one line")
        if self.scheme == "bearer":
            return f"Bearer {raw}"
        if self.scheme == "basic":
            return "Basic " + base64.b64encode(raw.encode("utf-8")).decode("ascii")
        return raw


class PackFetchSettings(Protocol):
    """The fetch fields of pack.toml (`tasks.sources.PackConfig` has them): named here, not
    imported, because tasks.sources imports this module for `HostAuth`."""

    fetch_timeout_s: float
    max_page_bytes: int
    fetch_concurrency: int
    per_host_concurrency: int
    allowed_hosts: Sequence[str]
    allow_private_hosts: bool
    auth: Sequence[HostAuth]
    secret_params: Sequence[str]


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
    auth: tuple[HostAuth, ...] = ()  # per-host headers from environment variables
    # a folder where the fetches of one build share robots.txt files (robots_cache.py);
    # "" = each fetch asks on its own
    robots_cache: str = ""
    # pack.toml secret_params: more query parameters whose values are secrets
    secret_params: tuple[str, ...] = ()
    # the source's urls.txt: a URL recorded with a secret REDACTED is requested as written
    # there (tasks.fetch.secret_urls.request_urls, read by the client; "" = as recorded)
    urls_file: str = ""

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
    def from_pack(cls, pack: PackFetchSettings, **overrides: object) -> FetchConfig:
        """A FetchConfig from a `tasks.sources.PackConfig` (fetch_* fields, allowed_hosts,
        allow_private_hosts, max_page_bytes, auth), with keyword overrides on top."""
        values: dict[str, object] = {
            "timeout_s": pack.fetch_timeout_s,
            "max_bytes": pack.max_page_bytes,
            "concurrency": pack.fetch_concurrency,
            "per_host_concurrency": pack.per_host_concurrency,
            "allowed_hosts": tuple(pack.allowed_hosts),
            "allow_private_hosts": pack.allow_private_hosts,
            "auth": tuple(pack.auth),
            "secret_params": tuple(pack.secret_params),
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
