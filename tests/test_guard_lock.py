"""The publish guard's rules and the pack lock, as plain functions (no Prefect, no build)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from tasks.publish import lock
from tasks.publish.guard import BuildFacts, check

PAGES = {f"https://d.test/{i}": f"h{i}" for i in range(10)}
SHARES = {"max_failed_share": 0.2, "max_loss_share": 0.5}


def facts(sections=100, entities=50, pages=PAGES, failed=0) -> BuildFacts:
    return BuildFacts(sections=sections, entities=entities, pages=dict(pages),
                      failed_sections=failed)


def test_a_build_whose_extraction_mostly_failed_is_refused_even_as_the_first() -> None:
    assert check(facts(failed=20), None, set(PAGES), **SHARES) is None
    reason = check(facts(failed=21), None, set(PAGES), **SHARES)
    assert reason and "21 of 100 sections (21%) failed extraction" in reason


def test_pages_lost_to_fetch_failures_are_refused_but_pages_removed_from_urls_txt_are_not() -> None:
    current = facts()
    fetched = dict(list(PAGES.items())[:4])  # 6 of 10 pages failed to fetch
    reason = check(facts(sections=40, pages=fetched), current, set(PAGES), **SHARES)
    assert reason and "6 of the current build's 10 pages (60%) could not be fetched" in reason
    # The same 6 pages taken out of urls.txt: a change the user made, published.
    assert check(facts(sections=40, pages=fetched), current, set(fetched), **SHARES) is None


def test_losing_most_entities_or_sections_with_unchanged_pages_is_refused() -> None:
    current = facts()
    reason = check(facts(entities=20), current, set(PAGES), **SHARES)
    assert reason and "entities fell from 50 to 20 (-60%)" in reason
    assert "sections fell from 100 to 40" in check(facts(sections=40), current, set(PAGES),
                                                   **SHARES)
    assert check(facts(entities=26), current, set(PAGES), **SHARES) is None
    # A changed page may rightly drop entities.
    changed = {**PAGES, "https://d.test/0": "new"}
    assert check(facts(entities=5, pages=changed), current, set(PAGES), **SHARES) is None


def test_the_lock_refuses_a_second_build_and_is_released(tmp_path) -> None:
    root = tmp_path / "pack"
    with lock.held(root, "b1") as held:
        path = held.path
        holder = json.loads(path.read_text())
        assert holder["pid"] == os.getpid() and holder["build_id"] == "b1"
        with pytest.raises(lock.PackLockedError, match=r"another build \(b1, pid \d+ on "):
            lock.acquire(root, "b2")
    assert not path.exists()


def test_a_lock_whose_process_died_is_taken_over(tmp_path) -> None:
    root = tmp_path / "pack"
    root.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    (root / lock.LOCK_FILE).write_text(json.dumps(
        {"host": socket.gethostname(), "pid": int(dead.stdout), "build_id": "old"}))
    (root / "builds" / ".tmp-old").mkdir(parents=True)  # left by the dead build
    warnings: list[str] = []
    taken = lock.acquire(root, "new", warn=warnings.append)
    assert json.loads(taken.path.read_text())["build_id"] == "new"
    assert taken.replaced["build_id"] == "old"
    assert taken.replaced_reason == f"its process {int(dead.stdout)} is gone"
    assert warnings and f"its process {int(dead.stdout)} is gone" in warnings[0]
    assert not (root / "builds" / ".tmp-old").exists()


def test_a_lock_from_another_host_is_stale_only_after_its_heartbeat_stops(tmp_path) -> None:
    root = tmp_path / "pack"
    root.mkdir()
    path = root / lock.LOCK_FILE
    path.write_text(json.dumps({"host": "elsewhere", "pid": 1, "build_id": "far"}))
    assert lock.stale_reason(path) is None
    with pytest.raises(lock.PackLockedError, match="on elsewhere"):
        lock.acquire(root, "mine")
    old = time.time() - lock.STALE_S - 1
    os.utime(path, (old, old))
    assert "no heartbeat" in lock.stale_reason(path)
    lock.release(lock.acquire(root, "mine"))
    assert not path.exists()
