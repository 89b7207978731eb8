"""Fetching: a list of URLs in, one `Page` per URL out (`pages.fetch_pages`).

`crawler` drives one crawl, `client` is its polite HTTP client, `admission` says whether a
URL may be requested, `policy` holds the pure rules (hosts, GitHub rewrites), `parse` and
`markdown_source` turn a body into Markdown, `types` holds `FetchConfig` and `Page`.

Sitemaps and freshness: `expand` turns a source's `sitemap:` lines into the build's URL
list (`sitemap_walk` walks the files through the same guards and client, `sitemap` reads
one file as a stream); `freshness` decides which pages a rebuild skips by lastmod and
names each page's outcome; `lastmod_trust` judges each host's lastmod from what builds saw.
"""
