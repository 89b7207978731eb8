"""Fetching: a list of URLs in, one `Page` per URL out (`pages.fetch_pages`).

`crawler` drives one crawl, `client` is its polite HTTP client, `admission` says whether a
URL may be requested, `policy` holds the pure rules (hosts, GitHub rewrites), `parse` and
`markdown_source` turn a body into Markdown, `types` holds `FetchConfig` and `Page`.
"""
