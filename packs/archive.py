"""Pack archives: write one with a sha256, install one safely, list installed packs.

An archive (`kpack pack`) holds the current build of one pack in the pack-folder layout of
packs/format.py, so that it unpacks as a folder `KnowledgePack.open` accepts::

    <name>/current
    <name>/builds/<build_id>/manifest.json, pack.db, tables/*.parquet, ...

It is a gzipped tar written reproducibly (sorted entries, fixed owner, mode and times), so
the same build always gives the same bytes and the same checksum. `NAME.tar.gz.sha256`
next to it holds the checksum in `sha256sum` format.

`install` treats every archive as hostile until proven otherwise:
- the checksum (`sha256=` or the sidecar file / URL) must match before anything is read;
- only regular files and folders under one `<name>/` are accepted: absolute paths, `..`,
  symlinks, hard links, devices, FIFOs and anything outside the layout above are refused;
- the uncompressed size is capped (`max_bytes`), counted on the decompressed stream itself
  so that a gzip bomb stops at the cap, not after it;
- the manifest's format version must be readable by this query module, and the pack must
  open with `KnowledgePack`;
- it is extracted into a temporary folder inside the target folder and moved into place
  with renames on the same file system: a new pack appears whole, and an existing pack gets
  the new build next to its old ones and its `current` pointer replaced atomically. A failed
  install removes its temporary folder and leaves an existing pack untouched.
File modes from the archive are ignored (files 0644, folders 0755).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import stat
import tarfile
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from packs import format as fmt
from packs import layout
from packs.format import PackFormatError
from packs.manifest import read_manifest

ARCHIVE_SUFFIX = ".tar.gz"
CHECKSUM_SUFFIX = ".sha256"
DEFAULT_MAX_BYTES = 4 * 1024**3  # uncompressed size of an archive (and of a download)
MAX_MEMBERS = 100_000
DEFAULT_TIMEOUT_S = 60.0  # per network read/connect; the whole download gets 10x this
MAX_SIDECAR_BYTES = 4096
KEEP_BUILDS = 2  # builds kept in a pack folder after an install (current always stays)
# Tar headers (PAX ones can be any size) are read on top of member data: the decompressed
# stream may exceed the cap by this much (or by the cap itself, if smaller), no more.
_HEADER_ALLOWANCE = 64 * 1024**2

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)


class ArchiveError(ValueError):
    """An archive was refused or a pack could not be archived; the message says why."""


class DownloadError(RuntimeError):
    """Fetching an archive or its checksum over HTTP failed (network, status, timeout)."""


# --- small helpers --------------------------------------------------------------------


def parse_size(text: str | int) -> int:
    """Bytes from an int or a size like "500M", "4G", "1.5GiB" (powers of 1024)."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"invalid size {text!r}: use bytes or a number with K, M, G or T")
    unit = (m.group(2) or "").lower()[:1]
    return int(float(m.group(1)) * 1024 ** " kmgt".index(unit or " "))


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


def _checksum_from_text(text: str, where: str) -> str:
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


