"""The reader's training data: the dev questions of each corpus, searched once on its
benchmark pack, read as the product reads them (benchmarks/train_reader.py fits on them).

Dev rows only (the blind test splits are never read here), and with `--with-spent` the
spent rows (retired test splits; see `dev_rows`):
    kubernetes  benchmarks/data/k8s_answers.jsonl, split dev (with the round-5 rows retired
                into dev and the 45 dev questions with a class written for issue 47)
    rust-book   rust_answers.jsonl, split dev (its round-5 rows are spent)
    cargo-book  cargo_answers.jsonl, split dev (every row: its test split was retired)
    xquad       articles 0-23 (benchmarks/xquad.py DEV_ARTICLES)

For each question: one search with the default pipeline and the gate off, the cited
sections and the other sections of their pages (packs/answer.py page_sections), the
passages and units the offline answer reads (packs/retrieval/extractive.py), their
FEATURES (packs/retrieval/reader_features.py), every unit's cosine similarity to the
question with the pack's own encoder (embedded once per distinct text, kept in a cache
file), and its label: which of the question's gold groups its bullet contains. A corpus's
questions are cached under the work folder, keyed by the pack's build, the questions and
the source of the modules that read them, so a second run only loads them.
"""

from __future__ import annotations

import hashlib
import pickle
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks import answer_eval, common, corpora, xquad
from packs.retrieval import unit_store

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ("kubernetes", "rust-book", "cargo-book", "xquad")
FILES = {"kubernetes": "k8s_answers.jsonl", "rust-book": "rust_answers.jsonl",
         "cargo-book": "cargo_answers.jsonl"}
# The modules whose source keys the cache: those that make the units and what the reader
# reads of each (unit_store.RULES, the pack's stored units keyed the same way), and those
# that read a question, search its passages and compute its features. unit_facts.py,
# code_units.py, word_forms.py and markdown.py were missing: a change to one of them left
# studies reading the features the code before it computed.
READ_BY = (*(Path(m.__file__).relative_to(ROOT).as_posix() for m in unit_store.RULES),
           "packs/retrieval/asks.py", "packs/retrieval/reader_features.py",
           "packs/retrieval/extractive.py", "packs/answer.py", "benchmarks/reader_data.py",
           "packs/retrieval/unit_vectors.py")


@dataclass
class Item:
    """One dev question as the reader sees it."""

    id: str
    corpus: str
    group: str  # the page it was written on (k-fold by page)
    question: str
    golds: list  # groups of alternatives
    kind: str
    x: np.ndarray  # FEATURES per unit
    sims: np.ndarray  # each unit's cosine similarity to the question
    labels: np.ndarray  # per unit: how many gold groups its bullet contains
    hits: list = field(default_factory=list)  # per unit: the indices of those groups
    texts: list = field(default_factory=list)  # per unit: its bullet's text
    units: list = field(default_factory=list)  # (passage index, Unit)
    weights: dict = field(default_factory=dict)  # the question's term weights
    gated: bool = False  # the calibrated gate's verdict on the same search
    baselines: dict = field(default_factory=dict)  # label → answer text (answer_eval)
    parts: list = field(default_factory=list)  # FEATURES per unit for each part it asks
    # each unit's similarity to the question from the pack's unit vectors (None: it has none)
    usims: np.ndarray | None = None

    def part_labels(self) -> list[np.ndarray]:
        """Per part, which units hold its gold group, when the question has a group per
        part (written in the order it asks them); [] otherwise."""
        if len(self.parts) != len(self.golds):
            return []
        return [np.asarray([float(g in h) for h in self.hits], dtype=np.float32)
                for g in range(len(self.golds))]


