"""The events a build tells Prefect about its pack, which the automations of
flows/alerts.py turn into notifications.

Every build run that ends emits one event about its pack, whose resource is
`kpack.pack.<name>` (with the build id as `kpack.build-id`):

- `kpack.pack.published`: a build was published, clean;
- `kpack.pack.partial`: a build was published partial, or with more than
  `notify_failed_sources` of its sources failed;
- `kpack.pack.unchanged`: nothing changed since the published build (nothing published,
  the pack is confirmed current);
- `kpack.publish.refused`: the publish guard refused the build (the current build stays);
- `kpack.build.failed`: the build raised an error (nothing published);
- `kpack.pack.watched`: `kpack serve` started serving the pack (opens the stale window
  when no build succeeds afterwards).

A build whose process dies cannot say so: Prefect's own `prefect.flow-run.Crashed` does.
A failed build says so itself rather than leaving it to Prefect's `prefect.flow-run.Failed`:
in Prefect 3.8.8 the state events of a scheduled run that starts within 5 minutes of being
scheduled follow a Scheduled state that had no event (the scheduler inserts them in bulk),
and the triggers service holds such followers up to 15 minutes for their leader.

The payload carries what a message shows: the pack, the build, the reason in one line,
the counts, the flow run.
Emitted inside the flow run, each event is related to it (and to its flow, deployment and
tags) by Prefect. The payload builders are pure; `emit` sends.
"""

from __future__ import annotations

import logging

PACK_RESOURCE = "kpack.pack."
FAILED = "kpack.build.failed"
PUBLISHED = "kpack.pack.published"
PARTIAL = "kpack.pack.partial"
UNCHANGED = "kpack.pack.unchanged"
REFUSED = "kpack.publish.refused"
WATCHED = "kpack.pack.watched"
SUCCESS = (PUBLISHED, PARTIAL, UNCHANGED)  # a successful build: the pack is current
MAX_REASON_CHARS = 400
log = logging.getLogger("kpack.alerts")


def first_line(text: object, limit: int = MAX_REASON_CHARS) -> str:
    """`text`'s first line, cut to `limit` characters (messages carry one line)."""
    line = str(text or "").strip().split("\n", 1)[0].strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _counts(summary: dict) -> dict:
    counts = dict(summary.get("counts") or {})
    counts["failed_sources"] = int(summary.get("failed_sources_total") or 0)
    counts["sources"] = int(summary.get("sources_total")
                            or counts.get("articles", 0) + counts["failed_sources"])
    return counts


def outcome_event(pack: str, build_id: str, summary: dict,
                  failed_share_limit: float) -> tuple[str, dict]:
    """(event name, payload) for build `build_id`, which ended with `summary` (published,
    or no changes: then the summary names the current build). Partial: the pack is
    partial (manifest partial_reasons), or more than `failed_share_limit` of its sources
    failed."""
    counts = _counts(summary)
    if summary.get("status") == "no changes":
        return UNCHANGED, _payload(pack, build_id, "no changes",
                                   f"no changes since build {summary.get('build_id')}: "
                                   "nothing published", counts)
    reasons = list(summary.get("partial_reasons") or [])
    failed, total = counts["failed_sources"], counts["sources"]
    if total and failed / total > failed_share_limit:
        reasons.append(f"{failed} of {total} sources failed ({failed / total:.0%}, more than "
                       f"notify_failed_sources = {failed_share_limit:.0%})")
    if summary.get("partial") and not summary.get("partial_reasons"):
        reasons.append("the pack is partial")
    if reasons:
        return PARTIAL, _payload(pack, build_id, "partial",
                                 "published partial: " + "; ".join(reasons), counts)
    return PUBLISHED, _payload(pack, build_id, "published",
                               f"published build {build_id}", counts)


def failed_event(pack: str, build_id: str, exc: BaseException) -> tuple[str, dict]:
    """(event name, payload) for a build that raised `exc`."""
    return FAILED, _payload(pack, build_id, "failed", f"{type(exc).__name__}: {exc}", {})


def refused_event(pack: str, build_id: str, reason: object) -> tuple[str, dict]:
    """(event name, payload) for a build the publish guard refused; a GuardError `reason`
    brings the refused build's counts."""
    counts = dict(getattr(reason, "counts", None) or {})
    return REFUSED, _payload(pack, build_id, "refused", str(reason), counts)


def watched_event(pack: str, max_age_s: float, schedule: str) -> tuple[str, dict]:
    """(event name, payload) when `kpack serve` starts serving `pack`."""
    payload = _payload(pack, "", "watched",
                       f"kpack serve started serving {pack} ({schedule})", {})
    payload["max_age_s"] = max_age_s
    return WATCHED, payload


def _payload(pack: str, build_id: str, status: str, reason: str, counts: dict) -> dict:
    return {"pack": pack, "build_id": build_id, "status": status, "reason": first_line(reason),
            "counts": counts, "flow_run_id": _flow_run_id()}


def _flow_run_id() -> str:
    """The flow run this code runs in ("" outside one)."""
    from prefect.runtime import flow_run

    return str(flow_run.get_id() or "")


def emit(name: str, payload: dict) -> None:
    """Send the event about `payload["pack"]` to Prefect (through its events worker, which
    delivers it before the process ends). Emitting never fails a build: Prefect logs
    what it could not send."""
    from prefect.events import emit_event

    pack = payload["pack"]
    resource = {"prefect.resource.id": f"{PACK_RESOURCE}{pack}",
                "prefect.resource.name": pack}
    if payload.get("build_id"):
        resource["kpack.build-id"] = payload["build_id"]
    emit_event(event=name, resource=resource, payload=payload)
    log.info("%s: event %s", pack, name)
