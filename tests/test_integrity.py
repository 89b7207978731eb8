"""Readers survive a damaged pack: checksums in the manifest, checked before Kuzu sees the
database, so that a corrupt pack.db is one clear error (exit 2), never a crashed host."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from query_fixtures import embedder, pack_dir  # noqa: F401 (fixtures)

from packs import KnowledgePack
from packs import format as fmt
from packs.archive import ArchiveError, pack_archive, sha256_file
from packs.format import PackFormatError
from packs.install import install
from packs.integrity import PackCorruptError, PackUnverifiedError, check_on_open, verify
from packs.layout import resolve_build_dir
from packs.manifest import read_manifest
from packs.text import TEXT_RULES_VERSION

ROOT = Path(__file__).resolve().parents[1]


def _copy(pack_dir: Path, dest: Path) -> tuple[Path, Path]:
    shutil.copytree(pack_dir, dest)
    return dest, resolve_build_dir(dest)


def _flip(path: Path, offset: int, size: int = 4096) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        data = f.read(size)
        f.seek(offset)
        f.write(bytes(b ^ 0xFF for b in data))


def _kpack(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "KPACK_CACHE_DIR": str(cache)}
    env.pop("KPACK_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "packs.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_every_file_of_a_build_has_a_checksum(pack_dir) -> None:
    build = resolve_build_dir(pack_dir)
    sums = read_manifest(build).checksums
    files = {p.relative_to(build).as_posix() for p in build.rglob("*") if p.is_file()}
    assert set(sums) == files - {fmt.MANIFEST_FILE}
    assert fmt.DB_FILE in sums and sums[fmt.DB_FILE]["bytes"] == (build / fmt.DB_FILE).stat().st_size
    assert verify(build, sums) == list(sums)


@pytest.mark.parametrize("where", [0.0, 0.1, 0.35, 0.6, 0.9])
def test_a_flipped_block_in_the_database_is_one_clear_error_in_a_child_process(
        pack_dir, tmp_path, where) -> None:
    copy, build = _copy(pack_dir, tmp_path / "kestrel")
    db = build / fmt.DB_FILE
    _flip(db, int(db.stat().st_size * where) // 4096 * 4096)
    res = _kpack("search", str(copy), "how are jobs retried?", cache=tmp_path / "cache")
    # The parent is alive (it is running this line) and the child exited cleanly with 2.
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "pack.db does not match its checksum" in lines[0]


def test_an_empty_database_names_its_size(pack_dir, tmp_path) -> None:
    copy, build = _copy(pack_dir, tmp_path / "kestrel")
    (build / fmt.DB_FILE).write_bytes(b"")
    with pytest.raises(PackCorruptError, match=r"pack.db is 0 bytes, the manifest says"):
        KnowledgePack.open(copy)
    res = _kpack("query", str(copy), "how are jobs retried?", cache=tmp_path / "cache")
    assert res.returncode == 2 and "0 bytes" in res.stderr and "Traceback" not in res.stderr


def test_a_verified_database_is_not_hashed_again_until_it_changes(pack_dir, tmp_path,
                                                                   monkeypatch) -> None:
    monkeypatch.setenv("KPACK_CACHE_DIR", str(tmp_path / "cache"))
    copy, build = _copy(pack_dir, tmp_path / "kestrel")
    sums = read_manifest(build).checksums
    check_on_open(build, sums)
    stamps = list((tmp_path / "cache" / "verified").iterdir())
    assert [p.name for p in stamps] == [f"{sums[fmt.DB_FILE]['sha256']}.json"]
    KnowledgePack.open(copy).close()  # the stamp matches: opens
    _flip(build / fmt.DB_FILE, 8192, 16)  # same size, new bytes: the stamp no longer holds
    with pytest.raises(PackCorruptError, match="does not match its checksum"):
        check_on_open(build, sums)


def test_kpack_verify_checks_every_file(pack_dir, tmp_path) -> None:
    copy, build = _copy(pack_dir, tmp_path / "kestrel")
    ok = _kpack("verify", str(copy), cache=tmp_path / "cache")
    assert ok.returncode == 0 and "files match their checksums" in ok.stdout
    parquet = build / fmt.TABLES_DIR / f"{fmt.SECTIONS}.parquet"
    _flip(parquet, 0, 8)
    bad = _kpack("verify", str(copy), cache=tmp_path / "cache")
    assert bad.returncode == 2 and "sections.parquet does not match" in bad.stderr


def test_kpack_verify_lists_every_damaged_file(pack_dir, tmp_path) -> None:
    copy, build = _copy(pack_dir, tmp_path / "kestrel")
    _flip(build / fmt.TABLES_DIR / f"{fmt.SECTIONS}.parquet", 0, 8)
    (build / fmt.TABLES_DIR / f"{fmt.ARTICLES}.parquet").unlink()
    with open(build / fmt.DB_FILE, "ab") as f:
        f.write(b"x")
    with pytest.raises(PackCorruptError) as caught:
        verify(build, read_manifest(build).checksums)
    assert len(caught.value.damaged) == 3, caught.value.damaged
    bad = _kpack("verify", str(copy), cache=tmp_path / "cache")
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2, bad.stderr
    assert sorted(line.split()[1] for line in lines[:-1]) == sorted(
        [f"{fmt.TABLES_DIR}/{fmt.SECTIONS}.parquet", f"{fmt.TABLES_DIR}/{fmt.ARTICLES}.parquet",
         fmt.DB_FILE]), lines
    assert all(line.startswith("damaged: ") for line in lines[:-1])
    assert lines[-1].startswith("error: ") and "3 of" in lines[-1] and "listed above" in lines[-1]


def test_install_refuses_an_archive_whose_gzip_crc_fails(pack_dir, tmp_path) -> None:
    packed = pack_archive(pack_dir, tmp_path / "kestrel.tar.gz")
    raw = bytearray(packed.path.read_bytes())
    raw[-8] ^= 0xFF  # the CRC-32 of the gzip trailer: only reading to the end notices
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(bytes(raw))
    with pytest.raises(gzip.BadGzipFile):
        gzip.decompress(bytes(raw))
    with pytest.raises(ArchiveError, match="not a valid"):
        install(bad, tmp_path / "installed", sha256=sha256_file(bad))
    assert not (tmp_path / "installed" / "kestrel").exists()


# --- integrity is never optional by accident (#37) ----------------------------------------


def _strip_checksums(build: Path) -> None:
    manifest = build / fmt.MANIFEST_FILE
    raw = json.loads(manifest.read_text(encoding="utf-8"))
    raw["checksums"] = {}
    manifest.write_text(json.dumps(raw), encoding="utf-8")


def test_a_manifest_without_checksums_is_refused_unless_the_caller_opts_in(pack_dir, tmp_path,
                                                                          monkeypatch) -> None:
    monkeypatch.setenv("KPACK_CACHE_DIR", str(tmp_path / "cache"))
    copy, build = _copy(pack_dir, tmp_path / "kestrel")
    _strip_checksums(build)
    with pytest.raises(PackUnverifiedError, match="no checksums"):
        KnowledgePack.open(copy)
    with KnowledgePack.open(copy, verify=False) as kp:  # the explicit opt-in
        assert kp.search("Where do jobs go after they exhaust their retries?").sections
    res = _kpack("search", str(copy), "how are jobs retried?", cache=tmp_path / "cache")
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "no checksums" in lines[0] and "--allow-unverified" in lines[0]
    ok = _kpack("search", str(copy), "how are jobs retried?", "--allow-unverified",
                cache=tmp_path / "cache")
    assert ok.returncode == 0 and ok.stdout.strip(), ok.stderr


def test_a_manifest_field_of_the_wrong_type_is_one_line_naming_the_field(pack_dir,
                                                                         tmp_path) -> None:
    """`checksums: null` used to print pydantic's four-line report."""
    copy, build = _copy(pack_dir, tmp_path / "kestrel")
    manifest = build / fmt.MANIFEST_FILE
    raw = json.loads(manifest.read_text(encoding="utf-8"))
    raw["checksums"], raw["counts"] = None, {"articles": "many"}
    manifest.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(PackFormatError) as caught:
        read_manifest(build)
    message = str(caught.value)
    assert "\n" not in message, message
    assert "checksums: Input should be a valid dictionary (got None)" in message
    assert "counts.articles: Input should be a valid integer" in message
    res = _kpack("inspect", str(copy), cache=tmp_path / "cache")
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "invalid manifest: " in lines[0]
    assert "checksums: Input should be a valid dictionary (got None)" in lines[0]