def dev_rows(name: str, spent: bool = False) -> list[dict]:
    """The dev rows of a documentation corpus (split "dev": never a test row), as
    {"id", "question", "golds", "group", "kind", "split"}; `kind` is the row's class
    (identifier, paraphrase, two-page) when it has one. With `spent`, the spent rows too:
    retired test splits, reported once, kept out of dev only because they share pages
    with the test split after them, and the test rounds the ledger has run (`ran_rounds`:
    their rows still say "test", as frozen, and their blind figures stand there)."""
    rows = corpora.load_rows(corpora.DATA_DIR / FILES[name])
    keep = ("dev", "spent") if spent else ("dev",)
    ran = ran_rounds(FILES[name]) if spent else set()
    return [{"id": r["id"], "question": r["question"], "golds": r["answers"],
             "group": r["gold"][0], "kind": r.get("class") or r["kind"],
             "split": "spent" if r["split"] == "test" else r["split"]}
            for r in rows if r["split"] in keep
            or (r["split"] == "test" and r.get("test_round") in ran)]


def spent_ids(names: Sequence[str] = CORPORA) -> set[str]:
    """The ids of the spent rows (`dev_rows` with `spent`, split "spent") of the corpora
    among `names` that have answer files (FILES)."""
    return {r["id"] for name in names if name in FILES
            for r in dev_rows(name, spent=True) if r["split"] == "spent"}


def ran_rounds(file: str) -> set[int]:
    """The `test_round`s of `file` that benchmarks/ledger.jsonl records a blind run of."""
    from benchmarks import ledger

    entries = ledger.entries()
    names = ledger.ran_splits(entries)
    return {e["where"]["test_round"] for e in entries
            if e["event"] == "freeze" and e["split"] in names
            and e["split"].startswith(file + ":") and "test_round" in e["where"]}


def xquad_rows(data: Path) -> list[dict]:
    articles = xquad.load(data / "qa" / "xquad")
    out = []
    for n, a in enumerate(articles[:xquad.DEV_ARTICLES]):
        for p in a["paragraphs"]:
            for qa in p["qas"]:
                out.append({"id": qa["id"], "question": qa["question"],
                            "golds": [[x["text"] for x in qa["answers"]]],
                            "group": f"xquad/{n}", "kind": "xquad"})
    return out


def _source_hash() -> str:
    h = hashlib.sha256()
    for rel in READ_BY:
        h.update((ROOT / rel).read_bytes())
    return h.hexdigest()[:16]


def read_question(pack, row: dict, corpus: str, vectors: dict | None) -> Item:
    """Search `row`'s question once and read it as the product's offline answer does
    (`vectors`: the unit vectors known so far, added to; None: no unit is embedded and every
    similarity is 0, for a fit of the first model alone)."""
    from benchmarks.baseline_turn3 import extractive as baseline
    from packs.answer import _members, _part_similarity, page_sections
    from packs.answer import idf as pack_idf
    from packs.retrieval import asks, extractive, unit_vectors
    from packs.retrieval import reader_features as rf

    result = pack.search(row["question"], use_cache=False, gate_threshold=-1.0)
    sections, passages = extractive.passages_of(result.cited(), page_sections(pack, result))
    units = extractive.units_of(row["question"], passages)
    idf = pack_idf(pack)
    q = rf.analyse(row["question"])
    x = rf.features(q, passages, units, idf)
    texts = [extractive.bullet(row["question"], u, passages[i].content[u.start:u.end],
                               passages[i]) for i, u in units]
    hits = [[g for g, group in enumerate(row["golds"]) if answer_eval.contains(t, [group])]
            for t in texts]
    sims = np.zeros(len(units), dtype=np.float32)
    if vectors is not None:
        embedded = [unit_vectors.embedded_text(u) for _, u in units]
        todo = list(dict.fromkeys(t for t in embedded if t not in vectors))
        if todo:  # sentence-transformers: the vectors of the pack's encoder, faster here
            prefix = pack.embedder.spec.document_prefix
            found = common._sentence_transformer(pack.manifest.embedding.model).encode(
                [prefix + t for t in todo], batch_size=64, normalize_embeddings=True)
            for t, v in zip(todo, found):
                vectors[t] = np.asarray(v, dtype=np.float16)
        qvec = np.asarray(result.question_vector, dtype=np.float32)
        sims[:] = [float(vectors[t].astype(np.float32) @ qvec) for t in embedded]
    weights = rf.term_weights(row["question"], [rf.unit_terms_of(u) for _, u in units], idf)
    cited = result.cited()
    turn3 = answer_eval.body(baseline.answer(row["question"], cited, pack_idf=baseline.idf_of(
        pack.vocabulary()), extra=page_sections(pack, result))[0]) if cited else ""
    first = baseline.first_sentence(cited[0].content) if cited else ""
    asked = asks.parts(row["question"])
    lookup = unit_vectors.similarity(_members(pack, result))  # as the answer reads them
    usims = unit_vectors.aligned(units, lambda i: lookup(sections[i]))
    part_sims = _part_similarity(pack, result)(sections, asked) if asked else []
    parts = [rf.features(rf.analyse(p, row["question"]),
                         extractive.part_passages(passages, sims), units, idf)
             for p, sims in zip(asked, part_sims)]
    return Item(row["id"], corpus, row["group"], row["question"], row["golds"], row["kind"],
                x, sims, np.asarray([len(h) for h in hits], dtype=np.float32), hits, texts,
                units, weights, not result.gate.get("calibrated_passed", True),
                {"first sentence": first, "turn-3 product": turn3}, parts, usims)


