"""Fit the offline graph's entity model (tasks/extract/judge.py) on the labelled samples,
with leave-one-corpus-out cross-validation, and write its weights as data.

    python benchmarks/graph_model.py [--data ../shared/data] [--work out/bench]
        [--labels benchmarks/data/graph_labels --labels benchmarks/data/graph_labels_v8]
        [--write tasks/extract/graph_model.json] [--out FILE]

Labels: every labelled entity of each folder: the before-labels of issue 48 (kubernetes,
rust-book), a fresh sample of the v8 graph (graph_labels_v8: kubernetes, rust-book,
cargo-book) and of the first model's graph (graph_labels_v9: drawn from what that model
kept, so they are easier), and the blind rounds already scored (graph_labels_blind to
graph_labels_blind8b: drawn from what the model of their day kept or added; dev data once
scored), each with its features in the corpus's pack (the features read only the pages'
text). The packs under --work are the harness's (benchmarks/common.py): a pack built with
another model file is rebuilt with the tree's first, so a work folder kept as a baseline's
graph is no place to fit in after a `--write`.

The model is fitted on the labelled items today's rules propose (`candidates`: the
population it will judge); an L2-regularised logistic regression on standardised
features (Newton's method, numpy).

Printed: for each held-out corpus (fitted on the others) and pooled: the precision of
the items kept at the threshold, the share of correct items kept, and the correct and
wrong items dropped. The threshold is the lowest whose pooled out-of-fold precision
reaches `--target`; the model written is fitted on all the corpora.

The fact model (tasks/extract/judge_facts.py) is fitted the same way on the labelled facts
today's rules propose (`--fact-labels`: every folder above with facts, graph_labels_blind
to graph_labels_blind8b the scored rounds; never a round not yet scored), each
read in its section of the pack, its threshold the lowest whose pooled out-of-fold
precision reaches `--fact-target`. `--write` writes the fact model beside the entity
model already in the file (`--refit-entity` refits that too).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, corpora, graph_precision  # noqa: E402

CORPORA = ("kubernetes", "rust-book", "cargo-book")
SCORED = ("graph_labels_blind", "graph_labels_blind2", "graph_labels_blind3",
          "graph_labels_blind4", "graph_labels_blind5", "graph_labels_blind6",
          "graph_labels_blind6b", "graph_labels_blind7", "graph_labels_blind7b",
          "graph_labels_blind8", "graph_labels_blind8b")  # blind rounds run once, now dev data
LABELS = tuple(ROOT / "benchmarks/data" / d
               for d in ("graph_labels", "graph_labels_v8", "graph_labels_v9", *SCORED))
FACT_LABELS = LABELS  # a folder without facts (graph_labels_v9, blind4) adds none
L2 = 1.0


def fit(x, y, l2: float = L2):
    """(weights, bias) of an L2-regularised logistic regression (Newton's method)."""
    import numpy as np

    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    reg = np.full(d + 1, l2)
    reg[-1] = 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-np.clip(xb @ w, -30, 30)))
        grad = xb.T @ (p - y) + reg * w
        hess = xb.T @ (xb * (p * (1 - p))[:, None]) + np.diag(reg) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:-1], float(w[-1])


def model_dict(rows: list[dict], names: list[str], threshold: float = 0.5) -> dict:
    """Fit on `rows` (each with "x": features, "y": label) and return the JSON model."""
    import numpy as np

    x = np.array([[r["x"].get(n, 0.0) for n in names] for r in rows])
    y = np.array([float(r["y"]) for r in rows])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    w, b = fit((x - mean) / scale, y)
    return {"features": names, "mean": mean.round(6).tolist(), "scale": scale.round(6).tolist(),
            "weights": w.round(6).tolist(), "bias": round(b, 6), "threshold": threshold,
            "trained_on": len(rows)}


def predict(model: dict, rows: list[dict]) -> list[float]:
    from tasks.extract.judge import probability

    return [probability(r["x"], model) for r in rows]