def _tarinfo(name: str, *, size: int = 0, is_dir: bool = False, mtime: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if is_dir else tarfile.REGTYPE
    info.mode = 0o755 if is_dir else 0o644
    info.size = 0 if is_dir else size
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def pack_archive(pack_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None
                 ) -> PackedArchive:
    """Archive the current build of `pack_dir` (pack folder or build folder).

    `out` is the archive path, or a folder to write `<name>-<build_id>.tar.gz` into
    (default: the working folder). Also writes `<out>.sha256`. Both are written to temp
    files and renamed, so a failed run leaves no half-written archive.
    Raises PackFormatError for something that is not a pack, ArchiveError when the build
    holds a symlink or special file (archives carry regular files only).
    """
    from packs.layout import resolve_build_dir

    build_dir = resolve_build_dir(pack_dir)
    manifest = read_manifest(build_dir)
    name, build_id = manifest.name, build_dir.name
    if not _NAME.match(name) or not _NAME.match(build_id):
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
    entries: list[tuple[str, Path | None]] = [(prefix, None)]
    for path in sorted(build_dir.rglob("*")):
        rel = path.relative_to(build_dir).as_posix()
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode) or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise ArchiveError(f"{path}: not a regular file or folder; a pack archive holds "
                               "regular files only (remove it, or rebuild the pack)")
        entries.append((f"{prefix}/{rel}", path if stat.S_ISREG(mode) else None))

    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    files = 0
    try:
        with open(tmp, "wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz, \
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
        digest = sha256_file(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    checksum_path = target.with_name(target.name + CHECKSUM_SUFFIX)
    _write_atomic(checksum_path, f"{digest}  {target.name}\n".encode())
    return PackedArchive(path=target, checksum_path=checksum_path, sha256=digest,
                         size_bytes=target.stat().st_size, name=name, build_id=build_id,
                         files=files)


# --- install ----------------------------------------------------------------------------


@dataclass
class Installed:
    name: str
    build_id: str
    path: Path
    sha256: str
    previous_build: str | None
    size_bytes: int


class _CappedReader:
    """A read-only stream that raises ArchiveError once more than `limit` bytes came out."""

    def __init__(self, raw: BinaryIO, max_bytes: int, label: str) -> None:
        self.raw, self.max_bytes, self.label, self.count = raw, max_bytes, label, 0
        self.limit = max_bytes + min(_HEADER_ALLOWANCE, max_bytes)

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0 or size > 1 << 20:
            size = 1 << 20
        data = self.raw.read(size)
        self.count += len(data)
        if self.count > self.limit:
            raise ArchiveError(f"{self.label}: expands to more than {self.max_bytes:,} bytes; "
                               "refused (raise the limit with --max-size if you trust it)")
        return data


def _member_parts(member: tarfile.TarInfo, label: str) -> list[str]:
    """The member's path components, or ArchiveError when its name or type is unsafe."""
    name = member.name
    where = f"{label}: entry {name[:200]!r}"
    if member.issym() or member.islnk():
        raise ArchiveError(f"{where} is a {'symbolic' if member.issym() else 'hard'} link "
                           f"(to {member.linkname[:200]!r}); pack archives may not hold links")
    if member.ischr() or member.isblk() or member.isfifo() or member.isdev():
        raise ArchiveError(f"{where} is a device or FIFO; pack archives hold regular files only")
    if not (member.isreg() or member.isdir()) or member.issparse():
        raise ArchiveError(f"{where} is not a regular file or folder (tar type "
                           f"{member.type!r}); refused")
    if "\\" in name or "\x00" in name:
        raise ArchiveError(f"{where} has a backslash or NUL in its path; refused")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise ArchiveError(f"{where} is an absolute path; refused")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ArchiveError(f"{where} contains '..' (path traversal); refused")
    if not parts:
        raise ArchiveError(f"{where} has an empty path; refused")
    return parts


def _check_layout(parts: list[str], is_dir: bool, where: str, build: list[str]) -> None:
    """Only `<name>/`, `<name>/current` and `<name>/builds/<one build id>/...` are allowed."""
    layout = (f"{where}: unexpected entry {'/'.join(parts)[:200]!r} (a pack archive holds "
              f"<name>/{fmt.CURRENT_FILE} and <name>/{fmt.BUILDS_DIR}/<build id>/ only)")
    if not _NAME.match(parts[0]):
        raise ArchiveError(layout)
    if len(parts) == 1:
        if not is_dir:
            raise ArchiveError(layout)
        return
    if parts[1] == fmt.CURRENT_FILE and len(parts) == 2 and not is_dir:
        return
    if parts[1] != fmt.BUILDS_DIR or (len(parts) == 2 and not is_dir):
        raise ArchiveError(layout)
    if len(parts) >= 3:
        if not _NAME.match(parts[2]):
            raise ArchiveError(layout)
        if build and build[0] != parts[2]:
            raise ArchiveError(f"{where}: holds more than one build ({build[0]!r} and "
                               f"{parts[2]!r}); a pack archive holds one")
        build[:1] = [parts[2]]


def _extract(f: BinaryIO, tree: Path, max_bytes: int, label: str) -> tuple[str, str]:
    """Extract a gzipped tar into `tree`, checking every entry; returns (name, build id)."""
    top: str | None = None
    build: list[str] = []
    total = members = 0
    try:
        capped = _CappedReader(gzip.GzipFile(fileobj=f, mode="rb"), max_bytes, label)
        with tarfile.open(fileobj=capped, mode="r|") as tar:
            for member in tar:
                members += 1
                if members > MAX_MEMBERS:
                    raise ArchiveError(f"{label}: more than {MAX_MEMBERS:,} entries; refused")
                parts = _member_parts(member, label)
                if top is None:
                    top = parts[0]
                elif parts[0] != top:
                    raise ArchiveError(f"{label}: more than one top-level folder ({top!r} "
                                       f"and {parts[0]!r}); a pack archive holds one pack")
                _check_layout(parts, member.isdir(), label, build)
                total += member.size
                if total > max_bytes:
                    raise ArchiveError(
                        f"{label}: expands to more than {max_bytes:,} bytes; refused "
                        "(raise the limit with --max-size if you trust it)")
                dest = tree.joinpath(*parts)
                try:
                    if member.isdir():
                        dest.mkdir(parents=True, exist_ok=True)
                        continue
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    src = _member_data(tar, member)
                    with open(dest, "xb") as out:
                        shutil.copyfileobj(src, out, 1 << 20)
                except (FileExistsError, NotADirectoryError) as exc:
                    raise ArchiveError(f"{label}: entry {member.name[:200]!r} appears twice "
                                       "or clashes with another entry; refused") from exc
        # tarfile stops at the end-of-archive blocks; read the gzip stream to its end so
        # that its CRC and length trailer are checked (a flipped byte fails there).
        while capped.read(1 << 20):
            pass
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ArchiveError(f"{label}: not a valid {ARCHIVE_SUFFIX} archive: {exc}") from exc
    if top is None or not build:
        raise ArchiveError(f"{label}: holds no pack build (expected <name>/{fmt.BUILDS_DIR}/"
                           "<build id>/)")
    return top, build[0]


def _member_data(tar: tarfile.TarFile, member: tarfile.TarInfo) -> BinaryIO:
    src = tar.extractfile(member)
    if src is None:  # cannot happen for a regular file; guards the type checker
        raise ArchiveError(f"entry {member.name!r} has no data")
    return src


def _validate(root: Path, name: str, build_id: str, label: str) -> None:
    """The extracted pack names its one build, has a readable format, and opens."""
    from packs.pack import KnowledgePack

    current = layout.current_id(root)
    if current != build_id:
        raise ArchiveError(f"{label}: '{fmt.CURRENT_FILE}' names {current!r}, but the "
                           f"archive holds build {build_id!r}")
    manifest_path = root / fmt.BUILDS_DIR / build_id / fmt.MANIFEST_FILE
    try:
        raw = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ArchiveError(f"{label}: no readable {fmt.MANIFEST_FILE} in build "
                           f"{build_id!r}: {exc}") from exc
    version = raw.get("format_version") if isinstance(raw, dict) else None
    try:
        fmt.check_format(version, f"{label} (pack {name!r})")
        manifest = read_manifest(manifest_path.parent)
        if manifest.name != name:
            raise ArchiveError(f"{label}: folder {name!r} holds a pack whose manifest is "
                               f"named {manifest.name!r}")
        # The manifest's own model, so that $KPACK_EMBEDDING_MODEL cannot fail the check.
        KnowledgePack.open(root, embedding_model=manifest.embedding.model).close()
    except PackFormatError as exc:
        # The temp path in the message would be gone by the time anyone reads it.
        raise ArchiveError(str(exc).replace(str(root), f"{label}:{name}")) from exc


def _move_into_place(new_root: Path, dest: Path, build_id: str) -> str | None:
    """Rename the extracted pack (or its build) into `dest`; returns the replaced build id."""
    if not dest.exists() and not dest.is_symlink():
        os.rename(new_root, dest)
        return None
    pointer = dest / fmt.CURRENT_FILE
    if dest.is_symlink() or not dest.is_dir() or not pointer.is_file():
        raise ArchiveError(f"{dest} exists and is not a knowledge pack folder; move it away "
                           "or install with --into another folder")
    previous = layout.current_id(dest)
    builds = dest / fmt.BUILDS_DIR
    builds.mkdir(exist_ok=True)
    target = builds / build_id
    aside = None
    if target.exists():
        aside = builds / f".replaced-{build_id}-{os.getpid()}-{time.monotonic_ns()}"
        os.rename(target, aside)
    try:
        os.rename(new_root / fmt.BUILDS_DIR / build_id, target)
    except OSError:
        if aside is not None:
            os.rename(aside, target)
        raise
    layout.set_current(dest, build_id)
    if aside is not None:
        shutil.rmtree(aside)
    layout.prune(dest, KEEP_BUILDS)
    return previous


def is_url(source: str | os.PathLike[str]) -> bool:
    return isinstance(source, str) and re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", source) is not None


def install(
    source: str | os.PathLike[str],
    into: str | os.PathLike[str] = "out",
    *,
    sha256: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    fetch: Callable[[str, Path, int, float], bool] | None = None,
) -> Installed:
    """Verify and install a pack archive (a local path or an http(s) URL) into `into/<name>/`.

    The expected checksum is `sha256`, else the sidecar (`<archive>.sha256`, fetched next to
    a URL); with neither, or on a mismatch, nothing is installed. `fetch` (default: httpx)
    downloads a URL to a file and returns False for a 404. Returns what was installed.
    Raises ArchiveError for a refused archive (checksum, unsafe entry, size, format, a pack
    that does not open, a non-pack in the way), DownloadError for network failures.
    """
    label = str(source)
    expected = _checksum_from_text(sha256, "--sha256") if sha256 is not None else None
    into_dir = Path(into).expanduser()
    created = not into_dir.exists()
    into_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".kpack-install-", dir=into_dir))
    installed = False
    try:
        if is_url(str(source)):
            url = str(source)
            if not url.lower().startswith(("http://", "https://")):
                raise ArchiveError(f"{url}: only http:// and https:// URLs are supported")
            fetch = fetch or _http_fetch
            archive = staging / "archive.tar.gz"
            if not fetch(url, archive, max_bytes, timeout_s):
                raise DownloadError(f"{url}: not found (HTTP 404)")
            if expected is None:
                sidecar = staging / "archive.sha256"
                if fetch(url + CHECKSUM_SUFFIX, sidecar, MAX_SIDECAR_BYTES, timeout_s):
                    expected = _checksum_from_text(
                        sidecar.read_text("utf-8", "replace"), url + CHECKSUM_SUFFIX)
        else:
            archive = Path(source).expanduser()
            if not archive.is_file():
                raise ArchiveError(f"{archive}: no such archive file")
            sidecar = archive.with_name(archive.name + CHECKSUM_SUFFIX)
            if expected is None and sidecar.is_file():
                expected = _checksum_from_text(
                    sidecar.read_text("utf-8", "replace")[:MAX_SIDECAR_BYTES], str(sidecar))
        if expected is None:
            raise ArchiveError(f"{label}: no checksum to verify against; pass --sha256 HEX or "
                               f"put {Path(label).name}{CHECKSUM_SUFFIX} next to the archive")
        with open(archive, "rb") as f:
            actual = sha256_file(f)
            if actual != expected:
                raise ArchiveError(f"{label}: checksum mismatch: expected {expected}, got "
                                   f"{actual}; the archive is corrupt or not the one you "
                                   "meant. Nothing was installed")
            f.seek(0)
            tree = staging / "tree"
            tree.mkdir()
            name, build_id = _extract(f, tree, max_bytes, label)
        _validate(tree / name, name, build_id, label)
        dest = into_dir / name
        previous = _move_into_place(tree / name, dest, build_id)
        installed = True
        return Installed(name=name, build_id=build_id, path=dest, sha256=actual,
                         previous_build=previous, size_bytes=_du(dest))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if created and not installed:
            into_dir.rmdir()  # it was made for this install and is empty again


