"""The build report as Markdown and the per-URL table as rows: pure rendering of a build
summary (what `build_pack` returns, plus its manifest), testable without Prefect.
`flows.artifacts` publishes them to the Prefect UI.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

MAX_LISTED = 50  # failures / changed pages listed in the report before "... and N more"
# The per-URL table artifact travels in one Prefect event, and the server refuses events
# over 1.5 MB (a 5,183-URL table was 1.7 MB): it keeps failures and changes first and
# stops at this many rows or bytes, with a last row pointing at the manifest.
MAX_TABLE_ROWS = 500
MAX_TABLE_BYTES = 400_000
NO_CHANGES = "no changes"  # summary["status"] of a rebuild that found nothing new


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines + [""]


def _more(items: list, shown: int, total: int | None = None) -> list[str]:
    total = max(total or 0, len(items))
    return [f"... and {total - shown} more", ""] if total > shown else []


def _num(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _changes_section(changes: dict) -> list[str]:
    lines = ["## What changed", ""]
    rows = []
    for what in ("pages", "sections", "entities"):
        c = changes.get(what)
        if isinstance(c, dict):
            rows.append([what, *(c.get(k, "") for k in ("added", "changed", "removed",
                                                        "unchanged"))])
    if rows:
        lines += _table(["", "added", "changed", "removed", "unchanged"], rows)
    for key, label in (("pages_added", "Pages added"), ("pages_changed", "Pages changed"),
                       ("pages_removed", "Pages removed")):
        urls = changes.get(key) or []
        if urls:
            lines += [f"{label}:", ""] + [f"- {u}" for u in urls[:MAX_LISTED]] + [""]
            lines += _more(urls, MAX_LISTED)
    return lines if len(lines) > 2 else []


FRESHNESS_COLUMNS = (("skipped_lastmod", "skipped by lastmod"), ("not_modified", "304"),
                     ("unchanged", "unchanged by hash"), ("changed", "changed"),
                     ("new", "new"), ("removed", "removed"), ("failed", "failed"))


def _freshness_section(fresh: dict) -> list[str]:
    """Per-page outcomes, the sitemaps read and each host's lastmod verdict."""
    pages = fresh.get("pages") or {}
    if not pages:
        return []
    lines = ["## Freshness", ""]
    lines += _table([label for _, label in FRESHNESS_COLUMNS],
                    [[_num(int(pages.get(k, 0))) for k, _ in FRESHNESS_COLUMNS]])
    maps = fresh.get("sitemaps") or {}
    if maps:
        lines += [f"Sitemaps: {_num(maps.get('files', 0))} files read ("
                  f"{_num(maps.get('not_modified', 0))} not modified, "
                  f"{_num(maps.get('failed', 0))} failed, {_num(maps.get('bytes', 0))} bytes "
                  f"downloaded); {_num(maps.get('listed', 0))} pages listed, "
                  f"{_num(maps.get('pages', 0))} kept ({_num(maps.get('filtered_out', 0))} "
                  f"filtered out, {_num(maps.get('duplicates', 0))} duplicates, "
                  f"{_num(maps.get('over_cap', 0))} over max_urls).", ""]
        failures = maps.get("failures") or []
        if failures:
            lines += _table(["sitemap", "reason"], [[f.get("url"), f.get("error")]
                                                    for f in failures[:MAX_LISTED]])
            lines += _more(failures, MAX_LISTED, maps.get("failures_total"))
    hosts = fresh.get("lastmod_hosts") or {}
    if hosts:
        lines += [f"Sitemap lastmod (trust_lastmod = {fresh.get('trust_lastmod', 'auto')}):",
                  ""]
        lines += _table(["host", "skipped by it", "next build", "why"], [
            [host, "yes" if h.get("trusted") else "no",
             "trusted" if h.get("verdict") else "not trusted", h.get("reason")]
            for host, h in hosts.items()])
    return lines


