"""What an Anthropic API error means, decided in one place for the build and the query side.

- `is_api_error`: an error of the SDK's API family (status errors, connection errors and
  timeouts, unparseable responses): the ones callers degrade on or retry.
- `is_terminal` (query side): the request or credentials are wrong (400, 401, 403, 404); no
  fallback should hide it, the caller raises `SynthesisError`.
- `is_transient`, `retry_after_of` (query side): whether `packs.retry`'s loop asks again (a
  status it retries, unless the server said `x-should-retry: false`; connection errors and
  timeouts) and how long the server asked it to wait.
- `classify` (build side): "transient" (the statuses `packs.retry` retries, connection
  errors, timeouts, unparseable responses: ask again, honouring Retry-After), "fatal" (401,
  402, 403, 404: stop the stage) or "item" (any other status: this one request fails),
  with a one-line message.
- `counts_against_breaker`: a transport failure, as opposed to 429 (the API pacing us).
- `is_terminal_error_type`: an error `type` of the API's error body (a Message Batches item
  reports its failure that way) that asking again will not fix.

The SDK is never imported just to look at an error: an SDK error can only exist once the
SDK is loaded, so the checks read it from `sys.modules`.
"""

from __future__ import annotations

import sys
from typing import Any

from packs.retry import is_retryable, retry_after_s


class SynthesisError(RuntimeError):
    """Claude refused the request for a reason retrying cannot fix (auth, bad request)."""


def _sdk() -> Any:
    return sys.modules.get("anthropic")


def is_api_error(exc: BaseException) -> bool:
    """An `anthropic.APIError` (status, connection, timeout, response-validation errors)."""
    sdk = _sdk()
    return sdk is not None and isinstance(exc, sdk.APIError)


def is_terminal(exc: BaseException) -> bool:
    """Errors that no retry or fallback should hide: the request or credentials are wrong."""
    sdk = _sdk()
    return sdk is not None and isinstance(exc, (
        sdk.AuthenticationError, sdk.PermissionDeniedError, sdk.BadRequestError,
        sdk.NotFoundError))


def is_transient(exc: BaseException) -> bool:
    """An error worth asking again: a status `packs.retry` retries (unless the response
    says `x-should-retry: false`), a connection error or a timeout."""
    sdk = _sdk()
    if sdk is None:
        return False
    if isinstance(exc, sdk.APIStatusError):
        said = (exc.response.headers.get("x-should-retry") or "").lower()
        return said != "false" and is_retryable(exc.status_code)
    return isinstance(exc, sdk.APIConnectionError)  # includes APITimeoutError


def retry_after_of(exc: BaseException) -> float | None:
    """The wait a status error's response asks for (Retry-After), else None."""
    response = getattr(exc, "response", None)
    return retry_after_s(response.headers) if response is not None else None


def classify(exc: Exception, *, model: str, base_url: str) -> tuple[str, str, float | None]:
    """(kind, message, retry_after) with kind in {"transient", "item", "fatal"}; re-raises
    `exc` when it is not an API error."""
    sdk = _sdk()
    if sdk is None:
        raise exc
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        detail = exc.api_message or str(exc)
        if status == 401:
            return ("fatal", f"ANTHROPIC_API_KEY was rejected (401) by {base_url}: {detail}. "
                    "Check the key, or unset ANTHROPIC_API_KEY to build with the offline "
                    "extractor.", None)
        if status == 402:
            return ("fatal", f"the Anthropic account cannot be billed (402): {detail}", None)
        if status == 403:
            return ("fatal", f"ANTHROPIC_API_KEY is not allowed to use {model!r} (403): "
                    f"{detail}", None)
        if status == 404:
            return ("fatal", f"model {model!r} or endpoint not found (404) at {base_url}: "
                    f"{detail}. Check extractor_model in pack.toml.", None)
        if is_retryable(status):
            return ("transient", f"HTTP {status}: {detail}", retry_after_s(exc.response.headers))
        return ("item", f"request rejected (HTTP {status}): {detail}", None)
    if isinstance(exc, sdk.APIConnectionError):  # includes APITimeoutError
        return ("transient", f"{type(exc).__name__}: {exc}", None)
    if isinstance(exc, sdk.APIResponseValidationError):
        return ("transient", f"unparseable API response: {exc}", None)
    raise exc


def counts_against_breaker(exc: Exception) -> bool:
    """A transport failure: not an answer from a healthy API (429 is one: it paces us)."""
    sdk = _sdk()
    return not (sdk is not None and isinstance(exc, sdk.APIStatusError)
                and exc.status_code == 429)


# Error types of the API's error body that asking again will not fix.
TERMINAL_ERROR_TYPES = frozenset({
    "invalid_request_error", "request_too_large", "not_found_error", "permission_error",
    "authentication_error", "billing_error"})


def is_terminal_error_type(error_type: str) -> bool:
    """True for an error body `type` that a retry cannot fix (bad request, auth, billing)."""
    return error_type in TERMINAL_ERROR_TYPES
