"""Anthropic clients: the one place an `anthropic.Anthropic` is constructed.

Key from ANTHROPIC_API_KEY, base URL from ANTHROPIC_BASE_URL when set (tests point it at
a loopback server). Every client has a timeout, and none retries on its own: the SDK's
retries are off (max_retries=0) and the one retry loop of `packs.retry` asks again.
`new_client` is for callers that own their retries (the build's LLM layer, with its
injected clock and sleep); `shared_client` is the query side's: one per (key, base URL,
timeout), a `RetryingClient` whose `messages.create` retries transient failures
(`QUERY_POLICY`: MAX_RETRIES retries, Retry-After honoured, else jittered backoff). The SDK
is imported only when a client is built, so an offline build or `search()` never pays for
it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from packs import retry
from packs.llm import errors

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
TIMEOUT_S = 60.0
MAX_RETRIES = 2
# A question waits: retry soon (the SDK's own back-off was 0.5 s doubling to 8 s, with a
# Retry-After of up to 60 s honoured).
QUERY_POLICY = retry.RetryPolicy(max_retries=MAX_RETRIES, backoff_base_s=0.5,
                                 backoff_cap_s=8.0, max_retry_after_s=60.0)


def api_key() -> str | None:
    """The key in ANTHROPIC_API_KEY, or None when it is unset or empty."""
    return os.environ.get(API_KEY_ENV) or None


def base_url() -> str | None:
    """ANTHROPIC_BASE_URL, or None (the SDK's default endpoint) when unset or empty."""
    return os.environ.get(BASE_URL_ENV) or None


def new_client(key: str, *, base_url: str | None, timeout: float,
               max_retries: int = 0) -> Any:
    """A new `anthropic.Anthropic` (base_url None: the SDK's default endpoint), with the
    SDK's own retries off unless `max_retries` says otherwise."""
    import anthropic

    return anthropic.Anthropic(api_key=key, base_url=base_url, timeout=timeout,
                               max_retries=max_retries)


class RetryingClient:
    """An `anthropic.Anthropic` (SDK retries off) whose `messages.create` goes through the
    one retry loop of `packs.retry`: transient failures (`errors.is_transient`) are asked
    again as `policy` says; the rest, and the last failure, raise as the SDK raised them.
    A streamed reply is retried only until it starts. Everything else is the client's."""

    def __init__(self, client: Any, policy: retry.RetryPolicy = QUERY_POLICY,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.client, self.policy, self.sleep = client, policy, sleep
        self.messages = _Messages(self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


class _Messages:
    def __init__(self, owner: RetryingClient) -> None:
        self._owner = owner

    def create(self, **request: Any) -> Any:
        owner = self._owner
        return retry.call(lambda: owner.client.messages.create(**request), owner.policy,
                          transient=errors.is_transient, retry_after=errors.retry_after_of,
                          sleep=owner.sleep)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._owner.client.messages, name)


_lock = threading.Lock()
_clients: dict[tuple[str, str | None, float], Any] = {}


def shared_client(timeout: float = TIMEOUT_S) -> Any:
    """A shared client for the current key and base URL, or None without a key."""
    key = api_key()
    if key is None:
        return None
    url = base_url()
    cache_key = (key, url, timeout)
    with _lock:
        c = _clients.get(cache_key)
        if c is None:
            c = RetryingClient(new_client(key, base_url=url, timeout=timeout))
            _clients[cache_key] = c
        return c


def text_of(message: Any) -> str:
    """The text blocks of a Messages API reply, joined."""
    return "".join(getattr(b, "text", "") for b in message.content
                   if getattr(b, "type", "") == "text")
