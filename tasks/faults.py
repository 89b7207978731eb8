"""Injected faults, for resilience tests and drills: `KPACK_FAULTS`.

A comma-separated list of `STAGE@SHARD:ACTION`, where SHARD is the shard's number as
task names show it (1-based) or `*`, and ACTION is

    fail        raise InjectedFault the first time that stage runs on that shard
    fail=N      ... the first N times
    sleep=S     sleep S seconds before the stage runs (to widen a window for a kill)

e.g. `KPACK_FAULTS="embed@2:fail,embed@1:sleep=5"`. Runs are counted with marker files in
the work directory (created atomically), so a fault fires the right number of times
across retries, worker processes and machines sharing the work directory.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

ENV = "KPACK_FAULTS"


class InjectedFault(RuntimeError):
    """A failure asked for by KPACK_FAULTS."""


@dataclass(frozen=True)
class Fault:
    stage: str
    shard: str  # "1", "2", ... or "*"
    action: str  # "fail" or "sleep"
    amount: float


def parse(spec: str) -> list[Fault]:
    """Parse a KPACK_FAULTS value; ValueError names the item that cannot be read."""
    faults = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        try:
            target, action = item.split(":", 1)
            stage, shard = target.split("@", 1)
            name, _, amount = action.partition("=")
            if name not in ("fail", "sleep") or not stage or not (shard == "*" or shard.isdigit()):
                raise ValueError
            faults.append(Fault(stage, shard, name, float(amount) if amount else 1.0))
        except ValueError:
            raise ValueError(f"{ENV}: cannot read {item!r}; write STAGE@SHARD:fail[=N] or "
                             "STAGE@SHARD:sleep=SECONDS") from None
    return faults


def check(spec: str, stage: str, shard: int | None, marker_dir: Path) -> None:
    """Apply the faults of `spec` that match this run of `stage` on `shard` (0-based)."""
    label = "*" if shard is None else str(shard + 1)
    for fault in parse(spec):
        if fault.stage != stage or fault.shard not in ("*", label):
            continue
        if fault.action == "sleep":
            time.sleep(fault.amount)
            continue
        marker_dir.mkdir(parents=True, exist_ok=True)
        for n in range(int(fault.amount)):
            try:
                fd = os.open(marker_dir / f"{stage}-{label}-{n}", os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                continue
            os.close(fd)
            raise InjectedFault(f"injected fault: {stage} shard {label} (run {n + 1})")
