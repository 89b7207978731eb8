"""The sections' vocabulary the confidence gate reads (`gate.Vocabulary`): from the build's
tables/terms.json when it was counted with the current text rules (packs/text.py), else
counted again from the database's sections.

Counting again costs a second or more per 5,000 sections (1.5 s for the Kubernetes pack,
3.5 s for SciFact's 10,569 sections on this machine), paid by every process that opens a
pack built before the current text rules. So a recount is kept in the user's cache folder
($KPACK_CACHE_DIR/vocabulary/), keyed by the sha256 the manifest gives the database and
the text rules: the sections are in the database, so the same database under the same
rules has the same vocabulary. A pack without a checksum for its database is never cached.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from packs import text as text_rules
from packs.integrity import PackCorruptError
from packs.retrieval import gate


def _parse(raw: dict, code_sections: Callable[[], int]) -> gate.Vocabulary:
    code = raw.get("code_sections")
    return gate.Vocabulary(raw["terms"], int(raw["sections"]), gate.decode_pairs(raw["pairs"]),
                           int(code_sections() if code is None else code))


def dump(vocab: gate.Vocabulary) -> str:
    """The Vocabulary in terms.json's form (tasks/publish/tables.py writes the same keys)."""
    return json.dumps({"sections": vocab.sections, "text_rules": text_rules.TEXT_RULES_VERSION,
                       "terms": dict(vocab.df), "pairs": gate.encode_pairs(vocab.pairs or ()),
                       "code_sections": vocab.code_sections}, separators=(",", ":"))


def cache_file(db_sha256: str) -> Path:
    from packs.onnx_backend import cache_root

    return cache_root() / "vocabulary" / f"{db_sha256}-{text_rules.TEXT_RULES_VERSION}.json"


def _cached(db_sha256: str | None) -> gate.Vocabulary | None:
    if not db_sha256:
        return None
    try:
        raw = json.loads(cache_file(db_sha256).read_text(encoding="utf-8"))
        return _parse(raw, lambda: 0)  # `dump` always writes code_sections
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # absent or unreadable: count again


def _keep(db_sha256: str | None, vocab: gate.Vocabulary) -> None:
    """Best effort: a read-only cache folder only means the next open counts again."""
    if not db_sha256:
        return
    path = cache_file(db_sha256)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(dump(vocab), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        return


def load(terms_path: Path, section_texts: Callable[[], Iterable[str]],
         db_sha256: str | None) -> gate.Vocabulary:
    """The vocabulary of the pack whose tables/terms.json is `terms_path`;
    `section_texts` reads the sections (for a recount), `db_sha256` is the manifest's
    checksum of the database (None: no cache). PackCorruptError when terms.json is not the
    JSON the build writes (a damaged pack opened with verify=False)."""
    try:
        raw = (json.loads(terms_path.read_text(encoding="utf-8")) if terms_path.is_file()
               else {})
        # Counted with other text rules than packs/text.py's (or before they were named:
        # a plural fold), or before the pair hashes: count the sections again.
        if "pairs" in raw and raw.get("text_rules") == text_rules.TEXT_RULES_VERSION:
            return _parse(raw, lambda: sum(map(gate.has_code, section_texts())))
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # json.JSONDecodeError and binascii.Error are ValueErrors; AttributeError: not a
        # JSON object
        raise PackCorruptError(
            f"{terms_path}: not the vocabulary the build writes ({type(exc).__name__}: "
            f"{str(exc)[:120]}): the pack is damaged; run kpack verify, then reinstall or "
            "rebuild it") from exc
    vocab = _cached(db_sha256)
    if vocab is None:
        vocab = gate.count_vocabulary(section_texts())
        _keep(db_sha256, vocab)
    return vocab
