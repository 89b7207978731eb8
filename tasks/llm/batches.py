"""The Message Batches API through the real SDK: submit many requests at half price, poll
until the batch ends or a timeout passes, read the results.

`run_batch` never retries and never waits past its deadline; whatever did not come back
(the batch could not be created, timed out, or items expired or were canceled) is left out
of the outcome, and the caller sends those requests as ordinary calls. Accounting (ledger,
cost, budget) belongs to the caller (`tasks.llm.layers.LLM.batch`).

Failures: 401/402/403 raise `FatalError` (as for direct calls); any other error while
creating or polling (a 404: an endpoint without the Batches API) ends the batch attempt
with a `reason`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# Imported only by `LLM.batch`, once a client exists: the SDK is loaded by then.
import anthropic

from packs.llm.errors import classify, is_terminal_error_type
from packs.llm.usage import Completion, completion_of
from tasks.llm.failures import DETERMINISTIC, TRANSIENT, FatalError


@dataclass
class BatchOutcome:
    completions: dict[str, Completion] = field(default_factory=dict)  # custom_id → answer
    errors: dict[str, tuple[str, str]] = field(default_factory=dict)  # id → (kind, message)
    batch_id: str | None = None
    http_requests: int = 0  # create + polls + results + cancel
    reason: str | None = None  # why some requests did not come back
    skipped: list[str] = field(default_factory=list)  # not sent: the cost cap (LLM.batch)


def run_batch(client: anthropic.Anthropic, requests: dict[str, dict], *, model: str,
              base_url: str, clock: Callable[[], float], sleep: Callable[[float], None],
              poll_s: float, timeout_s: float) -> BatchOutcome:
    """Submit `requests` (custom_id → Messages API params) as one Message Batch and wait
    for it, polling every `poll_s` seconds for at most `timeout_s` seconds."""
    out = BatchOutcome()
    deadline = clock() + timeout_s

    def fail(exc: Exception, what: str) -> BatchOutcome:
        kind, message, _ = classify(exc, model=model, base_url=base_url)
        if getattr(exc, "status_code", None) == 404:
            kind, message = "item", f"no Message Batches API at {base_url} (404)"
        if kind == "fatal":
            raise FatalError(message) from None
        out.reason = f"{what}: {message}"
        return out

    try:
        out.http_requests += 1
        batch = client.messages.batches.create(requests=[
            {"custom_id": cid, "params": params} for cid, params in requests.items()])
    except anthropic.APIError as exc:
        return fail(exc, "the Message Batches API refused the batch")
    out.batch_id = batch.id
    while batch.processing_status != "ended":
        if clock() >= deadline:
            out.reason = f"the batch did not end within {timeout_s:g} s"
            try:
                out.http_requests += 1
                batch = client.messages.batches.cancel(batch.id)
            except anthropic.APIError:
                pass  # the deadline stands; the caller calls directly either way
            if batch.processing_status != "ended":
                return out
            break
        sleep(poll_s)
        try:
            out.http_requests += 1
            batch = client.messages.batches.retrieve(batch.id)
        except anthropic.APIError as exc:
            return fail(exc, "polling the batch failed")
    try:
        out.http_requests += 2  # the SDK retrieves the batch again for its results_url
        for line in client.messages.batches.results(batch.id):
            result = line.result
            if result.type == "succeeded":
                out.completions[line.custom_id] = completion_of(result.message)
            elif result.type == "errored":
                err = result.error.error
                kind = DETERMINISTIC if is_terminal_error_type(err.type) else TRANSIENT
                out.errors[line.custom_id] = (kind, f"batch item {err.type}: {err.message}")
    except (anthropic.APIError, anthropic.AnthropicError) as exc:
        if isinstance(exc, anthropic.APIError):
            return fail(exc, "reading the batch results failed")
        out.reason = f"reading the batch results failed: {exc}"
    missing = len(requests) - len(out.completions) - len(out.errors)
    if missing and out.reason is None:
        out.reason = f"{missing} batch requests expired or were canceled"
    return out
