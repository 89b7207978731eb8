"""The pack's Kuzu database, loaded from its tables (tasks/publish/tables.py).

`load_kuzu` writes `pack.db` in a build directory from `tables/*.parquet`, with the HNSW
vector index on Section.embedding (cosine), a second one on Section.keyword_embedding when
the sections carry keyword vectors, and a full-text index over section heading path and
content; `load_kuzu_isolated` does it in a child process of its own. Relationship rows
whose endpoints are missing are dropped (and counted), because Kuzu refuses dangling edges
and one bad extraction must not sink a build.
"""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import kuzu
import polars as pl

from packs import format as fmt
from packs.cypher import file_literal

log = logging.getLogger("kpack.store")


@dataclass
class StoreResult:
    counts: dict[str, int]
    dropped_edges: dict[str, int] = field(default_factory=dict)
    keyword_vectors: bool = False  # Section.keyword_embedding and its index were stored


def _edges(name: str, lf: pl.LazyFrame, src: str, dst: str, src_ids: pl.LazyFrame,
           dst_ids: pl.LazyFrame, folder: Path) -> tuple[Path, int, int]:
    """Edges whose two endpoints exist, written to folder/<name>.parquet as (src, dst,
    properties...); returns (path, kept, dropped)."""
    # In the tables' order: Kuzu returns edges in the order they were stored, and ties in
    # what reads them (the whole-pack items) follow it, so a build must not shuffle them.
    kept = (lf.join(src_ids.select(pl.col("id").alias(src)), on=src, how="semi",
                    maintain_order="left")
            .join(dst_ids.select(pl.col("id").alias(dst)), on=dst, how="semi",
                  maintain_order="left"))
    path = folder / f"{name}.parquet"
    kept.sink_parquet(path)
    n_kept = pl.scan_parquet(path).select(pl.len()).collect().item()
    n_all = lf.select(pl.len()).collect().item()
    return path, n_kept, n_all - n_kept


