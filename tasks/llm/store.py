"""The LLM layer's cache and ledger: validated responses and every API attempt of one run.

The cache key (`cache_key`) hashes the request (no secrets in it: the key lives in the
client) plus a version constant, so an unchanged section costs nothing on a rebuild. Only
validated output is stored (`tasks.llm.layers.LLM.structured` decides what that is). Each run
writes its own files: a journal of new responses (JSON lines, so a killed run keeps what it
paid for; `read_journal` reads it back) and a ledger row per API attempt with its token
usage and $. One writer per file, so many workers on a shared filesystem never write the
same file; no shared database.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from packs.llm.usage import Usage

# Bump when the cache row format changes; part of every cache key.
CACHE_SCHEMA = "llm-cache-v1"


def cache_key(request: dict, version: str) -> str:
    """sha256 of the request (model, system, tools, messages, max_tokens) and a version."""
    blob = json.dumps(
        {"schema": CACHE_SCHEMA, "version": version, "request": request},
        sort_keys=True, ensure_ascii=False, separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


LEDGER_COLUMNS = (
    "run_id", "ts", "key", "item_id", "model", "purpose", "attempt", "status", "http_status",
    "input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
    "cost_usd", "duration_s", "error",
)


class ResponseStore:
    """Validated responses and the per-call ledger of one run, with no shared database.

    Lookups come from `known` (validated responses of earlier runs by cache key: the
    extract stage reads them from its shard's earlier outputs) and from what this run
    stored. New responses are appended to `journal` (JSON lines, this run's own file) as
    they arrive, so a killed run keeps what it paid for; every API attempt is appended to
    `ledger`. Each file has one writer, so many workers on a shared filesystem never
    write the same file. Thread-safe within a process.
    """

    def __init__(self, known: dict[str, dict] | None = None, *, journal: Path | None = None,
                 ledger: Path | None = None) -> None:
        self._known = dict(known or {})
        self.new: dict[str, dict] = {}
        self.usage: dict[str, Usage] = {}
        self._rows: list[dict] = []
        self._lock = threading.Lock()
        self._journal = journal
        self._ledger = ledger
        for path in (journal, ledger):
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)

    def close(self) -> None:
        """Nothing to release: every write is appended and closed at once."""

    def get(self, key: str) -> dict | None:
        with self._lock:
            return self.new.get(key) or self._known.get(key)

    def put(self, key: str, *, prompt_version: str, model: str, content_hash: str | None,
            item_id: str | None, response: dict, usage: Usage) -> None:
        line = {"key": key, "prompt_version": prompt_version, "model": model,
                "content_hash": content_hash, "item_id": item_id, "response": response,
                "usage": asdict(usage), "created_at": now_iso()}
        with self._lock:
            self.new[key] = response
            self.usage[key] = usage
            if self._journal is not None:
                _append_jsonl(self._journal, line)

    def record(self, row: dict) -> None:
        row = {c: row.get(c) for c in LEDGER_COLUMNS}
        with self._lock:
            self._rows.append(row)
            if self._ledger is not None:
                _append_jsonl(self._ledger, row)

    def ledger(self, run_id: str | None = None) -> list[dict]:
        """The ledger rows recorded through this store (of one run, if given)."""
        with self._lock:
            return [r for r in self._rows if run_id is None or r["run_id"] == run_id]


def read_journal(path: Path) -> dict[str, dict]:
    """cache key → response from a journal a killed run left (a torn last line is skipped)."""
    found: dict[str, dict] = {}
    if not path.is_file():
        return found
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # the line a kill cut short
        if isinstance(entry, dict) and "key" in entry and "response" in entry:
            found[entry["key"]] = entry["response"]
    return found


def _append_jsonl(path: Path, row: dict) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")


def now_iso() -> str:
    """The current UTC time as an ISO 8601 string (ms), for journal and ledger rows."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")
