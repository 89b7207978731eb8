"""The pack folder: the one module that reads and changes its layout.

    <pack>/current              the id of the build readers open (one line)
    <pack>/builds/<id>/         published builds (ids sort by time: they are start times)
    <pack>/builds/.tmp-<id>/    a build being written (removed when it fails)
    <pack>/history.jsonl        one line per build run: published, no changes, refused, failed
    <pack>/.build.lock          held by the build that writes the pack (tasks/publish/lock.py)
    <pack>/watch.json           how `kpack serve` watches it: max_age, schedule, alert
                                targets (named without their secrets; flows/alerts.py)
    <pack>/alerts.jsonl         one line per notification sent about it (flows/alert_log.py)

Publishing (tasks/publish/atomic.py), installing an archive (packs/install.py) and opening a pack
(packs/pack.py) all go through here, so they agree on what `current` may name, how it is
replaced (a temp file and a rename: readers never see a half-written pointer) and which
builds a prune keeps (`prune`: one rule for both).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

from packs import format as fmt

HISTORY_FILE = "history.jsonl"
WATCH_FILE = "watch.json"
ALERTS_FILE = "alerts.jsonl"
TEMP_PREFIX = ".tmp-"
_BUILD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def valid_build_id(build_id: str) -> bool:
    return bool(_BUILD_ID.match(build_id))


def current_id(pack_root: Path) -> str | None:
    """The build id `<pack>/current` names (None when there is no pointer or it is empty)."""
    pointer = pack_root / fmt.CURRENT_FILE
    if not pointer.is_file():
        return None
    return pointer.read_text(encoding="utf-8").strip() or None


def build_path(pack_root: Path, build_id: str) -> Path:
    return pack_root / fmt.BUILDS_DIR / build_id


def temp_path(pack_root: Path, build_id: str) -> Path:
    return pack_root / fmt.BUILDS_DIR / f"{TEMP_PREFIX}{build_id}"


def set_current(pack_root: Path, build_id: str) -> None:
    """Point `current` at `build_id` atomically (write a temp file, rename it over)."""
    if not valid_build_id(build_id):
        raise ValueError(f"invalid build id {build_id!r}")
    tmp = pack_root / f".{fmt.CURRENT_FILE}.{os.getpid()}.tmp"
    tmp.write_text(build_id + "\n", encoding="utf-8")
    os.replace(tmp, pack_root / fmt.CURRENT_FILE)


def build_ids(pack_root: Path) -> list[str]:
    """The published builds' ids, oldest first (temp and hidden folders left out)."""
    builds = pack_root / fmt.BUILDS_DIR
    if not builds.is_dir():
        return []
    return sorted(p.name for p in builds.iterdir() if p.is_dir() and not p.name.startswith("."))


def prune(pack_root: Path, keep: int) -> list[str]:
    """Remove all but the `keep` newest builds; the current build always stays (a reader
    may hold an older one open: readers on a pruned build see its files vanish, so keep
    >= 2 when readers stay open across a rebuild). Returns the ids removed."""
    current = current_id(pack_root)
    ids = build_ids(pack_root)
    removed = [old for old in ids[: max(len(ids) - keep, 0)] if old != current]
    for old in removed:
        shutil.rmtree(build_path(pack_root, old), ignore_errors=True)
    return removed


def remove_temp_dirs(pack_root: Path) -> list[str]:
    """Remove the temp folders of builds that did not finish; only safe while holding the
    pack's lock (no build of it is writing one)."""
    builds = pack_root / fmt.BUILDS_DIR
    removed = []
    for tmp in builds.glob(f"{TEMP_PREFIX}*") if builds.is_dir() else ():
        shutil.rmtree(tmp, ignore_errors=True)
        removed.append(tmp.name)
    return removed


