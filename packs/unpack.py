"""Unpack a pack archive that is treated as hostile until proven otherwise.

`unpack` extracts a gzipped tar entry by entry, as a stream, and refuses:
- anything but regular files and folders under one `<name>/`: absolute paths, `..`,
  symlinks, hard links, devices, FIFOs and anything outside the pack layout
  (`<name>/current`, `<name>/builds/<one build id>/...`);
- an archive whose uncompressed size passes `max_bytes`, counted on the decompressed stream
  itself so that a gzip bomb stops at the cap, not after it; or that has too many entries;
- a corrupt stream (the gzip CRC and length trailer are read to the end).
File modes from the archive are ignored (files 0644, folders 0755). Checking the checksum
first, and the unpacked pack afterwards, is `install`'s job (packs/install.py).
"""

from __future__ import annotations

import gzip
import re
import shutil
import tarfile
import zlib
from pathlib import Path
from typing import BinaryIO

from packs import format as fmt
from packs.archive import ARCHIVE_SUFFIX, SAFE_NAME, ArchiveError

MAX_MEMBERS = 100_000
# Tar headers (PAX ones can be any size) are read on top of member data: the decompressed
# stream may exceed the cap by this much (or by the cap itself, if smaller), no more.
_HEADER_ALLOWANCE = 64 * 1024**2


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
    if not SAFE_NAME.match(parts[0]):
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
        if not SAFE_NAME.match(parts[2]):
            raise ArchiveError(layout)
        if build and build[0] != parts[2]:
            raise ArchiveError(f"{where}: holds more than one build ({build[0]!r} and "
                               f"{parts[2]!r}); a pack archive holds one")
        build[:1] = [parts[2]]


def unpack(f: BinaryIO, tree: Path, max_bytes: int, label: str) -> tuple[str, str]:
    """Extract a gzipped tar (`f`, at its start) into the empty folder `tree`, checking
    every entry; returns (pack name, build id). ArchiveError (naming `label`) for anything
    unsafe, too big, corrupt or outside the pack layout; `tree` may then hold a part."""
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
