"""Install a pack archive safely, and list the packs installed in a folder.

`install` treats every archive as hostile until proven otherwise:
- the checksum (`sha256=` or the sidecar file / URL) must match before anything is read;
- the archive is unpacked by `packs.unpack.unpack`, which refuses unsafe entries, anything
  outside the pack layout, and more than `max_bytes` uncompressed;
- the manifest's format version must be readable by this query module, and the pack must
  open with `KnowledgePack`;
- it is extracted into a temporary folder inside the target folder and moved into place
  with renames on the same file system: a new pack appears whole, and an existing pack gets
  the new build next to its old ones and its `current` pointer replaced atomically. A failed
  install removes its temporary folder and leaves an existing pack untouched.

Writing archives is packs/archive.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packs import format as fmt
from packs import layout, rollback, signing
from packs.archive import CHECKSUM_SUFFIX, ArchiveError, checksum_from_text, sha256_file
from packs.format import PackFormatError
from packs.manifest import read_manifest
from packs.unpack import unpack

DEFAULT_MAX_BYTES = 4 * 1024**3  # uncompressed size of an archive (and of a download)
DEFAULT_TIMEOUT_S = 60.0  # per network read/connect; the whole download gets 10x this
MAX_SIDECAR_BYTES = 4096
KEEP_BUILDS = 2  # builds kept in a pack folder after an install (current always stays)

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)


class DownloadError(RuntimeError):
    """Fetching an archive or its checksum over HTTP failed (network, status, timeout)."""


# --- install ----------------------------------------------------------------------------


def parse_size(text: str | int) -> int:
    """Bytes from an int or a size like "500M", "4G", "1.5GiB" (powers of 1024)."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"invalid size {text!r}: use bytes or a number with K, M, G or T")
    unit = (m.group(2) or "").lower()[:1]
    return int(float(m.group(1)) * 1024 ** " kmgt".index(unit or " "))


@dataclass
class Installed:
    name: str
    build_id: str
    path: Path
    sha256: str
    previous_build: str | None
    size_bytes: int
    signed_by: str | None = None  # the trusted key that signed it (with trust=)
    # the key a signature names when it was not checked (no trust=): say so
    signed_unchecked: str | None = None
    removed_builds: list[str] = field(default_factory=list)  # newer ones, on a downgrade


def _validate(root: Path, name: str, build_id: str, label: str, trust=None) -> str | None:
    """The extracted pack names its one build, has a readable format, every file matches
    the manifest's checksums (which must list them all), it is signed by a key of `trust`
    when given (returns that key's id), and it opens."""
    from packs import integrity
    from packs.pack import KnowledgePack
    from packs.pack import log as pack_log

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
        signer = (signing.check(manifest_path.parent, manifest_path.read_bytes(), trust)
                  if trust is not None else None)
        integrity.verify(manifest_path.parent, manifest.checksums)
        # The manifest's own model, so that $KPACK_EMBEDDING_MODEL cannot fail the check.
        # (Its note on an unchecked signature would name this temp folder: install says it.)
        quiet, pack_log.disabled = pack_log.disabled, True
        try:
            KnowledgePack.open(root, embedding_model=manifest.embedding.model,
                               trust=trust).close()
        finally:
            pack_log.disabled = quiet
    except PackFormatError as exc:
        # The temp path in the message would be gone by the time anyone reads it.
        raise ArchiveError(str(exc).replace(str(root), f"{label}:{name}")) from exc
    return signer


def _move_into_place(new_root: Path, dest: Path, build_id: str,
                     allow_downgrade: bool = False) -> tuple[str | None, list[str]]:
    """Rename the extracted pack (or its build) into `dest`; returns (the replaced build
    id, the newer builds removed by an allowed downgrade)."""
    if not dest.exists() and not dest.is_symlink():
        os.rename(new_root, dest)
        return None, []
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
    removed = rollback.drop_newer(dest, build_id) if allow_downgrade else []
    layout.prune(dest, KEEP_BUILDS)
    return previous, removed


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
    trust=None,
    allow_downgrade: bool = False,
) -> Installed:
    """Verify and install a pack archive (a local path or an http(s) URL) into `into/<name>/`.

    The expected checksum is `sha256`, else the sidecar (`<archive>.sha256`, fetched next to
    a URL); with neither, or on a mismatch, nothing is installed. Every file of the build
    must match the manifest's checksums. `trust` (public key files or keys, see
    packs/signing.py): the manifest must be signed by one of them; anyone who can rewrite
    an archive can rewrite its .sha256 too, so only a signature says who built a pack.
    `fetch` (default: httpx) downloads a URL to a file and returns False for a 404.
    A build older than the installed current one is refused (DowngradeError, naming both:
    a signed archive can still be an old one) unless `allow_downgrade`, which then also
    removes the installed builds newer than it (packs/rollback.py).
    Returns what was installed. Raises ArchiveError for a refused archive (checksum,
    signature, unsafe entry, size, format, damage, a pack that does not open, a non-pack in
    the way), DowngradeError for an older build, DownloadError for network failures.
    """
    if trust is not None:
        from packs.signing import trusted_keys

        trust = trusted_keys(trust)  # an unusable key fails before any download
    label = str(source)
    expected = checksum_from_text(sha256, "--sha256") if sha256 is not None else None
    into_dir = Path(into).expanduser()
    created = not into_dir.exists()
    into_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".kpack-install-", dir=into_dir))
    installed = False
    try:
        archive, expected = _archive(source, staging, expected, max_bytes, timeout_s, fetch)
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
            name, build_id = unpack(f, tree, max_bytes, label)
        signer = _validate(tree / name, name, build_id, label, trust)
        dest = into_dir / name
        new_build = tree / name / fmt.BUILDS_DIR / build_id
        if not allow_downgrade:
            rollback.check_install(dest, read_manifest(new_build), label)
        status = signing.signature_status(new_build, signer is not None)
        previous, removed = _move_into_place(tree / name, dest, build_id, allow_downgrade)
        installed = True
        return Installed(name=name, build_id=build_id, path=dest, sha256=actual,
                         previous_build=previous, size_bytes=_du(dest), signed_by=signer,
                         signed_unchecked=status["key_id"] if status and not signer else None,
                         removed_builds=removed)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if created and not installed:
            into_dir.rmdir()  # it was made for this install and is empty again


def _archive(source, staging: Path, expected: str | None, max_bytes: int, timeout_s: float,
             fetch) -> tuple[Path, str | None]:
    """(the archive file: `source` itself, or downloaded into `staging`; the checksum to
    expect: `expected`, else its .sha256 sidecar's, else None)."""
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
                expected = checksum_from_text(
                    sidecar.read_text("utf-8", "replace"), url + CHECKSUM_SUFFIX)
        return archive, expected
    archive = Path(source).expanduser()
    if not archive.is_file():
        raise ArchiveError(f"{archive}: no such archive file")
    sidecar = archive.with_name(archive.name + CHECKSUM_SUFFIX)
    if expected is None and sidecar.is_file():
        expected = checksum_from_text(
            sidecar.read_text("utf-8", "replace")[:MAX_SIDECAR_BYTES], str(sidecar))
    return archive, expected


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
