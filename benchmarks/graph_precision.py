"""Precision of a pack's graph (entities, facts, relationships) on a hand-labelled sample.

    python benchmarks/graph_precision.py sample --pack PACK --corpus NAME --out DIR
        [--seed 48] [--entities 200] [--facts 100] [--relations 100]
    python benchmarks/graph_precision.py score --pack PACK --corpus NAME [--pack ... --corpus ...]
        --labels DIR [--sample-new N] [--seed 48] [--results FILE]

`sample` draws a seeded uniform sample of the pack's distinct entities, facts and
relationships (from the Parquet tables of its current build) and writes DIR/NAME_entities.jsonl,
NAME_facts.jsonl and NAME_relations.jsonl, one item a line with what a labeller needs (the
section's url, heading path and the text around the item) and "label": null, "why": null.
A labeller sets "label" to true or false and, when false, "why" to a failure class
("literal", "fragment: cut mid-sentence", ...: the text before a colon is the class).
The criteria are in benchmarks/data/graph_labels/README.md.

`score` matches labelled items to the items of PACK by key and prints, per kind: the items
labelled, how many PACK still has, the precision over those still present (true / present,
Wilson 95 % interval), the removed items by label (removed false ones are the good
removals), the precision of the whole labelled sample, and its failure classes. After the
graph changes, `--sample-new N` prints N unlabelled items of PACK that the labels do not
hold, to label afresh.

Keys (stable across builds, independent of ids):
  entity    folded name + "|" + type (folded: NFKC, case-folded, whitespace collapsed;
            nothing else, since the label judges the name as written, markup included)
  fact      16 hex digits of the sha256 of the text, lower-cased, non-word runs as one space
  relation  folded source + "|" + relation + "|" + folded target (the two names sorted for
            a symmetric relation such as CO_OCCURS_WITH)
An entity whose name is still present under another type counts as removed, and is
reported as "retyped".
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import random
import re
import sys
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402
from packs import format as fmt  # noqa: E402
from packs import text as text_rules  # noqa: E402

KINDS = ("entities", "facts", "relations")
SIZES = {"entities": 200, "facts": 100, "relations": 100}
SYMMETRIC = frozenset({"CO_OCCURS_WITH"})
MAX_CONTEXT = 700  # characters of context written per item
_NON_WORD = re.compile(r"[^\w]+")


# --- keys ----------------------------------------------------------------------------------


def fold(name: str) -> str:
    """NFKC, case-folded, whitespace runs as one space."""
    return " ".join(unicodedata.normalize("NFKC", name).casefold().split())


def entity_key(name: str, etype: str) -> str:
    return f"{fold(name)}|{(etype or '').lower()}"


def fact_key(text: str) -> str:
    folded = _NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()
    return hashlib.sha256(folded.encode("utf-8")).hexdigest()[:16]


def relation_key(source: str, relation: str, target: str) -> str:
    a, b = fold(source), fold(target)
    if relation in SYMMETRIC and b < a:
        a, b = b, a
    return f"{a}|{relation}|{b}"


# --- the pack's items ---------------------------------------------------------------------


@dataclass
class Graph:
    """A pack build's graph tables as plain rows: sections by id, mentions by entity."""

    entities: list[dict]
    facts: list[dict]
    relationships: list[dict]
    sections: dict[str, dict]
    mentions: dict[str, list[str]]  # entity id -> section ids
    counts: dict[str, int]


def tables_dir(pack: Path) -> Path:
    """The tables folder of a pack folder's current build, or of a build folder."""
    if (pack / fmt.TABLES_DIR).is_dir():
        return pack / fmt.TABLES_DIR
    current = pack / fmt.CURRENT_FILE
    if not current.is_file():
        raise FileNotFoundError(f"{pack}: neither a pack folder (no {fmt.CURRENT_FILE}) nor a "
                                f"build folder (no {fmt.TABLES_DIR}/); pass --pack PACK_DIR")
    return pack / fmt.BUILDS_DIR / current.read_text().strip() / fmt.TABLES_DIR