def append_history(pack_root: Path, build_id: str, status: str, detail: str = "",
                   pages: dict[str, int] | None = None) -> None:
    """One JSON line per build run in `<pack>/history.jsonl` (an O_APPEND write: lines of
    concurrent writers do not interleave). `pages`: the run's per-page outcomes
    (manifest `freshness.pages`: skipped_lastmod, not_modified, unchanged, changed, new,
    removed, failed), for runs that fetched."""
    line = {"at": datetime.now(UTC).isoformat(timespec="seconds"), "build_id": build_id,
            "status": status, "detail": detail}
    if pages is not None:
        line["pages"] = dict(pages)
    pack_root.mkdir(parents=True, exist_ok=True)
    with (pack_root / HISTORY_FILE).open("a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def _read_jsonl(path: Path) -> list[dict]:
    """The JSON-object lines of `path`, oldest first ([] without the file). A line that is
    not a JSON object (a torn write, a hand edit) comes back as status "unreadable" with
    its text in `detail`, so nothing in the file is hidden."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            entry = None
        if not isinstance(entry, dict):
            entry = {"at": "", "build_id": "", "status": "unreadable", "detail": line[:500]}
        out.append(entry)
    return out


def append_alerts(pack_root: Path, lines: list[dict]) -> None:
    """Append notification records to `<pack>/alerts.jsonl` (one O_APPEND write)."""
    if not lines:
        return
    pack_root.mkdir(parents=True, exist_ok=True)
    with (pack_root / ALERTS_FILE).open("a", encoding="utf-8") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))


def read_alerts(pack_root: Path) -> list[dict]:
    """The notification records of `<pack>/alerts.jsonl`, oldest first."""
    return _read_jsonl(pack_root / ALERTS_FILE)


def write_watch(pack_root: Path, record: dict) -> None:
    """Write `<pack>/watch.json` (a temp file renamed over)."""
    pack_root.mkdir(parents=True, exist_ok=True)
    tmp = pack_root / f".{WATCH_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, pack_root / WATCH_FILE)


def read_watch(pack_root: Path) -> dict | None:
    """`<pack>/watch.json`, or None when no `kpack serve` has watched the pack (or the
    file is unreadable)."""
    try:
        record = json.loads((pack_root / WATCH_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None


def resolve_build_dir(path: str | os.PathLike[str]) -> Path:
    """The build folder of a pack folder (through `current`) or of a build folder itself.
    PackFormatError says what is wrong."""
    p = Path(path).expanduser()
    if not p.exists():
        raise fmt.PackFormatError(f"{p}: no such pack directory")
    if not p.is_dir():
        raise fmt.PackFormatError(
            f"{p}: not a directory (pass the pack folder or a build folder)")
    if (p / fmt.MANIFEST_FILE).is_file():
        return p
    pointer = p / fmt.CURRENT_FILE
    if not pointer.is_file():
        raise fmt.PackFormatError(
            f"{p}: not a knowledge pack (neither {fmt.MANIFEST_FILE} nor a "
            f"'{fmt.CURRENT_FILE}' file)")
    build_id = pointer.read_text(encoding="utf-8").strip()
    if not valid_build_id(build_id):
        raise fmt.PackFormatError(f"{pointer}: invalid build id {build_id[:80]!r}")
    build = build_path(p, build_id)
    if not (build / fmt.MANIFEST_FILE).is_file():
        raise fmt.PackFormatError(
            f"{p}: '{fmt.CURRENT_FILE}' names build {build_id!r}, but {build} has no "
            f"{fmt.MANIFEST_FILE}")
    return build


def read_history(pack_root: Path) -> list[dict]:
    """The lines of `<pack>/history.jsonl`, oldest first ([] without the file); a line that
    is not a JSON object comes back as status "unreadable" (see `_read_jsonl`)."""
    return _read_jsonl(pack_root / HISTORY_FILE)


def pack_root_of(build_dir: Path) -> Path | None:
    """The pack folder that holds `build_dir` as `builds/<id>/`, or None for a build
    folder standing alone (copied or unpacked elsewhere: it has no history of its own)."""
    build_dir = Path(build_dir).resolve()
    root = build_dir.parent.parent
    if build_dir.parent.name == fmt.BUILDS_DIR and (root / fmt.CURRENT_FILE).is_file():
        return root
    return None


# `kpack eval` scorecards live beside the builds, not inside them: a build folder is
# immutable and checksummed once published.
EVAL_DIR = "eval"


def eval_report_path(pack_root: Path, build_id: str) -> Path:
    """Where the scorecard of `kpack eval` on build `build_id` is kept."""
    if not valid_build_id(build_id):
        raise ValueError(f"invalid build id {build_id!r}")
    return pack_root / EVAL_DIR / f"{build_id}.json"


def save_eval_report(pack_root: Path, build_id: str, report: dict) -> Path:
    """Write `report` as `<pack>/eval/<build_id>.json` (a temp file renamed over, so a
    reader never sees half of it; the last evaluation of a build replaces the one before).
    Returns the path; OSError when the pack folder is not writable."""
    path = eval_report_path(pack_root, build_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def latest_eval_report(pack_root: Path, build_id: str | None = None
                       ) -> tuple[str, dict] | None:
    """(build id, scorecard) of the last `kpack eval` saved for `build_id`, else of the
    newest build evaluated (ids sort by time); None when none was saved. PackFormatError
    when the file is not a JSON object."""
    folder = pack_root / EVAL_DIR
    if not folder.is_dir():
        return None
    saved = sorted(p.stem for p in folder.glob("*.json") if valid_build_id(p.stem))
    if not saved:
        return None
    chosen = build_id if build_id in saved else saved[-1]
    path = folder / f"{chosen}.json"
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise fmt.PackFormatError(f"{path}: unreadable scorecard: {exc}") from exc
    if not isinstance(report, dict):
        raise fmt.PackFormatError(f"{path}: the scorecard is not a JSON object")
    return chosen, report
