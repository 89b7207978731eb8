"""Pack archives on a small real pack: round trip, checksums, hostile archives, listing."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import typer
from loopback_site import LoopbackSite
from query_fixtures import embedder, pack_dir, url_of  # noqa: F401 (fixtures)
from typer.testing import CliRunner

from packs import KnowledgePack
from packs.archive import ArchiveError, pack_archive, sha256_file
from packs.cli.admin import register
from packs.install import DownloadError, install, list_packs, parse_size
from packs.rollback import DowngradeError

QUESTION = "Where do jobs go after they exhaust their retries?"


@pytest.fixture(scope="module")
def archive(pack_dir, tmp_path_factory) -> Path:
    return pack_archive(pack_dir, tmp_path_factory.mktemp("arch") / "kestrel.tar.gz").path


def _search(path: Path) -> tuple[list[str], str]:
    with KnowledgePack.open(path) as kp:
        r = kp.search(QUESTION, fewshot=False)  # few-shot only feeds synthesis
        return [s.url for s in r.sections], r.context


def _left_behind(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# --- round trip -------------------------------------------------------------------------


def test_archive_round_trips_with_the_same_search_result(pack_dir, archive, tmp_path):
    sidecar = archive.with_name("kestrel.tar.gz.sha256")
    digest = sha256_file(archive)
    assert sidecar.read_text() == f"{digest}  kestrel.tar.gz\n"
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert "kestrel/current" in names and "kestrel/builds/b0001/manifest.json" in names
    assert "kestrel/builds/b0001/pack.db" in names

    into = tmp_path / "installed"
    rec = install(archive, into)
    assert (rec.name, rec.build_id, rec.sha256, rec.previous_build) == (
        "kestrel", "b0001", digest, None)
    assert _left_behind(into) == ["kestrel"]  # no staging folder left
    urls, context = _search(into / "kestrel")
    assert urls[0] == url_of("queues")
    assert (urls, context) == _search(pack_dir)


def test_archives_are_reproducible(pack_dir, archive, tmp_path):
    again = pack_archive(pack_dir / "builds" / "b0001", tmp_path)  # a build folder, a folder out
    assert again.path.name == "kestrel-b0001.tar.gz"
    assert again.sha256 == sha256_file(archive)


def _rebuilt(pack_dir: Path, dest: Path, build_id: str) -> Path:
    """A copy of the pack whose one build is called `build_id`."""
    shutil.copytree(pack_dir, dest)
    os.rename(dest / "builds" / "b0001", dest / "builds" / build_id)
    manifest = dest / "builds" / build_id / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "build_id": build_id}))
    (dest / "current").write_text(build_id + "\n")
    return dest


def test_install_over_an_existing_pack_swaps_current(pack_dir, archive, tmp_path):
    newer = _rebuilt(pack_dir, tmp_path / "src" / "kestrel", "b0002")
    newer_archive = pack_archive(newer, tmp_path / "b2.tar.gz").path
    into = tmp_path / "installed"
    install(archive, into)
    rec = install(newer_archive, into)
    assert (rec.build_id, rec.previous_build) == ("b0002", "b0001")
    assert (into / "kestrel" / "current").read_text().strip() == "b0002"
    assert sorted(p.name for p in (into / "kestrel" / "builds").iterdir()) == ["b0001", "b0002"]
    # Reinstalling the older build that is still there is a rollback (#49): refused
    # unless asked, then it replaces it, becomes current and the newer build goes.
    with pytest.raises(DowngradeError, match="older than the installed current build b0002"):
        install(archive, into)
    rec = install(archive, into, allow_downgrade=True)
    assert (rec.build_id, rec.previous_build, rec.removed_builds) == ("b0001", "b0002",
                                                                     ["b0002"])
    assert _left_behind(into / "kestrel" / "builds") == ["b0001"]
    assert _search(into / "kestrel")[0][0] == url_of("queues")


def test_a_failed_install_leaves_the_existing_pack_untouched(pack_dir, archive, tmp_path):
    into = tmp_path / "installed"
    install(archive, into)
    before = sorted(str(p.relative_to(into)) for p in into.rglob("*"))
    # A well-formed archive whose manifest has a format this module cannot read.
    manifest = json.loads((pack_dir / "builds/b0001/manifest.json").read_text())
    manifest.update(format_version=99, build_id="b0009")
    bad = _make_archive(tmp_path / "future.tar.gz", [
        _dir("kestrel"), _file("kestrel/current", b"b0009\n"),
        _file("kestrel/builds/b0009/manifest.json", json.dumps(manifest).encode()),
        _file("kestrel/builds/b0009/pack.db", (pack_dir / "builds/b0001/pack.db").read_bytes()),
    ])
    with pytest.raises(ArchiveError, match="format 99 is not readable") as exc:
        install(bad, into)
    assert "\n" not in str(exc.value)
    assert sorted(str(p.relative_to(into)) for p in into.rglob("*")) == before
    assert _search(into / "kestrel")[0][0] == url_of("queues")


def test_install_refuses_a_folder_that_is_not_a_pack(archive, tmp_path):
    into = tmp_path / "installed"
    (into / "kestrel").mkdir(parents=True)
    (into / "kestrel" / "notes.txt").write_text("mine")
    with pytest.raises(ArchiveError, match="exists and is not a knowledge pack"):
        install(archive, into)
    assert _left_behind(into) == ["kestrel"]
    assert _left_behind(into / "kestrel") == ["notes.txt"]


# --- checksums --------------------------------------------------------------------------


def test_checksum_mismatch_and_missing_checksum_are_refused(archive, tmp_path):
    copy = tmp_path / "copy.tar.gz"
    copy.write_bytes(archive.read_bytes())
    into = tmp_path / "installed"
    with pytest.raises(ArchiveError, match="no checksum to verify against"):
        install(copy, into)
    copy.with_name("copy.tar.gz.sha256").write_text("0" * 64 + "  copy.tar.gz\n")
    with pytest.raises(ArchiveError, match="checksum mismatch"):
        install(copy, into)
    with pytest.raises(ArchiveError, match="checksum mismatch"):
        install(archive, into, sha256="ab" * 32)  # --sha256 wins over a correct sidecar
    with pytest.raises(ArchiveError, match="not a sha256 checksum"):
        install(archive, into, sha256="abc")
    assert _left_behind(into) == []
    assert install(copy, into, sha256=sha256_file(archive)).build_id == "b0001"


def test_a_tampered_archive_fails_its_checksum(archive, tmp_path):
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    evil = tmp_path / "kestrel.tar.gz"
    evil.write_bytes(bytes(data))
    (tmp_path / "kestrel.tar.gz.sha256").write_text(sha256_file(archive))
    with pytest.raises(ArchiveError, match="checksum mismatch"):
        install(evil, tmp_path / "installed")
    assert _left_behind(tmp_path / "installed") == []


# --- hostile archives -------------------------------------------------------------------


def _dir(name: str) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info, None


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _special(name: str, kind: bytes, link: str = "") -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info, None


def _make_archive(path: Path, members) -> Path:
    """A .tar.gz of exactly these members, with a correct sidecar checksum."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    raw = gzip.compress(buf.getvalue(), compresslevel=1, mtime=0)
    path.write_bytes(raw)
    path.with_name(path.name + ".sha256").write_text(hashlib.sha256(raw).hexdigest() + "\n")
    return path