def load_graph(pack: Path) -> Graph:
    """Read the entity, fact, relationship, mention and section tables of `pack`."""
    import pyarrow.parquet as pq

    tables = tables_dir(pack)

    def rows(name: str, columns: tuple[str, ...]) -> list[dict]:
        return pq.read_table(tables / f"{name}.parquet", columns=list(columns)).to_pylist()

    sections = {s["id"]: s for s in rows(fmt.SECTIONS, ("id", "url", "heading_path",
                                                        "position", "chunk", "content"))}
    mentions: dict[str, list[str]] = {}
    for m in rows(fmt.MENTIONS, fmt.TABLE_COLUMNS[fmt.MENTIONS]):
        mentions.setdefault(m["entity_id"], []).append(m["section_id"])
    graph = Graph(rows(fmt.ENTITIES, fmt.TABLE_COLUMNS[fmt.ENTITIES]),
                  rows(fmt.FACTS, fmt.TABLE_COLUMNS[fmt.FACTS]),
                  rows(fmt.RELATIONSHIPS, fmt.TABLE_COLUMNS[fmt.RELATIONSHIPS]),
                  sections, mentions, {})
    graph.counts = {"sections": len(sections), "entities": len(graph.entities),
                    "facts": len(graph.facts), "relationships": len(graph.relationships)}
    return graph


def _where(graph: Graph, section_id: str | None) -> dict:
    s = graph.sections.get(section_id or "", {})
    return {"section_id": section_id, "url": s.get("url"), "heading_path": s.get("heading_path")}


@functools.cache
def _sentences(content: str) -> tuple[str, ...]:
    return tuple(s for block in re.split(r"\n\s*\n", content or "")
            for s in text_rules.sentences(block) if s.strip())


def mention_context(content: str, names: list[str]) -> str:
    """The sentences of `content` that contain one of `names` (case-insensitive), joined,
    at most MAX_CONTEXT characters; "" when none does."""
    needles = [n.lower() for n in names if n]
    found = [s for s in _sentences(content) if any(n in s.lower() for n in needles)]
    return " … ".join(found)[:MAX_CONTEXT]


def text_window(content: str, text: str) -> str:
    """MAX_CONTEXT characters of `content` around the first place `text` starts."""
    start = (content or "").find(text[:40]) if text else -1
    start = max(0, start - MAX_CONTEXT // 3) if start >= 0 else 0
    return (content or "")[start:start + MAX_CONTEXT]


def items(graph: Graph, kind: str) -> dict[str, dict]:
    """The distinct items of one kind, by key (the first row of a key in table order wins),
    each a labeller's row with "label" and "why" still None."""
    out: dict[str, dict] = {}
    names = {e["id"]: e for e in graph.entities}
    if kind == "entities":
        for e in graph.entities:
            order = sorted(graph.mentions.get(e["id"], []),
                           key=lambda sid: (graph.sections.get(sid, {}).get("url") or "",
                                            graph.sections.get(sid, {}).get("position") or 0))
            forms = [e["name"], *(e.get("aliases") or [])]
            sid = next((s for s in order if mention_context(
                graph.sections[s]["content"], forms)), order[0] if order else None)
            content = graph.sections.get(sid or "", {}).get("content") or ""
            out.setdefault(entity_key(e["name"], e["type"]), {
                "key": entity_key(e["name"], e["type"]), "name": e["name"], "type": e["type"],
                "description": e["description"], "aliases": list(e.get("aliases") or []),
                "sections": len(order), **_where(graph, sid),
                "context": mention_context(content, forms) or content[:MAX_CONTEXT],
                "label": None, "why": None})
    elif kind == "facts":
        for f in graph.facts:
            content = graph.sections.get(f["section_id"], {}).get("content") or ""
            out.setdefault(fact_key(f["text"]), {
                "key": fact_key(f["text"]), "text": f["text"],
                "entity": names.get(f["entity_id"], {}).get("name"),
                **_where(graph, f["section_id"]), "context": text_window(content, f["text"]),
                "label": None, "why": None})
    elif kind == "relations":
        for r in graph.relationships:
            src = names.get(r["source_id"], {}).get("name") or ""
            dst = names.get(r["target_id"], {}).get("name") or ""
            key = relation_key(src, r["relation"], dst)
            out.setdefault(key, {"key": key, "source": src, "relation": r["relation"],
                                 "target": dst, "evidence": r["evidence"],
                                 **_where(graph, r["section_id"]), "label": None, "why": None})
    else:
        raise ValueError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")
    return out


def draw(keyed: dict[str, dict], n: int, seed: int, exclude: set[str] = frozenset()) -> list[dict]:
    """A seeded uniform sample of n items (all when fewer), by sorted key, so the draw does
    not depend on table order; keys in `exclude` are never drawn."""
    keys = sorted(k for k in keyed if k not in exclude)
    return [keyed[k] for k in random.Random(seed).sample(keys, min(n, len(keys)))]


# --- scoring --------------------------------------------------------------------------------


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95 % by default); (0, 1) when n is 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def failure_class(why: str | None) -> str:
    """The class of a "why" note: its text before the first colon (the note when none)."""
    return (why or "unexplained").split(":", 1)[0].strip() or "unexplained"