def _http_fetch(url: str, dest: Path, max_bytes: int, timeout_s: float) -> bool:
    """GET `url` into `dest` with per-read and total timeouts and a size cap."""
    import httpx

    deadline = time.monotonic() + 10 * timeout_s
    try:
        with httpx.stream("GET", url, timeout=timeout_s, follow_redirects=True) as r:
            if r.status_code == 404:
                return False
            if r.status_code != 200:
                raise DownloadError(f"{url}: HTTP {r.status_code}")
            declared = r.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > max_bytes:
                raise ArchiveError(f"{url}: {int(declared):,} bytes is over the "
                                   f"{max_bytes:,}-byte limit; refused")
            got = 0
            with open(dest, "xb") as out:
                for chunk in r.iter_bytes(1 << 20):
                    got += len(chunk)
                    if got > max_bytes:
                        raise ArchiveError(f"{url}: more than {max_bytes:,} bytes; refused")
                    if time.monotonic() > deadline:
                        raise DownloadError(f"{url}: download took longer than "
                                            f"{10 * timeout_s:.0f} s")
                    out.write(chunk)
    except httpx.HTTPError as exc:
        raise DownloadError(f"{url}: {type(exc).__name__}: {exc}") from exc
    return True


# --- list -------------------------------------------------------------------------------


