"""Alerts for scheduled rebuilds: Prefect notification blocks and automations that turn
the build's events into messages, installed when `kpack serve` starts.

Where to send (pack.toml `notify`, plus `kpack serve --notify` for every pack): each
target is a Prefect notification block, named by a hash of its URL (never the URL): a
Slack incoming webhook (hooks.slack.com) is a `SlackWebhook` block; any other URL a
`CustomWebhookNotificationBlock` that posts the message as one JSON object, with the URL
kept in the block's secrets, so the API and UI show it masked.

What is said (flows/alert_messages.py): one automation per pack and kind, named
`kpack <pack> <kind>`, each with one SendNotification action per target:

- failed: `kpack.build.failed`; refused: `kpack.publish.refused`; partial:
  `kpack.pack.partial` (flows/alert_events.py);
- crashed: Prefect's `prefect.flow-run.Crashed` of a run tagged `pack:<pack>`;
- stale (proactive): no `kpack.pack.published`, `partial` or `unchanged` within max_age
  of the last one, or of `kpack.pack.watched` (kpack serve started) when none came;
- published, unchanged: only when asked for (`notify_on`).

Reactive triggers fire once per event; the stale trigger fires once when its window ends
empty, and waits for the next success (or the next `kpack serve` start) to open another.
`install` creates or updates them idempotently: an automation whose definition is already
on the server is left alone (so an open stale window survives a restart of kpack serve),
a changed one is updated, and the kinds a pack no longer wants are deleted.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from urllib.parse import quote
from uuid import UUID

from flows import alert_events as ev
from flows import alert_messages as msg
from tasks.alert_config import (
    MAX_AGE_MAX_S,
    MAX_AGE_MIN_S,
    describe_target,
    is_slack,
    resolve_target,
)
from tasks.sources import SourceConfig

AUTOMATION_PREFIX = "kpack "
DEFAULT_EXPLORER = "http://127.0.0.1:8765/"  # kpack explore's default address
log = logging.getLogger("kpack.alerts")


@dataclass(frozen=True)
class Target:
    url: str  # the webhook URL itself: a secret, never logged or written
    shown: str  # how logs, files and pages name it (tasks.alert_config.describe_target)

    @property
    def slack(self) -> bool:
        return is_slack(self.url)

    @property
    def block_name(self) -> str:
        kind = "slack" if self.slack else "webhook"
        return f"kpack-{kind}-{hashlib.sha256(self.url.encode()).hexdigest()[:16]}"


@dataclass(frozen=True)
class PackAlerts:
    """What `kpack serve` watches of one pack and where it tells of it."""

    pack: str
    root: Path  # the pack folder, OUT/<pack>
    targets: tuple[Target, ...]
    opt_in: tuple[str, ...]  # kinds asked for in notify_on
    max_age_s: float
    schedule: str  # in words, for messages and `kpack status`

    @property
    def kinds(self) -> list[str]:
        if not self.targets:
            return []
        return [msg.FAILED, msg.CRASHED, msg.REFUSED, msg.PARTIAL, msg.STALE, *self.opt_in]

    def watch_record(self) -> dict:
        """What `<pack>/watch.json` holds (packs/layout.py): no URL, no secret."""
        return {"pack": self.pack, "max_age_s": self.max_age_s, "schedule": self.schedule,
                "targets": [{"shown": t.shown, "block": t.block_name} for t in self.targets],
                "kinds": self.kinds}


def default_max_age(cron: str, every: timedelta | None) -> float:
    """Twice the schedule's interval: twice `every`, or twice the longest gap between the
    cron's next 60 firings (a weekday cron waits 3 days over a weekend)."""
    if every is not None:
        gap = every.total_seconds()
    else:
        from prefect.server.schemas.schedules import CronSchedule
        from prefect.utilities.asyncutils import run_coro_as_sync

        dates = run_coro_as_sync(CronSchedule(cron=cron).get_dates(n=60))
        gap = max((b - a).total_seconds() for a, b in pairwise(dates))
    return min(max(2 * gap, MAX_AGE_MIN_S), MAX_AGE_MAX_S)


def plan(sources: Iterable[SourceConfig], out_dir: Path, serve_targets: Sequence[str] = (),
         every: timedelta | None = None,
         environ: dict[str, str] | None = None) -> list[PackAlerts]:
    """Each source's alerts: its pack.toml `notify` plus `serve_targets` (kpack serve
    --notify), each `env:NAME` read now (TargetError names an unset variable), duplicates
    dropped; its max_age from pack.toml or `default_max_age`."""
    plans = []
    for source in sources:
        cfg = source.config
        seen: dict[str, Target] = {}
        for written in [*cfg.notify, *serve_targets]:
            url = resolve_target(written, environ)
            seen.setdefault(url, Target(url=url, shown=describe_target(
                written if written.startswith("env:") else url)))
        schedule = (f"every {msg.duration_words(every.total_seconds())}" if every
                    else f"cron {cfg.schedule}")
        max_age = cfg.max_age or default_max_age(cfg.schedule, every)
        plans.append(PackAlerts(pack=source.name, root=Path(out_dir) / source.name,
                                targets=tuple(seen.values()),
                                opt_in=tuple(dict.fromkeys(cfg.notify_on)),
                                max_age_s=max_age, schedule=schedule))
    return plans