def score_kind(labelled: list[dict], present: set[str], names: set[str] = frozenset()) -> dict:
    """Precision of labelled items against the keys `present` in a pack. Raises ValueError
    when an item has no true/false label. `names` (entities): the folded names present, to
    tell a retyped entity from a removed one."""
    unlabelled = [r["key"] for r in labelled if not isinstance(r.get("label"), bool)]
    if unlabelled:
        raise ValueError(f"{len(unlabelled)} items have no true/false label, e.g. "
                         f"{unlabelled[0]!r}: label them before scoring")
    kept = [r for r in labelled if r["key"] in present]
    gone = [r for r in labelled if r["key"] not in present]
    good = sum(r["label"] for r in kept)
    total_good = sum(r["label"] for r in labelled)
    return {
        "labelled": len(labelled), "present": len(kept), "present_true": good,
        "precision": good / len(kept) if kept else None, "interval": wilson(good, len(kept)),
        "removed_true": sum(r["label"] for r in gone),
        "removed_false": sum(not r["label"] for r in gone),
        "retyped": sum(r["key"].rsplit("|", 1)[0] in names for r in gone),
        "sample_precision": total_good / len(labelled) if labelled else None,
        "sample_interval": wilson(total_good, len(labelled)),
        "classes": Counter(failure_class(r.get("why")) for r in labelled if not r["label"]),
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def report(corpora: list[tuple[str, str, dict[str, int], dict[str, dict]]]) -> str:
    """The score table and failure classes of each (corpus, tables folder, pack counts,
    scores by kind) as text."""
    lines = [common.machine_line(), ""]
    for corpus, where, counts, _ in corpora:
        lines.append(f"{corpus}: {where} ("
                     + ", ".join(f"{v} {k}" for k, v in counts.items()) + ")")
    lines += ["", "| corpus | kind | labelled | present | precision (present) | 95% interval | "
              "removed false | removed true | retyped | precision (labelled sample) | "
              "95% interval |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for corpus, _, _, scores in corpora:
        for kind, s in scores.items():
            lo, hi = s["interval"]
            slo, shi = s["sample_interval"]
            lines.append(f"| {corpus} | {kind} | {s['labelled']} | {s['present']} | "
                         f"{_pct(s['precision'])} | {lo:.3f}–{hi:.3f} | {s['removed_false']} | "
                         f"{s['removed_true']} | {s['retyped']} | "
                         f"{_pct(s['sample_precision'])} | {slo:.3f}–{shi:.3f} |")
    lines += ["", "Labelled false, by class (benchmarks/data/graph_labels/README.md):"]
    for corpus, _, _, scores in corpora:
        for kind, s in scores.items():
            classes = ", ".join(f"{c} {n}" for c, n in s["classes"].most_common())
            lines.append(f"  {corpus} {kind}: {classes or 'none'}")
    return "\n".join(lines)


# --- CLI ------------------------------------------------------------------------------------


def _path(folder: Path, corpus: str, kind: str) -> Path:
    return folder / f"{corpus}_{kind}.jsonl"


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no labels (write them with `sample` first)")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def cmd_sample(args: argparse.Namespace) -> int:
    graph = load_graph(args.pack)
    print(f"{args.corpus}: {graph.counts} from {tables_dir(args.pack)}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    for kind in KINDS:
        keyed = items(graph, kind)
        sample = draw(keyed, getattr(args, kind), args.seed)
        path = _path(args.out, args.corpus, kind)
        if path.exists() and not args.force:
            raise FileExistsError(f"{path} exists (labels?): pass --force to overwrite it")
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sample),
                        encoding="utf-8")
        print(f"{kind}: {len(sample)} of {len(keyed)} distinct → {path}", flush=True)
    print(f"sampled {args.corpus} with seed {args.seed}; label the files, then run score")
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    if len(args.pack) != len(args.corpus):
        raise SystemExit("give one --corpus per --pack, in the same order")
    results, fresh = [], []
    for pack, corpus in zip(args.pack, args.corpus):
        graph = load_graph(pack)
        print(f"{corpus}: read {graph.counts}", file=sys.stderr, flush=True)
        scores = {}
        labelled_kinds = [k for k in KINDS if _path(args.labels, corpus, k).is_file()] or KINDS
        for kind in KINDS:
            keyed = items(graph, kind)
            if kind not in labelled_kinds:  # a round may label some kinds only
                print(f"{corpus} {kind}: no labels in {args.labels}, not scored",
                      file=sys.stderr)
                continue
            labelled = _read_jsonl(_path(args.labels, corpus, kind))
            names = {k.rsplit("|", 1)[0] for k in keyed} if kind == "entities" else set()
            scores[kind] = score_kind(labelled, set(keyed), names)
            if args.sample_new:
                fresh.append((corpus, kind, draw(keyed, args.sample_new, args.seed,
                                                 {r["key"] for r in labelled})))
        results.append((corpus, str(tables_dir(pack)), graph.counts, scores))
    common.print_report(report(results), args.results, "Graph precision on the labelled samples",
                        "graph_precision.py", None)
    for corpus, kind, rows in fresh:
        print(f"\n{len(rows)} unlabelled {kind} of {corpus} (seed {args.seed}):")
        for r in rows:
            print(json.dumps(r, ensure_ascii=False))
    total = sum(s["labelled"] for *_, scores in results for s in scores.values())
    print(f"\nscored {total} labelled items of {', '.join(args.corpus)}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="draw the items to label")
    s.add_argument("--pack", type=Path, required=True, help="pack folder or build folder")
    s.add_argument("--corpus", required=True, help="name used in the file names")
    s.add_argument("--out", type=Path, required=True, help="folder for NAME_<kind>.jsonl")
    s.add_argument("--seed", type=int, default=48)
    for kind, n in SIZES.items():
        s.add_argument(f"--{kind}", type=int, default=n, help=f"sample size (default {n})")
    s.add_argument("--force", action="store_true", help="overwrite existing files")
    c = sub.add_parser("score", help="precision of the labelled items still in the pack")
    c.add_argument("--pack", type=Path, required=True, action="append",
                   help="pack folder or build folder (repeat for several corpora)")
    c.add_argument("--corpus", required=True, action="append",
                   help="the corpus of each --pack, in the same order")
    c.add_argument("--labels", type=Path, required=True, help="folder of NAME_<kind>.jsonl")
    c.add_argument("--sample-new", type=int, default=0, metavar="N",
                   help="also print N unlabelled items per kind of the pack")
    c.add_argument("--seed", type=int, default=48)
    c.add_argument("--results", type=Path, default=None, help="also write the table here")
    args = ap.parse_args(argv)
    return cmd_sample(args) if args.command == "sample" else cmd_score(args)


if __name__ == "__main__":
    sys.exit(main())
