"""Shared by the evaluation benchmarks: serve a corpus as pages over loopback, build a pack
from their URLs through the real build flow (cached), plain-library baselines, and tables.

A corpus becomes `Page`s (a path, a title, Markdown text). `build_cached` serves them from
memory on 127.0.0.1, writes a source folder whose urls.txt lists them, and runs
`flows.build.run_build` with the offline extractor. The pack, the base URL it was built
from and a fingerprint of the pages and model are kept under the work folder, so a rerun
with the same pages reuses the pack without serving or building anything; gold URLs are
made from the recorded base URL.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

from flows.settings import configure_prefect_env
from tests.loopback_site import serve_handler

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"
DEFAULT_WORK = ROOT / "out" / "bench"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# Bump when the page layout changes, so cached packs are rebuilt.
LAYOUT_VERSION = "pages-v1"

# The benchmarks' entry settings, before any of them imports Prefect: each script imports
# this module first.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# A build that finds no Prefect server starts a temporary one and leaves nothing behind
# (benchmarks/cli_latency.py measures the kept server on purpose).
os.environ.setdefault("KPACK_SERVER_IDLE_S", "0")
configure_prefect_env()


MARKDOWN = "text/markdown; charset=utf-8"


@dataclass(frozen=True)
class Page:
    path: str  # "/doc/123"
    title: str
    markdown: str  # the body served (HTML when `content_type` says so)
    content_type: str = MARKDOWN


def markdown_page(title: str, sections: Sequence[tuple[str | None, str]]) -> str:
    """A page: `# title`, then each (heading or None, text) as `## heading` + paragraph."""
    parts = [f"# {title}"]
    for heading, text in sections:
        if heading:
            parts.append(f"## {heading}")
        parts.append(" ".join(text.split()))
    return "\n\n".join(parts) + "\n"


def print_report(text: str, path: Path | None, title: str, script: str,
                 argv: Sequence[str] | None) -> None:
    """Print a benchmark's output and, when `path` is given, write it as a Markdown file:
    title, the command (`argv`, the process's arguments when None), the text."""
    print(text)
    if path is None:
        return
    args = sys.argv[1:] if argv is None else argv
    command = " ".join(["python", f"benchmarks/{script}", *args])
    path.write_text(f"# {title}\n\n- Command: `{command}`\n\n```\n{text}\n```\n",
                    encoding="utf-8")
    from benchmarks import results_md

    results_md.write_json(path)  # the summary the book reads (benchmarks/book.py)


def append_run(path: Path, command: str, text: str, note: str = "") -> None:
    """Append one run to the results log `path` (made if missing): a `## <machine line>`
    heading, the command in backticks followed by `note`, then `text` as printed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(f"\n## {machine_line()}\n\n`{command}`{note}\n\n{text}")


def printing_log() -> tuple[Callable[[str], None], list[str]]:
    """A `log(line)` that prints each line at once (flushed) and keeps it, and the list it
    keeps them in (a results file's "Output, as printed")."""
    printed: list[str] = []

    def log(line: str) -> None:
        print(line, flush=True)
        printed.append(line)

    return log, printed


def machine_line() -> str:
    """Host, cores, accelerator, Python and date: printed first by every benchmark."""
    try:
        import torch

        gpu = "GPU" if torch.cuda.is_available() else "no GPU"
    except ImportError:
        gpu = "no GPU"
    return (f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, {gpu}, "
            f"Python {platform.python_version()}; date {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")


# --- serving -----------------------------------------------------------------------------


@contextmanager
def serve_pages(pages: Sequence[Page], port: int = 0) -> Iterator[str]:
    """Serve the pages on 127.0.0.1, each with its content type (on `port` when it is
    free, else a free one); yields the base URL."""
    body = {p.path: (p.markdown.encode("utf-8"), p.content_type) for p in pages}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            data, kind = body.get(self.path.split("?", 1)[0], (None, MARKDOWN))
            self.send_response(200 if data is not None else 404)
            self.send_header("Content-Type", kind)
            data = data if data is not None else b"not found"
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    with serve_handler(Handler, port) as base:
        yield base


# --- building (cached) ---------------------------------------------------------------------


@dataclass(frozen=True)
class BuiltPack:
    pack_dir: Path
    base_url: str
    reused: bool
    seconds: float
    counts: dict[str, int]


def fingerprint(pages: Sequence[Page], model: str, settings: str = "") -> str:
    """Of the pages, the model, the extra pack.toml settings and the parser and splitter
    versions."""
    from tasks.extract.offline import OFFLINE_VERSION
    from tasks.sections import SPLITTER_VERSION
    from tasks.stages import resolve, topics, unit_vectors
    from tasks.stages.fetch import VERSION as FETCH_VERSION

    # The graph's versions too, and the unit vectors' settings: a pack whose extractor,
    # topic map or answer units changed is rebuilt (its vectors are reused from the work
    # folder).
    units = unit_vectors.STAGE.settings_key()
    h = hashlib.sha256(f"{LAYOUT_VERSION}\0{FETCH_VERSION}\0{SPLITTER_VERSION}\0{model}\0"
                       f"{settings}\0{OFFLINE_VERSION}\0{resolve.STAGE.VERSION}\0{topics.STAGE.VERSION}"
                       f"\0{units}".encode())
    for p in pages:
        h.update(f"\0{p.path}\0{p.title}\0{p.markdown}".encode())
        if p.content_type != MARKDOWN:
            h.update(f"\0{p.content_type}".encode())
    return h.hexdigest()


def build_cached(name: str, pages: Sequence[Page], work: Path, model: str = MODEL,
                 description: str = "", settings: dict[str, object] | None = None) -> BuiltPack:
    """The pack of `pages` under work/name/: reused when the pages, model, splitter and
    `settings` (extra pack.toml keys) are unchanged, else served and built with the offline
    extractor. One process at a time (`_one_at_a_time`). Raises flows.build.BuildError."""
    with _one_at_a_time(work / name):
        return _build_cached(name, pages, work, model, description, settings)


@contextmanager
def _one_at_a_time(folder: Path) -> Iterator[None]:
    """Hold the benchmark pack `folder`'s lock file while its state is read and rebuilt.
    Two benchmarks started on one --work dir both rebuilt the pack, and state.json kept the
    base URL of the build that lost, so no gold page matched; the second now waits, then
    finds the pack the first built."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".state.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build_cached(name: str, pages: Sequence[Page], work: Path, model: str,
                  description: str, settings: dict[str, object] | None) -> BuiltPack:
    folder = work / name
    state_file = folder / "state.json"
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in sorted((settings or {}).items()))
    fp = fingerprint(pages, model, extra)
    port = 0
    if state_file.is_file():
        state = json.loads(state_file.read_text())
        pack_dir = Path(state["pack"])
        if state.get("fingerprint") == fp and (pack_dir / "current").is_file():
            return BuiltPack(pack_dir, state["base_url"], True, 0.0, state["counts"])
        # Rebuilt on the same port, the pages keep their URLs: the build's caches apply
        # (an unchanged section keeps its vector) and only what changed is paid for.
        port = urlsplit(state["base_url"]).port or 0
    from flows.build import run_build

    source = folder / "source" / name
    source.mkdir(parents=True, exist_ok=True)
    (source / "pack.toml").write_text(
        f"description = {json.dumps(description)}\nallow_private_hosts = true\n"
        f"embedding_model = {json.dumps(model)}\nfetch_concurrency = 16\n"
        "per_host_concurrency = 16\nkeep_builds = 1\n" + extra)
    t0 = time.perf_counter()
    with serve_pages(pages, port) as base:
        (source / "urls.txt").write_text("".join(f"{base}{p.path}\n" for p in pages))
        # force: a benchmark measures the code under test, so the publish guard (which
        # keeps a pack whose entity count fell, as a changed extractor's may) must not
        # leave the previous build current.
        summary = run_build(source, folder / "out", work_dir=folder / "work",
                            extractor="offline", allow_private_hosts=True, force=True)
    seconds = time.perf_counter() - t0
    state = {"fingerprint": fp, "base_url": base, "pack": summary["pack"],
             "counts": summary["counts"], "failed": len(summary["failed_sources"])}
    state_file.write_text(json.dumps(state, indent=2))
    return BuiltPack(Path(summary["pack"]), base, False, seconds, summary["counts"])


# --- plain-library baselines ----------------------------------------------------------------


def page_texts(pack, headings: bool = False) -> dict[str, str]:
    """Each page's text in an open pack, by URL: its sections' contents in the pack's order;
    with `headings`, its title first and each section's heading path before its content (a
    whole-pack item may be a page's title or a heading)."""
    import polars as pl

    from packs import format as fmt

    columns = ["url", "title", "heading_path", "content"] if headings else ["url", "content"]
    out: dict[str, str] = {}
    for row in pl.read_parquet(pack.path / fmt.TABLES_DIR / f"{fmt.SECTIONS}.parquet",
                               columns=columns).iter_rows():
        url, content = row[0], row[-1]
        if headings:
            out[url] = f"{out.get(url, row[1] or '')}\n{row[2] or ''}\n{content}"
        else:
            out[url] = f"{out.get(url, '')}\n{content}"
    return out


def bm25_rankings(doc_ids: Sequence[str], texts: Sequence[str], queries: Sequence[str],
                  k: int = 100) -> list[list[str]]:
    """bm25s (Lucene BM25, k1=1.5, b=0.75) with English stop words and the Snowball stemmer."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(list(texts), stopwords="en", stemmer=stemmer,
                                   show_progress=False), show_progress=False)
    q_tokens = bm25s.tokenize(list(queries), stopwords="en", stemmer=stemmer,
                              show_progress=False)
    docs, _ = retriever.retrieve(q_tokens, k=min(k, len(doc_ids)), show_progress=False,
                                 n_threads=1)
    return [[doc_ids[i] for i in row] for row in docs]


@functools.lru_cache(maxsize=2)
def _sentence_transformer(model: str):
    from sentence_transformers import SentenceTransformer

    from packs.embedding import resolve_model

    return SentenceTransformer(resolve_model(model).load_from, device="cpu")


def dense_rankings(doc_ids: Sequence[str], texts: Sequence[str], queries: Sequence[str],
                   model: str = MODEL, k: int = 100,
                   cache_dir: Path | None = None) -> list[list[str]]:
    """sentence-transformers `encode` (normalised) of documents and queries, cosine top k.
    With `cache_dir`, the document matrix is kept there keyed on the texts and model."""
    import numpy as np

    st = _sentence_transformer(model)
    key = hashlib.sha256("\0".join([model, *texts]).encode()).hexdigest()[:16]
    cached = cache_dir / f"dense-{key}.npy" if cache_dir else None
    if cached is not None and cached.is_file():
        d = np.load(cached)
    else:
        d = st.encode(list(texts), batch_size=32, normalize_embeddings=True,
                      convert_to_numpy=True)
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            np.save(cached, d)
    q = st.encode(list(queries), batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    sims = q @ d.T
    top = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return [[doc_ids[i] for i in row] for row in top]


def rrf_rankings(*runs: list[list[str]], k: int = 60, depth: int = 100) -> list[list[str]]:
    """Reciprocal rank fusion (k=60) of per-query rankings."""
    out = []
    for lists in zip(*runs):
        scores: dict[str, float] = {}
        for ranking in lists:
            for rank, doc in enumerate(ranking, start=1):
                scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
        out.append(sorted(scores, key=lambda d: -scores[d])[:depth])
    return out


def score_url_run(rankings: Sequence[Sequence[str]], golds: Sequence[Sequence[str]],
                  ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """Mean metrics of rankings of URLs (or URL#heading) against gold sources, with the
    same matching and metric code `kpack eval` uses."""
    from packs.eval_metrics import Source, mean_metrics, score_ranking
    from packs.eval_questions import parse_gold

    rows = []
    for ranking, gold in zip(rankings, golds):
        parsed = [parse_gold(g) for g in gold]
        srcs = []
        for item in ranking[:max(max(ks), 10)]:
            url, _, heading = item.partition("#")
            srcs.append(Source(url, heading.rsplit(" > ", 1)[-1], heading))
        rows.append(score_ranking(srcs, parsed, ks))
    return mean_metrics(rows)


# --- the product -------------------------------------------------------------------------------


def product_run(pack, questions, options, ks: Sequence[int] = (1, 5, 10)) -> tuple[dict, float]:
    """(overall metrics, mean ms per search) of `evaluate` with `options`."""
    from packs.evaluation import evaluate

    report = evaluate(pack, questions, options, ks=ks)
    return report.overall, 1000 * report.seconds / max(report.questions, 1)


# --- 95% intervals ------------------------------------------------------------------------------


def bootstrap(values: Sequence[float], rounds: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the mean of `values` (items resampled with
    replacement `rounds` times, seeded: the same values give the same interval); (0, 0)
    for no values."""
    if not values:
        return (0.0, 0.0)
    rng = random.Random(seed)
    n = len(values)
    means = sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(rounds))
    return means[int(0.025 * rounds)], means[int(0.975 * rounds) - 1]


def interval(values: Sequence[float], fmt: str = ".3f") -> str:
    """"mean [lo, hi]" of `values` with its `bootstrap` interval, "-" for no values."""
    if not values:
        return "-"
    lo, hi = bootstrap(values)
    return f"{statistics.fmean(values):{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"


def table(rows: Sequence[tuple[str, dict[str, float]]], cols: Sequence[str],
          extra: Sequence[str] = ()) -> str:
    """A Markdown table: one row per (label, metrics), `cols` as 3-decimal columns."""
    width = max(len(r[0]) for r in rows)
    w = {c: max(len(c), 5) for c in cols}
    head = f"| {'run':{width}} | " + " | ".join(f"{c:>{w[c]}}" for c in cols) + " |"
    lines = [head, "|" + "-" * (width + 2) + "|" + "|".join("-" * (w[c] + 2) for c in cols) + "|"]
    for label, m in rows:
        cells = []
        for c in cols:
            v = m.get(c)
            cells.append(f"{v:{w[c]}.3f}" if isinstance(v, float) else f"{str(v or ''):>{w[c]}}")
        lines.append(f"| {label:{width}} | " + " | ".join(cells) + " |")
    lines.extend(extra)
    return "\n".join(lines)