def block_for(target: Target):
    """The Prefect notification block for `target` (not saved)."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock, SlackWebhook

    if target.slack:
        return SlackWebhook(url=target.url, notify_type="failure")
    # The URL is a secret value substituted into the request, so the block's own fields
    # (shown by the API and the UI) hold no part of it; the body is the JSON message.
    return CustomWebhookNotificationBlock(
        name=target.shown, url="{{kpack_url}}", method="POST", form_data="{{body}}",
        headers={"Content-Type": "application/json"}, secrets={"kpack_url": target.url},
        timeout=10)


def _trigger(kind: str, pack: str, max_age_s: float):
    from prefect.events.schemas.automations import EventTrigger, Posture

    resource = {"prefect.resource.id": f"{ev.PACK_RESOURCE}{pack}"}
    if kind == msg.CRASHED:
        return EventTrigger(
            expect={msg.RUN_CRASHED}, match={"prefect.resource.id": "prefect.flow-run.*"},
            match_related={"prefect.resource.id": f"prefect.tag.pack:{pack}",
                           "prefect.resource.role": "tag"},
            posture=Posture.Reactive, threshold=1, within=timedelta(0))
    if kind == msg.STALE:
        return EventTrigger(
            after={*ev.SUCCESS, ev.WATCHED}, expect=set(ev.SUCCESS), match=resource,
            for_each={"prefect.resource.id"}, posture=Posture.Proactive, threshold=1,
            within=timedelta(seconds=max_age_s))
    expect = {msg.FAILED: ev.FAILED, msg.REFUSED: ev.REFUSED, msg.PARTIAL: ev.PARTIAL,
              msg.PUBLISHED: ev.PUBLISHED, msg.UNCHANGED: ev.UNCHANGED}[kind]
    return EventTrigger(expect={expect}, match=resource, posture=Posture.Reactive,
                        threshold=1, within=timedelta(0))


def automations(plan: PackAlerts, blocks: dict[str, UUID], *, ui: str,
                explorer_url: str = DEFAULT_EXPLORER) -> list:
    """The AutomationCore of each kind `plan` alerts on; `blocks` maps each target's block
    name to its block document id."""
    from prefect.events.actions import SendNotification
    from prefect.events.schemas.automations import AutomationCore

    builds_url = builds_link(explorer_url, plan.pack)
    out = []
    for kind in plan.kinds:
        actions = []
        for target in plan.targets:
            body = msg.slack_body if target.slack else msg.json_body
            actions.append(SendNotification(
                block_document_id=blocks[target.block_name],
                subject=msg.subject(kind, plan.pack),
                body=body(kind, plan.pack, ui=ui, builds_url=builds_url,
                          max_age_s=plan.max_age_s)))
        when = (f"no build of {plan.pack} succeeds within max_age "
                f"{msg.duration_words(plan.max_age_s)} ({plan.schedule})" if kind == msg.STALE
                else f"a build of {plan.pack} is {kind}")
        out.append(AutomationCore(
            name=f"{AUTOMATION_PREFIX}{plan.pack} {kind}",
            description=f"kpack serve: tell {', '.join(t.shown for t in plan.targets)} when "
                        f"{when}",
            tags=["kpack", f"pack:{plan.pack}"], trigger=_trigger(kind, plan.pack,
                                                                  plan.max_age_s),
            actions=actions))
    return out


def builds_link(explorer_url: str, pack: str) -> str:
    """The explorer's builds page of `pack` (braces encoded: it is baked into a template)."""
    base = explorer_url.rstrip("/").replace("{", "%7B").replace("}", "%7D")
    return f"{base}/builds?pack={quote(pack)}"


def fingerprint(automation) -> str:
    """An automation's definition as comparable text (ids and set order left out)."""
    from prefect.events.schemas.automations import AutomationCore

    def norm(value):
        if isinstance(value, dict):
            return {k: norm(v) for k, v in value.items()}
        if isinstance(value, list):
            items = [norm(v) for v in value]
            return items if any(isinstance(v, dict) for v in items) else sorted(items, key=str)
        return value

    core = AutomationCore.model_validate(automation.model_dump(exclude={"id"}))
    return json.dumps(norm(core.model_dump(mode="json")), sort_keys=True)


def install(plans: Sequence[PackAlerts], *, explorer_url: str = DEFAULT_EXPLORER,
            out: Callable[[str], object] = log.info) -> dict[str, str]:
    """Save the targets' blocks and create, update or delete the packs' automations on the
    Prefect server the environment names; `out` gets one line per pack. Returns
    automation name → what was done ("created", "updated", "unchanged", "deleted")."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_UI_URL

    ui = str(PREFECT_UI_URL.value() or "")
    blocks: dict[str, UUID] = {}
    for target in {t.block_name: t for p in plans for t in p.targets}.values():
        # _sync: Block.save dispatches on context and returns a coroutine in a thread where a
        # run context or an event loop is current (seen under pytest-xdist); install is sync.
        blocks[target.block_name] = block_for(target).save(target.block_name, overwrite=True,
                                                           _sync=True)
    done: dict[str, str] = {}
    with get_client(sync_client=True) as client:
        ours = {a.name: a for a in client.read_automations()
                if a.name.startswith(AUTOMATION_PREFIX)}
        for p in plans:
            wanted = {a.name: a for a in automations(p, blocks, ui=ui, explorer_url=explorer_url)}
            for name, automation in wanted.items():
                have = ours.get(name)
                if have is None:
                    client.create_automation(automation)
                    done[name] = "created"
                elif fingerprint(have) != fingerprint(automation):
                    client.update_automation(have.id, automation)
                    done[name] = "updated"
                else:
                    done[name] = "unchanged"
            for name, have in ours.items():
                if name.startswith(f"{AUTOMATION_PREFIX}{p.pack} ") and name not in wanted:
                    client.delete_automation(have.id)
                    done[name] = "deleted"
            if p.targets:
                out(f"alerts for {p.pack}: {', '.join(p.kinds)} -> "
                    f"{', '.join(t.shown for t in p.targets)} (stale after "
                    f"{msg.duration_words(p.max_age_s)} without a successful build)")
    return done
