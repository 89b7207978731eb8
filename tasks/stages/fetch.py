"""fetch (per shard): the shard's URLs → pages-<key>.parquet.

A page whose sitemap lastmod is unchanged on a trusted host is not requested at all
(tasks.fetch.freshness: its previous row is kept, status "not_modified"); URLs the last
build fetched are asked for conditionally (their ETag / Last-Modified come from the
shard's previous output); a 304 keeps the previous text. Each page's outcome (skipped,
304, unchanged, changed, new, failed) is in its row and counted in the record, with the
lastmod evidence of its host. The key hashes what the pages hold, not how they were
fetched, so an unchanged site gives unchanged keys all the way down and a rebuild does
nothing.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from datetime import UTC, datetime

import polars as pl

from tasks.fetch import freshness
from tasks.fetch import pages as fetch_core
from tasks.shards import Shard
from tasks.stages.base import Stage
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
# v2: Markdown loses empty anchors (<a id="old"></a>) before its first heading; v3: an HTML
# definition list keeps each term with its definition, and loses its empty anchors; v4 (issue
# 47): a page served as an HTML fragment is read as a document's main content (keeps its
# headings); v4 (issue 51): an HTML heading's link to another page counts among the page's
# links (LINKS_TO), and every line of a block of Markdown link reference definitions does;
# v5: both (each branch had called its own change v4); v6: an RFC or Internet-Draft rendered
# as one <pre> keeps its <span class="h2"> headings and loses its page footers and running
# headers, a MediaWiki heading loses its "[edit]", and a reStructuredText page (.rst; it was
# plain text) or an AsciiDoc page (.adoc; refused as a local file) is read for its sections;
# v7: an HTML heading whose permalink is an icon (<a href="#x"><svg/></a>, before its text
# or beside it in its wrapper <div>) keeps its text; v8: a code block whose lines are link
# targets (MkDocs Material's anchored line numbers) is kept (it was dropped whole); v9: a
# <meta> charset yields to bytes that are UTF-8 holding non-ASCII text (a page saved as UTF-8);
# v10: an HTML table holding a heading is read as blocks, not rows; a page that came out with
# no heading (trafilatura found no content frame) is read again with the element holding its
# headings marked as its <article>; v11: a formula (MathML, in Wikipedia's, KaTeX's or MathJax's
# box) is read as linear text ("x^2", "a_(ij)") instead of being dropped; v12: a <title> whose
# part before " - " is one word and its rest longer ("Google - Site Reliability Engineering")
# is the title whole, not its brand alone; v13: rustdoc's items keep their headings (a summary
# gives way to the heading it holds, a "§" beside a heading goes, a signature heading shows
# its links' text), a <pre> of several <code> tabs is one code block each, a one-line code
# block stays a block, and a page opening with the site's name is titled by its own part;
# v14: a section's id made from its heading ("editing-and-navigation") goes, so that
# trafilatura does not drop the section as navigation; v15: Markdown callouts and tabs (MkDocs
# Material's "!!! note", '=== "Tab"', Docusaurus's ":::tip") are written as plain Markdown;
# v16: an .mdx page is Markdown, its import and one-line export statements dropped; v17: v12
# undone (it titled the Cargo book's "FAQ - The Cargo Book" whole); v18: an HTML link whose
# text is code ("[`map`](enum.Option.html#method.map)") is resolved and counted; v19: an XHTML
# page opening with an XML declaration is read (it came out empty), a page whose headings sit
# straight in its <body> is read again with that content as its article (gtk-doc, DocBook), a
# C "# define" in a code block is no heading, and a <pre> whose class says code
# ("programlisting") is one code block even with links and inline <code> in it; v20: a code
# block in a list item keeps its fences on lines of their own (the fence after the item's
# text made the rest of the page one code block), and inline code broken across lines in
# the source stays inline; v21: a page read again with its <body>'s content as its article is
# kept however many more words that reading has (GCC's release notes had lost 2,500 of 4,300),
# and a one-cell table holding a code block (DocBook's box) is read as blocks; v22: MediaWiki's
# "Jump to navigation" and "Jump to search" links go; v23: a <pre> without links is its text in
# one code block, its inline markup (texinfo's <var>) no longer breaking it into inline code;
# v24: a heading broken across source lines or by <br> is one line (DocBook's "3. Programming");
# v25: a body with no type and no extension is sniffed as HTML after an XML declaration too
VERSION = "fetch-v25"
PAGE_COLUMNS = {
    "url": pl.Utf8, "status": pl.Utf8, "http_status": pl.Int64, "final_url": pl.Utf8,
    "content_type": pl.Utf8, "etag": pl.Utf8, "last_modified": pl.Utf8,
    "content_hash": pl.Utf8, "error": pl.Utf8, "title": pl.Utf8, "text": pl.Utf8,
    "links": pl.List(pl.Utf8), "fetched_at": pl.Utf8,
    # the page's sitemap <lastmod> this build (null when it has none) and its outcome
    "lastmod": pl.Utf8, "outcome": pl.Utf8,
}
TOP_REASONS = 5  # failure reasons a record carries (counted); the rest is in the table


def shard_plan(shard: Shard) -> list[tuple[str, str | None]]:
    """(url, sitemap lastmod or None) per line of the shard's plan file (`url[\tlastmod]`)."""
    out: list[tuple[str, str | None]] = []
    with open(shard.plan, encoding="utf-8") as f:
        for line in f:
            url, _, lastmod = line.rstrip("\n").partition("\t")
            if url.strip():
                out.append((url, lastmod or None))
    return out