def summary(rows: list[dict], probs: list[float], t: float) -> str:
    kept = [r for r, p in zip(rows, probs) if p >= t]
    good = sum(r["y"] for r in kept)
    total_good = sum(r["y"] for r in rows)
    lo, hi = graph_precision.wilson(good, len(kept))
    before = sum(r["y"] for r in rows) / max(1, len(rows))
    return (f"{len(rows)} items, precision {before:.3f} -> kept {len(kept)}: "
            f"{good / max(1, len(kept)):.3f} [{lo:.3f}, {hi:.3f}]; correct kept "
            f"{good}/{total_good} ({good / max(1, total_good):.3f}), correct dropped "
            f"{total_good - good}, wrong dropped {len(rows) - len(kept) - (total_good - good)}")


def pack_sections(pack: Path) -> list[dict]:
    """The sections of a pack's current build: id, title, url, heading_path, content."""
    import pyarrow.parquet as pq

    return pq.read_table(graph_precision.tables_dir(pack) / "sections.parquet",
                         columns=["id", "title", "url", "heading_path", "content"]).to_pylist()


def proposed_tables(sections: list[dict]) -> dict:
    """The entity and fact tables today's offline rules propose for `sections`, before the
    models judge them: the extractor on every section, resolved across the pack with the
    examples' bound names left out (what the resolve stage hands the models)."""
    from packs.markdown import fence_spans
    from tasks.extract.assemble import assemble
    from tasks.extract.offline import extract_offline
    from tasks.extract.offline_names import bound_names
    from tasks.extract.schema import salvage

    extractions, stop = [], set()
    for s in sections:
        data = extract_offline(s["title"] or "", s["heading_path"] or "", s["content"] or "")
        try:
            extractions.append((s["id"], salvage(data).extraction))
        except ValueError:
            continue
        for a, b in fence_spans(s["content"] or ""):
            stop |= bound_names(s["content"][a:b])
    return assemble(extractions, stop)


def candidates(tables: dict) -> tuple[set[str], set[str]]:
    """(entity keys, fact keys) of the tables `proposed_tables` gives."""
    ents = {graph_precision.entity_key(n, t) for n, t in
            tables["entities"].select("name", "type").iter_rows()}
    facts = {graph_precision.fact_key(t) for (t,) in tables["facts"].select("text").iter_rows()}
    return ents, facts


def _labelled(data: Path, work: Path, labels: list[Path], kind: str):
    """Per corpus with labels of `kind` ("entities", "facts"): (corpus, its pack's sections,
    their PackText, the tables today's rules propose (`proposed_tables`; their keys:
    `candidates`), the labelled rows with the folder each comes from)."""
    from tasks.extract.judge import PackText

    for corpus in CORPORA:
        files = [f / f"{corpus}_{kind}.jsonl" for f in labels]
        files = [f for f in files if f.is_file()]
        if not files or not corpora.available(data, corpus):
            continue
        sections = pack_sections(corpora.load(data, corpus, work).built.pack_dir)
        text = PackText([(s["url"], s["heading_path"], s["content"]) for s in sections])
        rows = [(json.loads(line), path.parent.name) for path in files
                for line in path.read_text(encoding="utf-8").splitlines()]
        yield corpus, sections, text, proposed_tables(sections), rows


def load_rows(data: Path, work: Path, labels: list[Path], log) -> list[dict]:
    """Labelled entities of each corpus with their features, each row {"corpus", "x", "y",
    "present", "name", "source"}; `present`: today's rules propose it (`candidates`)."""
    from tasks.extract.judge import entity_features

    out: list[dict] = []
    for corpus, sections, text, tables, rows in _labelled(data, work, labels, "entities"):
        proposed, _ = candidates(tables)
        mine = [{"corpus": corpus, "x": entity_features(r["name"], r["type"], text),
                 "y": bool(r["label"]), "present": r["key"] in proposed, "name": r["name"],
                 "source": source} for r, source in rows]
        out += mine
        log(f"{corpus}: {len(sections)} sections, {len(proposed)} entities proposed; "
            f"{len(mine)} labelled, {sum(r['present'] for r in mine)} of them proposed")
    return out


def _fact_sections(sections: list[dict]):
    """A labelled fact's (heading path, content) to read it in: its section in the pack,
    else the heading path and context its label kept."""
    by_id = {s["id"]: (s["heading_path"] or "", s["content"] or "") for s in sections}
    return lambda r: by_id.get(r["section_id"], (r["heading_path"] or "", r.get("context") or ""))


