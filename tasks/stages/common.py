"""What every stage module shares: the work directory, the build context, the record a
stage returns, content keys, atomic writes and progress lines.

Work directory layout (it may be a shared filesystem: every file is written by one task,
via a temp file and a rename, and named by a content key)::

    <work>/prefect-results/            Prefect's persisted task results
    <work>/<pack>/plan/<key>/<i>.txt   the URLs of shard i of a shard layout
    <work>/<pack>/<stage>/...          Parquet outputs named by content key, per shard
    <work>/<pack>/state.json           the last completed build's shard outputs (lineage)
    <work>/<pack>/ledger/*.jsonl       one Claude cost ledger per extract shard run
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from packs.manifest import EmbeddingInfo
from tasks.extract.core import ExtractConfig
from tasks.fetch.freshness import SkipPolicy
from tasks.fetch.types import FetchConfig
from tasks.workdir import (  # noqa: F401 (the stages' helpers, re-exported)
    WorkDir,
    log,
    parquet_rows,
    stage_key,
    write_parquet,
    write_text,
)

ProgressFn = Callable[[int, int], None]
STATE_FILE = "state.json"


@dataclass(frozen=True)
class BuildContext:
    """Everything a stage needs besides its inputs; small and picklable, so it travels to
    Dask workers with each task (no URL lists, no tables)."""

    pack: str
    work: WorkDir
    build_id: str
    fetch: FetchConfig
    max_words: int
    overlap_words: int
    extract: ExtractConfig
    extract_kind: str  # "claude" or "offline", resolved once by the driver
    model: str  # the embedding model as given (an id or a local folder)
    embedding: EmbeddingInfo
    keyword_vectors: bool
    out_dir: str
    source_folder: str
    description: str = ""
    keep_builds: int = 2
    unit_vectors: bool = True  # pack.toml's unit_vectors: the unit_vectors stage runs
    faults: str = ""  # $KPACK_FAULTS of the driver (tasks.faults)
    force: bool = False  # publish even when the guard says the build is worse
    isolate_reduce: bool = False  # run resolve and publish in a child process (isolated.py)
    guard_max_failed_share: float = 0.2
    guard_max_loss_share: float = 0.5
    # pack.toml query_encoder: what publish ships (tasks.encoder_export)
    query_encoder: str = "fp32"
    # which pages fetch may skip by their sitemap lastmod (tasks.fetch.freshness)
    skip: SkipPolicy = field(default_factory=SkipPolicy)


@dataclass(frozen=True)
class Record:
    """What a stage hands on: where its outputs are and how many rows they hold.

    `key` names the outputs (a hash of the inputs and settings); `digest` hashes what
    was written when that can differ for one key (an extraction with failures), and
    downstream keys are built from `ref` (the digest when there is one). `work` holds
    the counters of work done in this run (sections encoded, API calls, ...).
    """

    stage: str
    key: str
    shard: int | None
    paths: dict[str, str]
    rows: dict[str, int]
    seconds: float
    info: dict = field(default_factory=dict)
    work: dict = field(default_factory=dict)
    digest: str = ""

    @property
    def ref(self) -> str:
        return self.digest or self.key

    def table(self, name: str, columns: list[str] | None = None) -> pl.DataFrame:
        return pl.read_parquet(self.paths[name], columns=columns)

    def reused(self) -> Record:
        """The same outputs, found in a cache: no work done in this run."""
        return replace(self, work={}, info={**self.info, "reused": True}, seconds=0.0)


class LogProgress:
    """A progress callback that logs plain lines at every ~10% (and at the end)."""

    def __init__(self, label: str, logger: logging.Logger | None = None):
        self.label, self.log, self.next_pct = label, logger or log, 0

    def __call__(self, done: int, total: int, *_: object) -> None:
        pct = 100 * done // max(total, 1)
        if pct >= self.next_pct or done == total:
            self.log.info("%s: %d/%d (%d%%)", self.label, done, total, pct)
            self.next_pct = pct + 10


def elapsed(start: float) -> float:
    return time.perf_counter() - start


# --- lineage: the last completed build's shard outputs ----------------------------------


def read_state(work: WorkDir) -> dict:
    """The last completed build's shard layout and outputs ({} when there is none)."""
    path = work.pack_dir / STATE_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return state if isinstance(state, dict) else {}


def write_state(work: WorkDir, count: int, records: Mapping[str, list[Record]],
                variants: Mapping[str, Any]) -> None:
    """Record which output each shard of each stage has, for the next build's lineage.
    `variants` are the settings an output depends on besides its pages (model, prompt,
    ...): outputs are only reused under the same variant."""
    stages = {}
    for stage, recs in records.items():
        paths: list[list[str] | None] = [None] * count
        for r in recs:
            paths[r.shard] = sorted(r.paths.values())
        stages[stage] = {"variant": variants.get(stage), "paths": paths}
    work.pack_dir.mkdir(parents=True, exist_ok=True)
    write_text(work.pack_dir / STATE_FILE, json.dumps({"count": count, "stages": stages}))


def previous_outputs(state: dict, stage: str, variant: Any, shards: list[int]) -> tuple[str, ...]:
    """Output paths of `stage` in the given shards of the state's layout, when they were
    made under the same variant and still exist."""
    entry = (state.get("stages") or {}).get(stage)
    if not entry or entry.get("variant") != variant:
        return ()
    paths = entry.get("paths") or []
    out: list[str] = []
    for i in shards:
        if 0 <= i < len(paths) and paths[i]:
            out.extend(p for p in paths[i] if Path(p).is_file())
    return tuple(out)
