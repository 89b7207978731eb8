"""The four benchmark corpora as packs and question sets, shared by the retrieval, gate and
latency benchmarks.

    kubernetes  the 405 prose pages (concepts/ tasks/ tutorials/ setup/) of ../shared/data/
                kubernetes-docs, questions in benchmarks/data/k8s_questions.jsonl
    rust-book   the 112 chapters of ../shared/data/rust-book, questions in
                benchmarks/data/rust_questions.jsonl
    scifact     5,183 abstracts (benchmarks/scifact.py), claims: dev = qrels/train.tsv,
                test = qrels/test.tsv
    xquad       48 Wikipedia articles (benchmarks/xquad.py), dev = articles 0-23
    cargo-book  the Cargo book as HTML, as rustup installs it with the Rust docs
                ($(rustc --print sysroot)/share/doc/rust/html/cargo, or $KPACK_CARGO_DOCS):
                101 pages (print.html, toc.html and 404.html left out), served as text/html,
                so the build takes the product's HTML path. Only an answer set
                (benchmarks/data/cargo_answers.jsonl, benchmarks/doc_answers.py).

Every corpus is served over loopback and built with the real flow and the offline extractor
(`common.build_cached`, reused while the pages, model and splitter are unchanged). The
documentation question files hold in-domain questions (kinds paraphrase, identifier,
multihop; `gold` = paths relative to the corpus root) and adjacent-but-absent ones (kind
absent, no gold), each marked dev or test. Out-of-domain questions for SciFact and XQuAD
come from benchmarks/data/ood_questions.jsonl (unrelated ones are asked of every corpus).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import common

DATA_DIR = Path(__file__).resolve().parent / "data"
CORPORA = ("kubernetes", "rust-book", "scifact", "xquad")
DOCS = {  # corpus → (folder under the data root, questions file, page filter)
    "kubernetes": ("kubernetes-docs", "k8s_questions.jsonl",
                   ("concepts/", "tasks/", "tutorials/", "setup/")),
    "rust-book": ("rust-book", "rust_questions.jsonl", ("src/",)),
}
OOD_FILE = DATA_DIR / "ood_questions.jsonl"
HTML_DOCS = ("cargo-book",)  # answer sets only: no retrieval questions
_NOT_PAGES = frozenset({"print.html", "toc.html", "404.html"})  # the whole book, its contents


@dataclass
class Corpus:
    """A built pack and its questions, by split: in-domain (with gold) and absent."""

    name: str
    built: common.BuiltPack
    in_domain: dict[str, list] = field(default_factory=dict)  # split → [evaluation.Question]
    absent: dict[str, list] = field(default_factory=dict)  # split → [evaluation.Question]
    unrelated: dict[str, list] = field(default_factory=dict)  # split → [evaluation.Question]


def cargo_docs() -> Path | None:
    """The Cargo book's HTML folder: $KPACK_CARGO_DOCS, else the one rustup installed with
    the Rust docs (the rust-docs component); None when there is none."""
    if env := os.environ.get("KPACK_CARGO_DOCS"):
        root = Path(env)
    else:
        try:
            sysroot = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True,
                                     text=True, timeout=30, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
        root = Path(sysroot) / "share" / "doc" / "rust" / "html" / "cargo"
    return root if (root / "index.html").is_file() else None


def available(data: Path, name: str) -> bool:
    """Whether the data of corpus `name` is under `data` (the Cargo book: installed)."""
    if name == "cargo-book":
        return cargo_docs() is not None
    if name in DOCS:
        return (data / DOCS[name][0] / "MANIFEST.jsonl").is_file()
    if name == "scifact":
        return (data / "scifact" / "corpus.jsonl").is_file()
    return (data / "qa" / "xquad" / "xquad.en.json").is_file()


def doc_pages(data: Path, name: str) -> list[common.Page]:
    """The pages of a documentation corpus, served at /<path relative to its root>."""
    folder, _, prefixes = DOCS[name]
    root = data / folder
    pages = []
    for line in (root / "MANIFEST.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["path"].startswith(prefixes):
            text = (root / row["path"]).read_text(encoding="utf-8")
            pages.append(common.Page("/" + row["path"], row.get("title") or "", text))
    return pages


def html_pages(root: Path) -> list[common.Page]:
    """The HTML pages under `root` (but _NOT_PAGES), served at /<path relative to it>."""
    return [common.Page("/" + p.relative_to(root).as_posix(), "",
                        p.read_text(encoding="utf-8", errors="replace"),
                        "text/html; charset=utf-8")
            for p in sorted(root.rglob("*.html")) if p.name not in _NOT_PAGES]


def _question(row: dict, gold: list[str]):
    from packs.eval_questions import Question, parse_gold

    return Question(id=row["id"], question=row["question"],
                    gold=tuple(parse_gold(g) for g in gold), kind=row.get("kind"))


def load_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def unrelated_questions(name: str) -> dict[str, list]:
    """Out-of-domain questions of ood_questions.jsonl asked of `name`: the unrelated ones
    (target any) and, for scifact / xquad, the adjacent ones written for them."""
    out: dict[str, list] = {"dev": [], "test": []}
    for row in load_rows(OOD_FILE):
        if row["target"] in ("any", name):
            out[row["split"]].append(_question({**row, "kind": row["kind"]}, []))
    return out


def load(data: Path, name: str, work: Path) -> Corpus:
    """Build (or reuse) the pack of `name` and load its questions."""
    if name in HTML_DOCS:
        root = cargo_docs()
        if root is None:
            raise FileNotFoundError("no Cargo book found: install the rust-docs component "
                                    "or set KPACK_CARGO_DOCS to its html/cargo folder")
        built = common.build_cached(name, html_pages(root), work,
                                    description="The Cargo book, HTML (benchmark)")
        return Corpus(name, built, {"dev": [], "test": []}, {"dev": [], "test": []})
    if name in DOCS:
        built = common.build_cached(name, doc_pages(data, name), work,
                                    description=f"{name} documentation (benchmark)")
        corpus = Corpus(name, built, {"dev": [], "test": []}, {"dev": [], "test": []})
        for row in load_rows(DATA_DIR / DOCS[name][1]):
            gold = [f"{built.base_url}/{g}" for g in row["gold"]]
            q = _question(row, gold)
            (corpus.absent if row["kind"] == "absent" else corpus.in_domain)[row["split"]].append(q)
        ood = unrelated_questions(name)
        corpus.unrelated = {s: [q for q in qs if q.kind == "unrelated"] for s, qs in ood.items()}
        return corpus
    if name == "scifact":
        from benchmarks import scifact

        corpus_rows, queries, test_qrels, dev_qrels = scifact.load(data / "scifact")
        built = common.build_cached("scifact", scifact.pages(corpus_rows), work,
                                    description="SciFact abstracts (evaluation benchmark)")
        in_domain = {"dev": scifact.questions(queries, dev_qrels, built.base_url),
                     "test": scifact.questions(queries, test_qrels, built.base_url)}
    else:
        from benchmarks import xquad

        articles = xquad.load(data / "qa" / "xquad")
        built = common.build_cached("xquad", xquad.pages(articles), work,
                                    description="XQuAD English (evaluation benchmark)")
        in_domain = xquad.questions(articles, built.base_url)
    ood = unrelated_questions(name)
    return Corpus(name, built, in_domain,
                  {s: [q for q in qs if q.kind == "adjacent"] for s, qs in ood.items()},
                  {s: [q for q in qs if q.kind == "unrelated"] for s, qs in ood.items()})
