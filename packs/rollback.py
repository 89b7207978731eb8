"""No silent rollback: a pack folder's `current` never goes back to an older build unasked.

A signature says who built a build, not that it is the latest: an older build, correctly
signed by the same key, could be installed over a newer one (a mirror serving last month's
archive), and `current` would go back with one line of output. So:

- `kpack install` (packs/install.py) refuses an archive whose build is older than the
  installed current build (`check_install`), naming both, unless `allow_downgrade`; an
  allowed downgrade removes the newer builds (`drop_newer`), so the folder says what it
  holds and readers that check signatures do not take it for a rollback.
- `KnowledgePack.open(pack_folder, trust=...)` refuses a folder whose `current` names a
  build older than another build beside it that is signed by a trusted key
  (`newer_trusted`): `current` was moved back by something other than an install.
  Without `trust` nothing vouches for the other builds' dates, so nothing is compared.

Older means an earlier `built_at` (UTC), then a smaller build id (ids sort by time).
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from packs import format as fmt
from packs import layout
from packs.manifest import Manifest, manifest_bytes, parse_manifest


class DowngradeError(fmt.PackFormatError):
    """A build older than the current one was asked for without allowing a downgrade."""


def order_key(manifest: Manifest) -> tuple[datetime, str]:
    """How builds sort from oldest to newest: built_at, then build id."""
    try:
        at = datetime.fromisoformat(manifest.built_at.replace("Z", "+00:00"))
        at = at if at.tzinfo else at.replace(tzinfo=UTC)
    except ValueError:
        at = datetime.min.replace(tzinfo=UTC)
    return at, manifest.build_id


def _label(manifest: Manifest) -> str:
    return f"build {manifest.build_id} (built {manifest.built_at})"


def _installed(pack_root: Path, build_id: str) -> Manifest | None:
    build = layout.build_path(pack_root, build_id)
    try:
        return parse_manifest(manifest_bytes(build), build)
    except fmt.PackFormatError:
        return None  # damaged or gone: nothing to compare with


def check_install(pack_root: Path, new: Manifest, label: str) -> None:
    """DowngradeError when `new` is older than the current build of `pack_root` (a pack
    folder, or a folder that does not exist yet)."""
    current_id = layout.current_id(pack_root) if pack_root.is_dir() else None
    current = _installed(pack_root, current_id) if current_id else None
    if current is not None and order_key(new) < order_key(current):
        raise DowngradeError(
            f"{label}: {_label(new)} is older than the installed current {_label(current)} "
            f"of {pack_root}: refusing a rollback; pass --allow-downgrade "
            "(allow_downgrade=True) to install it anyway")


def drop_newer(pack_root: Path, build_id: str) -> list[str]:
    """Remove the builds of `pack_root` newer than `build_id` (after an allowed
    downgrade); returns their ids."""
    mine = _installed(pack_root, build_id)
    if mine is None:
        return []
    removed = []
    for other in layout.build_ids(pack_root):
        found = _installed(pack_root, other) if other != build_id else None
        if found is not None and order_key(found) > order_key(mine):
            shutil.rmtree(layout.build_path(pack_root, other), ignore_errors=True)
            removed.append(other)
    return removed


def newer_trusted(build_dir: Path, manifest: Manifest, trust) -> None:
    """DowngradeError when `build_dir` is the current build of a pack folder that also
    holds a newer build signed by a key of `trust` (see the module doc)."""
    from packs import signing

    root = layout.pack_root_of(build_dir)
    if root is None:
        return
    for other in layout.build_ids(root):
        if other == build_dir.name:
            continue
        found = _installed(root, other)
        if found is None or order_key(found) <= order_key(manifest):
            continue
        other_dir = layout.build_path(root, other)
        try:
            signing.check(other_dir, manifest_bytes(other_dir), trust)
        except fmt.PackFormatError:
            continue  # not vouched for by a trusted key: proves nothing
        raise DowngradeError(
            f"{root}: current names {_label(manifest)}, but {_label(found)}, newer and "
            "signed by a trusted key, is installed beside it: a rollback? Reinstall the "
            f"newer build, or open {build_dir} itself (allow_downgrade=True) to use the "
            "older one")
