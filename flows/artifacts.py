"""What the Prefect UI shows about a build: progress bars, the build report, the per-URL
status table and a link to the published pack.

Rendering is pure and lives in `flows.report` (`report_markdown`, `sources_rows`). The
functions that create artifacts do nothing outside a flow or task run (a stage core run
on its own, a unit test), so callers never need to check. Artifact keys hold only
lowercase letters, digits and dashes (Prefect's rule); `artifact_key` makes them.

Keys (one series per pack, so the Artifacts page shows each pack's history):
    progress-<pack>-<stage>   fetch / extract / embed progress, 0–100
    build-report-<pack>       the markdown build report
    sources-<pack>            one row per URL: status, HTTP status, error, change
    pack-<pack>               file:// link to the published pack folder

and, on each extract shard's task run (keyless), its Claude calls, tokens and cost.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import httpx

from flows.report import capped_rows, report_markdown, sources_rows, with_manifest

log = logging.getLogger("kpack.artifacts")

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


# --- per shard ------------------------------------------------------------------------------


def shard_cost_artifact(pack: str, shard, record) -> UUID | None:
    """A markdown artifact on the current task run (a shard of a stage that declares
    SHARD_ARTIFACT, e.g. extract's): its sections, API calls, cache hits, tokens and USD
    (the stage's `shard_row`). Returns its id; None outside a task run, for a shard with
    nothing to show (extract: no call made and no cached answer found, the offline
    extractor), or when the API refused it (logged: the report is observability and
    never fails the build)."""
    from prefect.context import TaskRunContext

    from flows.report import SHARD_HEADER, shard_row
    from tasks import stages

    stage = stages.get(record.stage)
    row = stage.shard_row(record, shard.count)
    if TaskRunContext.get() is None or row is None:
        return None
    from prefect.artifacts import create_markdown_artifact

    text = "\n".join([f"# {stage.NAME.capitalize()} shard {row['shard']} of {pack}", "",
                      "| " + " | ".join(SHARD_HEADER) + " |", "|" + "---|" * len(SHARD_HEADER),
                      "| " + " | ".join(shard_row(row)) + " |", ""])
    try:
        return create_markdown_artifact(
            markdown=text, description=f"{stage.SHARD_ARTIFACT} of {stage.NAME} shard "
                                       f"{row['shard']} of {pack}")
    except _API_ERRORS as exc:
        log.warning("%s shard %s: no artifact (%s)", stage.NAME, row["shard"], exc)
        return None


# --- publishing the report -----------------------------------------------------------------


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
