"""One writer per pack: the lock a build holds on `<out>/<pack>/` from start to finish.

Without it, two builds of one pack both published, and the slower one (started first,
from older pages) became `current` last. The lock is the file `<pack>/.build.lock`,
created with O_EXCL, holding who took it (host, pid, build id, time). While the build
runs, a heartbeat thread touches it every HEARTBEAT_S seconds.

A lock is stale, and taken over with a warning, when its process is gone (same host) or
its heartbeat stopped more than STALE_S ago (any host: builds on a shared file system).
Anything else refuses the second build with one line naming the holder; a lock taken
over names the build that died, whose run the flow then marks Crashed. Taking the lock
also removes the temp folders (`builds/.tmp-*`) that crashed builds left: while we hold
it, no other build of this pack can be writing one.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from packs import layout

LOCK_FILE = ".build.lock"
HEARTBEAT_S = 30.0
STALE_S = 300.0


class PackLockedError(RuntimeError):
    """Another build of the pack is running; the message names it."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def stale_reason(path: Path, now: float | None = None) -> str | None:
    """Why the lock at `path` no longer protects a running build, or None if it does."""
    holder = _holder(path)
    try:
        age = (now or time.time()) - path.stat().st_mtime
    except FileNotFoundError:
        return "gone"
    if holder.get("host") == socket.gethostname() and isinstance(holder.get("pid"), int):
        if not _alive(holder["pid"]):
            return f"its process {holder['pid']} is gone"
    if age > STALE_S:
        return f"no heartbeat for {age:.0f} s"
    if not holder and age > HEARTBEAT_S:
        return "it is unreadable"
    return None


def _create(path: Path, build_id: str) -> None:
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"host": socket.gethostname(), "pid": os.getpid(), "build_id": build_id,
                   "started_at": time.time()}, f)


@dataclass(frozen=True)
class Lock:
    path: Path
    build_id: str
    replaced: dict | None = None  # the holder of a stale lock taken over (a dead build)
    replaced_reason: str | None = None  # why that lock was stale ("its process 12 is gone")


def acquire(pack_root: Path, build_id: str, warn=None) -> Lock:
    """Take the pack's lock for `build_id`; PackLockedError when a live build holds it.
    The Lock names the holder of a stale lock it replaced (that build died) and why the
    lock was stale; the flow records the dead build as `crashed` in history.jsonl."""
    pack_root.mkdir(parents=True, exist_ok=True)
    path = pack_root / LOCK_FILE
    replaced = replaced_reason = None
    for _ in range(3):
        try:
            _create(path, build_id)
            break
        except FileExistsError:
            reason = stale_reason(path)
            if reason is None:
                h = _holder(path)
                since = time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                      time.gmtime(h.get("started_at") or 0))
                raise PackLockedError(
                    f"{pack_root.name}: another build ({h.get('build_id', '?')}, pid "
                    f"{h.get('pid', '?')} on {h.get('host', '?')}, since {since}) is running; "
                    f"wait for it, or delete {path} if no build is running") from None
            replaced, replaced_reason = _holder(path), reason
            if warn:
                warn(f"taking over the lock of {pack_root.name} from build "
                     f"{replaced.get('build_id', '?')}: {reason}")
            with contextlib.suppress(FileNotFoundError):
                os.replace(path, path.with_name(f"{LOCK_FILE}.stale-{os.getpid()}"))
                os.unlink(path.with_name(f"{LOCK_FILE}.stale-{os.getpid()}"))
    else:
        raise PackLockedError(f"{pack_root.name}: could not take {path}; try again")
    layout.remove_temp_dirs(pack_root)
    return Lock(path, build_id, replaced, replaced_reason)


def release(lock: Lock) -> None:
    """Remove the lock if it is still ours (a takeover may have replaced it)."""
    if _holder(lock.path).get("build_id") == lock.build_id:
        lock.path.unlink(missing_ok=True)


@contextlib.contextmanager
def held(pack_root: Path, build_id: str, warn=None) -> Iterator[Lock]:
    """Hold the pack's lock, with a heartbeat, for the body of the `with`."""
    lock = acquire(pack_root, build_id, warn)
    path = lock.path
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            with contextlib.suppress(OSError):
                os.utime(path)

    thread = threading.Thread(target=beat, name=f"lock-{pack_root.name}", daemon=True)
    thread.start()
    try:
        yield lock
    finally:
        stop.set()
        thread.join(timeout=5)
        release(lock)
