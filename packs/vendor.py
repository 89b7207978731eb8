"""How the query module travels with a pack: a zip of the `packs` package (`packs.pyz`).

The build calls `write_zipapp(build_dir / format.VENDORED_MODULE)`; the zip holds the
package's .py files exactly as they were at build time. An app that must read a pack with
the very module that built it puts the zip first on its path:

    import sys; sys.path.insert(0, "PACK/builds/<id>/packs.pyz")
    from packs import KnowledgePack

Only the pure-Python module travels; its third-party dependencies (the query runtime:
kuzu, numpy, pydantic, onnxruntime, tokenizers, and anthropic for synthesis) must be
installed — `pip install knowledge-packs` is the supported way, the zip is the
fallback/audit copy. The model travels too, as the build's `encoder/` (packs/encoder.py).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def write_zipapp(dest: Path) -> Path:
    """Write the `packs` package sources to `dest` (a .pyz/.zip); returns `dest`."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(dest.suffix + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(PACKAGE_DIR.rglob("*.py")):
            rel = path.relative_to(PACKAGE_DIR.parent)
            # Fixed timestamps: the same sources give byte-identical zips.
            info = zipfile.ZipInfo(rel.as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    tmp.replace(dest)
    return dest