def load_fact_rows(data: Path, work: Path, labels: list[Path], log) -> list[dict]:
    """Labelled facts of each corpus that today's rules propose, with their features read
    in their sections of the corpus's pack: {"corpus", "x", "y", "source"}."""
    from tasks.extract.judge_facts import fact_features

    out: list[dict] = []
    for corpus, sections, text, tables, rows in _labelled(data, work, labels, "facts"):
        _, proposed = candidates(tables)
        where = _fact_sections(sections)
        mine = [{"corpus": corpus, "y": bool(r["label"]), "source": source,
                 "x": fact_features(r["text"], *where(r), text)}
                for r, source in rows if r["key"] in proposed]
        out += mine
        log(f"{corpus}: {len(mine)} labelled facts today's rules propose")
    return out


def quoted_rejected(data: Path, work: Path, labels: list[Path], log) -> None:
    """Of the labelled facts the shipped fact model keeps, the precision of those that quote
    (as code) a name the shipped entity model rejects, beside the rest; and of those whose
    own entity it rejects, split by whether they name a name it keeps. The first split is
    why such a fact is judged by the fact model alone (tasks/extract/assemble.py); the
    second looked as good, but the facts it would add scored 0.80 and 0.83 blind (round
    11b), and they still go with their entity."""
    from packs.text import CODE_SPAN
    from tasks.extract.assemble import rejected_names
    from tasks.extract.judge import load_model, probability
    from tasks.extract.judge_facts import fact_features

    model = load_model()
    for corpus, sections, text, tables, rows in _labelled(data, work, labels, "facts"):
        _, proposed = candidates(tables)
        ents = tables["entities"]
        rejected = rejected_names(ents, text, model)
        kept = {n.lower() for n in ents["name"] if n not in rejected and len(n) >= 3}
        where = _fact_sections(sections)
        split: dict[str, list[bool]] = {}
        for r, _ in rows:
            if r["key"] not in proposed or probability(fact_features(
                    r["text"], *where(r), text), model["fact"]) < model["fact"]["threshold"]:
                continue
            quotes = any(m.group(1).strip() in rejected for m in CODE_SPAN.finditer(r["text"]))
            split.setdefault(f"that {'quote' if quotes else 'do not quote'} a rejected name",
                             []).append(bool(r["label"]))
            own = (r.get("entity") or "").strip("`")
            if own in rejected:
                names = any(k in r["text"].lower() for k in kept - {own.lower()})
                split.setdefault(f"about a rejected name, naming {'a' if names else 'no'} kept "
                                 "one", []).append(bool(r["label"]))
        for group, labels_ in split.items():
            log(f"{corpus}: facts kept {group}: {len(labels_)}, "
                f"precision {sum(labels_) / max(1, len(labels_)):.3f}")


def fit_facts(rows: list[dict], target: float, log) -> dict:
    """The fact model fitted on every row, its threshold chosen by leave-one-corpus-out
    (see the module docstring)."""
    names = sorted(rows[0]["x"])
    probs = out_of_fold(rows, names)
    t = choose_threshold(rows, probs, target)
    log(f"\nfact model: {len(names)} features, fitted on {len(rows)} labelled facts; threshold "
        f"{t:.2f} (the lowest whose pooled out-of-fold precision reaches {target})")
    for held in (*sorted({r["corpus"] for r in rows}), "pooled"):
        idx = [i for i, r in enumerate(rows) if held in ("pooled", r["corpus"])]
        log(f"  {held}, threshold {t:.2f}: "
            + summary([rows[i] for i in idx], [probs[i] for i in idx], t))
    model = model_dict(rows, names, t)
    log(largest_weights(names, model, 8))
    return model


def out_of_fold(rows: list[dict], names: list[str]) -> list[float]:
    """Each row's probability under the model fitted on the other corpora's rows
    (leave-one-corpus-out)."""
    oof = {}
    for held in sorted({r["corpus"] for r in rows}):
        m = model_dict([r for r in rows if r["corpus"] != held], names)
        for r in rows:
            if r["corpus"] == held:
                oof[id(r)] = predict(m, [r])[0]
    return [oof[id(r)] for r in rows]