def _sources_section(summary: dict) -> list[str]:
    sources = summary.get("sources")
    failed = summary.get("failed_sources")
    if failed is None and sources is not None:
        failed = [s for s in sources if s.get("status") not in ("ok", "not_modified")]
    lines = ["## Sources", ""]
    if sources:
        counts = Counter(s.get("status") for s in sources)
        lines += [f"{len(sources)} URLs: " + ", ".join(
            f"{n} {status}" for status, n in sorted(counts.items(), key=lambda kv: -kv[1])), ""]
    if failed:
        total = max(len(failed), summary.get("failed_sources_total") or 0)
        lines += [f"**{total} URLs not included:**", ""]
        lines += _table(["URL", "status", "HTTP", "reason"], [
            [s.get("url"), s.get("status"), s.get("http_status"), s.get("error")]
            for s in failed[:MAX_LISTED]])
        lines += _more(failed, MAX_LISTED, total)
    elif sources is not None or failed is not None:
        lines += ["Every URL was fetched.", ""]
    return lines if len(lines) > 2 else []


def _extract_section(summary: dict) -> list[str]:
    stats = summary.get("extract_stats") or {}
    failures = summary.get("extract_failures") or []
    extractor = summary.get("extractor") or {}
    if not stats and not failures:
        return []
    lines = ["## Extraction", ""]
    kind = extractor.get("kind") or stats.get("extractor", {}).get("kind", "")
    model = extractor.get("model") or ""
    lines += [f"Extractor: {kind} {model}".rstrip(), ""]
    always = ("sections", "calls", "cache_hits")  # the rest only when not zero
    rows = [[label, _num(stats[key])] for key, label in (
        ("sections", "sections"), ("calls", "API calls"),
        ("batched_calls", "calls carrying several sections"),
        ("batched_sections", "sections sent in those"), ("retries", "retries"),
        ("repairs", "repair rounds"), ("cache_hits", "cache hits"),
        ("cache_misses", "cache misses"), ("failed", "failed"),
        ("failed_deterministic", "failed: unusable answer or refused request"),
        ("failed_transient", "failed: API errors (asked again next build)"),
        ("failed_remembered", "failed earlier, not asked again"),
        ("not_extracted", "not extracted (cost cap)"),
        ("dropped_items", "invalid items dropped (this build's answers)"),
        ("input_tokens", "input tokens"), ("output_tokens", "output tokens"),
        ("cache_read_input_tokens", "cache-read input tokens"),
        ("cache_creation_input_tokens", "cache-write input tokens"),
    ) if key in stats and (key in always or stats[key])]
    if "cost_usd" in stats:
        cost = f"${float(stats['cost_usd']):.4f}"
        if stats.get("estimated"):
            cost += " (model not in the price table: priced at the top rate)"
        if "estimate_usd" in stats:
            cost += f" (estimated before the calls: ${float(stats['estimate_usd']):.4f})"
        rows.append(["cost", cost])
    if stats.get("pages") and "usd_per_100_pages" in stats:
        rows.append(["$ per 100 pages", f"${stats['usd_per_100_pages']:.4f} actual, "
                     f"${stats.get('usd_per_100_pages_estimate', 0.0):.4f} estimated "
                     f"({_num(stats['pages'])} pages)"])
    if rows:
        lines += _table(["", "value"], rows)
    lines += shard_lines(stats.get("by_shard") or [])
    dropped = stats.get("dropped") or {}
    if dropped:
        lines += ["Invalid items dropped from otherwise usable answers, by reason:", ""]
        lines += _table(["reason", "items"], [[r, _num(n)] for r, n in
                                              sorted(dropped.items(), key=lambda kv: -kv[1])])
    if failures:
        total = max(len(failures), summary.get("extract_failures_total") or 0)
        lines += [f"**{total} sections failed extraction:**", ""]
        lines += _table(["section", "status", "reason"], [
            [f.get("section_id"), f.get("status", "failed"), f.get("reason")]
            for f in failures[:MAX_LISTED]])
        lines += _more(failures, MAX_LISTED, total)
    return lines


SHARD_HEADER = ["shard", "sections", "API calls", "cache hits", "input tokens",
                "output tokens", "cost"]


def shard_row(row: dict) -> list[str]:
    """One extract shard's cells (extract_by_shard's row), in SHARD_HEADER's order."""
    cost = f"${float(row.get('cost_usd', 0.0)):.4f}"
    if row.get("reused"):
        cost += " (output reused)"
    return [str(row.get("shard", "")), *(_num(row.get(k, 0)) for k in (
        "sections", "calls", "cache_hits", "input_tokens", "output_tokens")), cost]


