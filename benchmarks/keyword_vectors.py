"""Do keyword-aware vectors help? nDCG@10 / recall@10 with and without them.

    python benchmarks/keyword_vectors.py [--data ../shared/data] [--work out/bench-kw]
                                         [--scifact-docs 1500] [--skip-scifact] [--skip-k8s]

Two packs, built through the real flow with the offline extractor and the offline
all-MiniLM-L6-v2 (format 2, so every section has its keyword vector), cached under --work:

- SciFact: the 300 test claims (qrels/test.tsv) against a subset of the corpus — every
  abstract a test claim cites plus the first abstracts of corpus.jsonl up to
  --scifact-docs in all (the full 5,183 take long to build on 2 cores; 0 = all). Gold =
  the cited abstract's page. Nothing is tuned: the keyword weight is the default 0.5.
- Kubernetes docs: the concepts/tasks/tutorials/setup prose pages (405) and 20 questions
  written for this benchmark (QUESTIONS below), one gold page each.

Each is scored (packs.evaluation, page level, confidence gate off) as plain vector search
and as the default pipeline, each without and with `keyword_vectors=True`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402

COLS = ("ndcg@10", "recall@10", "mrr")
VECTOR = {"hybrid": False, "graph_rerank": False, "multi_doc": False, "graph_facts": False,
          "fewshot": False}
CONFIGS: dict[str, dict[str, object]] = {
    "vector only": VECTOR,
    "vector only + keyword vectors (0.5)": {**VECTOR, "keyword_vectors": True},
    "default pipeline": {},
    "default pipeline + keyword vectors (0.5)": {"keyword_vectors": True},
}
GATE_OFF = {"gate_threshold": -1.0}

PROSE_DIRS = ("concepts", "tasks", "tutorials", "setup")
# Written for this benchmark (not taken from the pages); gold = the page that answers it.
QUESTIONS: list[tuple[str, str]] = [
    ("How do I run a task on a schedule, such as a nightly backup?",
     "tasks/job/automated-tasks-with-cron-jobs.md"),
    ("How can I add entries to a Pod's /etc/hosts file?",
     "tasks/network/customize-hosts-file-for-pods.md"),
    ("How do I force delete a Pod that belongs to a StatefulSet?",
     "tasks/run-application/force-delete-stateful-set-pod.md"),
    ("How do I install kubectl on Linux?", "tasks/tools/install-kubectl-linux.md"),
    ("How can containers in one Pod see each other's processes?",
     "tasks/configure-pod-container/share-process-namespace.md"),
    ("How do I make a Pod run on a particular node using node labels?",
     "tasks/configure-pod-container/assign-pods-nodes.md"),
    ("How do I debug DNS resolution problems in my cluster?",
     "tasks/administer-cluster/dns-debugging-resolution.md"),
    ("How do I set the command and arguments a container runs?",
     "tasks/inject-data-application/define-command-argument-container.md"),
    ("How do I create an external load balancer for a Service?",
     "tasks/access-application-cluster/create-external-load-balancer.md"),
    ("What is a StatefulSet and when should I use one?",
     "concepts/workloads/controllers/statefulset.md"),
    ("What are init containers and how do they differ from app containers?",
     "concepts/workloads/pods/init-containers.md"),
    ("How do StorageClasses describe different kinds of storage?",
     "concepts/storage/storage-classes.md"),
    ("How do I limit the total resources a namespace can consume?",
     "concepts/policy/resource-quotas.md"),
    ("How do I spread Pods evenly across zones and nodes?",
     "concepts/scheduling-eviction/topology-spread-constraints.md"),
    ("What are the PostStart and PreStop container hooks?",
     "concepts/containers/container-lifecycle-hooks.md"),
    ("How are dependent objects deleted when their owner is deleted?",
     "concepts/architecture/garbage-collection.md"),
    ("How do I encrypt Secret data at rest with a KMS provider?",
     "tasks/administer-cluster/kms-provider.md"),
    ("How do I record the requests made to the API server for auditing?",
     "tasks/debug/debug-cluster/audit.md"),
    ("How do I restrict the system calls a container can make?",
     "tutorials/security/seccomp.md"),
    ("How do I configure Redis using a ConfigMap?",
     "tutorials/configuration/configure-redis-using-configmap.md"),
]


def _score(pack, questions) -> list[tuple[str, dict]]:
    from packs.options import SearchOptions

    rows = []
    for label, overrides in CONFIGS.items():
        metrics, ms = common.product_run(pack, questions,
                                         SearchOptions.build(**{**overrides, **GATE_OFF}))
        rows.append((label, {**metrics, "ms/query": round(ms, 1)}))
    return rows


def scifact(data: Path, work: Path, limit: int) -> None:
    from benchmarks import scifact as sf
    from packs import KnowledgePack

    corpus, queries, test_qrels, _ = sf.load(data / "scifact")
    gold = {d for rel in test_qrels.values() for d in rel}
    chosen = [d for d in corpus if str(d["_id"]) in gold]
    for d in corpus:
        if limit and len(chosen) >= limit:
            break
        if str(d["_id"]) not in gold:
            chosen.append(d)
    built = common.build_cached("scifact-kw", sf.pages(chosen), work,
                                description="SciFact subset (keyword-vector benchmark)")
    print(f"\nSciFact: {len(chosen)} of {len(corpus)} abstracts (all {len(gold)} cited by a "
          f"test claim + the first others), {len(test_qrels)} test claims; pack "
          f"{'reused' if built.reused else f'built in {built.seconds:.0f} s'}, "
          f"{built.counts['sections']} sections")
    qs = sf.questions(queries, test_qrels, built.base_url)
    with KnowledgePack.open(built.pack_dir) as pack:
        assert pack.manifest.keyword_vectors.present, "pack lacks keyword vectors"
        print(common.table(_score(pack, qs), (*COLS, "ms/query")))


def kubernetes(data: Path, work: Path) -> None:
    from packs import KnowledgePack
    from packs.eval_questions import Question, parse_gold

    root = data / "kubernetes-docs"
    rows = [json.loads(line) for line in (root / "MANIFEST.jsonl").open(encoding="utf-8")]
    rows = [r for r in rows if r["path"].split("/")[0] in PROSE_DIRS]
    known = {r["path"] for r in rows}
    missing = [p for _, p in QUESTIONS if p not in known]
    if missing:
        raise SystemExit(f"gold pages not in the corpus: {missing}")
    pages = [common.Page("/" + r["path"], r.get("title") or r["path"],
                         (root / r["path"]).read_text(encoding="utf-8")) for r in rows]
    built = common.build_cached("k8s-kw", pages, work,
                                description="Kubernetes docs prose (keyword-vector benchmark)")
    print(f"\nKubernetes docs: {len(pages)} pages, {len(QUESTIONS)} questions; pack "
          f"{'reused' if built.reused else f'built in {built.seconds:.0f} s'}, "
          f"{built.counts['sections']} sections")
    qs = [Question(id=f"k8s-{i}", question=q,
                   gold=(parse_gold({"source": f"{built.base_url}/{path}"}),))
          for i, (q, path) in enumerate(QUESTIONS, start=1)]
    with KnowledgePack.open(built.pack_dir) as pack:
        assert pack.manifest.keyword_vectors.present, "pack lacks keyword vectors"
        print(common.table(_score(pack, qs), (*COLS, "ms/query")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=ROOT / "out" / "bench-kw")
    ap.add_argument("--scifact-docs", type=int, default=1500,
                    help="abstracts in the SciFact pack (cited ones first; 0 = all)")
    ap.add_argument("--skip-scifact", action="store_true")
    ap.add_argument("--skip-k8s", action="store_true")
    args = ap.parse_args(argv)
    print(common.machine_line())
    print(f"model {common.MODEL}; offline extractor; confidence gate off; page-level scoring")
    if not args.skip_k8s:
        if (args.data / "kubernetes-docs" / "MANIFEST.jsonl").is_file():
            kubernetes(args.data, args.work)
        else:
            print("skipped Kubernetes: no kubernetes-docs under --data")
    if not args.skip_scifact:
        if (args.data / "scifact" / "corpus.jsonl").is_file():
            scifact(args.data, args.work, args.scifact_docs)
        else:
            print("skipped SciFact: no scifact under --data")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