def load_all(data: Path, work: Path, log=print) -> list[Item]:
    """The Items of every corpus (CORPORA) with their spent rows, no unit embedded: what the
    shipped reader is fitted on (train_reader.py --with-spent --no-similarity), for the
    studies that refit it (reader_concise.py, reader_static.py, reader_trees.py)."""
    return [it for name in CORPORA
            for it in load(name, data, work, log, spent=True, similarity=False)]


def load(name: str, data: Path, work: Path, log=print, rows: list[dict] | None = None,
         spent: bool = False, similarity: bool = True) -> list[Item]:
    """The Items of corpus `name` (built or cached packs under `work`; cached Items); with
    `spent`, its spent rows too (`dev_rows`). Without `similarity` no unit is embedded (its
    similarity is 0), for a reader whose second model does not ship: about 0.3 s a question
    instead of 5 s on a 2-core machine (2026-11-30: 2,002 questions in 9 minutes)."""
    from packs import KnowledgePack

    if name == "xquad":
        articles = xquad.load(data / "qa" / "xquad")
        built = common.build_cached("xquad", xquad.pages(articles), work,
                                            description="XQuAD English (evaluation benchmark)")
        rows = rows if rows is not None else xquad_rows(data)
    else:
        built = corpora.load(data, name, work).built
        rows = rows if rows is not None else dev_rows(name, spent)
    key = hashlib.sha256(repr((str(built.pack_dir), (built.pack_dir / "current").read_text(),
                               [(r["id"], r["question"], r["golds"]) for r in rows],
                               _source_hash(), similarity)).encode()).hexdigest()[:16]
    cache = work / "reader-cache" / f"{name}-{key}{'' if similarity else '-nosim'}.pkl"
    if cache.is_file():
        items = pickle.loads(cache.read_bytes())
        log(f"{name}: {len(items)} dev questions (cached {cache.name})")
        return items
    vec_file = work / "reader-cache" / f"{name}-vectors.pkl"
    vectors = None  # no unit embedded
    if similarity:
        vectors = pickle.loads(vec_file.read_bytes()) if vec_file.is_file() else {}
    items, t0 = [], time.perf_counter()
    with KnowledgePack.open(built.pack_dir) as pack:
        for k, row in enumerate(rows, start=1):
            items.append(read_question(pack, row, name, vectors))
            if k % 25 == 0 or k == len(rows):
                log(f"  {name}: {k}/{len(rows)} questions read, {len(vectors or ())} unit "
                    f"vectors, {time.perf_counter() - t0:.0f} s")
    cache.parent.mkdir(parents=True, exist_ok=True)
    if vectors is not None:
        vec_file.write_bytes(pickle.dumps(vectors))
    cache.write_bytes(pickle.dumps(items))
    return items