def test_checksums_removed_and_a_flipped_database_is_refused_not_searched(pack_dir,
                                                                          tmp_path) -> None:
    copy, build = _copy(pack_dir, tmp_path / "kestrel")
    _strip_checksums(build)
    db = build / fmt.DB_FILE
    _flip(db, int(db.stat().st_size * 0.1) // 4096 * 4096)
    res = _kpack("search", str(copy), "how are jobs retried?", cache=tmp_path / "cache")
    assert res.returncode == 2 and res.stdout == "", (res.returncode, res.stdout[:200])
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_file_the_checksums_leave_out_is_refused(pack_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KPACK_CACHE_DIR", str(tmp_path / "cache"))
    copy, build = _copy(pack_dir, tmp_path / "kestrel")
    (build / fmt.TABLES_DIR / "extra.json").write_text("{}", encoding="utf-8")
    with pytest.raises(PackUnverifiedError, match=r"tables/extra.json not covered"):
        KnowledgePack.open(copy)
    with pytest.raises(PackUnverifiedError, match="not covered"):
        verify(build, read_manifest(build).checksums)


def test_a_malformed_checksum_entry_is_damage(pack_dir, tmp_path) -> None:
    copy, build = _copy(pack_dir, tmp_path / "kestrel")
    raw = json.loads((build / fmt.MANIFEST_FILE).read_text(encoding="utf-8"))
    raw["checksums"]["../../etc/passwd"] = {"sha256": "0" * 64, "bytes": 1}
    (build / fmt.MANIFEST_FILE).write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(PackCorruptError, match="malformed"):
        KnowledgePack.open(copy)


def test_a_small_file_a_query_reads_is_hashed_on_open(pack_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KPACK_CACHE_DIR", str(tmp_path / "cache"))
    copy, build = _copy(pack_dir, tmp_path / "kestrel")
    examples = build / fmt.FEWSHOT_EXAMPLES
    text = examples.read_bytes()
    examples.write_bytes(text.replace(b"e", b"E", 1))  # same size, other bytes
    with pytest.raises(PackCorruptError, match="examples.jsonl does not match"):
        KnowledgePack.open(copy)


def test_kpack_verify_refuses_a_build_without_checksums(pack_dir, tmp_path) -> None:
    copy, build = _copy(pack_dir, tmp_path / "kestrel")
    _strip_checksums(build)
    bad = _kpack("verify", str(copy), cache=tmp_path / "cache")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "no checksums" in bad.stderr
    ok = _kpack("verify", str(copy), "--allow-unverified", cache=tmp_path / "cache")
    assert ok.returncode == 0 and "nothing to verify" in ok.stdout


def test_undecodable_text_in_an_unverified_database_is_the_damaged_pack_error(
        pack_dir, tmp_path, monkeypatch) -> None:
    """With the checks switched off, what a damaged database raises while it is read is
    still the pack-damaged error (exit 2), not a raw UnicodeDecodeError."""
    monkeypatch.setenv("KPACK_CACHE_DIR", str(tmp_path / "cache"))
    copy, build = _copy(pack_dir, tmp_path / "kestrel")
    db = build / fmt.DB_FILE
    raw = bytearray(db.read_bytes())
    at = raw.find(b"dead letter queue instead")
    assert at > 0
    raw[at:at + 2] = b"\xff\xfe"  # invalid UTF-8 in a stored string, same size
    db.write_bytes(bytes(raw))
    with KnowledgePack.open(copy, verify=False) as kp, \
            pytest.raises(PackCorruptError, match="reading the database failed"):
        kp.search("dead letter queue")
    res = _kpack("search", str(copy), "dead letter queue", "--allow-unverified",
                 cache=tmp_path / "cache")
    assert res.returncode == 2, res.stderr[-2000:]
    # (the model's loading progress bar may come first: this pack carries no encoder)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "the pack is damaged" in errors[0], res.stderr[-2000:]
    assert "Traceback" not in res.stderr


def test_undecodable_few_shot_examples_are_the_damaged_pack_error(tmp_path) -> None:
    from packs.retrieval.fewshot import load_examples

    path = tmp_path / "examples.jsonl"
    path.write_bytes(b'{"question": "caf\xe9?", "answer": "a"}\n')
    with pytest.raises(PackCorruptError, match="not UTF-8 text"):
        load_examples(path)


def test_eval_mcp_and_explore_refuse_an_unverified_pack_unless_told(pack_dir, tmp_path,
                                                                    monkeypatch) -> None:
    """Every command that opens a pack takes the same opt-in as search and query."""
    from query_fixtures import url_of

    from packs.explore.cli import open_app
    from packs.mcp_server import close_packs, open_packs

    monkeypatch.setenv("KPACK_CACHE_DIR", str(tmp_path / "cache"))
    copy, build = _copy(pack_dir, tmp_path / "kestrel")
    _strip_checksums(build)
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": "Where do jobs go after they exhaust their retries?",
                                     "gold_sources": [url_of("retries")]}) + "\n")
    args = ("eval", str(copy), "--questions", str(questions), "--no-save", "--no-judge")
    refused = _kpack(*args, cache=tmp_path / "cache")
    assert refused.returncode == 2 and "no checksums" in refused.stderr, refused.stderr
    ok = _kpack(*args, "--allow-unverified", cache=tmp_path / "cache")
    assert ok.returncode == 0 and "1 questions" in ok.stdout, ok.stderr

    with pytest.raises(PackUnverifiedError):
        open_packs([copy], warm=False)
    close_packs(open_packs([copy], warm=False, verify=False))
    with pytest.raises(PackUnverifiedError):
        open_app([copy])
    _app, packset = open_app([copy], verify=False)
    assert [p.manifest.name for p in packset.packs] == ["kestrel"]
    packset.close()
    both = _kpack("mcp", str(copy), "--allow-unverified", "--trust", str(tmp_path / "k.pub"),
                  cache=tmp_path / "cache")
    assert both.returncode == 2 and "cannot go with --allow-unverified" in both.stderr


@pytest.mark.parametrize("damage", [b"{\"pairs\": ", b"\xff\xfe\x00garbage",
                                    b"{\"pairs\": \"not base64!\", \"terms\": {},"
                                    b" \"sections\": 1, \"text_rules\": \""
                                    + TEXT_RULES_VERSION.encode() + b"\"}"])
def test_a_damaged_vocabulary_in_an_unverified_pack_is_the_damaged_pack_error(
        pack_dir, tmp_path, monkeypatch, damage) -> None:
    """tables/terms.json read with the checks off: truncated JSON, bytes that are not
    UTF-8, or fields the build never writes are the pack-damaged error, not a raw one."""
    monkeypatch.setenv("KPACK_CACHE_DIR", str(tmp_path / "cache"))
    copy, build = _copy(pack_dir, tmp_path / "kestrel")
    terms = build / fmt.TABLES_DIR / fmt.TERMS_FILE
    assert terms.is_file()
    terms.write_bytes(damage)
    with KnowledgePack.open(copy, verify=False) as kp, \
            pytest.raises(PackCorruptError, match="terms.json: not the vocabulary"):
        kp.search("dead letter queue")
