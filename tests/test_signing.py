"""Signed packs (#37): `kpack keygen`, `kpack pack --sign`, `kpack install --trust` and
`KnowledgePack.open(..., trust=)`. A real Ed25519 key pair, a real pack, real archives."""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from query_fixtures import embedder, pack_dir  # noqa: F401 (fixtures)

from packs import KnowledgePack
from packs import format as fmt
from packs.archive import ArchiveError, pack_archive, sha256_file
from packs.install import install
from packs.integrity import checksums
from packs.layout import resolve_build_dir
from packs.signing import SignatureError, generate_keypair, key_id, load_public_key

ROOT = Path(__file__).resolve().parents[1]


def _kpack(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    full.pop("KPACK_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "packs.cli", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("keys")
    private, public, _kid = generate_keypair(folder / "signer")
    return private, public


@pytest.fixture(scope="module")
def signed(pack_dir, keys, tmp_path_factory) -> Path:
    return pack_archive(pack_dir, tmp_path_factory.mktemp("signed") / "kestrel.tar.gz",
                        sign_key=keys[0]).path


def _members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def _rewrite(archive: Path, dest: Path, change) -> Path:
    """An archive with `change(members)` applied and a matching .sha256: what someone who
    controls the download location can do."""
    members = _members(archive)
    change(members)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size = len(members[name])
            tar.addfile(info, io.BytesIO(members[name]))
    dest.write_bytes(gzip.compress(buf.getvalue()))
    (dest.parent / (dest.name + ".sha256")).write_text(f"{sha256_file(dest)}  {dest.name}\n")
    return dest


BUILD = "kestrel/builds/b0001"


def test_keygen_writes_a_private_key_only_its_owner_reads(tmp_path) -> None:
    res = _kpack("keygen", str(tmp_path / "k"), "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert (tmp_path / "k").stat().st_mode & 0o777 == 0o600
    assert out["key_id"] == key_id(load_public_key(tmp_path / "k.pub"))
    again = _kpack("keygen", str(tmp_path / "k"))
    assert again.returncode == 2 and "exists" in again.stderr  # never overwrites a key


def test_a_signed_archive_installs_with_trust_and_opens_with_trust(signed, keys,
                                                                   tmp_path) -> None:
    assert f"{BUILD}/{fmt.SIGNATURE_FILE}" in _members(signed)
    rec = install(signed, tmp_path / "installed", trust=keys[1])
    assert rec.signed_by == key_id(load_public_key(keys[1]))
    with KnowledgePack.open(tmp_path / "installed" / "kestrel", trust=keys[1]) as kp:
        assert kp.manifest.name == "kestrel"
    res = _kpack("install", str(signed), "--into", str(tmp_path / "cli"), "--trust", str(keys[1]))
    assert res.returncode == 0 and "signed by trusted key" in res.stdout, res.stderr
    ok = _kpack("verify", str(tmp_path / "cli" / "kestrel"), "--trust", str(keys[1]))
    assert ok.returncode == 0 and "signed by trusted key" in ok.stdout, ok.stderr


def test_an_unsigned_archive_is_refused_with_trust(pack_dir, keys, tmp_path) -> None:
    plain = pack_archive(pack_dir, tmp_path / "plain.tar.gz").path
    with pytest.raises(ArchiveError, match="not signed"):
        install(plain, tmp_path / "installed", trust=keys[1])
    assert not (tmp_path / "installed").exists()
    res = _kpack("install", str(plain), "--into", str(tmp_path / "x"), "--trust", str(keys[1]))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    with pytest.raises(SignatureError, match="not signed"):
        KnowledgePack.open(pack_dir, trust=keys[1])


def test_an_archive_re_signed_with_another_key_is_refused(signed, keys, tmp_path) -> None:
    other = tmp_path / "other"
    generate_keypair(other)
    resigned = pack_archive(_installed(signed, tmp_path), tmp_path / "re.tar.gz",
                            sign_key=other).path
    with pytest.raises(ArchiveError, match="does not verify with the trusted key"):
        install(resigned, tmp_path / "installed", trust=keys[1])
    # Both keys trusted: either signature will do.
    assert install(resigned, tmp_path / "both", trust=[keys[1], f"{other}.pub"]).signed_by


def _installed(archive: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "unpacked"
    install(archive, dest)
    return dest / "kestrel"


def test_a_fully_rewritten_archive_is_refused_by_its_signature(signed, keys, tmp_path) -> None:
    """pack.db, the manifest's checksum and the .sha256 all rewritten (the probe that
    installed and served before): only the signature can tell."""
    def tamper(members: dict[str, bytes]) -> None:
        db = bytearray(members[f"{BUILD}/{fmt.DB_FILE}"])
        db[-1] ^= 0x01
        members[f"{BUILD}/{fmt.DB_FILE}"] = bytes(db)
        manifest = json.loads(members[f"{BUILD}/{fmt.MANIFEST_FILE}"])
        import hashlib

        manifest["checksums"][fmt.DB_FILE]["sha256"] = hashlib.sha256(db).hexdigest()
        members[f"{BUILD}/{fmt.MANIFEST_FILE}"] = json.dumps(manifest).encode()

    bad = _rewrite(signed, tmp_path / "bad.tar.gz", tamper)
    assert install(bad, tmp_path / "untrusting").name == "kestrel"  # checksums all agree
    with pytest.raises(ArchiveError, match="changed after signing"):
        install(bad, tmp_path / "installed", trust=keys[1])
    res = _kpack("install", str(bad), "--into", str(tmp_path / "cli"), "--trust", str(keys[1]))
    assert res.returncode == 2 and "changed after signing" in res.stderr
    assert not (tmp_path / "cli").exists()


def test_a_pack_changed_after_install_fails_to_open_with_trust(signed, keys, tmp_path) -> None:
    pack = _installed(signed, tmp_path)
    build = resolve_build_dir(pack)
    (build / "fewshot" / "examples.jsonl").write_text('{"question": "q", "answer": "a"}\n')
    raw = json.loads((build / fmt.MANIFEST_FILE).read_text())
    raw["checksums"] = checksums(build)  # a consistent, re-sealed manifest
    (build / fmt.MANIFEST_FILE).write_text(json.dumps(raw))
    KnowledgePack.open(pack).close()  # consistent checksums: opens without trust
    with pytest.raises(SignatureError, match="changed after signing"):
        KnowledgePack.open(pack, trust=keys[1])


def test_a_malformed_signature_is_refused(signed, keys, tmp_path) -> None:
    def garble(members: dict[str, bytes]) -> None:
        members[f"{BUILD}/{fmt.SIGNATURE_FILE}"] = b'{"scheme": "ed25519", "signature": "!!"}'

    with pytest.raises(ArchiveError, match="not a valid ed25519 signature"):
        install(_rewrite(signed, tmp_path / "g.tar.gz", garble), tmp_path / "i", trust=keys[1])


def test_signature_is_plain_ed25519_over_the_manifest_bytes(signed, keys) -> None:
    members = _members(signed)
    record = json.loads(members[f"{BUILD}/{fmt.SIGNATURE_FILE}"])
    public = load_public_key(keys[1])
    public.verify(base64.b64decode(record["signature"]), members[f"{BUILD}/{fmt.MANIFEST_FILE}"])
    assert record["scheme"] == "ed25519" and record["key_id"] == key_id(public)


def test_signed_archives_are_reproducible(pack_dir, signed, keys, tmp_path) -> None:
    again = pack_archive(pack_dir, tmp_path / "again.tar.gz", sign_key=keys[0])
    assert again.sha256 == sha256_file(signed)  # Ed25519 signatures are deterministic


def test_bad_keys_are_one_line_errors(pack_dir, tmp_path) -> None:
    (tmp_path / "junk").write_text("not a key")
    res = _kpack("pack", str(pack_dir), "-o", str(tmp_path / "a.tar.gz"), "--sign",
                 str(tmp_path / "junk"))
    assert res.returncode == 2 and "not a usable private key" in res.stderr
    assert not (tmp_path / "a.tar.gz").exists()
    with pytest.raises(SignatureError, match="not a public key"):
        KnowledgePack.open(pack_dir, trust=tmp_path / "junk")
    with pytest.raises(ValueError, match="cannot go with verify=False"):
        KnowledgePack.open(pack_dir, trust=Ed25519PrivateKey.generate().public_key(),
                           verify=False)


def test_an_encrypted_key_needs_its_passphrase(pack_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KPACK_SIGNING_PASSPHRASE", "correct horse")
    private, public, _ = generate_keypair(tmp_path / "enc")
    assert b"ENCRYPTED" in private.read_bytes()
    archive = pack_archive(pack_dir, tmp_path / "e.tar.gz", sign_key=private).path
    monkeypatch.delenv("KPACK_SIGNING_PASSPHRASE")
    with pytest.raises(SignatureError, match="KPACK_SIGNING_PASSPHRASE"):
        pack_archive(pack_dir, tmp_path / "f.tar.gz", sign_key=private)
    assert install(archive, tmp_path / "i", trust=public).signed_by


def test_pack_refuses_a_build_that_does_not_match_its_manifest(pack_dir, tmp_path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(pack_dir, copy)
    (resolve_build_dir(copy) / fmt.TABLES_DIR / "links.parquet").write_bytes(b"x")
    res = _kpack("pack", str(copy), "-o", str(tmp_path / "a.tar.gz"))
    assert res.returncode == 2 and "links.parquet" in res.stderr
