"""Does an int8 query encoder keep the rankings of the fp32 one a pack ships?

    python benchmarks/query_encoder.py --k8s-pack out/bench/k8s/packs/k8s-docs
                                      [--data ../shared/data] [--out benchmarks/results/query_encoder.md]

Documents stay fp32 vectors (embedded by the build); only the question is encoded by the
int8 dynamic quantization (onnxruntime.quantization) of the pack's ONNX export. Reported
side by side with the fp32 encoder in the same run:

- Kubernetes docs pack (built by `benchmarks/k8s_build.py`), the 191 questions of
  benchmarks/data/k8s_questions.jsonl: mean top-10 overlap of the ranked sections (fp32 vs
  int8) and page-level nDCG@10 against the gold pages, for vector search alone and for
  the default pipeline (gate off, so every question is ranked).
- SciFact (5,183 abstracts, exact cosine over fp32 document vectors from the same ONNX
  export, cached under out/bench): the 300 test claims and the dev claims, top-10
  overlap and nDCG@10.

Criterion (issue 17): top-10 overlap >= 0.95 and |nDCG@10 difference| <= 0.005 on both.
Needs the build install (quantization imports onnx). Skips what has no data.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402

K8S_QUESTIONS = ROOT / "benchmarks" / "data" / "k8s_questions.jsonl"
K = 10


def overlap(a: list[str], b: list[str], k: int = K) -> float:
    return len(set(a[:k]) & set(b[:k])) / max(min(k, len(a), len(b)), 1)


def ndcg(ranking: list[str], gold: dict[str, float], k: int = K) -> float:
    dcg = sum(gold.get(d, 0.0) / math.log2(i + 2) for i, d in enumerate(ranking[:k]))
    ideal = sorted(gold.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def encoders(build_dir: Path, manifest):
    """(fp32, int8) OnnxEncoders: the pack's shipped export and its int8 quantization."""
    from packs import format as fmt
    from packs.embedding import local_folder, resolve_model
    from packs.encoder import sha256_file
    from packs.onnx_backend import OnnxEncoder, ensure_export

    enc = manifest.encoder
    if not enc.present:
        raise SystemExit(f"{build_dir}: the pack carries no encoder; rebuild it")
    fp32_path = build_dir / fmt.ENCODER_MODEL
    # Quantize the cached export the pack's file came from (same sha256), not inside the pack.
    export = ensure_export(local_folder(resolve_model(manifest.embedding.model).load_from))
    if sha256_file(export) != enc.files[fmt.ENCODER_MODEL].sha256:
        raise SystemExit(f"{export} is not the export this pack ships; rebuild the pack")
    int8_path = quantized_path(export)
    load = lambda p: OnnxEncoder.from_files(p, build_dir / fmt.ENCODER_DIR, enc.pooling,  # noqa: E731
                                            enc.max_seq_length)
    return load(fp32_path), load(int8_path), fp32_path, int8_path


def quantized_path(model_path: Path) -> Path:
    """The int8 dynamic quantization of an exported model, next to it, made once."""
    import os
    import tempfile

    from onnxruntime.quantization import QuantType, quantize_dynamic

    target = model_path.with_name("model.int8.onnx")
    if not target.is_file():
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            out = Path(tmp) / "model.int8.onnx"
            quantize_dynamic(str(model_path), str(out), weight_type=QuantType.QInt8)
            os.replace(out, target)
    return target


def common_cache() -> Path:
    path = common.DEFAULT_WORK / "query_encoder"
    path.mkdir(parents=True, exist_ok=True)
    return path