START = [_dir("kestrel"), _file("kestrel/current", b"b1\n"), _dir("kestrel/builds/b1")]

HOSTILE = {
    "traversal": ([*START, _file("kestrel/builds/b1/../../../escaped", b"x")], "path traversal"),
    "leading-dotdot": ([_file("../escaped", b"x")], "path traversal"),
    "absolute": ([*START, _file("/tmp/kpack-escaped", b"x")], "absolute path"),
    "symlink": ([*START, _special("kestrel/builds/b1/pack.db", tarfile.SYMTYPE, "/etc/passwd")],
                "symbolic link"),
    "hardlink": ([*START, _special("kestrel/builds/b1/pack.db", tarfile.LNKTYPE, "/etc/passwd")],
                 "hard link"),
    "device": ([*START, _special("kestrel/builds/b1/tty", tarfile.CHRTYPE)], "device"),
    "fifo": ([*START, _special("kestrel/builds/b1/pipe", tarfile.FIFOTYPE)], "device or FIFO"),
    "oversized": ([*START, _file("kestrel/builds/b1/pack.db", b"\0" * 300_000)],
                  "expands to more than 100,000 bytes"),
    "two-packs": ([*START, _dir("other")], "more than one top-level folder"),
    "two-builds": ([*START, _dir("kestrel/builds/b2")], "more than one build"),
    "stray-file": ([*START, _file("kestrel/run.sh", b"#!/bin/sh\n")], "unexpected entry"),
    "duplicate": ([*START, _file("kestrel/builds/b1/a", b"1"), _file("kestrel/builds/b1/a", b"2")],
                  "appears twice"),
    "no-build": ([_dir("kestrel"), _file("kestrel/current", b"b1\n")], "holds no pack build"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_archives_are_refused_and_leave_nothing_behind(case, tmp_path):
    members, message = HOSTILE[case]
    work = tmp_path / "work"
    work.mkdir()
    evil = _make_archive(work / f"{case}.tar.gz", members)
    into = work / "installed"
    with pytest.raises(ArchiveError, match=message) as exc:
        install(evil, into, max_bytes=100_000)
    assert "\n" not in str(exc.value)
    assert not into.exists()  # not even the folder it would have installed into
    assert sorted(p.name for p in work.iterdir()) == sorted([evil.name, evil.name + ".sha256"])
    assert not (tmp_path / "escaped").exists() and not Path("/tmp/kpack-escaped").exists()


def test_a_gzip_bomb_stops_at_the_cap(tmp_path):
    # Sizes declared in member headers are checked before reading; a PAX header has no
    # declared cap, so the decompressed stream itself is counted and cut off.
    info, data = _file("kestrel/builds/b1/pack.db", b"x")
    info.pax_headers = {"comment": "A" * 20_000_000}
    bomb = _make_archive(tmp_path / "bomb.tar.gz", [*START, (info, data)])
    assert bomb.stat().st_size < 100_000
    with pytest.raises(ArchiveError, match="expands to more than 1,000,000 bytes"):
        install(bomb, tmp_path / "installed", max_bytes=1_000_000)
    big = _make_archive(tmp_path / "big.tar.gz", [
        *START, _file("kestrel/builds/b1/pack.db", b"\0" * 20_000_000)])
    with pytest.raises(ArchiveError, match="expands to more than 1,000,000 bytes"):
        install(big, tmp_path / "installed", max_bytes=1_000_000)
    assert _left_behind(tmp_path / "installed") == []


def test_not_an_archive(tmp_path):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"this is not gzip")
    junk.with_name("junk.tar.gz.sha256").write_text(sha256_file(junk))
    with pytest.raises(ArchiveError, match="not a valid .tar.gz archive"):
        install(junk, tmp_path / "installed")
    with pytest.raises(ArchiveError, match="no such archive file"):
        install(tmp_path / "missing.tar.gz", tmp_path / "installed")


# --- URLs ------------------------------------------------------------------------------


def test_install_from_a_url_with_its_sidecar(archive, tmp_path):
    data = archive.read_bytes()
    sidecar = archive.with_name("kestrel.tar.gz.sha256").read_bytes()
    with LoopbackSite() as site:
        site.route("/p/kestrel.tar.gz", lambda r: r.send(200, data, "application/gzip"))
        site.route("/p/kestrel.tar.gz.sha256", lambda r: r.send(200, sidecar, "text/plain"))
        site.route("/bare.tar.gz", lambda r: r.send(200, data, "application/gzip"))
        rec = install(site.url("/p/kestrel.tar.gz"), tmp_path / "a")
        assert rec.build_id == "b0001"
        with pytest.raises(ArchiveError, match="no checksum"):
            install(site.url("/bare.tar.gz"), tmp_path / "b")
        with pytest.raises(ArchiveError, match="over the 1,000-byte limit"):
            install(site.url("/p/kestrel.tar.gz"), tmp_path / "c", max_bytes=1000)
        with pytest.raises(DownloadError, match="HTTP 404"):
            install(site.url("/missing.tar.gz"), tmp_path / "d")
    assert _search(tmp_path / "a" / "kestrel")[0][0] == url_of("queues")
    for folder in "bcd":
        assert _left_behind(tmp_path / folder) == []
    with pytest.raises(ArchiveError, match="only http:// and https://"):
        install("ftp://example.test/x.tar.gz", tmp_path / "e")


def test_a_download_without_length_stops_at_the_cap(tmp_path):
    chunks = (b"\0" * 65536 for _ in range(64))  # 4 MiB, close-delimited
    with LoopbackSite() as site:
        site.route("/big.tar.gz", lambda r: r.send(200, chunks, "application/gzip"))
        with pytest.raises(ArchiveError, match="more than 100,000 bytes"):
            install(site.url("/big.tar.gz"), tmp_path / "x", sha256="0" * 64, max_bytes=100_000)
    assert _left_behind(tmp_path / "x") == []


# --- listing and the CLI ---------------------------------------------------------------


def test_list_packs(archive, tmp_path):
    into = tmp_path / "installed"
    install(archive, into)
    (into / "broken").mkdir()
    (into / "broken" / "current").write_text("nope\n")
    (into / "not-a-pack").mkdir()
    entries = list_packs(into)
    assert [e.name for e in entries] == ["broken", "kestrel"]
    broken, kestrel = entries
    assert "no manifest.json" in (broken.error or "")
    assert kestrel.error is None and kestrel.build_id == "b0001"
    assert kestrel.counts["sections"] == 11 and kestrel.counts["articles"] == 5
    assert kestrel.embedding_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert kestrel.size_bytes > 0 and kestrel.built_at == "2026-01-01T00:00:00Z"
    assert [e.name for e in list_packs(into / "kestrel")] == ["kestrel"]
    with pytest.raises(FileNotFoundError):
        list_packs(tmp_path / "nowhere")


@pytest.fixture()
def cli() -> typer.Typer:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    register(app)
    return app


def test_cli_pack_install_list(cli, pack_dir, tmp_path):
    runner = CliRunner()
    out = tmp_path / "kestrel.tar.gz"
    res = runner.invoke(cli, ["pack", str(pack_dir), "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["sha256"] == sha256_file(out)
    into = tmp_path / "installed"
    res = runner.invoke(cli, ["install", str(out), "--into", str(into)])
    assert res.exit_code == 0, res.output
    assert "installed kestrel build b0001" in res.stdout
    res = runner.invoke(cli, ["list", str(into), "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)[0]["name"] == "kestrel"
    res = runner.invoke(cli, ["list", str(into)])
    assert "kestrel  build b0001" in res.stdout and "11 sections" in res.stdout
    res = runner.invoke(cli, ["install", str(out), "--into", str(into), "--sha256", "0" * 64])
    assert res.exit_code == 2 and "checksum mismatch" in res.stderr
    res = runner.invoke(cli, ["install", str(out), "--into", str(into), "--max-size", "1K"])
    assert res.exit_code == 2 and "expands to more than 1,024 bytes" in res.stderr
    res = runner.invoke(cli, ["pack", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "no such pack directory" in res.stderr


def test_parse_size():
    assert parse_size("4G") == 4 * 1024**3
    assert parse_size("500M") == 500 * 1024**2
    assert parse_size("1.5KiB") == 1536
    assert parse_size("123") == 123
    with pytest.raises(ValueError, match="invalid size"):
        parse_size("lots")


def test_import_packs_stays_thin():
    code = ("import sys, packs, packs.archive, packs.install, packs.mcp_server; "
            "bad = [m for m in ('mcp', 'prefect', 'httpx', 'typer') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1],
                   env={**os.environ, "HF_HUB_OFFLINE": "1"})
