"""The one LLM layer under both the build and the query side (no Prefect, no `tasks`).

- `client`: the only place an `anthropic.Anthropic` is built (key, base URL, timeout,
  retries), plus the query side's shared client.
- `errors`: what an API error means (transient, terminal for a query, fatal or per-item
  for a build) and Retry-After parsing.
- `usage`: token usage and content of a Messages API reply, parsed in one place.
- `costs`: the dated price table and $ from token usage.

The `anthropic` SDK (about 2 s to import) is imported only inside the functions that need
it, so importing this package, the build flow or `packs.search` never pays for it. The
build's cache / validate / retry / rate-limit layers live in `tasks/llm/layers.py` on top of this.
"""
