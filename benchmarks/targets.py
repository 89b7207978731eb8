"""The standing benchmark targets: what BENCHMARKS.md shows, where each figure comes from,
and the command that measures it on the dev splits (`make bench`).

A `Figure` names results files in benchmarks/results/ (file names or globs) and which of
their tables (or printed lines) to show; the book (benchmarks/book.py) takes the newest
file, by the date the benchmark printed, that holds a matching table. `make bench` writes
each target's output to `benchmarks/results/<target id>.md`, listed first, so a fresh run
wins over the older files listed after it. Files whose name holds `before` are the code
before a change, run as a baseline, and never a target's current figure.

`blind` names the target's entries in benchmarks/ledger.jsonl; blind test runs are never
part of `make bench`: `blind_command` is run by hand, once per change, and records itself.
A command with `slow=True` (a long build) runs only with `make bench SLOW=1`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    files: tuple[str, ...]
    caption: str = ""  # regex the table's caption (headings and text above it) must match
    header: str = ""  # regex the table's header line must match
    rows: str = ""  # regex a body row must match to be shown ("" every row)
    last: bool = False  # the last matching table of the file (appended runs), not the first
    lines: str = ""  # printed lines to show (regex), for output without a table
    max_rows: int = 8


@dataclass(frozen=True)
class Target:
    id: str
    title: str
    goal: str
    figures: tuple[Figure, ...]
    command: str = ""  # the dev run of `make bench` ("" when it has no standing command)
    blind: tuple[str, ...] = ()  # ledger targets
    blind_command: str = ""
    slow: bool = False


def _files(target_id: str, *older: str) -> tuple[str, ...]:
    return (f"{target_id}.md", *older)


def _retrieval(kind: str, title: str, older: str, corpora: tuple[str, ...],
               flags: str = "") -> Target:
    """The retrieval target of one kind of pack: the default search against the best single
    retriever on `corpora`, measured by retrieval_defaults.py (plus `flags`)."""
    return Target(
        f"retrieval-{kind}", f"Retrieval, {title}",
        "the default search never loses more than 0.005 to the best single retriever",
        (Figure(_files(f"retrieval-{kind}", older), caption="default against the best",
                rows="|".join(corpora)),),
        "python benchmarks/retrieval_defaults.py "
        + "".join(f"--corpus {c} " for c in corpora) + "--split dev" + flags)


PACKS = "out/bench/{0}/out/{0}"  # where benchmarks/common.build_cached keeps a corpus's pack
K8S, RUST = PACKS.format("kubernetes"), PACKS.format("rust-book")

TARGETS: tuple[Target, ...] = (
    _retrieval("docs", "documentation packs (nDCG@10, page level)",
               "issue34e_ranking_after_docs.md", ("kubernetes", "rust-book")),
    _retrieval("prose", "prose packs (SciFact, XQuAD)", "issue34_ranking_after_prose.md",
               ("scifact", "xquad"), " --dev-limit 300 --no-titles"),
    Target(
        "gate", "Confidence gate (share of questions refused)",
        "at most 4 % of in-domain dev questions gated (mean over the corpora), "
        "as many absent ones as possible",
        tuple(Figure(_files("gate", "issue39_gate.md"), caption=r"^## dev",
                     header=f"{c} in-domain", rows="calibrated|shipped|previous|similarity")
              for c in ("kubernetes", "rust-book", "scifact", "xquad")),
        "python benchmarks/gate_calibration.py --split dev"),
    Target(
        "answers-docs", "Offline answer containment, documentation sets",
        "the offline answer contains every gold value: Kubernetes and the Rust book >= 0.90 "
        "on blind splits (issue 47), answers <= 120 words on average",
        tuple(Figure(_files("answers-docs", f"issue47_dev_{c}.md",
                            "issue34f_question_vector_after.md",
                            "issue34f_dev_latency_after.md"), caption=f"^{c} dev",
                     rows="first sentence|turn-3|product")
              for c in ("kubernetes", "rust-book", "cargo-book"))
        # the five Kubernetes questions: each verdict here, the answers in full in
        # the results file
        + (Figure(("issue47_five_answers.md",), lines=r"^### "),),
        "python benchmarks/doc_answers.py --corpus kubernetes --corpus rust-book "
        "--corpus cargo-book --split dev",
        blind=("answers-kubernetes", "answers-rust-book"),
        blind_command="python benchmarks/doc_answers.py --corpus kubernetes --split test"),
    Target(
        "answers-xquad", "XQuAD answers (gold text in the offline answer)",
        "gate on >= 0.93 on the blind questions (issue 47)",
        (Figure(_files("answers-xquad", "issue47_xquad_dev.md", "issue34f_xquad_dev_final.md",
                       "xquad_answers.md"),
                caption="^dev split"),),
        "python benchmarks/xquad_answers.py --split dev "
        "--out benchmarks/results/answers-xquad.md",
        blind=("answers-xquad",),
        blind_command="python benchmarks/xquad_answers.py --questions "
                      "benchmarks/data/xquad_fresh.jsonl --split test "
                      "--out benchmarks/results/xquad_answers.md"),
    Target(
        "whole-pack", "Whole-pack questions (item recall of the offline answer)",
        "item recall >= 0.70 and >= +0.20 over the best non-graph baseline (the top-k "
        "sections' units at the same words), every citation verified",
        tuple(Figure(_files("whole-pack", "issue48b_whole_pack_dev.md", "whole_pack_dev.md"),
                     caption=f"^{c} dev", rows="^(product|top-10)")
              for c in ("kubernetes", "rust-book", "cargo-book"))
        # the third dev set, written from the docs alone by a helper that never ran the
        # product (its first run, fresh: issue48g_dev3_*_before.md; the second dev set's
        # newest figures are issue48z_dev2_*.md)
        + tuple(Figure((f"issue48z_dev3_{short}.md", f"issue48w_dev3_{short}.md",
                        f"issue48v_dev3_{short}.md", f"issue48u_dev3_{short}.md",
                        f"issue48t_dev3_{short}.md", f"issue48n_dev3_{short}.md",
                        f"issue48l_dev3_{short}.md",
                        f"issue48k_dev3_{short}.md",
                        f"issue48j_dev3_{short}.md",
                        f"issue48g_dev3_{short}.md"),
                       caption=f"^{c} dev",
                       rows="^product$")
                for c, short in (("kubernetes", "k8s"), ("rust-book", "rust"))),
        "python benchmarks/whole_pack.py --corpus kubernetes --corpus rust-book "
        "--corpus cargo-book",
        blind=("whole-pack-kubernetes", "whole-pack-rust-book"),
        blind_command="python benchmarks/whole_pack.py --split test --record"),
    Target(
        "graph-precision", "Graph precision (hand-labelled samples)",
        "entity precision >= 0.90, fact precision >= 0.85",
        (Figure(("issue48_graph_precision_blind5.md", "issue48_graph_precision_blind3.md",
                 "issue48_graph_precision_blind2.md", "issue48_graph_precision_blind.md"),
                header="precision"),),
        f"python benchmarks/graph_precision.py score --pack {K8S} --corpus kubernetes "
        f"--pack {RUST} --corpus rust-book --labels benchmarks/data/graph_labels",
        blind=("graph-entities-kubernetes", "graph-facts-kubernetes", "graph-entities-rust-book",
               "graph-facts-rust-book"),
        blind_command="python benchmarks/graph_precision.py score ... --labels "
                      "benchmarks/data/graph_labels_blind5 (a fresh labelled sample per change)"),
    Target(
        "graph-share", "What the graph adds to answers (offline, dev)",
        "the graph paths earn their place: a switch that moves nothing stays off",
        tuple(Figure(_files("graph-share", "graph_share_dev.md"), caption=f"^{c}",
                     rows="whole pack") for c in ("kubernetes", "rust-book")),
        "python benchmarks/graph_share.py"),
    Target(
        "build-time", "Build time, Kubernetes docs (405 pages)",
        "the build's wall time close to a raw encode() of the same texts",
        (Figure(_files("build-time", "k8s_build.md"),
                lines=r"^(full build|stage seconds|raw encode|no-change rebuild)", max_rows=4),),
        "python benchmarks/k8s_build.py --rebuild --baseline", slow=True),
    Target(
        "rebuild", "Rebuild cost",
        "no-change rebuild <= 2x a trivial Prefect flow; bad input <= 3x inspect; "
        "a 1 % change downloads <= 5 % of the bytes",
        (Figure(_files("rebuild", "cli_latency.md"), lines=r"^- .*goal", last=True,
                max_rows=4),
         Figure(("freshness.md",), header="bytes downloaded", max_rows=8)),
        "nice python benchmarks/cli_latency.py --rounds 3 --no-write", slow=True),
    Target(
        "query-latency", "Query latency (search against the index floor)",
        "search p50 <= 1.5x the floor, p95 <= 2x",
        (Figure(_files("query-latency", "query_latency.md"), header="floor p50"),
         Figure(("explore_latency.md",), lines=r"ratio")),
        "python benchmarks/query_latency.py --queries 60"),
    Target(
        "install", "Query runtime install (size, cold start)",
        "the runtime install small and its answers identical to the full install's",
        (Figure(_files("install", "runtime_install.md"), header="MB on disk"),
         Figure(_files("install", "runtime_install.md"), header="spawn")),
        "python benchmarks/runtime_install.py --out benchmarks/results/install.md",
        slow=True),
    Target(
        "open-cost", "Checksums on open",
        "a later open pays a stat, not a hash",
        (Figure(_files("open-cost", "open_cost.md"), header="median ms", last=True),),
        f"python benchmarks/open_cost.py --pack {K8S}"),
    Target(
        "scale", "Scale-out (sharded build)",
        "driver memory <= 1.3x from 2,000 to 20,000 pages; dask:2 / threads wall <= 1.10",
        (Figure(("scale_build.md",), header="peak RSS", last=True),
         Figure(("k8s_runners.md",), header="mean wall s", last=True)),
        "python benchmarks/scale_build.py --pages 2000 20000 --runner threads", slow=True),
    Target(
        "html-extraction", "HTML main-content extraction",
        "the build's HTML parser at or above trafilatura's defaults (F1); doc pages keep their "
        "headings as sections",
        (Figure(_files("html-extraction", "html_extraction.md"),
                lines=r"^(setting +P mean|kpack \(current\) +0|trafilatura defaults \(txt\) +0|"
                      r"setting +headings|kpack \(current\) +\d+, \d+)"),),
        "python benchmarks/html_extraction.py"),
    Target(
        "extract-cost", "Claude calls and cost (loopback Messages API)",
        "batching cuts calls per section; a no-change rebuild makes none",
        (Figure(("extract_calls.md",), header="calls/section"),),
        "", slow=True),
    Target(
        "topics", "Topic map (community detection)",
        "Leiden at least as good as Louvain, faster",
        (Figure(_files("topics", "topic_communities.md"), header="modularity", max_rows=4),),
        f"python benchmarks/topic_communities.py --pack {K8S}"),
)
