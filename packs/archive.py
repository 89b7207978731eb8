"""Pack archives: write one, with its sha256, for `install` (packs/install.py) to verify.

An archive (`kpack pack`) holds the current build of one pack in the pack-folder layout of
packs/format.py, so that it unpacks as a folder `KnowledgePack.open` accepts::

    <name>/current
    <name>/builds/<build_id>/manifest.json, pack.db, tables/*.parquet, ...

It is a gzipped tar written reproducibly (sorted entries, fixed owner, mode and times), so
the same build always gives the same bytes and the same checksum. `NAME.tar.gz.sha256`
next to it holds the checksum in `sha256sum` format.

This module also holds what writing and reading archives share: the layout's names and
suffixes, `ArchiveError` and the checksum helpers.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import stat
import tarfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from packs import format as fmt
from packs.manifest import read_manifest

ARCHIVE_SUFFIX = ".tar.gz"
CHECKSUM_SUFFIX = ".sha256"

# A pack name or build id that is safe as one folder name (in an archive and on disk).
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


class ArchiveError(ValueError):
    """An archive was refused or a pack could not be archived; the message says why."""


# --- small helpers --------------------------------------------------------------------


def sha256_file(path: Path | BinaryIO) -> str:
    """Hex sha256 of a file (path or open binary file, read from its current position)."""
    h = hashlib.sha256()
    f = open(path, "rb") if isinstance(path, Path) else path
    try:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    finally:
        if isinstance(path, Path):
            f.close()
    return h.hexdigest()


def checksum_from_text(text: str, where: str) -> str:
    """The hex sha256 at the start of `text` (a sidecar or --sha256), lower-cased;
    ArchiveError naming `where` when it is not one."""
    token = text.split()[0] if text.split() else ""
    if not _HEX64.match(token):
        raise ArchiveError(f"{where}: not a sha256 checksum (expected 64 hex digits)")
    return token.lower()


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# --- pack -------------------------------------------------------------------------------


@dataclass
class PackedArchive:
    path: Path
    checksum_path: Path
    sha256: str
    size_bytes: int
    name: str
    build_id: str
    files: int
    signed_by: str | None = None  # the signing key's id (packs.signing.key_id)


def _tarinfo(name: str, *, size: int = 0, is_dir: bool = False, mtime: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if is_dir else tarfile.REGTYPE
    info.mode = 0o755 if is_dir else 0o644
    info.size = 0 if is_dir else size
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def pack_archive(pack_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
                 *, sign_key: str | os.PathLike[str] | None = None) -> PackedArchive:
    """Archive the current build of `pack_dir` (pack folder or build folder).

    `out` is the archive path, or a folder to write `<name>-<build_id>.tar.gz` into
    (default: the working folder). Also writes `<out>.sha256`. Both are written to temp
    files and renamed, so a failed run leaves no half-written archive. The build's files
    are checked against its manifest first (every file listed, every hash right), so an
    archive never ships a damaged build. `sign_key`: an Ed25519 private key file; the
    archive then carries `manifest.sig`, its signature of the manifest (packs/signing.py),
    in place of any the build had.
    Raises PackFormatError for something that is not a pack or is damaged or unverifiable
    (SignatureError for an unusable key), ArchiveError when the build holds a symlink or
    special file (archives carry regular files only).
    """
    from packs import integrity, signing
    from packs.layout import resolve_build_dir
    from packs.manifest import manifest_bytes

    build_dir = resolve_build_dir(pack_dir)
    manifest = read_manifest(build_dir)
    integrity.verify(build_dir, manifest.checksums)
    signature = (signing.sign(manifest_bytes(build_dir), signing.load_private_key(sign_key))
                 if sign_key is not None else None)
    name, build_id = manifest.name, build_dir.name
    if not SAFE_NAME.match(name) or not SAFE_NAME.match(build_id):
        raise ArchiveError(f"{build_dir}: pack name {name!r} or build id {build_id!r} is not "
                           "a safe folder name")
    target = Path(out) if out is not None else Path.cwd()
    if target.is_dir():
        target = target / f"{name}-{build_id}{ARCHIVE_SUFFIX}"
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mtime = int(datetime.fromisoformat(manifest.built_at.replace("Z", "+00:00")).timestamp())
    except ValueError:
        mtime = 0
    prefix = f"{name}/{fmt.BUILDS_DIR}/{build_id}"
    entries = _entries(build_dir, prefix, skip_signature=signature is not None)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as raw:
            files = _write_tar(raw, name, build_id, entries, signature, mtime)
        digest = sha256_file(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    checksum_path = target.with_name(target.name + CHECKSUM_SUFFIX)
    _write_atomic(checksum_path, f"{digest}  {target.name}\n".encode())
    signer = json.loads(signature)["key_id"] if signature is not None else None
    return PackedArchive(path=target, checksum_path=checksum_path, sha256=digest,
                         size_bytes=target.stat().st_size, name=name, build_id=build_id,
                         files=files, signed_by=signer)


def _entries(build_dir: Path, prefix: str, *, skip_signature: bool
             ) -> list[tuple[str, Path | None]]:
    """(name in the archive, file or None for a folder) for the build folder and
    everything in it, sorted; `skip_signature` leaves out a signature about to be replaced.
    ArchiveError for a symlink or special file."""
    entries: list[tuple[str, Path | None]] = [(prefix, None)]
    for path in sorted(build_dir.rglob("*")):
        rel = path.relative_to(build_dir).as_posix()
        if skip_signature and rel == fmt.SIGNATURE_FILE:
            continue
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode) or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise ArchiveError(f"{path}: not a regular file or folder; a pack archive holds "
                               "regular files only (remove it, or rebuild the pack)")
        entries.append((f"{prefix}/{rel}", path if stat.S_ISREG(mode) else None))
    return entries


def _write_tar(raw, name: str, build_id: str, entries: list[tuple[str, Path | None]],
               signature: bytes | None, mtime: int) -> int:
    """Write the gzip'd tar to the binary file `raw`: the pack folder, its `current`
    pointer, the entries and the new signature, every time stamp `mtime` (reproducible
    bytes). Returns the number of files written."""
    files = 0
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirname in (name, f"{name}/{fmt.BUILDS_DIR}"):
            tar.addfile(_tarinfo(dirname, is_dir=True, mtime=mtime))
        pointer = f"{build_id}\n".encode()
        tar.addfile(_tarinfo(f"{name}/{fmt.CURRENT_FILE}", size=len(pointer), mtime=mtime),
                    io.BytesIO(pointer))
        for arcname, path in entries:
            if path is None:
                tar.addfile(_tarinfo(arcname, is_dir=True, mtime=mtime))
                continue
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                tar.addfile(_tarinfo(arcname, size=size, mtime=mtime), f)
            files += 1
        if signature is not None:
            prefix = f"{name}/{fmt.BUILDS_DIR}/{build_id}"
            tar.addfile(_tarinfo(f"{prefix}/{fmt.SIGNATURE_FILE}", size=len(signature),
                                 mtime=mtime), io.BytesIO(signature))
            files += 1
    return files