@dataclass
class PackEntry:
    name: str
    path: str
    build_id: str | None = None
    built_at: str | None = None
    format_version: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    embedding_model: str | None = None
    size_bytes: int = 0
    error: str | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _du(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


def _entry(pack: Path) -> PackEntry:
    from packs.layout import resolve_build_dir

    entry = PackEntry(name=pack.name, path=str(pack), size_bytes=_du(pack))
    try:
        m = read_manifest(resolve_build_dir(pack))
    except PackFormatError as exc:
        entry.error = str(exc)
        return entry
    entry.name, entry.build_id, entry.built_at = m.name, m.build_id, m.built_at
    entry.format_version = m.format_version
    entry.counts = m.counts.model_dump()
    entry.embedding_model = m.embedding.model
    return entry


def list_packs(root: str | os.PathLike[str] = "out") -> list[PackEntry]:
    """The packs in `root` (or `root` itself when it is a pack), sorted by folder name.

    A folder counts as a pack when it has a `current` file or a manifest; one whose
    manifest cannot be read is listed with `error` set. FileNotFoundError for a missing root.
    """
    base = Path(root).expanduser()
    if not base.is_dir():
        raise FileNotFoundError(f"{base}: no such folder")
    if (base / fmt.CURRENT_FILE).is_file() or (base / fmt.MANIFEST_FILE).is_file():
        return [_entry(base)]
    return [_entry(p) for p in sorted(base.iterdir())
            if p.is_dir() and not p.name.startswith(".")
            and ((p / fmt.CURRENT_FILE).is_file() or (p / fmt.MANIFEST_FILE).is_file())]
