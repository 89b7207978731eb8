"""The units a build stores with a pack (packs/retrieval/unit_store.py): read back, they
are the units and facts the query side works out itself; a pack's file is written by the
real publish path and read by an answer; a file made by other rules, or damaged, is read
as none."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
from query_fixtures import build_pack, embedder, pack_dir  # noqa: F401 (fixtures)

from packs import KnowledgePack
from packs import format as fmt
from packs.retrieval import unit_facts, unit_store, units

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TEXTS = [
    "To drain a node, run:\n\n```\nkubectl drain my-node --ignore-daemonsets\n```\n\n"
    "The node is then marked unschedulable.",
    "The probes are:\n\n- **liveness**: restarts the container when it fails.\n"
    "- **readiness**: removes the Pod from the Service endpoints.\n- startup\n\n"
    "If a probe fails, then the kubelet acts on it. See [probes](/docs/probes/).",
    "| Field | Default |\n|---|---|\n| `maxSurge` | 25% |\n| `maxUnavailable` | 25% |",
    "1. Run a specialized operating system.\n\n   It reduces the attack surface.\n"
    "2. Keep nodes patched, e.g. with `unattended-upgrades`.",
]


def _same(stored: unit_facts.Facts, computed: unit_facts.Facts) -> None:
    for field in dataclasses.fields(computed):
        assert getattr(stored, field.name) == getattr(computed, field.name), field.name


def test_stored_units_and_facts_read_back_as_worked_out():
    for text in TEXTS:
        pairs = unit_store.decode(text, unit_store.encode(text))
        assert [u for u, _ in pairs] == units.candidates(text)
        assert any(u.brief is not None for u, _ in pairs) or "probes are" not in text
        for u, stored in pairs:
            _same(stored, unit_facts.facts(u, text[u.start:u.end]))


def test_a_file_is_read_by_its_index_and_other_rules_are_read_as_none(tmp_path, caplog):
    path = tmp_path / fmt.UNITS_FILE
    assert unit_store.write(path, [*TEXTS, TEXTS[0]]) == len(TEXTS)  # each text once
    store = unit_store.Store(path)
    assert [u for u, _ in store.get(TEXTS[1])] == units.candidates(TEXTS[1])
    assert store.get("a text the pack never held") is None
    head, body = path.read_bytes().split(b"\n", 1)
    other = json.loads(head)
    other["version"] = "0000000000000000"
    path.write_bytes(json.dumps(other).encode() + b"\n" + body)
    with caplog.at_level("INFO", logger="kpack.units"):
        assert unit_store.Store(path).get(TEXTS[1]) is None
    assert "other rules" in caplog.text


def test_a_damaged_entry_is_worked_out_again(tmp_path, caplog):
    path = tmp_path / fmt.UNITS_FILE
    unit_store.write(path, TEXTS[:1])
    head, body = path.read_bytes().split(b"\n", 1)
    path.write_bytes(head + b"\n" + b"x" * len(body))
    assert unit_store.Store(path).get(TEXTS[0]) is None
    assert "damaged entry" in caplog.text


def test_the_reader_takes_a_registered_files_units(tmp_path):
    """What the reader quotes comes from the file: a document whose unit says other words
    than the text is what `unit_store.candidates` returns for a text met the first time."""
    text = "Kestrel keeps a journal of every job it ran. The journal lives in journal.db."
    path = tmp_path / fmt.UNITS_FILE
    unit_store.write(path, [text])
    # the same length, so the index's offsets still hold
    path.write_bytes(path.read_bytes().replace(b"keeps a journal", b"keeps a JOURNAL"))
    units._candidates.cache_clear()  # as in a fresh process, which never worked them out
    unit_store.register(path)
    try:
        shown = [u.display for u in unit_store.candidates(text)]
    finally:
        unit_store.unregister(path)
    assert shown[0].startswith("Kestrel keeps a JOURNAL")
    assert shown != [u.display for u in units.segment(text)]


@pytest.mark.usefixtures("embedder")
def test_a_built_pack_ships_its_units_and_opening_it_registers_them(pack_dir):
    with KnowledgePack.open(pack_dir) as pack:
        path = pack.path / fmt.TABLES_DIR / fmt.UNITS_FILE
        assert f"{fmt.TABLES_DIR}/{fmt.UNITS_FILE}" in pack.manifest.checksums
        assert path in unit_store._stores
        store = unit_store.Store(path)
        contents = [r[0] for r in pack.db._run("MATCH (s:Section) RETURN s.content", {}, None)]
        assert contents
        for content in contents:
            pairs = store.get(content)
            assert [u for u, _ in pairs] == units.candidates(content)
            for u, stored in pairs:
                _same(stored, unit_facts.facts(u, content[u.start:u.end]))
        with KnowledgePack.open(pack_dir):
            pass
        assert path in unit_store._stores  # the other open pack still reads it
    assert path not in unit_store._stores  # the last one closed: forgotten


def test_a_rebuild_copies_the_units_of_unchanged_texts_from_the_build_before(tmp_path):
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    unit_store.write(before, TEXTS[:2])
    # mark the build before's document of TEXTS[1] (same length): a copy keeps the mark
    before.write_bytes(before.read_bytes().replace(b"liveness", b"LIVENESS"))
    assert unit_store.write(after, TEXTS[1:3], reuse=before) == 2
    again = unit_store.Store(after)
    assert b"LIVENESS" in again.document(unit_store.key(TEXTS[1]))
    assert [u for u, _ in again.get(TEXTS[2])] == units.candidates(TEXTS[2])
    # other rules: nothing is copied
    head, body = before.read_bytes().split(b"\n", 1)
    other = json.loads(head)
    other["version"] = "0000000000000000"
    before.write_bytes(json.dumps(other).encode() + b"\n" + body)
    unit_store.write(after, TEXTS[1:3], reuse=before)
    assert b"LIVENESS" not in unit_store.Store(after).document(unit_store.key(TEXTS[1]))