def largest_weights(names: list[str], model: dict, n: int) -> str:
    """The log line of a fitted model's `n` largest standardised weights."""
    top = sorted(zip(names, model["weights"]), key=lambda x: -abs(x[1]))[:n]
    return "largest weights (standardised): " + ", ".join(f"{k} {w:+.2f}" for k, w in top)


def choose_threshold(rows: list[dict], probs: list[float], target: float) -> float:
    """The lowest threshold whose kept items reach `target` precision (0.5 when none)."""
    for t in [i / 100 for i in range(5, 96)]:
        kept = [r["y"] for r, p in zip(rows, probs) if p >= t]
        if kept and sum(kept) / len(kept) >= target:
            return t
    return 0.5


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--labels", type=Path, action="append")
    ap.add_argument("--target", type=float, default=0.92,
                    help="out-of-fold precision the threshold must reach (entities)")
    ap.add_argument("--fact-labels", type=Path, action="append")
    ap.add_argument("--fact-target", type=float, default=0.90,
                    help="out-of-fold precision the fact threshold must reach")
    ap.add_argument("--refit-entity", action="store_true",
                    help="with --write: refit the entity model too (else kept as written)")
    ap.add_argument("--write", type=Path, default=None, help="write the models here")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--quoted-rejected", action="store_true",
                    help="only report the labelled facts that quote or are about a "
                         "rejected name")
    args = ap.parse_args(argv)
    if not any(corpora.available(args.data, c) for c in CORPORA):
        print(f"skipped: the labelled corpora are not under {args.data}")
        return 0
    lines: list[str] = [common.machine_line()]

    def log(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    if args.quoted_rejected:
        quoted_rejected(args.data, args.work, args.fact_labels or list(FACT_LABELS), log)
        return 0
    rows = load_rows(args.data, args.work, args.labels or list(LABELS), log)
    names = sorted(rows[0]["x"])
    proposed = [r for r in rows if r["present"]]
    probs = out_of_fold(proposed, names)  # fitted on the other corpora's proposed items
    t = choose_threshold(proposed, probs, args.target)
    log(f"\nentity model: {len(names)} features, fitted on the {len(proposed)} labelled items "
        f"today's rules propose; threshold {t:.2f} (the lowest whose pooled out-of-fold "
        f"precision reaches {args.target})")
    log("leave-one-corpus-out (fitted on the other corpora), items today's rules propose:")
    for held in (*CORPORA, "pooled"):
        idx = [i for i, r in enumerate(proposed) if held in ("pooled", r["corpus"])]
        for th in sorted({0.5, t}):
            log(f"  {held}, threshold {th:.2f}: "
                + summary([proposed[i] for i in idx], [probs[i] for i in idx], th))
    unbiased = [i for i, r in enumerate(proposed)
                if r["source"] in ("graph_labels", "graph_labels_v8")]
    log("  pooled, items drawn before any model (graph_labels, graph_labels_v8), threshold "
        f"{t:.2f}: " + summary([proposed[i] for i in unbiased], [probs[i] for i in unbiased], t))
    models = {"entity": model_dict(proposed, names, t)}
    log(largest_weights(names, models["entity"], 10))
    fact_rows = load_fact_rows(args.data, args.work, args.fact_labels or list(FACT_LABELS), log)
    if fact_rows:
        models["fact"] = fit_facts(fact_rows, args.fact_target, log)
    if args.write and not args.refit_entity and args.write.is_file():
        models["entity"] = json.loads(args.write.read_text(encoding="utf-8"))["entity"]
        log(f"entity model kept as written in {args.write} (--refit-entity refits it)")
    if args.write:
        args.write.write_text(json.dumps(models, indent=1) + "\n", encoding="utf-8")
        log(f"written: {args.write}")
    if args.out:
        command = " ".join(["python benchmarks/graph_model.py", *(argv or sys.argv[1:])])
        args.out.write_text(f"# The offline graph's models\n\n- Command: `{command}`\n\n```\n"
                            + "\n".join(lines) + "\n```\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
