"""The answer units of a pack's sections and what the reader reads of each whatever the
question (units.candidates, unit_facts.facts), worked out once in the build and shipped
with the pack as tables/units.jsonl (packs.format.UNITS_FILE), so that a fresh process
(one `kpack query`) reads them instead of working them out for every section it answers
from, at about half the cost (benchmarks/results/issue47zu_unit_store.md).

The file: a first line of JSON, {"format": FORMAT, "version": VERSION, "index": {key:
[offset, length]}}, then one JSON document per distinct section text, at `offset` bytes
after that line; `key` is `key(text)`. A document is [[unit, facts], ...] in the order
units.candidates gives them (see `encode`). VERSION hashes the source of every module
whose rules make the units and their facts: a pack built by other rules is read as if it
had no file (every unit is worked out again), never with stale units.

`register(path)` (KnowledgePack.open) makes a pack's file known to this process; the
reader asks `candidates(text)`, which primes units.candidates and unit_facts.facts with
the stored analysis the first time this process meets a text (`_served`), and otherwise
is units.candidates. Pure JSON: the query runtime reads it without pyarrow.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Iterable
from pathlib import Path

from packs import markdown, text, word_forms
from packs.retrieval import code_units, reader_question, segment, unit_facts, units
from packs.retrieval.segment import Unit

FORMAT = "units-v1"
# The modules whose rules make the units and their facts (a change to any is a new VERSION).
RULES = (text, word_forms, markdown, segment, units, unit_facts, code_units, reader_question)
# (read through each module's loader: the same bytes from packs.pyz, packs/vendor.py)
VERSION = hashlib.sha256(b"".join(m.__spec__.loader.get_data(m.__file__)  # type: ignore
                                  for m in RULES)).hexdigest()[:16]
SERVED_LIMIT = 8192  # texts remembered as already primed, then forgotten all at once

log = logging.getLogger("kpack.units")


def key(content: str) -> str:
    """The index key of a section's text."""
    return hashlib.blake2b(content.encode("utf-8"), digest_size=12).hexdigest()


def _unit_json(u: Unit) -> list:
    return [u.start, u.end, u.kind, u.display, u.block, u.group, u.inner,
            None if u.brief is None else _unit_json(u.brief), [list(i) for i in u.items]]


def _unit(v: list) -> Unit:
    start, end, kind, display, block, group, inner, brief, items = v
    return Unit(start=start, end=end, kind=kind, display=display, block=block, group=group,
                inner=inner, brief=None if brief is None else _unit(brief),
                items=tuple((a, b) for a, b in items))


def encode(content: str) -> str:
    """The JSON document of a section's text: each candidate unit with its facts."""
    out = []
    for u in units.candidates(content):
        f = unit_facts.facts(u, content[u.start:u.end])
        out.append([_unit_json(u), [list(f.terms), list(f.shape), sorted(f.opening),
                                    sorted(f.first), sorted(f.condition), f.has_code,
                                    f.command]])
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def decode(content: str, document: str) -> list[tuple[Unit, unit_facts.Facts]]:
    """The (unit, facts) pairs of `encode(content)`'s document."""
    pairs = []
    for uv, (terms, shape, opening, first, condition, has_code, command) in json.loads(document):
        u = _unit(uv)
        pairs.append((u, unit_facts.stored(u, content[u.start:u.end], tuple(terms),
                                           tuple(shape), frozenset(opening), frozenset(first),
                                           frozenset(condition), bool(has_code),
                                           bool(command))))
    return pairs


def write(path: Path, contents: Iterable[str], reuse: Path | None = None) -> int:
    """Write the file for the distinct `contents`; returns how many texts it holds. A text
    the file `reuse` (the previous build's) holds under the same rules is copied from it,
    not worked out again: a rebuild pays for the sections that changed."""
    old = Store(reuse) if reuse is not None and reuse.is_file() else None
    index: dict[str, list[int]] = {}
    body = bytearray()
    for content in contents:
        k = key(content)
        if k in index:
            continue
        data = (old.document(k) if old is not None else None) or encode(content).encode("utf-8")
        index[k] = [len(body), len(data)]
        body += data
    head = json.dumps({"format": FORMAT, "version": VERSION, "index": index},
                      separators=(",", ":")).encode("utf-8")
    path.write_bytes(head + b"\n" + bytes(body))
    return len(index)


class Store:
    """One pack's file, its index read on first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._index: dict[str, list[int]] | None = None
        self._start = 0
        self._lock = threading.Lock()

    def _load(self) -> dict[str, list[int]]:
        if self._index is None:
            index: dict[str, list[int]] = {}
            try:
                with self.path.open("rb") as fh:
                    head = json.loads(fh.readline())
                    self._start = fh.tell()
                if head.get("format") == FORMAT and head.get("version") == VERSION \
                        and isinstance(head.get("index"), dict):
                    index = head["index"]
                else:
                    log.info("%s: units made by other rules (%s), worked out again",
                             self.path, head.get("version"))
            except (OSError, ValueError, KeyError, AttributeError) as exc:
                log.warning("%s: unreadable (%s); units worked out again", self.path, exc)
            self._index = index
        return self._index

    def document(self, k: str) -> bytes | None:
        """The stored document under key `k` (None: not held, or made by other rules)."""
        with self._lock:
            at = self._load().get(k)
            if not (isinstance(at, list) and len(at) == 2
                    and all(isinstance(n, int) and n >= 0 for n in at)):
                return None  # not held (or an index entry that is no [offset, length])
            with self.path.open("rb") as fh:
                fh.seek(self._start + at[0])
                return fh.read(at[1])

    def get(self, content: str, k: str | None = None
            ) -> list[tuple[Unit, unit_facts.Facts]] | None:
        """The stored units and facts of `content` (`k`: its key, when known)."""
        document = self.document(k or key(content))
        if document is None:
            return None
        try:
            return decode(content, document.decode("utf-8"))
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            log.warning("%s: a damaged entry (%s); its units worked out again", self.path, exc)
            return None


_stores: dict[Path, Store] = {}
_opened: dict[Path, int] = {}  # how many open packs registered each file
_served: set[int] = set()  # hash() of the texts met (a collision only skips the file)
_lock = threading.Lock()


def register(path: Path) -> None:
    """Make the units file `path` known to this process (a missing file is ignored)."""
    if path.is_file():
        with _lock:
            _stores.setdefault(path, Store(path))
            _opened[path] = _opened.get(path, 0) + 1


def unregister(path: Path) -> None:
    """One pack that registered `path` is closed: the file is forgotten with the last."""
    with _lock:
        left = _opened.get(path, 1) - 1
        if left > 0:
            _opened[path] = left
        else:
            _opened.pop(path, None)
            _stores.pop(path, None)


def candidates(content: str) -> list[Unit]:
    """units.candidates(content), read from a registered pack's file the first time this
    process meets the text (its units' facts primed for unit_facts.facts too)."""
    if hash(content) not in _served:
        with _lock:
            stores = list(_stores.values())
            if len(_served) >= SERVED_LIMIT:
                _served.clear()
            _served.add(hash(content))
        k = key(content) if stores else ""
        for store in stores:
            pairs = store.get(content, k)
            if pairs is not None:
                unit_facts.prime([(u, content[u.start:u.end], f) for u, f in pairs])
                return units.candidates_primed(content, tuple(u for u, _ in pairs))
    return units.candidates(content)
