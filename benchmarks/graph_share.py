"""The graph's share: per question class, what each graph stage adds to the offline answer.

    python benchmarks/graph_share.py [--corpus kubernetes --corpus rust-book] [--out FILE]
        [--data ../shared/data] [--work out/bench]

Classes (dev splits only): **single fact** (the documentation answer sets' dev questions,
benchmarks/data/*_answers.jsonl, but their `two-page` class), **two pages** (their
`two-page` class) and **whole pack** (benchmarks/data/*_whole_pack.jsonl). Each question
is asked offline (`ask()`, no key) under each configuration:

    default            every graph stage as shipped
    - whole_pack       no whole-pack path (list questions get the single-passage answer)
    - multi_doc        no sections of linked pages (the LINKS_TO graph)
    - graph_facts      no entity facts and triples in the context
    + graph_rerank     page-centrality rerank on (off by default)

and scored by **recall** (the share of the question's gold pages among the answer's
sources) and **containment** (single fact, two pages: the answer holds one alternative of
every gold group, benchmarks/answer_eval.py; whole pack: the mean item recall, as
benchmarks/whole_pack.py scores it), each a mean with its 95% bootstrap interval; and
**groups**, the share of a question's answer groups the answer holds (a two-page question
has one group per page: containment asks for both, groups shows an answer that has one;
whole pack: the item recall again).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import answer_eval, common, corpora, whole_pack  # noqa: E402

CONFIGS = {
    "default": {},
    "- whole_pack": {"whole_pack": False},
    "- multi_doc": {"multi_doc": False},
    "- graph_facts": {"graph_facts": False},
    "+ graph_rerank": {"graph_rerank": True},
}
ANSWERS = {"kubernetes": "k8s_answers.jsonl", "rust-book": "rust_answers.jsonl"}


def classes(name: str) -> dict[str, list[dict]]:
    """The dev questions of corpus `name` by class."""
    answers = [r for r in corpora.load_rows(corpora.DATA_DIR / ANSWERS[name])
               if r["split"] == "dev"]
    whole = [r for r in corpora.load_rows(corpora.DATA_DIR / whole_pack.FILES[name])
             if r["split"] == "dev"]
    return {"single fact": [r for r in answers if r.get("class") != "two-page"],
            "two pages": [r for r in answers if r.get("class") == "two-page"],
            "whole pack": whole}


def group_share(answer: str, groups: list[list[str]]) -> float:
    """The share of the answer groups of which `answer` holds one alternative (a two-page
    question has two groups: one per page; containment asks for both)."""
    return sum(answer_eval.contains(answer, [g]) for g in groups) / len(groups) if groups else 0.0


def score(pack, base_url: str, cls: str, rows: list[dict], options: dict
          ) -> tuple[list[float], list[float], list[float]]:
    """(recall, containment, group share) per question of one class under one
    configuration."""
    recall, contained, groups = [], [], []
    for r in rows:
        answer = pack.ask(r["question"], use_cache=False, **options)
        urls = {s["url"] for s in answer["sources"]}
        gold = ({f"{base_url}/{p}" for i in r["items"] for p in i["pages"]}
                if cls == "whole pack" else {f"{base_url}/{g}" for g in r["gold"]})
        recall.append(len(gold & urls) / len(gold) if gold else 0.0)
        if cls == "whole pack":
            contained.append(whole_pack.recall(answer["answer"], r["items"])[0])
            groups.append(contained[-1])
        else:
            contained.append(float(answer_eval.contains(answer["answer"], r["answers"])))
            groups.append(group_share(answer["answer"], r["answers"]))
    return recall, contained, groups


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--corpus", action="append", choices=tuple(ANSWERS))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    names = [n for n in args.corpus or tuple(ANSWERS) if corpora.available(args.data, n)]
    if not names:
        print(f"skipped: no documentation corpus under {args.data}")
        return 0
    import os

    os.environ.pop("ANTHROPIC_API_KEY", None)  # the offline answer, whatever the shell has
    lines = [common.machine_line()]
    from packs import KnowledgePack

    for name in names:
        corpus = corpora.load(args.data, name, args.work)
        by_class = classes(name)
        lines += ["", f"{name} (dev; " + ", ".join(f"{c} {len(r)}" for c, r in
                                                    by_class.items()) + " questions)",
                  "| class | configuration | recall | containment | groups |",
                  "|---|---|---|---|---|"]
        with KnowledgePack.open(corpus.built.pack_dir) as pack:
            for cls, rows in by_class.items():
                for label, options in CONFIGS.items():
                    rec, con, grp = score(pack, corpus.built.base_url, cls, rows, options)
                    lines.append(f"| {cls} | {label} | {common.interval(rec)} | "
                                 f"{common.interval(con)} | {common.interval(grp)} |")
                    print(lines[-1], flush=True)
    common.print_report("\n".join(lines), args.out, "The graph's share, per question class",
                        "graph_share.py", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
