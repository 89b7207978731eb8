"""Checksums of a build's files: written into the manifest, checked when a pack is opened.

Kuzu trusts its database file: a few flipped bytes can crash the process that opens it
(a segfault takes a host app such as the MCP server down with it), and a truncated file
fails with a confusing binder error. So a reader never hands Kuzu a file it has not
checked against the manifest:

- `checksums(build_dir)`: {relative path: {"sha256", "bytes"}} of every file of a build
  except the manifest and its signature; the publish step stores it as
  `Manifest.checksums`.
- `check_on_open(build_dir, sums)`: the manifest must list every file of the build (a
  manifest with no checksums, or one that leaves a file out, is refused: integrity is
  never skipped by accident), every listed file exists with its size (a stat each), and
  every file a query reads (`pack.db`, `tables/terms.json`, the few-shot and eval files)
  hashes to its checksum. The encoder is hashed by its loader (packs/encoder.py); the
  Parquet tables and packs.pyz, which no query reads, by `verify`. Hashing a large
  database on every open would dominate a cold start, so a successful hash of a file of
  1 MiB or more is remembered in a stamp file under the user's cache folder
  ($KPACK_CACHE_DIR), keyed by the file's device, inode, size, mtime and ctime: any
  write to the file changes ctime, and ctime cannot be set back from user space, so a
  stamp never vouches for bytes it did not hash.
- `verify(build_dir, sums)`: every file, fully, no stamps (`kpack verify`, `kpack install`);
  it lists every damaged file, not only the first.

A caller that must open an unchecked pack says so (`KnowledgePack.open(..., verify=False)`,
`--allow-unverified`); a damaged database may then crash the process.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from packs import format as fmt

CHUNK = 1 << 20
STAMP_VERSION = 1
STAMP_MIN_BYTES = 1 << 20  # smaller files are hashed on every open, with no stamp
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
OPT_OUT = "pass --allow-unverified (KnowledgePack.open(..., verify=False)) to open it unchecked"


class PackCorruptError(fmt.PackFormatError):
    """A file of the build does not match the manifest's checksum (or is missing), or the
    database could not be read: the pack is damaged. `damaged` holds one line per damaged
    file when every file was checked (`verify`)."""

    def __init__(self, message: str, damaged: list[str] | None = None) -> None:
        super().__init__(message)
        self.damaged = list(damaged or [])


class PackUnverifiedError(fmt.PackFormatError):
    """The manifest cannot vouch for the build: no checksums, or files it does not list."""


def sha256_of(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _unlisted(rel: str, name: str) -> bool:
    """Files no checksum covers: the manifest, its signature and hidden files."""
    return rel in (fmt.MANIFEST_FILE, fmt.SIGNATURE_FILE) or name.startswith(".")


def _files(build_dir: Path) -> list[str]:
    return sorted(rel for p in build_dir.rglob("*")
                  if p.is_file() and not _unlisted(rel := p.relative_to(build_dir).as_posix(),
                                                   p.name))


def checksums(build_dir: Path) -> dict[str, dict[str, object]]:
    """Checksum and size of every file under `build_dir` but the manifest and its
    signature, by relative POSIX path (sorted, so that the manifest is stable)."""
    return {rel: {"sha256": sha256_of(build_dir / rel), "bytes": (build_dir / rel).stat().st_size}
            for rel in _files(build_dir)}


def require_coverage(build_dir: Path, sums: dict) -> None:
    """PackUnverifiedError unless `sums` is well formed and lists every file of the build."""
    if not sums:
        raise PackUnverifiedError(
            f"{build_dir}: the manifest has no checksums, so nothing vouches for this build's "
            f"files; rebuild or reinstall it, or {OPT_OUT}")
    for rel, entry in sums.items():
        parts = rel.split("/")
        if (not isinstance(entry, dict) or not _HEX64.match(str(entry.get("sha256", "")))
                or type(entry.get("bytes")) is not int or entry["bytes"] < 0
                or rel.startswith("/") or "\\" in rel or any(p in ("", ".", "..") for p in parts)):
            raise PackCorruptError(f"{build_dir}: the manifest's checksum entry {rel[:120]!r} "
                                   "is malformed; the pack is damaged: reinstall or rebuild it")
    extra = [rel for rel in _files(build_dir) if rel not in sums]
    if extra:
        more = f" and {len(extra) - 3} more" if len(extra) > 3 else ""
        raise PackUnverifiedError(
            f"{build_dir}: {', '.join(extra[:3])}{more} not covered by the manifest's "
            f"checksums; remove what was added, reinstall or rebuild, or {OPT_OUT}")


def _check_sizes(build_dir: Path, sums: dict) -> None:
    for rel, entry in sums.items():
        try:
            size = (build_dir / rel).stat().st_size
        except OSError as exc:
            raise PackCorruptError(f"{build_dir}: {rel} is missing ({exc.strerror}); "
                                   "reinstall or rebuild the pack") from exc
        if size != entry.get("bytes"):
            raise PackCorruptError(
                f"{build_dir}: {rel} is {size:,} bytes, the manifest says "
                f"{entry.get('bytes'):,}: the pack is damaged; reinstall or rebuild it")


def _check_hash(build_dir: Path, rel: str, entry: dict) -> None:
    actual = sha256_of(build_dir / rel)
    if actual != entry.get("sha256"):
        raise PackCorruptError(
            f"{build_dir}: {rel} does not match its checksum in the manifest: the pack is "
            "damaged; reinstall or rebuild it (kpack verify lists every damaged file)")


def _damage(path: Path, rel: str, entry: dict) -> str | None:
    """Why one listed file does not match the manifest, or None when it does."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        return f"{rel} is missing ({exc.strerror})"
    if size != entry.get("bytes"):
        return f"{rel} is {size:,} bytes, the manifest says {entry.get('bytes'):,}"
    if sha256_of(path) != entry.get("sha256"):
        return f"{rel} does not match its checksum in the manifest"
    return None


