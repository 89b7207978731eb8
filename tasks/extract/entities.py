"""Entity resolution within one pack: many raw mentions in, one entity per real thing out.

Pure functions, no I/O. The rules, in the order they are applied:

1. **Normalised name** (`normalize_name`): the name as a reader sees it first
   (`tasks.extract.names.rendered`: `[crypto/tls](/pkg/crypto/tls/)` is `crypto/tls`,
   emphasis, inline tags and HTML entities resolved), then Unicode NFKC,
   backticks/quotes/markdown emphasis and a trailing "()" removed, lower case, "-" and
   runs of whitespace become one space,
   leading/trailing punctuation dropped, and the last word singularised when it is a plain
   alphabetic word longer than three letters ("autoscalers" → "autoscaler",
   "policies" → "policy"; "status", "class", "kubernetes" are left alone). Mentions with the
   same normalised name are one entity.
2. **Squashed form**: names equal once spaces, "_" and "." are removed (and the last part
   singularised) merge too ("Config Map" / "ConfigMap" / "config_map", "max_tokens" /
   "max tokens").
3. **Declared aliases**: an extractor may list aliases for a mention ("HPA" for
   "Horizontal Pod Autoscaler", found in "Horizontal Pod Autoscaler (HPA)"); each alias
   merges with its name.
4. **Acronyms**: a name written as 2–6 capitals ("HPA", "HPAs") merges with the one multi-word
   entity in the pack whose initials spell it (with or without stop words such as "of").
   If two or more long names share those initials, nothing is merged (precision first).

**Types** are advisory: an LLM may call "Deployment" a concept in one section and an api in
another, and splitting them would halve the graph. So the type never prevents a merge; the
merged entity takes the most frequent type among its mentions, where "other" (unknown) only
counts when no mention has a real type; ties are broken by TYPE_PRIORITY, which prefers
specific types ("api", "code") over "term"/"concept". The entity id is
`packs.format.entity_id(normalised canonical name, chosen type)`, so ids are deterministic for
a given set of mentions.

The canonical display name is the most frequent surface form, preferring a multi-word form
over an acronym (so "Horizontal Pod Autoscaler" beats "HPA"); the others become aliases. The
description is the longest one seen (capped), which is usually the most informative.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from packs.format import entity_id
from packs.rows import Entity
from packs.text import singular
from tasks.extract.names import rendered

# More specific first; used to break ties between equally frequent types.
TYPE_PRIORITY = (
    "api", "flag", "environment_variable", "setting", "function", "file", "version", "code",
    "command", "config_option", "library", "tool", "product", "service",
    "protocol", "standard", "data_format", "organization", "person", "term", "concept", "other",
)
_TYPE_RANK = {t: i for i, t in enumerate(TYPE_PRIORITY)}
_IDENTIFIER_TYPES = frozenset({"code", "setting", "function", "environment_variable", "flag"})
MAX_DESCRIPTION_CHARS = 500

_STRIP_CHARS = "`'\"“”‘’*_~"
_EDGE_PUNCT = re.compile(r"^[\s\W_]+|[\s\W_]+$", re.UNICODE)
_SPACES = re.compile(r"[\s\-‐–—]+")
_ACRONYM = re.compile(r"^[A-Z][A-Z0-9]{1,5}s?$")
_STOP = frozenset({"of", "the", "and", "for", "a", "an", "to", "in", "on", "with", "by"})
@dataclass(frozen=True)
class RawEntity:
    """One entity as an extractor saw it in one section."""

    name: str
    type: str = "other"
    description: str = ""
    aliases: tuple[str, ...] = ()
    section_id: str = ""


ResolvedEntity = Entity  # what the pack's entities table holds (packs.rows)


@dataclass
class Resolution:
    entities: list[ResolvedEntity]
    # normalised surface name (of any mention or alias) -> entity id
    by_key: dict[str, str]

    def lookup(self, name: str) -> str | None:
        """The entity id a surface name resolved to, or None if it was never seen."""
        key = normalize_name(name)
        found = self.by_key.get(key)
        if found is None:
            found = self.by_key.get(_squash(key))
        return found


def normalize_name(name: str) -> str:
    """The merge key for a surface name (see the module docstring, rule 1)."""
    text = unicodedata.normalize("NFKC", rendered(name)).strip()
    text = text.strip(_STRIP_CHARS)
    if text.endswith("()"):
        text = text[:-2]
    text = text.lower().strip(_STRIP_CHARS)
    text = _SPACES.sub(" ", text)
    text = _EDGE_PUNCT.sub("", text)
    if not text:
        return ""
    words = text.split(" ")
    words[-1] = singular(words[-1])
    return " ".join(words)


def _squash(key: str) -> str:
    parts = [p for p in re.split(r"[\s_.]+", key) if p]
    if parts:
        parts[-1] = singular(parts[-1])
    return "~" + "".join(parts)


def _initials(key: str, *, keep_stop: bool) -> str:
    # Only multi-word names spell acronyms: "max_tokens" is one word, not "m t".
    words = [w for w in key.split(" ") if w and (keep_stop or w not in _STOP)]
    return "".join(w[0] for w in words) if len(words) >= 2 else ""


def _acronym_key(surface: str) -> str | None:
    s = surface.strip(_STRIP_CHARS).strip()
    if not _ACRONYM.match(s):
        return None
    return s[:-1].lower() if s.endswith("s") and len(s) > 2 else s.lower()


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def add(self, x: str) -> None:
        self.parent.setdefault(x, x)

    def find(self, x: str) -> str:
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # Deterministic: the smaller key becomes the root.
            lo, hi = sorted((ra, rb))
            self.parent[hi] = lo


def resolve_entities(raw: Iterable[RawEntity]) -> Resolution:
    """Merge raw mentions into entities (rules in the module docstring).

    Mentions whose name normalises to "" are dropped. The output order is by entity id, so
    the result does not depend on the order of `raw`.
    """
    uf = _UnionFind()
    mentions: list[tuple[str, RawEntity]] = []
    surfaces: dict[str, Counter[str]] = defaultdict(Counter)  # key -> surface forms
    for r in raw:
        key = normalize_name(r.name)
        if not key:
            continue
        uf.add(key)
        mentions.append((key, r))
        surfaces[key][_surface(r.name)] += 1
        for alias in r.aliases:
            akey = normalize_name(alias)
            if akey and akey != key:
                uf.add(akey)
                uf.union(key, akey)
                surfaces[akey][_surface(alias)] += 0

    # Rule 2: squashed forms.
    by_squash: dict[str, str] = {}
    for key in list(uf.parent):
        sq = _squash(key)
        if sq in by_squash:
            uf.union(by_squash[sq], key)
        else:
            by_squash[sq] = key

    # Rule 4: acronyms, only when exactly one long name (component) spells them.
    initials: dict[str, set[str]] = defaultdict(set)
    for key in list(uf.parent):
        for keep in (False, True):
            ini = _initials(key, keep_stop=keep)
            if len(ini) >= 2:
                initials[ini].add(key)
    for key, forms in list(surfaces.items()):
        acr = next((a for a in map(_acronym_key, forms) if a), None)
        if acr is None:
            continue
        candidates = {uf.find(k) for k in initials.get(acr, ()) if k != key}
        candidates.discard(uf.find(key))
        if len(candidates) == 1:
            uf.union(key, candidates.pop())

    groups: dict[str, list[tuple[str, RawEntity]]] = defaultdict(list)
    for key, r in mentions:
        groups[uf.find(key)].append((key, r))
    keys_of: dict[str, set[str]] = defaultdict(set)
    for key in uf.parent:
        keys_of[uf.find(key)].add(key)

    entities: list[ResolvedEntity] = []
    by_key: dict[str, str] = {}
    for root, members in groups.items():
        forms: Counter[str] = Counter()
        for key in keys_of[root]:
            forms.update(surfaces.get(key, Counter()))
        name = _canonical_name(forms)
        types = Counter(r.type or "other" for _, r in members)
        if len(types) > 1:
            types.pop("other", None)  # "other" means "unknown": it never outvotes a real type
        etype = min(types, key=lambda t: (-types[t], _TYPE_RANK.get(t, len(_TYPE_RANK)), t))
        if etype in _IDENTIFIER_TYPES and " " in name:
            # An identifier is shown as code writes it ("TopologyManager"), not as the
            # phrase a merged mention spelled ("Topology Manager").
            name = min((f for f in forms if " " not in f), key=lambda f: (-forms[f], f),
                       default=name)
        description = max(
            (r.description.strip() for _, r in members), key=lambda d: (len(d), d), default=""
        )[:MAX_DESCRIPTION_CHARS]
        eid = entity_id(normalize_name(name), etype)
        seen = {name.lower()}
        aliases = []
        for form in sorted(forms, key=lambda f: (f.lower(), f)):
            if form.lower() not in seen:
                seen.add(form.lower())
                aliases.append(form)
        entities.append(ResolvedEntity(eid, name, etype, description, aliases))
        for key in keys_of[root]:
            by_key[key] = eid
            by_key.setdefault(_squash(key), eid)
    entities.sort(key=lambda e: e.id)
    return Resolution(entities=entities, by_key=by_key)


def _surface(name: str) -> str:
    """A surface form as displayed: rendered (no markup), without wrapping backticks."""
    return rendered(name).strip().strip("`").strip()


def _canonical_name(forms: Counter[str]) -> str:
    def rank(form: str) -> tuple:
        is_acronym = _acronym_key(form) is not None
        return (is_acronym, -forms[form], -len(form.split()), form.lower(), form)

    return min(forms, key=rank)