def load_kuzu(db_path: Path, tables_dir: Path, dim: int) -> StoreResult:
    """Create `db_path` (must not exist) from the pack's tables/*.parquet (written by
    `write_tables`): nodes are copied straight from them, edges are filtered to existing
    endpoints first. Then the HNSW and full-text indexes."""
    if db_path.exists():
        raise FileExistsError(f"{db_path} already exists; the store stage writes a fresh database")
    scan = {name: pl.scan_parquet(tables_dir / f"{name}.parquet") for name in fmt.TABLE_COLUMNS}
    ids = {name: scan[name].select("id") for name in (fmt.ARTICLES, fmt.SECTIONS,
                                                         fmt.ENTITIES, fmt.FACTS, fmt.TOPICS)}
    keyword = fmt.KEYWORD_EMBEDDING in scan[fmt.SECTIONS].collect_schema().names()
    sections = scan[fmt.SECTIONS].select("article_id", "id").rename(
        {"article_id": "src", "id": "dst"})
    dropped: dict[str, int] = {}
    db = kuzu.Database(str(db_path))
    conn = kuzu.Connection(db)
    try:
        for ddl in fmt.kuzu_schema(dim, keyword_vectors=keyword):
            conn.execute(ddl)
        for table, name in (("Article", fmt.ARTICLES), ("Section", fmt.SECTIONS),
                            ("Entity", fmt.ENTITIES), ("Fact", fmt.FACTS),
                            ("Topic", fmt.TOPICS)):
            if scan[name].select(pl.len()).collect().item():
                conn.execute(f"COPY {table} FROM "
                             f"{file_literal(tables_dir / f'{name}.parquet')}")
        with tempfile.TemporaryDirectory(prefix="kpack-store-") as tmp:
            edges = [
                ("HAS_SECTION", sections, "src", "dst", ids[fmt.ARTICLES], ids[fmt.SECTIONS]),
                ("MENTIONS", scan[fmt.MENTIONS].unique(maintain_order=True), "section_id",
                 "entity_id", ids[fmt.SECTIONS], ids[fmt.ENTITIES]),
                ("RELATED_TO", scan[fmt.RELATIONSHIPS], "source_id", "target_id",
                 ids[fmt.ENTITIES], ids[fmt.ENTITIES]),
                ("HAS_FACT", scan[fmt.FACTS].filter(pl.col("entity_id").is_not_null())
                 .select(src="entity_id", dst="id"), "src", "dst", ids[fmt.ENTITIES],
                 ids[fmt.FACTS]),
                ("LINKS_TO", scan[fmt.LINKS].unique(maintain_order=True), "source_id", "target_id",
                 ids[fmt.ARTICLES], ids[fmt.ARTICLES]),
                ("IN_TOPIC", scan[fmt.TOPIC_ENTITIES].select(
                    "entity_id", "topic_id", "rank", "weight"), "entity_id", "topic_id",
                 ids[fmt.ENTITIES], ids[fmt.TOPICS]),
                ("COVERS", scan[fmt.TOPIC_SECTIONS], "topic_id", "section_id",
                 ids[fmt.TOPICS], ids[fmt.SECTIONS]),
            ]
            for rel, lf, src, dst, src_ids, dst_ids in edges:
                path, kept, dropped[rel] = _edges(rel, lf, src, dst, src_ids, dst_ids, Path(tmp))
                if kept:
                    conn.execute(f"COPY {rel} FROM {file_literal(path)}")
        for rel, n in dropped.items():
            if n:
                log.warning("dropped %d %s edges whose endpoints are not in the pack", n, rel)
        if scan[fmt.SECTIONS].select(pl.len()).collect().item():
            conn.execute(
                f"CALL CREATE_VECTOR_INDEX('Section', '{fmt.VECTOR_INDEX}', 'embedding', "
                "metric := 'cosine')"
            )
            if keyword:
                conn.execute(
                    f"CALL CREATE_VECTOR_INDEX('Section', '{fmt.KEYWORD_VECTOR_INDEX}', "
                    f"'{fmt.KEYWORD_EMBEDDING}', metric := 'cosine')"
                )
            conn.execute(
                f"CALL CREATE_FTS_INDEX('Section', '{fmt.FTS_INDEX}', "
                "['heading_path', 'content'], stemmer := 'porter')"
            )
        counts = count_rows(conn)
    finally:
        conn.close()
        db.close()
    return StoreResult(counts=counts, dropped_edges={k: v for k, v in dropped.items() if v},
                       keyword_vectors=keyword)


COUNT_QUERIES = {
    "articles": "MATCH (a:Article) RETURN count(*)",
    "sections": "MATCH (s:Section) RETURN count(*)",
    "entities": "MATCH (e:Entity) RETURN count(*)",
    "facts": "MATCH (f:Fact) RETURN count(*)",
    "links": "MATCH ()-[r:LINKS_TO]->() RETURN count(*)",
    "relationships": "MATCH ()-[r:RELATED_TO]->() RETURN count(*)",
    "mentions": "MATCH ()-[r:MENTIONS]->() RETURN count(*)",
    "topics": "MATCH (t:Topic) RETURN count(*)",
}


def count_rows(conn: kuzu.Connection) -> dict[str, int]:
    """Row counts of a pack database, keyed like the manifest's counts."""
    counts = {}
    for key, query in COUNT_QUERIES.items():
        result = conn.execute(query)
        counts[key] = int(result.get_next()[0])
    return counts


# --- the writer in a process of its own -------------------------------------------------
#
# Kuzu runs in the build's own process otherwise: its buffer pool and index builds grow
# with the pack, and a fatal error inside it (disk full aborts the process) would take
# the build down with no error line and no history entry. In a child process the build's
# memory stays flat and such a death becomes one clear StoreError.

