"""What the Prefect UI shows about a build: progress bars, the build report, the per-URL
status table and a link to the published pack.

Rendering is pure (`report_markdown`, `sources_rows`) and testable without Prefect. The
functions that create artifacts do nothing outside a flow or task run (a stage core run
on its own, a unit test), so callers never need to check. Artifact keys hold only
lowercase letters, digits and dashes (Prefect's rule); `artifact_key` makes them.

Keys (one series per pack, so the Artifacts page shows each pack's history):
    progress-<pack>-<stage>   fetch / extract / embed progress, 0–100
    build-report-<pack>       the markdown build report
    sources-<pack>            one row per URL: status, HTTP status, error, change
    pack-<pack>               file:// link to the published pack folder
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import httpx

log = logging.getLogger("kpack.artifacts")

MAX_LISTED = 50  # failures / changed pages listed in the report before "... and N more"
# The per-URL table artifact travels in one Prefect event, and the server refuses events
# over 1.5 MB (a 5,183-URL table was 1.7 MB): it keeps failures and changes first and
# stops at this many rows or bytes, with a last row pointing at the manifest.
MAX_TABLE_ROWS = 500
MAX_TABLE_BYTES = 400_000
NO_CHANGES = "no changes"  # summary["status"] of a rebuild that found nothing new


def artifact_key(*parts: object) -> str:
    """`parts` joined by dashes, lowercased, anything else than [a-z0-9-] turned to '-'."""
    text = "-".join(str(p) for p in parts if p not in (None, "")).lower()
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9-]", "-", text)).strip("-") or "kpack"


def _run_ids() -> tuple[UUID | None, UUID | None] | None:
    """(flow_run_id, task_run_id) of the current run, or None outside any run."""
    from prefect.context import FlowRunContext, TaskRunContext

    task_ctx = TaskRunContext.get()
    flow_ctx = FlowRunContext.get()
    if task_ctx is not None:
        return task_ctx.task_run.flow_run_id, task_ctx.task_run.id
    if flow_ctx is not None and flow_ctx.flow_run is not None:
        return flow_ctx.flow_run.id, None
    return None


def in_run() -> bool:
    """True inside a Prefect flow or task run."""
    return _run_ids() is not None


# --- progress ---------------------------------------------------------------------------

# What a failed progress update may raise: the API unreachable or refusing (httpx), no
# API configured (ValueError), a client used after its loop closed (RuntimeError).
_API_ERRORS = (httpx.HTTPError, OSError, RuntimeError, ValueError)


class ProgressArtifact:
    """A `progress(done, total, *extra)` callback that keeps a Prefect progress artifact.

    The artifact is created on the first call and updated when progress has moved by at
    least `min_step` points AND `min_interval_s` has passed since the last update, plus a
    final update at done == total; so a loop of any length costs at most ~100/min_step
    API calls and at most one per `min_interval_s`. Run ids are taken when the object is
    made, so calls from helper threads or event loops still attach to the right run.

    Outside a run it does nothing. It never raises: progress is observability, and a
    failed update (API down) logs one warning and switches the bar off rather than
    failing the build.
    """

    def __init__(self, key: str, description: str = "", *, min_step: float = 2.0,
                 min_interval_s: float = 1.0, clock: Callable[[], float] = time.monotonic,
                 client=None) -> None:
        self.key, self.description = key, description
        self.min_step, self.min_interval_s, self.clock = min_step, min_interval_s, clock
        self._client = client
        self._ids = _run_ids()
        self.enabled = self._ids is not None
        self.artifact_id: UUID | None = None
        self.last_pct = -1.0
        self.last_at = float("-inf")
        self.updates = 0  # API calls made, for tests and curiosity

    def __call__(self, done: int, total: int, *_: object) -> None:
        if not self.enabled:
            return
        pct = 100.0 if total <= 0 else max(0.0, min(100.0, 100.0 * done / total))
        now = self.clock()
        first = self.artifact_id is None
        final = pct >= 100.0 and self.last_pct < 100.0
        due = (pct - self.last_pct >= self.min_step and now - self.last_at >= self.min_interval_s)
        if not (first or final or due):
            return
        try:
            self._send(pct)
        except _API_ERRORS as exc:
            self.enabled = False
            log.warning("progress artifact %s switched off: %s", self.key, exc)
            return
        self.last_pct, self.last_at = pct, now
        self.updates += 1

    def _send(self, pct: float) -> None:
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.actions import ArtifactCreate, ArtifactUpdate

        client = self._client or get_client(sync_client=True)
        if self.artifact_id is None:
            flow_run_id, task_run_id = self._ids
            created = client.create_artifact(ArtifactCreate(
                type="progress", key=self.key, description=self.description or None,
                data=pct, flow_run_id=flow_run_id, task_run_id=task_run_id,
            ))
            self.artifact_id = created.id
        else:
            client.update_artifact(self.artifact_id, ArtifactUpdate(data=pct))


def stage_progress(stage: str, pack: str) -> ProgressArtifact:
    """The progress bar of one stage of one pack (`progress-<pack>-<stage>`)."""
    return ProgressArtifact(artifact_key("progress", pack, stage),
                            description=f"{stage}: {pack}")


def chain(*callbacks: Callable[..., None] | None) -> Callable[..., None]:
    """One progress callback that calls each of `callbacks` (None entries are skipped)."""
    live = [cb for cb in callbacks if cb is not None]

    def progress(*args: object) -> None:
        for cb in live:
            cb(*args)

    return progress


# --- the build report (pure) --------------------------------------------------------------


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
    partial_reasons, seconds, counts, changes (packs.diff shape), sources (manifest
    records) or failed_sources, extractor, extract_stats (tokens, cache hits, cost_usd),
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
    lines += _sources_section(summary)
    lines += _extract_section(summary)
    lines += _embed_section(summary)
    durations = summary.get("durations") or {}
    if durations:
        lines += ["## Durations", ""]
        lines += _table(["stage", "seconds"], [[k, f"{float(v):.2f}"] for k, v in durations.items()])
    if summary.get("build_dir"):
        lines += [f"Published at `{summary['build_dir']}`", ""]
    return "\n".join(lines).rstrip() + "\n"


def sources_rows(sources: list[dict], changes: dict | None = None) -> list[dict]:
    """One table row per URL: url, status, http_status, change, error, content_hash (short).

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
        rows.append({"url": url, "status": s.get("status"), "http_status": s.get("http_status"),
                     "change": change, "error": s.get("error") or "",
                     "content_hash": (s.get("content_hash") or "")[:12]})
    for url in changes.get("pages_removed") or ():
        rows.append({"url": url, "status": "removed", "http_status": None, "change": "removed",
                     "error": "", "content_hash": ""})
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
        kept.append({"url": f"... and {len(rows) - len(kept)} more URLs: see manifest.json "
                            "sources (kpack inspect PACK)", "status": "", "http_status": None,
                     "change": "", "error": "", "content_hash": ""})
    return kept


