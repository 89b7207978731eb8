"""Checksums of a build's files: written into the manifest, checked when a pack is opened.

Kuzu trusts its database file: a few flipped bytes can crash the process that opens it
(a segfault takes a host app such as the MCP server down with it), and a truncated file
fails with a confusing binder error. So a reader never hands Kuzu a file it has not
checked against the manifest:

- `checksums(build_dir)`: {relative path: {"sha256", "bytes"}} of every file of a build
  except the manifest itself; the publish step stores it as `Manifest.checksums`.
- `check_on_open(build_dir, manifest)`: every listed file exists with its size (a stat
  each), and `pack.db` hashes to its checksum. Hashing a large database on every open
  would dominate a cold start, so a successful full check is remembered in a stamp file
  under the user's cache folder ($KPACK_CACHE_DIR), keyed by the file's device, inode,
  size, mtime and ctime: any write to the file changes ctime, and ctime cannot be set
  back from user space, so a stamp never vouches for bytes it did not hash.
- `verify(build_dir, manifest)`: every file, fully, no stamps (`kpack verify`).

Packs written before checksums existed have none; they open as before, unchecked.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from packs import format as fmt

CHUNK = 1 << 20
STAMP_VERSION = 1


class PackCorruptError(fmt.PackFormatError):
    """A file of the build does not match the manifest's checksum (or is missing)."""


def sha256_of(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def checksums(build_dir: Path) -> dict[str, dict[str, object]]:
    """Checksum and size of every file under `build_dir` but the manifest, by relative
    POSIX path (sorted, so that the manifest is stable)."""
    out: dict[str, dict[str, object]] = {}
    for path in sorted(p for p in build_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(build_dir).as_posix()
        if rel == fmt.MANIFEST_FILE or path.name.startswith("."):
            continue
        out[rel] = {"sha256": sha256_of(path), "bytes": path.stat().st_size}
    return out


def _listed(build_dir: Path, sums: dict) -> list[tuple[str, Path, dict]]:
    return [(rel, build_dir / rel, entry) for rel, entry in sums.items()]


def _check_sizes(build_dir: Path, sums: dict) -> None:
    for rel, path, entry in _listed(build_dir, sums):
        try:
            size = path.stat().st_size
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


def verify(build_dir: Path, sums: dict) -> list[str]:
    """Hash every listed file; the relative paths checked. PackCorruptError names the
    first file that is missing, has the wrong size or the wrong hash."""
    _check_sizes(build_dir, sums)
    for rel, _path, entry in _listed(build_dir, sums):
        _check_hash(build_dir, rel, entry)
    return list(sums)


def check_on_open(build_dir: Path, sums: dict) -> None:
    """The cheap check a reader runs before opening the database (see the module doc)."""
    if not sums:
        return
    _check_sizes(build_dir, sums)
    entry = sums.get(fmt.DB_FILE)
    if entry is None:
        return
    path = build_dir / fmt.DB_FILE
    stamp = _stamp_path(entry["sha256"])
    key = _stat_key(path)
    if stamp is not None and _read_stamp(stamp) == key:
        return
    _check_hash(build_dir, fmt.DB_FILE, entry)
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
