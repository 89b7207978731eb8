"""The isolated Kuzu writer (tasks.publish.kuzu_store.load_kuzu_isolated): a real child process loading a
real pack's tables."""

from __future__ import annotations

import time

import pytest

from packs import format as fmt
from packs.embedding import Embedder
from tasks.publish import kuzu_store as store
from tests.test_packset import GARDEN, build_small_pack


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    folder = build_small_pack(tmp_path_factory.mktemp("writer"), "garden", "https://garden.test",
                              GARDEN, Embedder("all-MiniLM-L6-v2"))
    return folder / fmt.BUILDS_DIR / "b0001" / fmt.TABLES_DIR


def test_the_writer_loads_a_pack_through_the_watch(tables, tmp_path):
    import polars as pl

    result = store.load_kuzu_isolated(tmp_path / "pack.db", tables, 384)
    for name in (fmt.ARTICLES, fmt.SECTIONS):
        assert result.counts[name] == pl.read_parquet(tables / f"{name}.parquet").height > 2


def test_a_writer_whose_disk_stays_full_is_stopped(tables, tmp_path, monkeypatch):
    """Kuzu can spin on a full disk instead of aborting. Here every disk counts as full
    (a threshold above any free space), so the watch must stop the child after FULL_FOR_S
    and say why, well before the child would have finished on its own."""
    monkeypatch.setattr(store, "FULL_BYTES", 1 << 62)
    monkeypatch.setattr(store, "FULL_FOR_S", 0.2)
    monkeypatch.setattr(store, "POLL_S", 0.05)
    t0 = time.monotonic()
    with pytest.raises(store.StoreError, match="its disk stayed full for 0 s"):
        store.load_kuzu_isolated(tmp_path / "pack.db", tables, 384)
    assert time.monotonic() - t0 < 10


def test_tables_in_a_folder_with_quotes_load(tables, tmp_path):
    """COPY ... FROM takes its file as a string literal: a quote or a backslash in the
    output folder's name must not break the statement (it failed the whole build)."""
    import shutil

    odd = tmp_path / "it's a \\ folder"
    shutil.copytree(tables, odd / "tables")
    result = store.load_kuzu(odd / "pack.db", odd / "tables", 384)
    assert result.counts[fmt.ARTICLES] > 2 and result.counts[fmt.SECTIONS] > 2
