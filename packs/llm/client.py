"""Anthropic clients: the one place an `anthropic.Anthropic` is constructed.

Key from ANTHROPIC_API_KEY, base URL from ANTHROPIC_BASE_URL when set (tests point it at
a loopback server). Every client has a timeout. `new_client` is for callers that own
their retries (the build sets max_retries=0 so its clock and sleep are injectable);
`shared_client` is the query side's: one per (key, base URL, timeout), with the SDK's own
retries (MAX_RETRIES, its back-off) for transient failures. The SDK is imported only when a
client is built, so an offline build or `search()` never pays for it.
"""

from __future__ import annotations

import os
import threading
from typing import Any

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
TIMEOUT_S = 60.0
MAX_RETRIES = 2


def api_key() -> str | None:
    """The key in ANTHROPIC_API_KEY, or None when it is unset or empty."""
    return os.environ.get(API_KEY_ENV) or None


def base_url() -> str | None:
    """ANTHROPIC_BASE_URL, or None (the SDK's default endpoint) when unset or empty."""
    return os.environ.get(BASE_URL_ENV) or None


def new_client(key: str, *, base_url: str | None, timeout: float,
               max_retries: int = MAX_RETRIES) -> Any:
    """A new `anthropic.Anthropic` (base_url None: the SDK's default endpoint)."""
    import anthropic

    return anthropic.Anthropic(api_key=key, base_url=base_url, timeout=timeout,
                               max_retries=max_retries)


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
            c = new_client(key, base_url=url, timeout=timeout)
            _clients[cache_key] = c
        return c


def text_of(message: Any) -> str:
    """The text blocks of a Messages API reply, joined."""
    return "".join(getattr(b, "text", "") for b in message.content
                   if getattr(b, "type", "") == "text")