def shard_lines(by_shard: list[dict]) -> list[str]:
    """The per-shard calls and cost, costliest first (at most MAX_LISTED rows)."""
    if not by_shard:
        return []
    ranked = sorted(by_shard, key=lambda r: (-float(r.get("cost_usd", 0.0)),
                                             -int(r.get("calls", 0))))
    lines = ["Calls and cost per shard (costliest first):", ""]
    lines += _table(SHARD_HEADER, [shard_row(r) for r in ranked[:MAX_LISTED]])
    return lines + _more(ranked, MAX_LISTED)


def _embed_section(summary: dict) -> list[str]:
    stats = summary.get("embed_stats") or {}
    model = summary.get("embedding_model")
    if not stats and not model:
        return []
    lines = ["## Embedding", ""]
    if model:
        lines += [f"Model: {model}", ""]
    if stats:
        parts = [f"{_num(stats.get('computed', 0))} sections encoded",
                 f"{_num(stats.get('cached', 0))} from cache"]
        if stats.get("reused_stage_output"):
            parts.append("stage output reused")
        lines += [", ".join(parts), ""]
    return lines


def report_markdown(summary: dict) -> str:
    """The markdown build report of a build summary (what `build_pack` returns).

    Uses, when present: pack, build_id, status ("published" / "no changes"), partial and
    partial_reasons, seconds, counts, changes (packs.diff shape), freshness (manifest
    shape: page outcomes, sitemaps, lastmod verdicts), sources (manifest records) or
    failed_sources, extractor, extract_stats (tokens, cache hits, cost_usd),
    extract_failures ({section_id, reason}), embedding_model, embed_stats, durations.
    Missing keys leave their section out; never raises on a partial summary.
    """
    name = Path(str(summary.get("pack") or "pack")).name
    build_id = summary.get("build_id") or "?"
    status = summary.get("status") or "published"
    if summary.get("partial"):
        status += " (PARTIAL)"
    took = f" · **{summary['seconds']} s**" if summary.get("seconds") is not None else ""
    if status == NO_CHANGES:
        head = f"**No changes**: the published build `{build_id}` stays current{took}"
    else:
        head = f"**Build** `{build_id}` · **status** {status}{took}"
    lines = [f"# Build report: {name}", "", head, ""]
    for reason in summary.get("partial_reasons") or []:
        lines += [f"- partial: {reason}"]
    if summary.get("partial_reasons"):
        lines += [""]
    counts = summary.get("counts") or {}
    if counts:
        lines += ["## Counts", ""] + _table(list(counts), [[_num(v) for v in counts.values()]])
    lines += _changes_section(summary.get("changes") or {})
    lines += _freshness_section(summary.get("freshness") or {})
    lines += _sources_section(summary)
    lines += _extract_section(summary)
    lines += _embed_section(summary)
    durations = summary.get("durations") or {}
    if durations:
        lines += ["## Durations", ""]
        lines += _table(["stage", "seconds"],
                        [[k, f"{float(v):.2f}"] for k, v in durations.items()])
    if summary.get("build_dir"):
        lines += [f"Published at `{summary['build_dir']}`", ""]
    return "\n".join(lines).rstrip() + "\n"


# The Prefect UI shows a table artifact in a column about 830 px wide at a 1400 px window
# and never wraps a cell: with the full URL first, every column past http_status was off
# screen (2026-11-27, Prefect 3.8.8 UI). So the short columns come first, the page is named
# by the tail of its path, long errors are cut (the manifest has them whole), and the full
# URL, a link, comes last.
PAGE_CHARS = 30
ERROR_CHARS = 32


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def page_name(url: str | None, limit: int = PAGE_CHARS) -> str:
    """The tail of a URL's path, at most `limit` characters: whole segments from the end,
    "…/" in front when some were left out (`https://h/docs/a/b/` → "docs/a/b/"); the host
    for a URL with no path."""
    from urllib.parse import unquote, urlsplit

    if not url:
        return ""
    parts = urlsplit(url)
    path = unquote(parts.path)
    segments = [seg for seg in path.split("/") if seg]
    if not segments:
        return _clip(parts.netloc or url, limit)
    name = "/".join(segments) + ("/" if path.endswith("/") else "")
    if len(name) <= limit:
        return name
    name = segments[-1] + ("/" if path.endswith("/") else "")
    if len(name) > limit - 2:  # one long segment: its end
        return "…" + name[-(limit - 1):]
    for seg in reversed(segments[:-1]):
        if len(seg) + 1 + len(name) > limit - 2:
            break
        name = f"{seg}/{name}"
    return "…/" + name


