"""Study (issue 47, session 15): where the offline answer's misses are, and whether a unit's
neighbours, read through the unit vectors, help the learned reader. Nothing here ships.

    python benchmarks/unit_neighbours.py where --data ../shared/data --work W --corpus C
    python benchmarks/unit_neighbours.py cv --data ../shared/data --work W VARIANT ...

`where`: for every dev, spent and run test row of corpus C, the product's offline answer
(packs.answer.passages, the shipped reader) and, by class, how many rows miss a gold group;
of those, whether every missing group is in a unit the answer read (then the reading is at
fault), else in one of the 50 units of the whole pack most similar to the question by the
unit vectors (a pack-wide unit search could bring it), else nowhere near.

`cv`: the reader cross-validated by page (5 folds, the shipped penalty and limits, unit
vectors on: reader_fit.cross_validate) on the cached Items of all four corpora, with extra
features from the units' similarities (VARIANT: base, prevnext, nb, sec, prevbest,
nextbest) or with each pick joined to the unit after it when the reader scores that one
within DELTA of the pick (VARIANT join-first:DELTA, join-all:DELTA), or (session 16) with
each part of a question about several things (asks.parts) reading its units' similarity to
that part, from the part's own vector (packs.answer._part_similarity embeds the parts
already), instead of the whole question's: VARIANT part-own, part-mix (their mean),
part-max (the larger). The parts' similarities are worked out once from the documentation
packs under W (XQuAD's single such question reads the whole question's) and kept in
W/reader-cache/part-sims.pkl.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import answer_eval, common, corpora, reader_data, reader_fit  # noqa: E402
from packs.retrieval import reader  # noqa: E402

TOP_UNITS = 50


class PackUnits:
    """Every unit of a pack (each distinct section text's, once) with its vector from the
    pack's unit vectors and the page it is on: the pack-wide unit search."""

    def __init__(self, pack) -> None:
        import polars as pl

        from packs import format as fmt
        from packs.retrieval import unit_store

        store, blocks, self.texts, self.pages = pack.unit_vectors, [], [], []
        if not store.usable:
            raise SystemExit(f"{pack.path} has no unit vectors: rebuild it")
        sections = pl.read_parquet(pack.path / fmt.TABLES_DIR / f"{fmt.SECTIONS}.parquet",
                                   columns=["content", "url"])
        for content, url in dict(zip(sections["content"], sections["url"])).items():
            found = store.vectors(content)
            if found is None:
                continue
            units = unit_store.candidates(content)[:len(found)]
            blocks.append(found[:len(units)])
            self.texts += [u.display for u in units]
            self.pages += [url] * len(units)
        self.matrix = np.concatenate(blocks)

    def per_page(self, vector, per: int, words: int) -> str:
        """The best units for `vector`, at most `per` from a page, up to `words` words."""
        out, taken, n = [], {}, 0
        for i in np.argsort(-(self.matrix @ np.asarray(vector, dtype=np.float32))):
            if n >= words:
                break
            if taken.get(self.pages[i], 0) < per:
                taken[self.pages[i]] = taken.get(self.pages[i], 0) + 1
                out.append(self.texts[i])
                n += len(self.texts[i].split())
        return "\n".join(out)


def where(data: Path, work: Path, name: str) -> None:
    from packs import KnowledgePack
    from packs import answer as ans
    from packs.retrieval import extractive

    fold = answer_eval.fold
    built = corpora.load(data, name, work).built
    read = {r["id"] for r in reader_data.dev_rows(name, spent=True)}  # what the reader learns
    rows = [r for r in corpora.load_rows(corpora.DATA_DIR / reader_data.FILES[name])
            if r["id"] in read]
    counts: dict[str, Counter] = defaultdict(Counter)
    with KnowledgePack.open(built.pack_dir) as pack:
        units = PackUnits(pack)
        text_of = [fold(t) for t in units.texts]
        for k, r in enumerate(rows, start=1):
            c = counts[r.get("class") or "none"]
            c["rows"] += 1
            result = pack.search(r["question"], use_cache=False, gate_threshold=-1.0)
            text = ans.passages(pack, result)[0]
            if answer_eval.contains(text, r["answers"]):
                continue
            c["missed"] += 1
            _, passages = extractive.passages_of(result.cited(), ans.page_sections(pack, result))
            seen = [fold(u.display) for _, u in extractive.units_of(r["question"], passages)]
            missing = [g for g in r["answers"] if not answer_eval.contains(text, [g])]
            unread = [g for g in missing
                      if not any(fold(a) in t for t in seen for a in g)]
            if not unread:
                c["in a unit read"] += 1
                continue
            top = np.argsort(-(units.matrix @ np.asarray(result.question_vector, np.float32)))
            near = [text_of[i] for i in top[:TOP_UNITS]]
            close = all(any(fold(a) in t for t in near for a in g) for g in unread)
            c["in the pack's 50 nearest units" if close else "nowhere near"] += 1
            if k % 200 == 0:
                print(f"  {k}/{len(rows)} rows", flush=True)
    for cls, c in sorted(counts.items()):
        print(f"{name} {cls}: {dict(c)}")


def _z(v: np.ndarray) -> np.ndarray:
    return (v - v.mean()) / (v.std() + 1e-3)


def neighbours(it) -> tuple[dict[int, int], dict[int, int]]:
    """(next, previous) unit of each unit in its passage, by position."""
    nxt, prev = {}, {}
    by_passage: dict[int, list[int]] = defaultdict(list)
    for k, (p, _) in enumerate(it.units):
        by_passage[p].append(k)
    for ks in by_passage.values():
        ks = sorted(ks, key=lambda k: (it.units[k][1].start, it.units[k][1].end))
        for a, b in zip(ks, ks[1:]):
            nxt[a], prev[b] = b, a
    return nxt, prev


def extra_features(it, variant: str) -> np.ndarray:
    """The VARIANT's columns for Item `it`, from its units' similarities."""
    s = np.asarray(it.usims, dtype=np.float64)
    n, z = len(s), _z(s)
    nxt, prev = neighbours(it)
    pz = np.asarray([z[prev[k]] if k in prev else z.min() for k in range(n)])
    nz = np.asarray([z[nxt[k]] if k in nxt else z.min() for k in range(n)])
    rank = np.empty(n)
    rank[np.argsort(-s)] = np.arange(n)
    passage = np.asarray([p for p, _ in it.units])
    best = np.full(passage.max() + 1, -np.inf)
    np.maximum.at(best, passage, z)
    sec = best[passage]
    nb = (z + np.where(pz > z.min(), pz, z) + np.where(nz > z.min(), nz, z)) / 3
    cols = {"base": [],
            "prevnext": [pz - z.max(), nz - z.max()],
            "nb": [nb - nb.max()],
            "sec": [sec - sec.max()],
            "prevbest": [np.asarray([float(k in prev and rank[prev[k]] == 0) for k in range(n)]),
                         np.asarray([float(k in prev and rank[prev[k]] <= 2) for k in range(n)])],
            "nextbest": [np.asarray([float(k in nxt and rank[nxt[k]] == 0) for k in range(n)])]}
    return np.stack(cols[variant], axis=1) if cols[variant] else np.zeros((n, 0))


def _units_key(it) -> str:
    return hashlib.sha256("\n".join(u.display for _, u in it.units).encode()).hexdigest()


def part_sims(items, data: Path, work: Path) -> dict[str, list[np.ndarray]]:
    """Item id → for each part of its question, its units' similarities to that part (in
    the Item's unit order), for the Items of the documentation corpora that have parts.
    Kept per Item with a hash of its units, so a kept entry made for other units (the
    packs or the Items built again) is worked out again, never read misaligned."""
    import pickle

    from packs import KnowledgePack
    from packs.answer import page_sections
    from packs.retrieval import asks, extractive, unit_vectors

    cache = work / "reader-cache" / "part-sims.pkl"
    kept: dict[str, tuple[str, list[np.ndarray]]] = (pickle.loads(cache.read_bytes())
                                                     if cache.is_file() else {})
    for name in sorted({it.corpus for it in items} & set(reader_data.FILES)):
        todo = [it for it in items if it.corpus == name and it.parts
                and kept.get(it.id, ("",))[0] != _units_key(it)]
        if not todo:
            continue
        with KnowledgePack.open(corpora.load(data, name, work).built.pack_dir) as pack:
            store = pack.unit_vectors
            for it in todo:
                result = pack.search(it.question, use_cache=False, gate_threshold=-1.0)
                sections, passages = extractive.passages_of(result.cited(),
                                                            page_sections(pack, result))
                units = extractive.units_of(it.question, passages)
                if [u.display for _, u in units] != [u.display for _, u in it.units]:
                    continue  # the pack answers otherwise now: the Item's own sims stay
                mats = [store.vectors(s.content) for s in sections]
                sims = [unit_vectors.aligned(
                            units, lambda i, v=v, m=mats: None if m[i] is None else m[i] @ v)
                        for v in np.asarray(pack.embed_queries(asks.parts(it.question)),
                                            np.float32)]
                if len(sims) == len(it.parts) and all(s is not None for s in sims):
                    kept[it.id] = (_units_key(it), sims)
        print(f"  {name}: parts' similarities worked out for {len(todo)} questions",
              flush=True)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(pickle.dumps(kept))
    return {it.id: kept[it.id][1] for it in items
            if it.id in kept and kept[it.id][0] == _units_key(it)}


def with_part_sims(plain_add, own: dict[int, list[np.ndarray]], mode: str):
    """reader.add_units with each part reading its own similarities (`own`: by the id of
    the Item's `usims`), as `mode` (own, mix, max) combines them with the question's."""
    from packs.retrieval import unit_vectors

    combine = {"own": lambda p, q: p, "mix": lambda p, q: (p + q) / 2,
               "max": np.maximum}[mode]

    def add_units(x, parts, sims):
        x2, whole = plain_add(x, parts, sims)
        mine = own.get(id(sims))
        if mine is None:
            return x2, whole
        return x2, [np.hstack([xp, unit_vectors.features(combine(mine[j], sims))])
                    for j, xp in enumerate(parts)]
    return add_units


def joined_answer(model: reader.Reader, it, every: bool, delta: float) -> str:
    """reader_fit.answer_of, each pick (or the first only) joined to the unit after it when
    the reader scores that one within `delta` of the pick, the last picks dropped to keep
    the budget (ten words of slack)."""
    model, x, parts, picks = reader_fit.picks_of(model, it)
    texts = [it.texts[s.index] for s in picks]
    score = {s.index: s.score for s in reader.ranked(model, x, it.units)}
    nxt, _ = neighbours(it)
    taken = {s.index for s in picks}
    for j, s in enumerate(picks if every else picks[:1]):
        b = nxt.get(s.index)
        if b is not None and b not in taken and score[b] >= s.score - delta:
            texts[j] = f"{texts[j]} {it.texts[b]}"
            taken.add(b)
    words = reader.budget(model.limits, several=bool(parts)).max_words + 10
    while len(texts) > 1 and sum(len(t.split()) for t in texts) > words:
        texts.pop()
    return "\n".join(f"- {t} [1]" for t in texts)


def cv(data: Path, work: Path, variants: list[str]) -> None:
    from benchmarks.train_reader import kept_limits
    from packs.retrieval import unit_vectors

    items = reader_data.load_all(data, work, log=lambda *a: None)
    l2, limits, _ = kept_limits(ROOT / "packs" / "retrieval" / "reader_weights.json")
    folds = reader_fit.folds_by_page(items, 5)
    plain_add, plain_answer, names = reader.add_units, reader_fit.answer_of, unit_vectors.FEATURES
    for variant in variants:
        extra: dict[int, np.ndarray] = {}
        if variant.startswith("part-"):
            found = part_sims(items, data, work)
            own = {id(it.usims): found[it.id] for it in items if it.id in found}
            reader.add_units = with_part_sims(plain_add, own, variant.split("-", 1)[1])
        elif variant.startswith("join-"):
            every, delta = variant.startswith("join-all"), float(variant.split(":")[1])
            reader_fit.answer_of = lambda m, it, e=every, d=delta: joined_answer(m, it, e, d)
        else:
            extra = {id(it.usims): extra_features(it, variant) for it in items}
            width = next(iter(extra.values())).shape[1]
            unit_vectors.FEATURES = (*names, *(f"{variant}_{i}" for i in range(width)))

            def add_units(x, parts, sims, extra=extra):
                x, parts = plain_add(x, parts, sims)
                e = extra[id(sims)]
                return np.hstack([x, e]), [np.hstack([p, e]) for p in parts]
            reader.add_units = add_units
        try:
            answers = reader_fit.cross_validate(items, folds, l2, limits, second=False,
                                                units=True)
        finally:
            reader.add_units, reader_fit.answer_of = plain_add, plain_answer
            unit_vectors.FEATURES = names
        cells = []
        for corpus in sorted({it.corpus for it in items}):
            idx = [k for k, it in enumerate(items) if it.corpus == corpus]
            s = reader_fit.scores([answers[k] for k in idx], [items[k] for k in idx])
            cells.append(f"{corpus} {statistics.fmean(s['gate off']):.3f} "
                         f"({statistics.fmean(s['words']):.1f} w)")
        print(f"{variant:14s} " + " | ".join(cells), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("where", "cv"))
    ap.add_argument("variants", nargs="*", default=["base"])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--corpus", choices=("kubernetes", "rust-book"), default="kubernetes")
    args = ap.parse_intermixed_args(argv)
    print(common.machine_line())
    if args.what == "where":
        where(args.data, args.work, args.corpus)
    else:
        cv(args.data, args.work, args.variants)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