WRITER_TIMEOUT_S = 6 * 3600


class StoreError(RuntimeError):
    """The database could not be written or verified; the message says why."""


LOW_SPACE_BYTES = 64 * 1024 * 1024
# A writer whose file system stays full this long is stopped: Kuzu can also spin on a full
# disk instead of aborting (seen on a 600 kB tmpfs: 100% CPU for 10 minutes, 0 bytes free).
FULL_BYTES = 64 * 1024
FULL_FOR_S = 15.0
POLL_S = 0.5


def _space_note(folder: Path) -> str:
    """" (the disk ... is full)" when the folder's file system is nearly out of space:
    Kuzu aborts on a full disk with an unrelated message ('Invalid transaction type to
    rollback'), so the likely cause is named here."""
    free = _free_bytes(folder)
    if free is None or free >= LOW_SPACE_BYTES:
        return ""
    return f" (no space left on device: {free / 1e6:.1f} MB free where {folder} lives)"


def _free_bytes(folder: Path) -> int | None:
    import shutil

    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _child(args: list[str], timeout_s: float, where: Path | None = None) -> dict:
    """Run `python -m tasks.publish.kuzu_store ARGS`, its JSON reply. While it runs, the
    file system of `where` is watched: full (under FULL_BYTES free) for FULL_FOR_S seconds
    in a row, the child is stopped and the error says the disk is full."""
    import contextlib
    import subprocess
    import sys
    import tempfile
    import time

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "tasks.publish.kuzu_store", *args],
                                stdout=out, stderr=err, text=True)
        deadline, full_since = time.monotonic() + timeout_s, None
        try:
            while proc.poll() is None:
                now = time.monotonic()
                if now > deadline:
                    raise StoreError(f"the Kuzu writer did not finish in {timeout_s:.0f} s")
                free = _free_bytes(where) if where is not None else None
                if free is None or free >= FULL_BYTES:
                    full_since = None
                elif full_since is None:
                    full_since = now
                if full_since is not None and now - full_since >= FULL_FOR_S:
                    raise StoreError(f"the Kuzu writer was stopped: its disk stayed full for "
                                     f"{FULL_FOR_S:.0f} s{_space_note(where)}")
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=POLL_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        reason = lines[-1].strip() if lines else "no error message"
        how = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
               else f"exited with code {proc.returncode}")
        note = _space_note(where) if where is not None else ""
        raise StoreError(f"the Kuzu writer {how}: {reason}{note}")
    return json.loads(stdout.strip().splitlines()[-1])


def load_kuzu_isolated(db_path: Path, tables_dir: Path, dim: int,
                       timeout_s: float = WRITER_TIMEOUT_S) -> StoreResult:
    """`load_kuzu` in a child process; StoreError when it fails or dies."""
    data = _child(["load", str(db_path), str(tables_dir), str(dim)], timeout_s,
                  db_path.parent)
    return StoreResult(counts=data["counts"], dropped_edges=data["dropped_edges"],
                       keyword_vectors=data["keyword_vectors"])


def count_rows_isolated(db_path: Path, timeout_s: float = 600) -> dict[str, int]:
    """The row counts of a database opened read-only in a child process."""
    return _child(["count", str(db_path)], timeout_s)


def _main(argv: list[str]) -> None:
    from dataclasses import asdict

    if argv[0] == "load":
        result = load_kuzu(Path(argv[1]), Path(argv[2]), int(argv[3]))
        print(json.dumps(asdict(result)))
    elif argv[0] == "count":
        db = kuzu.Database(argv[1], read_only=True)
        conn = kuzu.Connection(db)
        try:
            print(json.dumps(count_rows(conn)))
        finally:
            conn.close()
            db.close()
    else:
        raise SystemExit("usage: python -m tasks.publish.kuzu_store load DB TABLES DIM | count DB")


if __name__ == "__main__":
    import sys

    _main(sys.argv[1:])
