"""The fetch stage: a list of URLs in, one `Page` per URL out (same order).

`fetch_pages` is the entry point; the rules it applies are pure functions elsewhere:
`tasks.fetch.policy` (address guard, allowed hosts, GitHub rewrites, retry timing) and
`tasks.fetch.parse` (content typing, charsets, HTML/Markdown → Markdown).

The network engine is `tasks.fetch.crawler` (the per-URL walk: redirects, size and time
caps), on `tasks.fetch.admission` (allowed hosts, addresses, robots.txt) and
`tasks.fetch.client` (GET, retries, per-host limits); the public types are in
`tasks.fetch.types`.

Failures never raise: each becomes a Page with status "failed", "unsupported" or
"disallowed" and a human reason. Only programming errors propagate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx

from tasks.fetch.crawler import fetch_all
from tasks.fetch.markdown_source import markdown_document
from tasks.fetch.parse import html_to_markdown
from tasks.fetch.types import USER_AGENT, VERSION, FetchConfig, Page, Sleep

__all__ = [
    "USER_AGENT",
    "VERSION",
    "FetchConfig",
    "Page",
    "fetch_pages",
    "html_to_markdown",
    "markdown_document",
]


def fetch_pages(
    urls: list[str],
    config: FetchConfig,
    *,
    previous: dict[str, dict] | None = None,
    progress: Callable[[int, int, Page], None] | None = None,
    sleep: Sleep | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> list[Page]:
    """Fetch every URL and return one Page per URL, in input order.

    `previous` maps url → {"etag", "last_modified", "content_hash"} from the last build;
    those URLs are fetched conditionally and a 304 gives status "not_modified" with the
    previous content_hash and no text. `progress(done, total, page)` is called as each URL
    finishes. `sleep` replaces asyncio.sleep for backoff and per-host delays (tests);
    `transport` replaces httpx's network transport. Per-URL problems become Page statuses;
    this raises only on programming errors. Safe to call from a thread with no event loop
    (a Prefect task) and from inside a running loop (it then runs in a worker thread).
    """
    job = fetch_all(list(urls), config, previous or {}, progress, sleep or asyncio.sleep, transport)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(job)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kpack-fetch") as pool:
        return pool.submit(asyncio.run, job).result()

