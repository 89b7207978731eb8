"""How fresh a pack is, read from its folder alone: `kpack status` and the explorer's home
page show the same thing from here.

From `<pack>/history.jsonl`: the last build run (any outcome), the last successful one (a
publish, or a rebuild that found no changes: either way the pack was current then) and
the last publish. From `<pack>/watch.json`, written when `kpack serve` starts: `max_age`,
the schedule and the alert targets (named without their secrets). From
`<pack>/alerts.jsonl`: the last notification sent (flows/alert_log.py records them).

A watched pack is **stale** when its last success is older than max_age, or, with no
success at all, when kpack serve started watching it longer ago than that: the same rule
the stale alert follows. Pure reads, no Prefect: the explorer runs on the query runtime.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from packs import format as fmt
from packs import layout

SUCCESS = ("published", "no changes")
FRESH, STALE, UNWATCHED, NEVER = "fresh", "stale", "not watched", "never built"


@dataclass(frozen=True)
class PackStatus:
    pack: str
    folder: str
    state: str  # fresh, stale, not watched (no kpack serve has watched it), never built
    last_build: dict | None  # the last history line, whatever its outcome
    last_success: dict | None  # the last "published" or "no changes" line
    last_publish: dict | None  # the last "published" line
    age_s: float | None  # seconds since the last success
    max_age_s: float | None  # from watch.json
    watch: dict | None
    last_alert: dict | None

    def to_dict(self) -> dict:
        return asdict(self)


def _when(text: str) -> datetime | None:
    try:
        at = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def ago(seconds: float | None) -> str:
    """Seconds in words: "45 s", "12 min", "3.5 h", "2.1 d" ("?" for None)."""
    if seconds is None:
        return "?"
    seconds = max(seconds, 0.0)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 172_800 else f"{seconds / 86_400:.1f} d"


def pack_status(pack_root: Path, now: datetime | None = None) -> PackStatus:
    """The status of the pack folder `pack_root` at `now` (default: now, UTC)."""
    now = now or datetime.now(UTC)
    history = [h for h in layout.read_history(pack_root) if h.get("status") != "unreadable"]
    success = next((h for h in reversed(history) if h.get("status") in SUCCESS), None)
    publish = next((h for h in reversed(history) if h.get("status") == "published"), None)
    watch = layout.read_watch(pack_root)
    alerts = [a for a in layout.read_alerts(pack_root) if a.get("status") != "unreadable"]
    success_at = _when(success.get("at", "")) if success else None
    age = (now - success_at).total_seconds() if success_at else None
    max_age = float(watch["max_age_s"]) if watch and watch.get("max_age_s") else None
    if not history:
        state = NEVER if watch is None else STALE if _overdue(watch, now, max_age) else FRESH
    elif max_age is None:
        state = UNWATCHED
    elif age is not None:
        state = STALE if age > max_age else FRESH
    else:
        state = STALE if _overdue(watch, now, max_age) else FRESH
    return PackStatus(pack=pack_root.name, folder=str(pack_root), state=state,
                      last_build=history[-1] if history else None, last_success=success,
                      last_publish=publish, age_s=age, max_age_s=max_age, watch=watch,
                      last_alert=alerts[-1] if alerts else None)


def _overdue(watch: dict | None, now: datetime, max_age: float | None) -> bool:
    """No success at all: stale once kpack serve has watched the pack for max_age."""
    since = _when((watch or {}).get("since", ""))
    return bool(since and max_age and (now - since).total_seconds() > max_age)


def pack_folders(path: Path) -> list[Path]:
    """The pack folders at `path`: itself when it is one (it has `current` or a history),
    else its sub-folders that are (an output folder such as `out/`), by name."""
    def is_pack(p: Path) -> bool:
        return (p / fmt.CURRENT_FILE).is_file() or (p / layout.HISTORY_FILE).is_file()

    if is_pack(path):
        return [path]
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if p.is_dir() and is_pack(p))


def describe(status: PackStatus, now: datetime | None = None) -> list[str]:
    """`status` as the lines `kpack status` prints (the explorer shows the same facts)."""
    now = now or datetime.now(UTC)

    def since(entry: dict | None) -> str:
        at = _when((entry or {}).get("at", ""))
        return f"{ago((now - at).total_seconds())} ago" if at else "at an unknown time"

    head = status.state.upper() if status.state == STALE else status.state
    if status.max_age_s is not None:
        head += f" (max_age {ago(status.max_age_s)}"
        head += (f"; last success {ago(status.age_s)} ago)" if status.age_s is not None
                 else "; no successful build yet)")
    lines = [f"{status.pack}: {head}"]
    b = status.last_build
    if b:
        detail = f": {b['detail']}" if b.get("detail") and b.get("status") not in SUCCESS else ""
        lines.append(f"  last build:   {b.get('build_id')} {b.get('status')} {since(b)}"
                     f"{detail[:200]}")
    for label, entry in (("last success", status.last_success),
                         ("last publish", status.last_publish)):
        if entry:
            lines.append(f"  {label}: {entry.get('build_id')} {entry.get('status')} "
                         f"{since(entry)}")
        elif b:
            lines.append(f"  {label}: none")
    w = status.watch
    if w:
        targets = ", ".join(t.get("shown", "?") for t in w.get("targets", [])) or "nobody"
        lines.append(f"  watched:      by kpack serve ({w.get('schedule', '?')}) since "
                     f"{w.get('since', '?')}; alerts to {targets}")
    a = status.last_alert
    if a:
        lines.append(f"  last alert:   {a.get('kind')} {a.get('status')} {since(a)} to "
                     f"{a.get('target', '?')}"
                     + (f" (build {a['build_id']})" if a.get("build_id") else "")
                     + (f": {a['reason']}" if a.get("reason") else ""))
    elif w and w.get("targets"):
        lines.append("  last alert:   none sent")
    return lines