def shard_urls(shard: Shard) -> list[str]:
    return [url for url, _ in shard_plan(shard)]


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


def fetch_reasons(records: list[Record]) -> str:
    """The three commonest reasons pages were not usable, for a build that fetched none."""
    reasons: Counter = Counter()
    for r in records:
        reasons.update(r.info.get("reasons", {}))
    top = sorted(reasons.items(), key=lambda kv: -kv[1])[:3]
    return "; ".join(f"{n} × {reason}" for reason, n in top) or "no reason recorded"


def _page_rows(ctx: BuildContext, shard: Shard, progress: ProgressFn | None
               ) -> tuple[pl.DataFrame, freshness.Evidence]:
    """One row per URL of the shard's plan (PAGE_COLUMNS), and its hosts' lastmod evidence."""
    plan = shard_plan(shard)
    lastmods = dict(plan)
    previous = _previous_pages(shard, set(lastmods))
    now = datetime.now(UTC)
    skip = {url for url, lastmod in plan if freshness.should_skip(
        url, lastmod, previous.get(url), ctx.skip, build_id=ctx.build_id, now=now)}
    to_fetch = [url for url, _ in plan if url not in skip]
    log.info("fetch %s: %d URLs (%d known from the last build, %d skipped by lastmod)",
             shard.label, len(plan), len(previous), len(skip))
    fetched = {page.url: page for page in fetch_core.fetch_pages(
        to_fetch, ctx.fetch, previous=previous,
        progress=progress or LogProgress(f"fetch {shard.label}"))}
    evidence = freshness.Evidence()
    rows = []
    for url, lastmod in plan:
        old = previous.get(url)
        if url in skip:
            row = {col: old.get(col) for col in PAGE_COLUMNS}
            row.update(status="not_modified", http_status=None, error=None, lastmod=lastmod,
                       outcome="skipped_lastmod")
            rows.append(row)
            continue
        page = fetched[url]
        row = {col: getattr(page, col, None) for col in PAGE_COLUMNS}
        row.update(lastmod=lastmod, outcome=freshness.outcome(page.status, page.text, old))
        if page.status == "not_modified" and old is not None:
            row.update(text=old["text"], title=old["title"], links=old["links"],
                       content_hash=old["content_hash"])
        evidence.add(url, lastmod, old, row["outcome"])
        rows.append(row)
    return pl.DataFrame(rows, schema=PAGE_COLUMNS), evidence


class Fetch(Stage):
    NAME = NAME
    VERSION = VERSION
    OUTPUTS = {"pages": "pages"}
    LINEAGE = True
    ENDS_EARLY = True

    def window(self, ctx: BuildContext, shard_count: int) -> tuple[int, BuildContext]:
        """(fetch shards run at once, the context each runs with): the pack's global and
        per-host limits hold for the whole build, divided among the shards in flight."""
        config = ctx.fetch
        n = 1 if config.per_host_delay_s > 0 else max(1, min(shard_count,
                                                             config.per_host_concurrency))
        return n, dataclasses.replace(ctx, fetch=dataclasses.replace(
            config, concurrency=max(1, config.concurrency // n),
            per_host_concurrency=max(1, config.per_host_concurrency // n)))

    def key(self, ctx: BuildContext, shard: Shard | None, inputs: dict) -> None:
        """None: a fetch's key is known only after fetching (it hashes the content)."""
        return None

    def facts(self, records: list[Record]) -> dict[str, int]:
        return {"pages": sum(r.rows.get("usable", 0) for r in records)}

    def stop_reason(self, records: list[Record]) -> str | None:
        if sum(r.rows["usable"] for r in records):
            return None
        urls = sum(r.rows["pages"] for r in records)
        return f"none of the {urls} URLs could be fetched ({fetch_reasons(records)})"

    def run(self, ctx: BuildContext, shard: Shard | None, inputs: dict,
            progress: ProgressFn | None = None) -> Record:
        """Fetch the shard's URLs and write them under the key of what they hold."""
        start = time.perf_counter()
        df, evidence = _page_rows(ctx, shard, progress)
        usable_status = (pl.when(pl.col("text").is_not_null()).then(pl.lit("text"))
                         .otherwise("status"))
        content_key = stage_key(NAME, self.VERSION, df.select(
            "url", usable_status.alias("s"), "content_hash", "final_url").rows())
        files = self.paths(ctx, content_key)
        write_parquet(df, files["pages"])
        usable = df.filter(pl.col("text").is_not_null()).height
        statuses = dict(Counter(df["status"].to_list()))
        outcomes = dict(Counter(df["outcome"].to_list()))
        failed = df.filter(pl.col("text").is_null() & (pl.col("status") != "not_modified"))
        reasons = Counter(reason_of(e) for e in failed["error"].to_list())
        log.info("fetch %s: done, %s", shard.label,
                 ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))
        return Record(
            NAME, content_key, shard.index, files, {"pages": df.height, "usable": usable},
            time.perf_counter() - start,
            info={"status_counts": statuses, "reasons": dict(reasons.most_common(TOP_REASONS)),
                  "outcomes": outcomes, "lastmod_evidence": evidence.hosts},
        )


STAGE = Fetch()
