"""Where the reader's unit similarity should be computed: at query time (the best few
units of the retrieved sections embedded with the pack's encoder) or at build time (every
unit of every section embedded once, its vector stored in the pack).

    python benchmarks/reader_embedding_cost.py [--data ../shared/data] [--work out/bench]
        [--corpus kubernetes] [--questions 60] [--sample 400] [--out FILE]

On the corpus's benchmark pack (benchmarks/corpora.py), with its shipped ONNX encoder:
- build time: the candidate units of every section (packs/retrieval/units.py), the time to
  embed a random sample of them (extrapolated to all), the bytes their vectors would take
  (float16), beside the build's own embed stage (its manifest's durations);
- query time: the offline answer alone (extractive.answer on a search already made, as
  ask() calls it) over the corpus's first --questions dev questions, p50 / p90 ms, and
  the time embedding its first model's best 4, 6 and 10 units would add (what the second
  model, the units' similarity to the question, costs at query time), same searches.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, corpora, reader_data  # noqa: E402

TOP_N = (4, 6, 10)


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[int(q * (len(s) - 1))]


def build_side(pack, sample: int, log) -> None:
    import polars as pl

    from packs import format as fmt
    from packs.retrieval.unit_vectors import embedded_text
    from packs.retrieval.units import candidates

    table = pl.read_parquet(pack.path / fmt.TABLES_DIR / f"{fmt.SECTIONS}.parquet",
                            columns=["content"])
    texts = [embedded_text(u) for (c,) in table.iter_rows() for u in candidates(c)]
    distinct = list(dict.fromkeys(texts))
    rng = random.Random(0)
    chosen = rng.sample(distinct, min(sample, len(distinct)))
    pack.embedder.encode_documents(chosen[:8])  # warm up
    t0 = time.perf_counter()
    pack.embedder.encode_documents(chosen, batch_size=64)
    per = (time.perf_counter() - t0) / len(chosen)
    dim = pack.manifest.embedding.dim
    log(f"build time: {len(table)} sections, {len(texts)} units ({len(distinct)} distinct); "
        f"{1000 * per:.1f} ms per unit embedded in batches of 64 (sample of {len(chosen)}) "
        f"-> {per * len(distinct):.0f} s to embed them all, {len(distinct) * dim * 2 / 1e6:.0f} MB "
        f"as float16; the build's embed stage took "
        f"{pack.manifest.durations.get('embed', float('nan')):.0f} s for the sections")


def query_side(pack, rows: list[dict], log) -> None:
    from packs.answer import _similarity, page_sections
    from packs.answer import idf as pack_idf
    from packs.retrieval import extractive, reader, unit_vectors
    from packs.retrieval import reader_features as rf

    shipped = reader.load()
    idf = pack_idf(pack)
    answer_ms: list[float] = []
    embed_ms: dict[int, list[float]] = {n: [] for n in TOP_N}
    for r in rows:
        result = pack.search(r["question"], use_cache=False, gate_threshold=-1.0)
        if not result.cited():
            continue
        extra = page_sections(pack, result)
        t0 = time.perf_counter()
        extractive.answer(result.question, result.cited(), pack_idf=idf, extra=extra)
        answer_ms.append(1000 * (time.perf_counter() - t0))
        # What the second model would add: embedding the first model's best units.
        sections, passages = extractive.passages_of(result.cited(), extra)
        units = extractive.units_of(result.question, passages)
        x = rf.features(rf.analyse(result.question), passages, units, idf)
        plain, x, _ = reader.with_units(shipped, x, [], None)  # the units as a query embeds them
        best = reader.ranked(plain, x, units)
        similarity = _similarity(pack, result)
        for n in TOP_N:
            top = [units[s.index] for s in best[:n]]
            t0 = time.perf_counter()
            similarity([sections[i] for i, _ in top],
                       [unit_vectors.embedded_text(u) for _, u in top])
            embed_ms[n].append(1000 * (time.perf_counter() - t0))
    log(f"query time over {len(answer_ms)} dev questions, same searches: the offline answer "
        f"alone (the shipped reader, {'with' if shipped.second else 'without'} its second "
        f"model): p50 {_pct(answer_ms, 0.5):.0f} ms, p90 {_pct(answer_ms, 0.9):.0f} ms")
    for n, ms in embed_ms.items():
        log(f"  + embedding its best {n} units with the pack's encoder for their similarity: "
            f"p50 {_pct(ms, 0.5):.0f} ms, p90 {_pct(ms, 0.9):.0f} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--corpus", default="kubernetes", choices=("kubernetes", "rust-book"))
    ap.add_argument("--questions", type=int, default=60)
    ap.add_argument("--sample", type=int, default=400)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if not corpora.available(args.data, args.corpus):
        print(f"skipped: no {args.corpus} corpus under {args.data}")
        return 0
    log, printed = common.printing_log()

    log(common.machine_line())
    from packs import KnowledgePack

    built = corpora.load(args.data, args.corpus, args.work).built
    with KnowledgePack.open(built.pack_dir) as pack:
        build_side(pack, args.sample, log)
        query_side(pack, reader_data.dev_rows(args.corpus)[:args.questions], log)
    if args.out:
        command = " ".join(["python benchmarks/reader_embedding_cost.py",
                            *(argv if argv is not None else sys.argv[1:])])
        args.out.write_text("# The reader's unit similarity: query time or build time\n\n"
                            f"- Command: `{command}` (HF_HUB_OFFLINE=1)\n\n```\n"
                            + "\n".join(printed) + "\n```\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