def verify(build_dir: Path, sums: dict, *, allow_unverified: bool = False) -> list[str]:
    """Hash every listed file; the relative paths checked. PackUnverifiedError when the
    manifest has no checksums or leaves a file out (unless `allow_unverified`: then the
    listed files only); PackCorruptError lists every file that is missing, has the wrong
    size or the wrong hash (one line each in `.damaged`), not only the first."""
    if not allow_unverified:
        require_coverage(build_dir, sums)
    damaged = [why for rel, entry in sums.items()
               if (why := _damage(build_dir / rel, rel, entry))]
    if damaged:
        raise PackCorruptError(
            f"{build_dir}: {len(damaged)} of {len(sums)} files are damaged: "
            f"{'; '.join(damaged)}; reinstall or rebuild the pack", damaged)
    return list(sums)


def hashed_on_open(rel: str) -> bool:
    """Whether opening a pack hashes this file: the files a query reads, but for the
    encoder (its loader hashes it before use)."""
    return not (rel.endswith(".parquet") or rel == fmt.VENDORED_MODULE
                or rel.startswith(fmt.ENCODER_DIR + "/"))


def check_on_open(build_dir: Path, sums: dict) -> None:
    """The check a reader runs before opening the database (see the module doc).
    PackUnverifiedError or PackCorruptError say what is wrong."""
    require_coverage(build_dir, sums)
    _check_sizes(build_dir, sums)
    for rel, entry in sums.items():
        if not hashed_on_open(rel):
            continue
        if entry["bytes"] < STAMP_MIN_BYTES:  # hashing it costs less than a stamp
            _check_hash(build_dir, rel, entry)
            continue
        path = build_dir / rel
        stamp = _stamp_path(entry["sha256"])
        key = _stat_key(path)
        if stamp is not None and _read_stamp(stamp) == key:
            continue
        _check_hash(build_dir, rel, entry)
        if stamp is not None:
            _write_stamp(stamp, key)


def _stat_key(path: Path) -> list[int]:
    st = path.stat()
    return [STAMP_VERSION, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _stamp_path(digest: str) -> Path | None:
    from packs.onnx_backend import cache_root

    return cache_root() / "verified" / f"{digest}.json"


def _read_stamp(path: Path) -> list[int] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, list) else None


def _write_stamp(path: Path, key: list[int]) -> None:
    """Best effort: a read-only cache only means the next open hashes again."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(key), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        return