# --- creating the artifacts ----------------------------------------------------------------


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
        })
    return {**merged, **{k: v for k, v in summary.items() if v is not None}}


def publish_report(summary: dict) -> dict[str, UUID] | None:
    """Create the build report (markdown), the per-URL table and the link to the pack as
    artifacts of the current run. Returns {"report", "sources", "link"} → artifact ids,
    or None outside a run. Reads the manifest of summary["build_dir"] for the sources.
    API errors propagate (the caller is a flow run, which needs the API anyway)."""
    if not in_run():
        return None
    from prefect.artifacts import (
        create_link_artifact,
        create_markdown_artifact,
        create_table_artifact,
    )

    full = with_manifest(summary)
    name = Path(str(full.get("pack") or "pack")).name
    build_id = full.get("build_id") or ""
    ids = {"report": create_markdown_artifact(
        markdown=report_markdown(full), key=artifact_key("build-report", name),
        description=f"Build report of {name} {build_id}".strip())}
    if full.get("sources") is not None:
        ids["sources"] = create_table_artifact(
            table=capped_rows(sources_rows(full["sources"], full.get("changes"))),
            key=artifact_key("sources", name),
            description=f"Per-URL fetch status of {name} {build_id}".strip())
    if full.get("pack"):
        ids["link"] = create_link_artifact(
            link=Path(full["pack"]).resolve().as_uri(), key=artifact_key("pack", name),
            link_text=f"{name} (build {build_id})",
            description=f"The published pack folder of {name}; apps open it with "
                        "KnowledgePack.open")
    return ids
