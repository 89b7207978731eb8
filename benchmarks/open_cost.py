"""What checking a pack's checksums costs when it is opened.

    python benchmarks/open_cost.py --pack out/bench/k8s/k8s-docs [--rounds 5]

On a copy of the pack's current build (so the real pack and its stamps are untouched),
with an empty KPACK_CACHE_DIR, this times, each `--rounds` times (median reported):

- `KnowledgePack.open(..., verify=False)` + close (no check: the floor);
- the first open of a database version: sizes plus a full sha256 of pack.db;
- a later open: sizes plus the remembered stamp (a stat);
- `kpack verify`'s full check of every file;
- the gate's vocabulary (packs/vocabulary.py): counted again from the sections (a pack
  built before the current text rules, first open on this machine), read from the copy
  kept in the cache folder (its later opens), and read from a current terms.json;

and the size of pack.db, so the hash rate can be read off. Results go to stdout and
benchmarks/results/open_cost.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "open_cost.md"


def _ms(fn, rounds: int, before=None) -> float:
    times = []
    for _ in range(rounds):
        if before:
            before()
        start = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def _vocabulary_rows(build: Path, sums: dict, rounds: int, cache: Path
                     ) -> list[tuple[str, float]]:
    """Medians of loading the gate's vocabulary three ways (see the module doc)."""
    from packs import KnowledgePack, vocabulary
    from packs import format as fmt

    terms = build / fmt.TABLES_DIR / fmt.TERMS_FILE
    db_sum = sums[fmt.DB_FILE]["sha256"]
    with KnowledgePack.open(build, verify=False) as kp:
        texts = kp.db.section_texts
        stale = terms.read_bytes()
        terms.write_text("{}")  # counted with no rules the current code knows
        recount = _ms(lambda: vocabulary.load(terms, texts, db_sum), rounds,
                      before=lambda: shutil.rmtree(cache / "vocabulary", ignore_errors=True))
        vocabulary.load(terms, texts, db_sum)
        kept = _ms(lambda: vocabulary.load(terms, texts, db_sum), rounds)
        terms.write_text(vocabulary.dump(vocabulary.load(terms, texts, db_sum)))
        current = _ms(lambda: vocabulary.load(terms, texts, None), rounds)
        terms.write_bytes(stale)
        sections = kp.manifest.counts.sections
    return [(f"gate vocabulary, counted again from {sections:,} sections", recount),
            ("gate vocabulary, the recount kept in the cache folder", kept),
            ("gate vocabulary, a current terms.json", current)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pack", type=Path, required=True, help="a pack folder or build folder")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    from packs import KnowledgePack, integrity
    from packs import format as fmt
    from packs.layout import resolve_build_dir
    from packs.manifest import read_manifest

    print(common.machine_line(), flush=True)
    with tempfile.TemporaryDirectory(prefix="kpack-open-") as tmp:
        os.environ["KPACK_CACHE_DIR"] = f"{tmp}/cache"
        build = Path(tmp) / "build"
        shutil.copytree(resolve_build_dir(args.pack), build)
        manifest = read_manifest(build)
        if not manifest.checksums:  # a pack from before checksums: add them to the copy
            manifest.checksums = integrity.checksums(build)
        sums = manifest.checksums
        db_mb = (build / fmt.DB_FILE).stat().st_size / 1e6
        total_mb = sum(int(e["bytes"]) for e in sums.values()) / 1e6

        def open_close() -> None:
            KnowledgePack.open(build, verify=False).close()

        manifest.write(build)
        floor = _ms(open_close, args.rounds)
        stamps = Path(tmp) / "cache" / "verified"
        cold = _ms(lambda: integrity.check_on_open(build, sums), args.rounds,
                   before=lambda: shutil.rmtree(stamps, ignore_errors=True))
        integrity.check_on_open(build, sums)
        warm = _ms(lambda: integrity.check_on_open(build, sums), args.rounds)
        full = _ms(lambda: integrity.verify(build, sums), args.rounds)
        vocab_rows = _vocabulary_rows(build, sums, args.rounds, Path(tmp) / "cache")
    rows = [("open + close, no check (floor)", floor),
            (f"first open of this pack.db: sizes + sha256 of {db_mb:.0f} MB", cold),
            ("later opens: sizes + the remembered stamp", warm),
            (f"kpack verify: every file ({total_mb:.0f} MB)", full), *vocab_rows]
    text = ("| step | median ms |\n|---|---:|\n"
            + "".join(f"| {name} | {ms:.1f} |\n" for name, ms in rows)
            + f"\nhash rate {db_mb / (cold / 1000):.0f} MB/s; a later open adds {warm:.2f} ms "
              f"to the {floor:.0f} ms open ({100 * warm / floor:.1f}%), the first open of a "
              f"new build {cold:.0f} ms ({100 * cold / floor:.0f}%)\n")
    print(text)
    common.append_run(RESULTS, f"python benchmarks/open_cost.py --pack {args.pack} "
                               f"--rounds {args.rounds}", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
