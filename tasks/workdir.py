"""The build's work directory and its small I/O helpers, below every stage and every job
module (tasks/fetch/, tasks/stages/ and the flow all use them): the logger, `WorkDir`, the
content key of a stage's output and atomic writes. Imports nothing of tasks/.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from packs import format as fmt

# Every stage logs here, with the standard library only: the flow's settings route the
# `kpack` loggers to the run logs of the task they are called in (Prefect's
# PREFECT_LOGGING_EXTRA_LOGGERS, flows/settings.py), and a stage run on its own (a test, a
# child process) logs as any library does.
log = logging.getLogger("kpack.build")


@dataclass(frozen=True)
class WorkDir:
    """The work directory of one pack's builds: `<root>/<pack>/<stage>/` per stage."""

    root: Path
    pack: str

    def stage(self, name: str) -> Path:
        path = self.root / self.pack / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def pack_dir(self) -> Path:
        return self.root / self.pack

    @property
    def results(self) -> Path:
        return self.root / "prefect-results"


def stage_key(*parts: object) -> str:
    """A content key: a short hash of the JSON of each part (never a path or a run id)."""
    return fmt.short_hash(*(json.dumps(p, sort_keys=True, default=str) for p in parts))


def _tmp(path: Path) -> Path:
    """A temp file beside `path`, its own to this process and thread: fetch shards run on
    threads of one process and may write the same file (an origin's robots.txt) at once."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def write_parquet(df: pl.DataFrame, path: str | Path) -> None:
    """Write via a temp file and rename, so a killed run never leaves a torn intermediate
    that the next run would mistake for finished work."""
    path = Path(path)
    tmp = _tmp(path)
    df.write_parquet(tmp)
    os.replace(tmp, path)


def write_text(path: Path, text: str) -> None:
    """Atomic small-file write (markers, pointers, state), same reason as write_parquet."""
    tmp = _tmp(path)
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def parquet_rows(path: str | Path) -> int:
    """The number of rows of a Parquet file (read from its metadata)."""
    return pl.scan_parquet(path).select(pl.len()).collect().item()
