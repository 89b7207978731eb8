"""Read-only access to a pack's Kuzu database: runs the statements of packs/cypher.py.

All statements are constants with `$parameters` (user text never becomes Cypher), and each
call records the statement it ran in a `QueryLog`, which `ask()` reports as `cypher_query`.
A Kuzu connection is not safe for concurrent use, so calls are serialised with a lock.

The statements of every search (HNSW, full-text, multi-document expansion, a page's
sections, graph facts) are prepared once per connection and reused: Kuzu's parse-and-plan
costs 1-3 ms a statement, as much as a small query itself. Only those: Kuzu 0.11.3
crashes the process (a segfault) preparing some statements, e.g. a UNION that uses one
parameter twice (SECTION_TRIPLES); the prepared ones are run by the tests on a real
database.
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from packs import text as text_rules
from packs.cypher import (
    ARTICLE_SECTIONS,
    ARTICLE_TITLES,
    ARTICLE_URLS,
    CENTRALITY,
    ENTITY_NAMES,
    ENTITY_SECTIONS,
    FILTERED_FTS_SEARCH,
    FILTERED_KEYWORD_VECTOR_SEARCH,
    FILTERED_VECTOR_SEARCH,
    FTS_FLOOR,
    FTS_SEARCH,
    KEYWORD_VECTOR_SEARCH,
    LINKED_SCORES,
    LINKED_SECTIONS,
    LINKING_SECTIONS,
    SECTION_COLS,
    SECTION_ENTITIES,
    SECTION_GRAPHS,
    SECTION_LANGUAGES,
    SECTION_SIMILARITIES,
    SECTION_TEXTS,
    SECTION_TRIPLES,
    SECTIONS_BY_ID,
    VECTOR_SEARCH,
    article_similarities,
)
from packs.filters import Filters, where
from packs.integrity import PackCorruptError
from packs.rows import Row, blend, by_key, row_of

# `s.id IN $ids` reads each returned column of every section (7.9 ms for 3 ids on the
# Kubernetes pack's 5,468 sections, growing with the pack); a primary-key lookup per id
# reads only its own row (1.6 ms for 3, 4.6 ms for 12). So up to PK_LOOKUPS ids are looked
# up one by one, in one statement (`by_key`).
PK_LOOKUPS = 16
# Prepared statements kept per connection (PackDB._prepared_statement).
MAX_PREPARED = 256


@dataclass
class QueryLog:
    """The parameterised statements run for one query, in order, without repeats."""

    statements: list[str] = field(default_factory=list)

    def add(self, statement: str) -> None:
        if statement not in self.statements:
            self.statements.append(statement)

    def text(self) -> str:
        return ";\n".join(self.statements)


def fts_query_text(terms: list[str]) -> str:
    """The FTS query string: word tokens only (packs/text.py `tokens`), so no user
    punctuation reaches the parser."""
    # Unstemmed, stop words kept: Kuzu's FTS stems the query and drops its stop words with
    # the same rules it indexed the sections with, which packs/text.py does not mirror.
    seen: dict[str, None] = {}
    for term in terms:
        for tok in text_rules.tokens(term):
            seen.setdefault(tok, None)
    return " ".join(seen)


class PackDB:
    """A read-only Kuzu database of one pack build.

    `has_languages` and `keyword_vectors` say whether the database has Section.languages
    and Section.keyword_embedding (format 2; the manifest says so); without them language
    filters match fence lines in the content and keyword search is refused. `has_graph`:
    Section.graph exists (format 3); without it graph facts are walked at query time.
    """

    def __init__(self, db_path: Path, *, has_languages: bool = True,
                 keyword_vectors: bool = False, has_graph: bool = False) -> None:
        import kuzu

        self.path = db_path
        self._db = kuzu.Database(str(db_path), read_only=True)
        self._conn = kuzu.Connection(self._db)
        self._lock = threading.Lock()
        self._prepared: dict[str, object] = {}
        self._centrality: dict[str, float] | None = None
        self._entity_names: list[tuple[str, list[str]]] | None = None
        self._article_urls: list[str] | None = None
        self._languages: list[str] | None = None
        self.has_languages = has_languages
        self.keyword_vectors = keyword_vectors
        self.has_graph = has_graph

    def close(self) -> None:
        with self._lock:
            self._prepared.clear()
            self._conn.close()
            self._db.close()

    def _run(self, statement: str, params: dict, log: QueryLog | None, *,
             prepare: bool = False) -> list[list]:
        """Rows of `statement`; `prepare`: prepare it once and reuse it (see the module
        docstring for which statements may be)."""
        if log is not None:
            log.add(statement)
        with self._lock:
            try:
                result = self._conn.execute(self._prepared_statement(statement) if prepare
                                            else statement, params)
                rows = []
                while result.has_next():
                    rows.append(result.get_next())
            except (RuntimeError, UnicodeDecodeError) as exc:
                raise self.damaged(exc) from exc
            return rows

    def read(self, statement: str, params: dict) -> list[list]:
        """Rows of one of packs/browse.py's lookups (the explorer's reads): run like the
        query side's own statements, serialised, not prepared, not logged."""
        return self._run(statement, params, None)

    def damaged(self, exc: BaseException) -> PackCorruptError:
        """The error for a read that failed on the database's bytes (Kuzu's errors and
        undecodable strings): the pack is damaged, one line, exit 2 at the CLI."""
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return PackCorruptError(
            f"{self.path}: reading the database failed ({type(exc).__name__}: {detail}): the "
            "pack is damaged; run kpack verify, then reinstall or rebuild it")

    def _prepared_statement(self, statement: str):
        """`statement` prepared on this connection, once (call with the lock held). The
        cache holds a few fixed statements and `by_key`'s; it is cleared, not grown, past
        MAX_PREPARED all the same."""
        prepared = self._prepared.get(statement)
        if prepared is None:
            if len(self._prepared) >= MAX_PREPARED:
                self._prepared.clear()
            # Kuzu 0.11 marks prepare() deprecated in favour of execute() with parameters,
            # which prepares again on every call; the project pins that version.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                prepared = self._conn.prepare(statement)
            self._prepared[statement] = prepared
        return prepared

    def _by_key(self, returns: str, fallback: str, ids: list[str],
                log: QueryLog | None) -> list[list]:
        """Rows of `returns` for the sections `ids` (each once): primary-key lookups for
        up to PK_LOOKUPS ids, else `fallback` (the same columns, `WHERE s.id IN $ids`)."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        if len(ids) > PK_LOOKUPS:
            return self._run(fallback, {"ids": ids}, log)
        return self._run(by_key(returns, len(ids)), {f"k{i}": v for i, v in enumerate(ids)},
                         log, prepare=True)

    def vector_search(self, qvec: np.ndarray, k: int, log: QueryLog | None = None) -> list[Row]:
        """Top-k sections by cosine distance, nearest first, with `similarity` = 1 - d."""
        out = []
        for values in self._run(VECTOR_SEARCH, {"q": qvec.tolist(), "k": int(k)}, log,
                                prepare=True):
            row = row_of(values)
            row.similarity = 1.0 - float(values[8])
            out.append(row)
        return out

    def vector_candidates(self, qvec: np.ndarray, k: int, filters: Filters | None = None,
                          keyword_weight: float = 0.0,
                          log: QueryLog | None = None) -> list[Row]:
        """Top-k sections by vector score, best first, each with `similarity` (content
        cosine) and `vscore`.

        keyword_weight w > 0 (needs keyword vectors) scores (1-w)*content + w*keyword
        cosine over the union of both indexes' top-k. Filters scan exactly the sections
        they admit (see FILTERED_VECTOR_SEARCH). No filter and w = 0: the plain HNSW query.
        """
        w = float(keyword_weight)
        if w > 0 and not self.keyword_vectors:
            raise ValueError("this pack has no keyword vectors (built before format 2); "
                             "set keyword_vectors=False")
        if filters:
            clause, params = where(filters, self.has_languages)
            params.update(q=qvec.tolist(), k=int(k))
            if w > 0:
                statement = FILTERED_KEYWORD_VECTOR_SEARCH.replace("{where}", clause)
                params["w"] = w
            else:
                statement = FILTERED_VECTOR_SEARCH.replace("{where}", clause)
            out = []
            for values in self._run(statement, params, log):
                row = row_of(values)
                row.similarity = float(values[8])
                if w > 0:
                    row.keyword_similarity = float(values[9])
                row.vscore = blend(row, w)
                out.append(row)
            return out
        rows = self.vector_search(qvec, k, log)
        if w <= 0:
            for r in rows:
                r.vscore = r.similarity
            return rows
        ids = list(dict.fromkeys([r.id for r in rows] + [
            v[0] for v in self._run(KEYWORD_VECTOR_SEARCH, {"q": qvec.tolist(), "k": int(k)},
                                    log)]))
        out = []
        for values in self._run(SECTION_SIMILARITIES, {"ids": ids, "q": qvec.tolist()}, log):
            row = row_of(values)
            row.similarity, row.keyword_similarity = float(values[8]), float(values[9])
            row.vscore = blend(row, w)
            out.append(row)
        out.sort(key=lambda r: -(r.vscore or 0.0))
        return out[:k]

    def fts_search(self, text: str, qvec: np.ndarray, k: int,
                   log: QueryLog | None = None, filters: Filters | None = None) -> list[Row]:
        """Top-k sections by BM25 for `text` (already tokenised), with their similarity.
        With filters, the top k among the matches the filters admit."""
        return self.score_fts(self.fts_raw(text, k, log, filters), qvec)

    def fts_raw(self, text: str, k: int, log: QueryLog | None = None,
                filters: Filters | None = None) -> list[list]:
        """The rows of the full-text query alone (no question vector needed, so it can run
        while the question is being embedded); `score_fts` turns them into Rows."""
        if not text:
            return []
        if not filters:
            return self._run(FTS_SEARCH, {"q": text, "k": int(k)}, log, prepare=True)
        clause, params = where(filters, self.has_languages)
        params.update(q=text, k=int(k))
        return self._run(FILTERED_FTS_SEARCH.replace("{where}", clause), params, log)

    def score_fts(self, raw: list[list], qvec: np.ndarray) -> list[Row]:
        """Rows of `fts_raw`, each with its BM25 score and its similarity to `qvec`."""
        return [self._with_similarity(values, 0, qvec, bm25=float(values[8])) for values in raw]

    def fts_floor(self, text: str, k: int) -> int:
        """The bare full-text top-k (no vectors returned), for latency baselines; returns
        the number of rows."""
        if not text:
            return 0
        return len(self._run(FTS_FLOOR, {"q": text, "k": int(k)}, None, prepare=True))

    def article_urls(self) -> list[str]:
        """Every article URL (loaded once; for the analyzer's path suggestions)."""
        if self._article_urls is None:
            self._article_urls = [r[0] for r in self._run(ARTICLE_URLS, {}, None) if r[0]]
        return self._article_urls

    def article_titles(self) -> list[tuple[str, str]]:
        """(id, title) of every article (for the title match, which keeps its own index)."""
        return [(r[0], r[1] or "") for r in self._run(ARTICLE_TITLES, {}, None)]

    def section_texts(self) -> list[str]:
        """Heading path + content of every section (for a pack without its tables/)."""
        return [f"{h or ''}\n{c or ''}" for h, c in self._run(SECTION_TEXTS, {}, None)]

    def languages(self) -> list[str]:
        """The code languages the pack's sections use (loaded once; [] for format 1)."""
        if self._languages is None:
            self._languages = (sorted(r[0] for r in self._run(SECTION_LANGUAGES, {}, None)
                                      if r[0]) if self.has_languages else [])
        return self._languages

    def sections_by_id(self, ids: list[str], qvec: np.ndarray,
                       log: QueryLog | None = None) -> list[Row]:
        rows = self._by_key(f"{SECTION_COLS}, s.embedding", SECTIONS_BY_ID, ids, log)
        return [self._with_similarity(v, 0, qvec) for v in rows]

    def article_sections(self, article_ids: list[str], qvec: np.ndarray,
                         log: QueryLog | None = None,
                         filters: Filters | None = None) -> list[Row]:
        """Every section of the articles (that the filters admit), in article then document
        order."""
        statement = ARTICLE_SECTIONS
        params = {"ids": list(article_ids), "q": np.asarray(qvec, dtype=np.float32).tolist()}
        if filters:
            clause, extra = where(filters, self.has_languages)
            statement = ARTICLE_SECTIONS.replace("WHERE a.id IN $ids",
                                                 f"WHERE a.id IN $ids AND {clause}")
            params.update(extra)
        out = []
        for values in self._run(statement, params, log, prepare=not filters):
            row = row_of(values)
            row.similarity = None if values[8] is None else float(values[8])
            out.append(row)
        return out

    def article_similarities(self, article_ids: list[str], qvecs: Sequence[np.ndarray],
                             log: QueryLog | None = None) -> dict[str, list[float | None]]:
        """Each section of the articles → its similarity to each of `qvecs` (None where
        the section has no vector), in one statement prepared for their number."""
        if not article_ids or not len(qvecs):
            return {}
        params: dict[str, object] = {"ids": list(article_ids)}
        params.update({f"q{i}": np.asarray(q, dtype=np.float32).tolist()
                       for i, q in enumerate(qvecs)})
        rows = self._run(article_similarities(len(qvecs)), params, log, prepare=True)
        return {values[0]: [None if v is None else float(v) for v in values[1:]]
                for values in rows}

    def linked_sections(self, article_ids: list[str], qvec: np.ndarray, direction: str,
                        log: QueryLog | None = None) -> list[Row]:
        """Sections of articles linked from ("out") or linking to ("in") the articles."""
        statement = LINKED_SECTIONS if direction == "out" else LINKING_SECTIONS
        rows = self._run(statement, {"ids": list(article_ids)}, log)
        return [self._with_similarity(v, 1, qvec, via=v[0]) for v in rows]

    def linked_scores(self, article_ids: list[str], qvec: np.ndarray,
                      log: QueryLog | None = None) -> list[tuple[str, str, float]]:
        """(section id, article id, similarity to `qvec`) of the sections
        `linked_sections(..., "out")` returns, without their columns or vectors (sections
        without a vector left out)."""
        rows = self._run(LINKED_SCORES, {"ids": list(article_ids), "q": qvec.tolist()}, log,
                         prepare=True)
        return [(sid, art, float(sim)) for sid, art, sim in rows if sim is not None]

    def entity_sections(self, section_ids: list[str], qvec: np.ndarray,
                        log: QueryLog | None = None) -> list[Row]:
        """Sections that mention an entity one of `section_ids` mentions."""
        rows = self._run(ENTITY_SECTIONS, {"ids": list(section_ids)}, log)
        return [self._with_similarity(v, 1, qvec, via=v[0]) for v in rows]

    def section_entities(self, section_ids: list[str], log: QueryLog | None = None):
        """(section id, entity id, name, type, fact text or None) rows."""
        return [tuple(r) for r in self._run(SECTION_ENTITIES, {"ids": list(section_ids)}, log)]

    def section_graphs(self, section_ids: list[str], log: QueryLog | None = None
                       ) -> dict[str, dict[str, list]]:
        """Section id → its precomputed graph {entities, facts, triples} (format 3; sections
        without any are left out)."""
        out = {}
        for sid, raw in self._by_key("s.id, s.graph", SECTION_GRAPHS, section_ids, log):
            if raw:
                try:
                    out[sid] = json.loads(raw)
                except ValueError as exc:
                    raise self.damaged(exc) from exc
        return out

    def section_triples(self, section_ids: list[str], log: QueryLog | None = None):
        """(section id, subject, relation, object) rows: triples touching the sections'
        entities, in no particular order."""
        return [tuple(r) for r in self._run(SECTION_TRIPLES, {"ids": list(section_ids)}, log)]

    def centrality(self) -> dict[str, float]:
        """Article id → precomputed degree centrality (loaded once)."""
        if self._centrality is None:
            self._centrality = {
                r[0]: float(r[1] or 0.0) for r in self._run(CENTRALITY, {}, None)
            }
        return self._centrality

    def entity_names(self) -> list[tuple[str, list[str]]]:
        """(name, aliases) of every entity (loaded once)."""
        if self._entity_names is None:
            self._entity_names = [(r[0], list(r[1] or [])) for r in
                                  self._run(ENTITY_NAMES, {}, None) if r[0]]
        return self._entity_names

    @staticmethod
    def _with_similarity(values: list, start: int, qvec: np.ndarray, *, bm25=None,
                         via=None) -> Row:
        row = row_of(values, start)
        emb = values[-1]
        if emb is not None:
            row.similarity = float(np.dot(np.asarray(emb, dtype=np.float32), qvec))
        row.bm25 = bm25
        row.via = via
        return row