def k8s(pack_dir: Path, lines: list[str]) -> None:
    from packs import KnowledgePack
    from packs.embedding import Embedder, ModelSpec

    questions = [json.loads(x) for x in K8S_QUESTIONS.open(encoding="utf-8")]
    with KnowledgePack.open(pack_dir) as fp32_pack, KnowledgePack.open(pack_dir) as int8_pack:
        m = fp32_pack.manifest
        fp32, int8, fp32_path, int8_path = encoders(fp32_pack.path, m)
        spec = ModelSpec(id=m.embedding.model, query_prefix=m.embedding.query_prefix)
        fp32_pack._embedder = Embedder.from_encoder(spec, fp32, str(fp32_path))
        int8_pack._embedder = Embedder.from_encoder(spec, int8, str(int8_path))
        prefix = re.compile(r"^(.*?)/(?:concepts|tasks|tutorials|setup)/")
        base = next(mt.group(1) for u in fp32_pack.db.article_urls() if (mt := prefix.match(u)))
        lines.append(f"\n## Kubernetes docs: {len(questions)} questions, pack {pack_dir} "
                     f"({m.counts.sections} sections, {m.embedding.model})\n")
        lines.append("| run | questions | top-10 overlap (mean) | min | nDCG@10 fp32 | nDCG@10 int8 "
                     "| diff | ms/q fp32 | ms/q int8 |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for label, opts in (("vector only", {"use_enhancements": False}),
                            ("default pipeline", {})):
            overlaps, nd = [], {"fp32": [], "int8": []}
            secs = {"fp32": 0.0, "int8": 0.0}
            for q in questions:
                ranked = {}
                for name, pack in (("fp32", fp32_pack), ("int8", int8_pack)):
                    t = time.perf_counter()
                    r = pack.search(q["question"], gate_threshold=-1.0, use_cache=False,
                                    max_results=K, **opts)
                    secs[name] += time.perf_counter() - t
                    ranked[name] = r.sections
                overlaps.append(overlap([s.id for s in ranked["fp32"]],
                                        [s.id for s in ranked["int8"]]))
                if q["gold"]:
                    gold = {f"{base}/{g}": 1.0 for g in q["gold"]}
                    for name in nd:
                        pages = list(dict.fromkeys(s.url for s in ranked[name]))
                        nd[name].append(ndcg(pages, gold))
            a, b = float(np.mean(nd["fp32"])), float(np.mean(nd["int8"]))
            n = len(questions)
            lines.append(f"| {label} | {n} ({len(nd['fp32'])} with gold) | "
                         f"{np.mean(overlaps):.3f} | {min(overlaps):.1f} | {a:.3f} | {b:.3f} | "
                         f"{b - a:+.3f} | {1000 * secs['fp32'] / n:.0f} | "
                         f"{1000 * secs['int8'] / n:.0f} |")
            print(lines[-1], flush=True)
        sizes = (fp32_path.stat().st_size / 2**20, int8_path.stat().st_size / 2**20)
        lines.append(f"\nencoder size: fp32 {sizes[0]:.1f} MiB, int8 {sizes[1]:.1f} MiB")
        cos = [float(fp32.encode([spec.query_prefix + q["question"]])[0]
                     @ int8.encode([spec.query_prefix + q["question"]])[0]) for q in questions]
        lines.append(f"cosine(fp32 query vector, int8 query vector): mean {np.mean(cos):.4f}, "
                     f"min {min(cos):.4f}")


def scifact(data: Path, pack_dir: Path, lines: list[str]) -> None:
    from benchmarks.scifact import load
    from packs import KnowledgePack

    corpus, queries, test, dev = load(data)
    with KnowledgePack.open(pack_dir) as pack:
        fp32, int8, _, _ = encoders(pack.path, pack.manifest)
    ids = [str(d["_id"]) for d in corpus]
    texts = [f"{' '.join(d['title'].split())}\n{d['text']}" for d in corpus]
    key = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
    cached = common_cache() / f"scifact-docs-{key}.npy"
    if cached.is_file():
        docs = np.load(cached)
    else:
        print(f"encoding {len(texts)} SciFact abstracts with the fp32 encoder (cached after)",
              flush=True)
        t = time.perf_counter()
        docs = fp32.encode(texts, batch_size=32)
        np.save(cached, docs)
        print(f"  {time.perf_counter() - t:.0f} s", flush=True)
    lines.append(f"\n## SciFact: {len(corpus)} abstracts, exact cosine over fp32 document "
                 "vectors\n")
    lines.append("| claims | top-10 overlap (mean) | min | nDCG@10 fp32 | nDCG@10 int8 | diff |")
    lines.append("|---|---|---|---|---|---|")
    for split, qrels in (("test", test), ("dev", dev)):
        qids = [q for q in sorted(qrels, key=int) if q in queries]
        qtexts = [queries[q] for q in qids]
        tops = {}
        for name, enc in (("fp32", fp32), ("int8", int8)):
            sims = enc.encode(qtexts, batch_size=64) @ docs.T
            tops[name] = [[ids[i] for i in row] for row in np.argsort(-sims, axis=1)[:, :K]]
        ov = [overlap(a, b) for a, b in zip(tops["fp32"], tops["int8"])]
        nd = {n: float(np.mean([ndcg(r, {d: float(g) for d, g in qrels[q].items()})
                                for r, q in zip(tops[n], qids)])) for n in tops}
        lines.append(f"| {split} ({len(qids)}) | {np.mean(ov):.3f} | {min(ov):.1f} | "
                     f"{nd['fp32']:.3f} | {nd['int8']:.3f} | {nd['int8'] - nd['fp32']:+.3f} |")
        print(lines[-1], flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k8s-pack", type=Path, default=ROOT / "out/bench/k8s/packs/k8s-docs")
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/query_encoder.md")
    args = ap.parse_args(argv)
    if not (args.k8s_pack / "current").is_file():
        print(f"skipped: no Kubernetes pack at {args.k8s_pack} (run benchmarks/k8s_build.py "
              "--out out/bench/k8s first)")
        return 0
    lines = ["# int8 vs fp32 query encoder — `python benchmarks/query_encoder.py`\n",
             common.machine_line()]
    print(lines[-1], flush=True)
    k8s(args.k8s_pack, lines)
    if (args.data / "scifact" / "corpus.jsonl").is_file():
        scifact(args.data / "scifact", args.k8s_pack, lines)
    else:
        lines.append(f"\nSciFact skipped: no {args.data / 'scifact'}")
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
