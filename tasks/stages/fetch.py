"""fetch (per shard): the shard's URLs → pages-<key>.parquet.

URLs the last build fetched are asked for conditionally (their ETag / Last-Modified come
from the shard's previous output); a 304 keeps the previous text. The key hashes what the
pages hold, not how they were fetched, so an unchanged site gives unchanged keys all the
way down and a rebuild does nothing.
"""

from __future__ import annotations

import time
from collections import Counter

import polars as pl

from tasks.fetch import pages as fetch_core
from tasks.shards import Shard
from tasks.stages.common import (
    BuildContext,
    LogProgress,
    ProgressFn,
    Record,
    log,
    stage_key,
    write_parquet,
)

NAME = "fetch"
VERSION = "fetch-v2"  # v2: Markdown loses empty anchors (<a id="old"></a>) before its first heading
SCOPE = "shard"
INPUTS: tuple[str, ...] = ()
RETRIES = 1

PAGE_COLUMNS = {
    "url": pl.Utf8, "status": pl.Utf8, "http_status": pl.Int64, "final_url": pl.Utf8,
    "content_type": pl.Utf8, "etag": pl.Utf8, "last_modified": pl.Utf8,
    "content_hash": pl.Utf8, "error": pl.Utf8, "title": pl.Utf8, "text": pl.Utf8,
    "links": pl.List(pl.Utf8), "fetched_at": pl.Utf8,
}
TOP_REASONS = 5  # failure reasons a record carries (counted); the rest is in the table


def settings(ctx: BuildContext) -> tuple:
    return (VERSION,)


def key(ctx: BuildContext, shard: Shard | None, inputs: dict) -> str | None:
    """None: a fetch's key is known only after fetching (it hashes the content)."""
    return None


def shard_urls(shard: Shard) -> list[str]:
    with open(shard.plan, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def _previous_pages(shard: Shard, urls: set[str]) -> dict[str, dict]:
    previous: dict[str, dict] = {}
    for path in shard.previous_outputs(NAME):
        df = pl.read_parquet(path).filter(pl.col("text").is_not_null()
                                          & pl.col("url").is_in(list(urls)))
        for row in df.iter_rows(named=True):
            previous[row["url"]] = row
    return previous


def reason_of(error: str | None) -> str:
    """A failure reason without the URL-specific tail, so that reasons can be counted."""
    return (error or "unknown").split(":")[0].strip()[:120]


def run(ctx: BuildContext, shard: Shard | None, inputs: dict,
        progress: ProgressFn | None = None) -> Record:
    start = time.perf_counter()
    urls = shard_urls(shard)
    previous = _previous_pages(shard, set(urls))
    log.info("fetch %s: %d URLs (%d known from the last build)", shard.label, len(urls),
             len(previous))
    pages = fetch_core.fetch_pages(urls, ctx.fetch, previous=previous,
                                   progress=progress or LogProgress(f"fetch {shard.label}"))
    rows = []
    for page in pages:
        row = {col: getattr(page, col) for col in PAGE_COLUMNS}
        if page.status == "not_modified" and page.url in previous:
            old = previous[page.url]
            row.update(text=old["text"], title=old["title"], links=old["links"],
                       content_hash=old["content_hash"])
        rows.append(row)
    df = pl.DataFrame(rows, schema=PAGE_COLUMNS)
    usable_status = pl.when(pl.col("text").is_not_null()).then(pl.lit("text")).otherwise("status")
    content_key = stage_key(NAME, VERSION, df.select(
        "url", usable_status.alias("s"), "content_hash", "final_url").rows())
    out = ctx.work.stage(NAME) / f"pages-{content_key}.parquet"
    write_parquet(df, out)
    usable = df.filter(pl.col("text").is_not_null()).height
    statuses = dict(Counter(df["status"].to_list()))
    failed = df.filter(pl.col("text").is_null() & (pl.col("status") != "not_modified"))
    reasons = Counter(reason_of(e) for e in failed["error"].to_list())
    log.info("fetch %s: done, %s", shard.label,
             ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))
    return Record(
        NAME, content_key, shard.index, {"pages": str(out)},
        {"pages": df.height, "usable": usable}, time.perf_counter() - start,
        info={"status_counts": statuses, "reasons": dict(reasons.most_common(TOP_REASONS))},
    )
