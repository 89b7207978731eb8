"""The Anthropic client the query side uses (synthesis and multi-query expansion).

Real `anthropic` SDK; key from ANTHROPIC_API_KEY, base URL from ANTHROPIC_BASE_URL when set.
The SDK retries transient failures itself (max_retries=2, with its own back-off); the
callers classify what is left: `is_terminal` errors (auth, permission, bad request) mean the
caller's setup is wrong and are raised; everything else degrades (extractive answer, the
original query alone). The SDK is imported only here and only when a key is set, so
`search()` never pays for it.
"""

from __future__ import annotations

import os
import threading
from typing import Any

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
TIMEOUT_S = 60.0
MAX_RETRIES = 2


class SynthesisError(RuntimeError):
    """Claude refused the request for a reason retrying cannot fix (auth, bad request)."""


def api_key() -> str | None:
    return os.environ.get(API_KEY_ENV) or None


_lock = threading.Lock()
_clients: dict[tuple[str, str | None, float], Any] = {}


def client(timeout: float = TIMEOUT_S):
    """A shared `anthropic.Anthropic` for the current key and base URL (None without key)."""
    key = api_key()
    if key is None:
        return None
    base_url = os.environ.get(BASE_URL_ENV) or None
    cache_key = (key, base_url, timeout)
    with _lock:
        c = _clients.get(cache_key)
        if c is None:
            import anthropic

            c = anthropic.Anthropic(api_key=key, base_url=base_url, timeout=timeout,
                                    max_retries=MAX_RETRIES)
            _clients[cache_key] = c
        return c


def is_terminal(exc: BaseException) -> bool:
    """Errors that no retry or fallback should hide: the request or credentials are wrong."""
    import anthropic

    return isinstance(exc, (anthropic.AuthenticationError, anthropic.PermissionDeniedError,
                            anthropic.BadRequestError, anthropic.NotFoundError))


def text_of(message) -> str:
    return "".join(getattr(b, "text", "") for b in message.content
                   if getattr(b, "type", "") == "text")
