"""The region of a whole-pack question: the pages its items are gathered from
(packs/retrieval/whole_pack.py), and its sections (`region_sections`, with those of other
pages a deeper search ranks high for a list or across question: `spread`).

The region is the pages of one family (`family`: a chapter "src/ch20-", or a folder
"concepts/configuration/"), the search's other first pages and the pages the lead page
links to. Which family: the one whose names share the most words with the question ("the
configuration concepts" → concepts/configuration/: `best_family`), else the first page's.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from packs import text as text_rules
from packs.db import fts_query_text
from packs.retrieval import extractive
from packs.retrieval.hybrid import rrf
from packs.retrieval.whole_pack_items import Sec, sec_of

MAX_PAGES = 14
REGION_PAGES = 40
CANDIDATE_PAGES = 5  # the first pages whose families compete
NAMED_WEIGHT = 1.5  # a family's own name, for a question that names a part (`best_family`)
# Words that name a part of the pages (`_names_a_part`), stemmed as the question's are.
PART_WORDS = frozenset(text_rules.stem(w) for w in (
    "section", "sections", "part", "chapter", "tutorials", "guide"))
KEEP_FIRST = 0.75  # the first page's family stays unless another matches 1/0.75 as well
_HOST = re.compile(r"^[a-z]+://[^/]+")

SECTIONS_OF = ("MATCH (a:Article)-[:HAS_SECTION]->(s:Section) WHERE a.id IN $ids "
               "RETURN a.id, s.id, s.url, s.title, s.heading_path, s.content, s.position "
               "ORDER BY a.id, s.position, s.chunk")
# Sections of pages beyond the region that a list or across question reads (`spread`), at
# most SPREAD_PER_PAGE of a page, from the full-text and vector top SPREAD_K, weighted
# SPREAD_WEIGHT down to half of it. Chosen on the spent blind whole-pack rounds (75
# questions the item model was never fitted on) with the dev sets unchanged:
# benchmarks/results/issue48ad_spread.md.
SPREAD_SECTIONS = 50
SPREAD_PER_PAGE = 2
SPREAD_K = 80
SPREAD_WEIGHT = 0.2

ARTICLES = "MATCH (a:Article) RETURN a.id, a.url, a.title"
LINKED = "MATCH (a:Article {id: $id})-[:LINKS_TO]->(b:Article) RETURN b.id"


def family(path: str, paths: Sequence[str]) -> str:
    """The prefix the pages beside `path` share: its file name's numbered stem ("src/ch03-"
    for "src/ch03-01-variables.md") when other pages have it, else its folder when that
    holds 2 to REGION_PAGES pages; "" when neither."""
    folder, _, name = path.rpartition("/")
    stem = re.match(r"[A-Za-z]*\d+[-_.]", name)
    if stem:
        prefix = f"{folder}/{stem.group(0)}"
        if sum(p.startswith(prefix) for p in paths) >= 2:
            return prefix
    prefix = folder + "/"
    if folder and 2 <= sum(p.startswith(prefix) for p in paths) <= REGION_PAGES:
        return prefix
    return ""


def pack_idf(pack: Any) -> Callable[[str], float] | None:
    """A word's IDF over the pack's sections, or None for a pack without a vocabulary."""
    vocabulary = getattr(pack, "vocabulary", None)
    return extractive.idf_of(vocabulary()) if callable(vocabulary) else None


def region(pack: Any, result: Any, limit: int = MAX_PAGES, family_only: bool = False
           ) -> tuple[list[str], dict[str, float]]:
    """(article ids of the question's region, best first; {section id: weight} of the
    search's sections): the pages beside a first page (`family`: its chapter or its
    folder; which first page: `best_family`), the other first pages (unless
    `family_only`) and the pages the first page links to."""
    cited = result.cited()
    weights = {s.id: 1.0 / (1 + i) for i, s in enumerate(cited)}
    first = list(dict.fromkeys(s.article_id for s in cited))
    if not first:
        return [], weights
    rows = pack.db.read(ARTICLES, {})
    arts = [(a, _HOST.sub("", url or "")) for a, url, _ in rows]
    path_of = dict(arts)
    paths = [p for _, p in arts]
    idf = pack_idf(pack) or (lambda w: 1.0)
    titles = {path_of[a]: title or "" for a, _, title in rows} if family_only else None
    family = best_family([path_of.get(a, "") for a in first[:CANDIDATE_PAGES]], paths,
                         result.question, idf, named=family_only, titles=titles)
    if family and not path_of.get(first[0], "").startswith(family):
        lead = next((a for a in first if path_of.get(a, "").startswith(family)),
                    min((a for a, p in arts if p.startswith(family)), key=path_of.get))
        first = [lead, *[a for a in first if a != lead]]
    near = sorted((a for a, p in arts if family and p.startswith(family)), key=path_of.get)
    out = [first[0], *near] if family_only else [*first[:3], *near, *first[3:]]
    if not near or not family_only:
        out += [r[0] for r in pack.db.read(LINKED, {"id": first[0]})]
    return list(dict.fromkeys(out))[:limit], weights


def best_family(firsts: list[str], paths: list[str], question: str,
                idf: Callable[[str], float] = lambda w: 1.0, named: bool = False,
                titles: Mapping[str, str] | None = None) -> str:
    """The family (`family`) of the pack's pages whose prefix, first page and best-ranked
    search page (of `firsts`) share the most with `question`, each shared term weighed by
    `idf` (its rarity in the pack, so "kubernetes" in a Kubernetes pack counts for
    little): "the configuration concepts" → concepts/configuration/, "the chapter on
    closures and iterators" → src/ch13-, but "which DNS policies can a Pod use?" stays in
    the first page's family (its page dns-pod-service names DNS). On a tie, the one
    holding the best-ranked of the first pages (`firsts`, best first); the first page's
    family unless another shares clearly more (KEEP_FIRST) or is a folder inside it that
    shares more ("the Services tutorials": tutorials/services/, not tutorials/, whose pages
    come alphabetically from tutorials/configuration/). `named`: the question names a
    part of the pages ("What does the Policies section of the concepts cover?"), so the
    terms of a family's own name (its last folder: `concepts/policy/`) count NAMED_WEIGHT
    times what a page's do (`concepts/services-networking/network-policies.md`), and a
    family none of `firsts` is in competes only when the question names a part of the
    pages (`_names_a_part`); `titles` (page path -> title), with `named`: the title of a
    family's first page (its index: "Troubleshooting Clusters") is part of its own name.
    "" (no family: the region is the first page and the pages it links to) when the first
    page has no family and, with `named`, its own path and title match the question as
    well as a family would have to beat a first page's family ("kubectl plugins", alone in
    tasks/extend-kubectl/)."""
    default = family(firsts[0], paths) if firsts else ""
    families, names, members, own_words = _layout(tuple(paths))
    asked: dict[str, float] = {}
    for w in text_rules.words(question):
        if w not in text_rules.STOP_WORDS:
            asked[text_rules.stem(w)] = max(asked.get(text_rules.stem(w), 0.0), idf(w))

    rank = {p: i for i, p in enumerate(firsts)}

    def weight(fam: str) -> float:
        words = set(own_words[fam]) if fam in own_words else _family_words(fam, paths, names)
        lead = min((p for p in firsts if p.startswith(fam)), key=rank.get, default=None)
        if lead is not None:  # the search's best page there names it too
            words |= names.get(lead, set())
        total = sum(asked.get(t, 0.0) for t in words)
        if named:  # its own name: its last folder ("concepts/policy/") and its first
            # page's title, the section's name as the docs show it ("Troubleshooting
            # Clusters" for tasks/debug/debug-cluster/), and a chapter's number ("13")
            last = re.sub(r"[_.-]+", " ", fam.rstrip("/").rsplit("/")[-1])
            own = set(text_rules.terms(last)) | _number(fam)
            if titles:
                own |= set(text_rules.terms(titles.get(min(members[fam]), "")))
                total += sum(asked.get(t, 0.0) for t in own - words)
            total += (NAMED_WEIGHT - 1) * sum(asked.get(t, 0.0) for t in own)
        return total

    best, best_key = default, (0.0, 0)
    for fam in families:  # ties: the first by name
        if named and not _names_a_part(asked, fam) and not any(
                p.startswith(fam) for p in firsts):
            continue  # "What does the documentation cover about X?" asks of X's pages
        key = (weight(fam), -min((rank.get(p, 99) for p in members[fam]), default=99))
        if key[0] > 0 and key > best_key:
            best, best_key = fam, key
    if not default and named and firsts:  # a page of its own ("kubectl plugins" in
        # tasks/extend-kubectl/): its overview is that page's, unless a family beats it
        lone = names.get(firsts[0], frozenset()) | set(text_rules.terms(
            (titles or {}).get(firsts[0], "")))
        if sum(asked.get(t, 0.0) for t in lone) >= KEEP_FIRST * best_key[0]:
            return ""
    kept = weight(default) if default else 0.0
    if default and kept >= KEEP_FIRST * best_key[0] and not (
            best != default and best.startswith(default) and best_key[0] > kept):
        return default  # the search's own first page wins unless clearly outmatched ...
    return best  # ... or a folder inside its own matches more ("the Services tutorials")


def _names_a_part(asked: Mapping[str, float], fam: str) -> bool:
    """Whether the question's terms (`asked`, stemmed) name a part of the pages: a section,
    part, chapter, tutorial or guide, or the top folder of `fam` ("the configuration
    concepts" for concepts/configuration/). A family none of the search's first pages is
    in is the region of an overview question only then: "Our apps and tools need their own
    identities in the cluster. What does the documentation cover about ServiceAccounts?"
    named setup/production-environment/tools/ by its last folder."""
    top = fam.strip("/").split("/")[0]
    return any(t in asked for t in (*PART_WORDS, *text_rules.terms(top)))


def _family_words(fam: str, paths: Sequence[str], names: Mapping[str, frozenset[str]]
                  ) -> set[str]:
    """The terms of a family's prefix and of its first page's path (a chapter's index page
    names it: "src/ch13-00-functional-features.md")."""
    head = min(p for p in paths if p.startswith(fam))
    return set(text_rules.terms(re.sub(r"[/_.-]+", " ", fam))) | names[head]


def _number(fam: str) -> set[str]:
    """The chapter number a numbered family's prefix carries ({"13"} for "src/ch13-",
    which a question names "Chapter 13"), else none."""
    m = re.search(r"(?:^|/)(?:ch|chapter)?0*(\d+)[-_.]$", fam, re.I)
    return {m.group(1)} if m else set()


@lru_cache(maxsize=8)
def _layout(paths: tuple[str, ...]) -> tuple[
        tuple[str, ...], dict[str, frozenset[str]], dict[str, tuple[str, ...]],
        dict[str, frozenset[str]]]:
    """What `best_family` reads of a pack's page paths whatever the question, worked out
    once per pack (each page's `family` scans every path: 405 pages cost 330,000 prefix
    tests a question): (its families, sorted by name; each path's terms; each family's
    pages; each family's words, `_family_words`)."""
    names = {p: frozenset(text_rules.terms(re.sub(r"[/_.-]+", " ", p))) for p in paths}
    families = tuple(sorted({family(p, paths) for p in paths} - {""}))
    members = {fam: tuple(p for p in paths if p.startswith(fam)) for fam in families}
    words = {fam: frozenset(_family_words(fam, paths, names)) for fam in families}
    return families, names, members, words


def region_sections(pack: Any, result: Any, kind: str) -> dict[str, Sec]:
    """The region's sections by id, each weighted: the search's rank for its sections,
    else its page's place in the region; for a list or across question also the sections
    of other pages a deeper search finds (`spread`)."""
    arts, weights = region(pack, result, family_only=kind == "overview")
    secs = [sec_of(r) for r in pack.db.read(SECTIONS_OF, {"ids": arts})] if arts else []
    by_id = {s.id: s for s in secs}
    for s in result.cited():
        if s.id not in by_id:
            by_id[s.id] = Sec(s.article_id, s.id, s.url, s.title, s.heading_path, s.content, 0)
    rank = {a: i for i, a in enumerate(arts)}
    for s in by_id.values():
        s.weight = max(weights.get(s.id, 0.0), 0.35 / (1 + rank.get(s.article_id, 9)))
    if kind != "overview" and SPREAD_SECTIONS:
        for sec in spread(pack, result, by_id):
            by_id[sec.id] = sec
    return by_id


def question_vector(pack: Any, result: Any) -> Any:
    """The search's vector of its question, or the question embedded when it has none."""
    return (result.question_vector if result.question_vector is not None
            else pack.embed_query(result.question))


def spread(pack: Any, result: Any, by_id: dict[str, Sec]) -> list[Sec]:
    """Up to SPREAD_SECTIONS sections of pages outside the region (`by_id`) that a deeper
    search for the question ranks high, at most SPREAD_PER_PAGE of a page, weighted
    SPREAD_WEIGHT down to half of it by their place: the full-text and vector top
    SPREAD_K fused by reciprocal rank. A list question's items are spread over the pack
    ("Which sysctls ...", "Which environment variables ..."), beyond the pages near its
    first answer."""
    words = [w for w in text_rules.words(result.question) if w not in text_rules.STOP_WORDS]
    rows: dict[str, Sec] = {}
    by_vector = []
    for r in pack.db.vector_search(question_vector(pack, result), SPREAD_K):
        by_vector.append(r.id)
        rows[r.id] = Sec(r.article_id, r.id, r.url, r.title, r.heading_path, r.content,
                         r.position)
    by_text = []
    for sid, art, url, title, heading, content, _, pos, *_ in pack.db.fts_raw(
            fts_query_text(words), SPREAD_K):
        by_text.append(sid)
        rows.setdefault(sid, sec_of([art, sid, url, title, heading, content, pos]))
    fused = rrf([by_vector, by_text])
    inside = {s.article_id for s in by_id.values()}
    out: list[Sec] = []
    pages: dict[str, int] = defaultdict(int)
    for sid in sorted(fused, key=lambda k: (-fused[k], k)):
        sec = rows[sid]
        if sid in by_id or sec.article_id in inside or pages[sec.article_id] >= SPREAD_PER_PAGE:
            continue
        pages[sec.article_id] += 1
        sec.weight = SPREAD_WEIGHT * (1 - 0.5 * len(out) / SPREAD_SECTIONS)
        out.append(sec)
        if len(out) >= SPREAD_SECTIONS:
            break
    return out
