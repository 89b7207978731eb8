"""The build's URL list: the pages urls.txt lists, then the pages of its `sitemap:` lines
(walked once per build, before the shards are planned), filtered by pack.toml's
[sitemap] include / exclude, without duplicates, at most `max_urls` of them.

In the work dir (`<work>/<pack>/sitemaps/`), each expansion writes:

    entries-<key>.parquet   every entry of every file read: url, lastmod, kind, parent
    files-<key>.parquet     every sitemap file: url, root, depth, status, error, entries,
                            bytes, etag, last_modified, kept_previous
    latest.json             names the two (relative to the folder, so a copied work dir
                            keeps working): the next build asks these files
                            conditionally and keeps a failed file's entries from them

Only small things leave: `Expanded` holds the URL strings and each sitemap page's lastmod
for the planner, which writes them into the shards' plan files (tasks get the paths), and
a report of a few counts and the failed files. No page is requested here.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import polars as pl

from packs.urls import canonical_url
from tasks.fetch.sitemap import UrlFilter
from tasks.fetch.sitemap_walk import Listed, Previous, Walk, describe, walk
from tasks.fetch.types import FetchConfig, Sleep
from tasks.workdir import WorkDir, log, stage_key, write_parquet, write_text

FOLDER = "sitemaps"
LATEST = "latest.json"
MAX_LISTED = 50  # failed sitemap files a report names; the files table keeps them all


class Source(Protocol):
    """What `expand` reads of a `tasks.sources.SourceConfig`: its urls.txt entries and
    sitemap lines (each with a `url`) and its config's [sitemap] table. Named here, not
    imported: tasks.sources imports tasks.fetch (HostAuth), and no import may go back."""

    urls: Sequence[Any]
    sitemaps: Sequence[Any]
    config: Any


@dataclass(frozen=True)
class Expanded:
    """The URL list of one build. `lastmod` maps a sitemap page to its <lastmod> (pages
    without one, and pages urls.txt lists directly, are not in it). `report` is small:
    counts and at most MAX_LISTED failed files (see `expand`)."""

    urls: list[str]
    lastmod: dict[str, str] = field(default_factory=dict)
    report: dict = field(default_factory=dict)


def expand(work: WorkDir, source: Source, config: FetchConfig, *,
           sleep: Sleep | None = None,
           transport: httpx.AsyncBaseTransport | None = None) -> Expanded:
    """urls.txt's pages, then its sitemaps' pages (see the module docstring).

    The report: `files` (sitemap files read), `ok`, `not_modified`, `failed` (files by
    status), `bytes` (downloaded), `listed` (page entries read), `filtered_out` (by
    include / exclude), `duplicates`, `over_cap` (past max_urls), `pages` (kept) and
    `failures` ([{url, error}]). A failed sitemap never raises: it is in `failures`, and
    its entries from the last build stand in for it. Raises OSError when the work dir
    cannot be written."""
    direct = [u.url for u in source.urls]
    if not source.sitemaps:
        return Expanded(direct)
    roots = [e.url for e in source.sitemaps]
    folder = work.stage(FOLDER)
    previous, old_names = _read_previous(folder)
    opts = source.config.sitemap
    job = walk(roots, config, opts.max_depth, previous, max_urls=opts.max_urls,
               sleep=sleep or asyncio.sleep, transport=transport)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        result = asyncio.run(job)
    else:  # called from inside an event loop: run the walk in a thread of its own
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kpack-sitemap") as pool:
            result = pool.submit(asyncio.run, job).result()
    _write(folder, result, old_names)
    expanded = select(direct, result.pages(roots), UrlFilter(opts.include, opts.exclude),
                      opts.max_urls)
    expanded.report.update(_file_counts(result))
    for failed in (f for f in result.files if f.error):
        log.warning("%s", describe(failed))
    r = expanded.report
    log.info("sitemaps: %d files (%d not modified, %d failed), %d pages listed, %d kept "
             "(%d filtered out, %d duplicates, %d over max_urls)", r["files"],
             r["not_modified"], r["failed"], r["listed"], r["pages"], r["filtered_out"],
             r["duplicates"], r["over_cap"])
    return expanded


def select(direct: list[str], pages: list[tuple[Listed, str]], keep: UrlFilter,
           max_urls: int) -> Expanded:
    """The pure core: `direct` URLs, then the sitemap pages `keep` accepts, each page once
    (by canonical URL, the first spelling kept), at most `max_urls` sitemap pages."""
    urls = list(direct)
    seen = {canonical_url(u) for u in direct}
    lastmod: dict[str, str] = {}
    counts = Counter(listed=len(pages))
    for entry, _root in pages:
        if not keep.keeps(entry.url):
            counts["filtered_out"] += 1
            continue
        key = canonical_url(entry.url)
        if key in seen:
            counts["duplicates"] += 1
            continue
        if counts["pages"] >= max_urls:
            counts["over_cap"] += 1
            continue
        seen.add(key)
        urls.append(entry.url)
        counts["pages"] += 1
        if entry.lastmod:
            lastmod[entry.url] = entry.lastmod
    report = {k: counts[k] for k in ("listed", "filtered_out", "duplicates", "over_cap",
                                     "pages")}
    return Expanded(urls, lastmod, report)


def _file_counts(result: Walk) -> dict:
    status = Counter(f.status for f in result.files)
    failed = [f for f in result.files if f.error]
    return {"files": len(result.files), "ok": status["ok"],
            "not_modified": status["not_modified"], "failed": status["failed"],
            "bytes": sum(f.bytes for f in result.files),
            "failures": [{"url": f.url, "error": f.error} for f in failed[:MAX_LISTED]],
            "failures_total": len(failed)}


ENTRY_SCHEMA = {"url": pl.Utf8, "lastmod": pl.Utf8, "kind": pl.Utf8, "parent": pl.Utf8}


def _read_previous(folder: Path) -> tuple[Previous, list[str]]:
    """The last expansion of this pack and its file names (empty when there is none or it
    is unreadable: then every file is asked in full, which costs bytes, not correctness)."""
    try:
        latest = json.loads((folder / LATEST).read_text(encoding="utf-8"))
        names = [Path(latest["entries"]).name, Path(latest["files"]).name]
        entries = pl.read_parquet(folder / names[0])
        files = pl.read_parquet(folder / names[1], columns=["url", "etag", "last_modified"])
    except (OSError, KeyError, TypeError, ValueError, pl.exceptions.PolarsError):
        return Previous(), []
    by_parent: dict[str, list[Listed]] = {}
    for url, lastmod, kind, parent in entries.select(list(ENTRY_SCHEMA)).iter_rows():
        by_parent.setdefault(parent, []).append(Listed(url, lastmod, kind, parent))
    validators = {url: {"etag": etag, "last_modified": lm}
                  for url, etag, lm in files.iter_rows()}
    return Previous(validators, by_parent), names


def _write(folder: Path, result: Walk, old_names: list[str]) -> None:
    rows = [(e.url, e.lastmod, e.kind, e.parent)
            for url in sorted(result.entries) for e in result.entries[url]]
    entries = pl.DataFrame(rows, schema=ENTRY_SCHEMA, orient="row")
    files = pl.DataFrame([asdict(f) for f in result.files] or None, schema={
        "url": pl.Utf8, "root": pl.Utf8, "depth": pl.Int64, "status": pl.Utf8,
        "error": pl.Utf8, "entries": pl.Int64, "bytes": pl.Int64, "etag": pl.Utf8,
        "last_modified": pl.Utf8, "kept_previous": pl.Boolean})
    key = stage_key(FOLDER, rows, files.select("url", "etag", "last_modified").rows())
    names = {"entries": f"entries-{key}.parquet", "files": f"files-{key}.parquet"}
    write_parquet(entries, folder / names["entries"])
    write_parquet(files, folder / names["files"])
    write_text(folder / LATEST, json.dumps(names))
    for old in old_names:  # one writer per pack (the pack's lock): nobody reads them now
        if old not in names.values():
            (folder / old).unlink(missing_ok=True)