def _row(url, status, http, change, outcome, error, content_hash) -> dict:
    return {"page": page_name(url), "status": status, "http": http, "change": change,
            "outcome": outcome or "", "error": _clip(error or "", ERROR_CHARS),
            "hash": (content_hash or "")[:10], "url": url}


def sources_rows(sources: list[dict], changes: dict | None = None) -> list[dict]:
    """One table row per URL: page (the tail of its path), status, http (the HTTP status),
    change, outcome (what the rebuild did: skipped_lastmod, not_modified, changed, ...),
    error (cut to ERROR_CHARS), hash (content hash, short), url (whole, last).

    `change` is added / changed / unchanged from `changes` (packs.diff shape) when given;
    URLs removed since the previous build get a row of their own with status "removed".
    """
    changes = changes or {}
    added, changed = set(changes.get("pages_added") or ()), set(changes.get("pages_changed") or ())
    have_diff = bool(changes)
    counts = changes.get("pages") or {}
    # lists capped in the summary: a URL in neither list is "unchanged" only when both
    # lists are complete
    complete = (counts.get("added", len(added)) <= len(added)
                and counts.get("changed", len(changed)) <= len(changed))
    rows = []
    for s in sources:
        url = s.get("url")
        change = ""
        if have_diff and s.get("status") in ("ok", "not_modified"):
            change = "added" if url in added else "changed" if url in changed else \
                "unchanged" if complete else ""
        rows.append(_row(url, s.get("status"), s.get("http_status"), change, s.get("outcome"),
                         s.get("error"), s.get("content_hash")))
    for url in changes.get("pages_removed") or ():
        rows.append(_row(url, "removed", None, "removed", "removed", "", ""))
    return rows


def capped_rows(rows: list[dict], max_rows: int = MAX_TABLE_ROWS,
                max_bytes: int = MAX_TABLE_BYTES) -> list[dict]:
    """At most `max_rows` rows and about `max_bytes` of JSON: failed URLs first, then
    changed, added and removed ones, then the rest; a last row says how many were left
    out and where the full list is (manifest.json `sources`, `kpack inspect`)."""
    import json

    def rank(row: dict) -> int:
        if row.get("status") not in ("ok", "not_modified", "removed"):
            return 0
        return 1 if row.get("change") in ("changed", "added", "removed") else 2

    ordered = sorted(rows, key=rank)  # stable: urls.txt order within a rank
    kept: list[dict] = []
    size = 0
    for row in ordered:
        size += len(json.dumps(row, default=str)) + 2
        if len(kept) >= max_rows - 1 or size > max_bytes:
            break
        kept.append(row)
    if len(kept) < len(rows):
        more = _row(None, "", None, "", "", "", "")
        more["page"] = f"... and {len(rows) - len(kept)} more"
        more["url"] = (f"... and {len(rows) - len(kept)} more URLs: see manifest.json sources "
                       "(kpack inspect PACK)")
        kept.append(more)
    return kept


def with_manifest(summary: dict) -> dict:
    """`summary` plus what only the manifest holds (sources, partial_reasons, and, unless
    the run found no changes, the extract/embed stats when the summary lacks them), read
    from summary["build_dir"].
    Returns the summary unchanged when there is no readable manifest."""
    from packs.format import PackFormatError
    from packs.manifest import read_manifest

    build_dir = summary.get("build_dir")
    if not build_dir:
        return summary
    try:
        manifest = read_manifest(Path(build_dir))
    except PackFormatError:
        return summary
    extra = manifest.extra
    merged: dict = {"sources": [s.model_dump() for s in manifest.sources],
                    "partial_reasons": manifest.partial_reasons}
    if summary.get("status") != NO_CHANGES:
        # the stats of the build this run made; a no-change run made none (and its
        # manifest is the previous build's)
        merged.update({
            "extract_stats": extra.get("extract_stats") or {},
            "extract_failures": extra.get("extract_failures") or [],
            "embed_stats": extra.get("embed_stats") or {},
            "durations": manifest.durations,
            "freshness": manifest.freshness.model_dump() if manifest.freshness else None,
        })
    return {**merged, **{k: v for k, v in summary.items() if v is not None}}
