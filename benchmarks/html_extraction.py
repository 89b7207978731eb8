"""Main-content quality of the fetch stage's HTML extraction, measured.

    python benchmarks/html_extraction.py [--data ../shared/data/html] [--limit N] [--json]

Two checks, each run for every candidate setting in one process (so the numbers compare):

1. article-extraction-benchmark (181 news/blog pages, gold `articleBody` in
   ground-truth.json). Each page goes through `tasks.fetch.parse.html_to_markdown` -- the
   exact code a build runs (decoding, <pre> wrapping, trafilatura, Markdown tidy) -- and the
   Markdown is scored against `articleBody`.
2. Doc-like pages from readability-test-pages, against the reference `expected.html`:
   headings kept = its h2-h4 headings (less a wiki's "[edit]" link) whose text comes out as a
   Markdown heading (any level: the reference renumbers some pages' h1 sections as h2); code
   blocks kept = its <pre> blocks whose text lies inside one ``` fence; and token F1 against
   its text. "As sections": of those headings, how many the split stage (tasks/sections.py)
   then makes a section's own heading.

Scoring. Markdown syntax is stripped first so markup is not penalised: link and image
syntax keeps only its text (URLs dropped), fence lines and ordered-list numbers are
removed, and `_` emphasis is unwrapped; `#`, `*`, `>`, `|`, backticks and list dashes are
not word characters, so the tokeniser skips them. Tokens are `\\w+` runs, lowercased.
Per page, with multiset (bag-of-words) overlap tp = sum(min(count_pred, count_gold)):
precision = tp / |pred|, recall = tp / |gold|, F1 their harmonic mean; an empty output
scores 0 on all three. The table gives the mean and median of per-page F1 and the means of
precision and recall. `AEB F1` is the benchmark's own headline metric for comparison with
published numbers (scrapinghub/article-extraction-benchmark evaluate.py: case-sensitive
4-gram shingles, per-page normalised tp/fp/fn, F1 of mean precision and mean recall).
Each candidate's per-page F1 is also compared, page by page, with the first candidate's
(the project's current settings): mean difference with a 95% bootstrap interval, and how
many pages got better or worse. Timings (ms/page, after one warm-up page) are wall clock
on whatever else the machine is doing; read them as rough.

Candidates: the project's current settings, the same with one trafilatura option changed
(applied by overriding the keyword arguments fetch_parse passes to `trafilatura.extract`,
so everything around the call is unchanged), and plain `trafilatura.extract(html)` with
default settings (txt output) as the baseline. Skips with a message (exit 0) when the data
folder is absent.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import lxml.html  # noqa: E402
import trafilatura  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks.extraction_scores import (  # noqa: E402
    aeb_f1,
    aeb_tp_fp_fn,
    bag_scores,
    kept,
    markdown_blocks,
    markdown_text,
    tokens,
)
from tasks.fetch import parse as fetch_parse  # noqa: E402
from tasks.sections import sections_from_markdown  # noqa: E402

DOC_PAGES = (
    "google-sre-book-1",
    "ietf-1",
    "mercurial",
    "v8-blog",
    "lwn-1",
    "wikipedia",
    "mozilla-1",
    "mozilla-2",
    "gitlab-blog",
    "topicseed-1",
)

Extractor = Callable[[bytes, str], str]


@dataclass(frozen=True)
class Candidate:
    name: str
    extract: Extractor
    markdown: bool  # output is Markdown (headings and fences countable, syntax stripped)


def _project(**overrides: object) -> Extractor:
    """html_to_markdown with `overrides` merged into its trafilatura.extract call."""

    def run(raw: bytes, url: str) -> str:
        if not overrides:
            return fetch_parse.html_to_markdown(raw, url)[1]
        calls: list[dict] = []

        def extract(*args: object, **kwargs: object) -> str | None:
            calls.append(kwargs)
            return trafilatura.extract(*args, **{**kwargs, **overrides})

        proxy = SimpleNamespace(extract=extract, extract_metadata=trafilatura.extract_metadata)
        # html_to_markdown imports trafilatura when it runs: the proxy stands in for it.
        with mock.patch.dict(sys.modules, {"trafilatura": proxy}):
            markdown = fetch_parse.html_to_markdown(raw, url)[1]
        if not calls:
            raise RuntimeError("html_to_markdown no longer calls trafilatura.extract: update the benchmark")
        return markdown

    return run


def _plain_trafilatura(raw: bytes, url: str) -> str:
    # Same decoded text as the project gets, so only the extraction differs.
    return trafilatura.extract(fetch_parse.decode(raw, None, html=True)) or ""


CANDIDATES = (
    Candidate("kpack (current)", _project(), True),
    Candidate("kpack + favor_precision", _project(favor_precision=True), True),
    Candidate("kpack + favor_recall", _project(favor_recall=True), True),
    Candidate("kpack, include_tables=False", _project(include_tables=False), True),
    Candidate("trafilatura defaults (txt)", _plain_trafilatura, False),
)

# --- scoring: benchmarks/extraction_scores.py ---------------------------------------------


def _prepared(candidate: Candidate, output: str) -> str:
    return markdown_text(output) if candidate.markdown else output


def run_articles(folder: Path, limit: int | None) -> dict[str, dict]:
    truth = json.loads((folder / "ground-truth.json").read_text(encoding="utf-8"))
    shas = sorted(truth)[:limit]
    pages = [(sha, gzip.decompress((folder / "html" / f"{sha}.html.gz").read_bytes())) for sha in shas]
    results: dict[str, dict] = {}
    reference: list[float] | None = None
    for cand in CANDIDATES:
        ps, rs, fs, aeb, empty = [], [], [], [], 0
        cand.extract(pages[0][1], truth[pages[0][0]]["url"])  # warm-up, outside the timing
        started = time.perf_counter()
        for sha, raw in pages:
            gold = truth[sha]["articleBody"]
            pred = _prepared(cand, cand.extract(raw, truth[sha]["url"]))
            empty += not pred.strip()
            p, r, f = bag_scores(tokens(pred), tokens(gold))
            ps.append(p)
            rs.append(r)
            fs.append(f)
            aeb.append(aeb_tp_fp_fn(pred, gold))
        elapsed = time.perf_counter() - started
        reference = reference or fs
        diff = [mine - theirs for mine, theirs in zip(fs, reference)]
        results[cand.name] = {
            "pages": len(pages),
            "precision_mean": statistics.mean(ps),
            "recall_mean": statistics.mean(rs),
            "f1_mean": statistics.mean(fs),
            "f1_median": statistics.median(fs),
            "aeb_f1": aeb_f1(aeb),
            "empty": empty,
            "ms_per_page": 1000 * elapsed / len(pages),
            "f1_diff_vs_first": statistics.mean(diff),
            "f1_diff_ci95": common.bootstrap(diff),
            "pages_better": sum(d > 0.001 for d in diff),
            "pages_worse": sum(d < -0.001 for d in diff),
        }
    return results


def _reference(path: Path) -> lxml.html.HtmlElement:
    # expected.html is UTF-8 with no <meta charset>; <br> inside <pre> separates lines.
    tree = lxml.html.fromstring(path.read_text(encoding="utf-8"))
    for br in tree.iter("br"):
        br.tail = "\n" + (br.tail or "")
    return tree


_EDIT = re.compile(r"\[edit\]\s*$")


def run_docs(folder: Path) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for cand in CANDIDATES:
        per_page = {}
        for name in DOC_PAGES:
            page = folder / name
            raw = (page / "source.html").read_bytes()
            expected = _reference(page / "expected.html")
            output = cand.extract(raw, f"https://{name}.example/")
            # Readability keeps a MediaWiki heading's "[edit]" link, which is no part of it.
            exp_headings = [_EDIT.sub("", h.text_content())
                            for h in expected.xpath("//h2|//h3|//h4")]
            exp_pre = [pre.text_content() for pre in expected.xpath("//pre")]
            headings, fences = markdown_blocks(output) if cand.markdown else (None, None)
            # and as the split stage reads them: the sections' own headings
            titles = ([s.title for s in sections_from_markdown(output, "")[1:]]
                      if cand.markdown else None)
            f1 = bag_scores(tokens(_prepared(cand, output)), tokens(expected.text_content()))[2]
            per_page[name] = {
                "expected_headings": len(exp_headings),
                "expected_pre": len(exp_pre),
                "headings": None if headings is None else kept(exp_headings, headings, inside=False),
                "code_blocks": None if fences is None else kept(exp_pre, fences, inside=True),
                "sections": None if titles is None else kept(exp_headings, titles, inside=False),
                "fences_out": None if fences is None else len(fences),
                "f1": f1,
            }
        out[cand.name] = per_page
    return out


# --- report --------------------------------------------------------------------------------


def _machine() -> str:
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return (
        f"{now}; {platform.platform()}; {platform.processor() or platform.machine()}; "
        f"{os.cpu_count()} CPUs; Python {platform.python_version()}; trafilatura {trafilatura.__version__}"
    )


def print_report(articles: dict[str, dict] | None, docs: dict[str, dict[str, dict]] | None) -> None:
    print(f"machine: {_machine()}")
    width = max(len(c.name) for c in CANDIDATES)
    if articles:
        n = next(iter(articles.values()))["pages"]
        print(f"\narticle-extraction-benchmark: {n} pages, bag-of-words token scores vs articleBody")
        print(f"{'setting':<{width}}  P mean  R mean  F1 mean  F1 median  AEB F1  empty  ms/page")
        for name, r in articles.items():
            print(
                f"{name:<{width}}  {r['precision_mean']:.3f}   {r['recall_mean']:.3f}   {r['f1_mean']:.3f}"
                f"    {r['f1_median']:.3f}      {r['aeb_f1']:.3f}   {r['empty']:>4}  {r['ms_per_page']:>7.0f}"
            )
        first = next(iter(articles))
        print(f"\nper-page F1 against {first!r} (paired; better/worse = pages moved by more than 0.001)")
        print(f"{'setting':<{width}}  mean diff  95% bootstrap CI    better  worse")
        for name, r in list(articles.items())[1:]:
            lo, hi = r["f1_diff_ci95"]
            print(
                f"{name:<{width}}  {r['f1_diff_vs_first']:+.4f}    [{lo:+.4f}, {hi:+.4f}]"
                f"  {r['pages_better']:>6}  {r['pages_worse']:>5}"
            )
    if docs:
        first = next(iter(docs.values()))
        exp_h = sum(p["expected_headings"] for p in first.values())
        exp_pre = sum(p["expected_pre"] for p in first.values())
        print(f"\ndoc pages ({len(first)}): h2-h4 headings and <pre> of expected.html kept, F1 vs its text")
        print(f"{'setting':<{width}}  headings (of {exp_h}), as sections  code blocks "
              f"(of {exp_pre})  F1 mean")
        for name, pages in docs.items():
            rows = list(pages.values())
            h = ("-" if rows[0]["headings"] is None else
                 f"{sum(p['headings'] for p in rows)}, {sum(p['sections'] for p in rows)}")
            c = "-" if rows[0]["code_blocks"] is None else str(sum(p["code_blocks"] for p in rows))
            f1 = statistics.mean(p["f1"] for p in rows)
            print(f"{name:<{width}}  {h:>31}  {c:>22}  {f1:.3f}")
        print("\nper page: headings kept,as sections/expected  code blocks kept/expected  F1")
        names = list(docs)
        print(f"{'page':<18}" + "".join(f"  {n[:24]:<24}" for n in names))
        for page in first:
            cells = []
            for name in names:
                p = docs[name][page]
                if p["headings"] is None:
                    cell = f"-  -  {p['f1']:.3f}"
                else:
                    cell = (
                        f"{p['headings']},{p['sections']}/{p['expected_headings']}"
                        f"  {p['code_blocks']}/{p['expected_pre']}"
                        f"  {p['f1']:.3f}"
                    )
                cells.append(f"  {cell:<24}")
            print(f"{page:<18}" + "".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "html")
    parser.add_argument("--limit", type=int, default=None, help="score only the first N benchmark pages")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")

    bench = args.data / "article-extraction-benchmark"
    docs_dir = args.data / "readability-test-pages"
    if not bench.is_dir() and not docs_dir.is_dir():
        print(f"skipped: no benchmark data under {args.data} (expected article-extraction-benchmark/)")
        return 0
    articles = run_articles(bench, args.limit) if bench.is_dir() else None
    docs = run_docs(docs_dir) if docs_dir.is_dir() else None
    titles = run_every_page(docs_dir) if docs_dir.is_dir() else None
    if args.json:
        print(json.dumps({"machine": _machine(), "articles": articles, "docs": docs,
                          "titles": titles}, indent=2))
    else:
        print_report(articles, docs)
        if titles:
            print(f"\ntitles: {titles['same']} of {titles['pages']} readability-test-pages "
                  "come out with the title of their expected-metadata.json (case and spaces "
                  f"folded); token F1 against expected.html over all {titles['f1_pages']} "
                  f"pages: {titles['f1_mean']:.4f}")
    return 0


def run_every_page(folder: Path) -> dict[str, float]:
    """Over every page of `folder` (readability-test-pages), with html_to_markdown: how many
    come out with the title their expected-metadata.json gives (`same` of `pages`), and the
    mean token F1 of their Markdown against the text of their expected.html (`f1_mean` over
    `f1_pages`; every page, not only DOC_PAGES)."""
    def fold(text: str | None) -> str:
        return " ".join((text or "").split()).casefold()

    same = pages = 0
    f1s = []
    for page in sorted(folder.iterdir()):
        meta, source = page / "expected-metadata.json", page / "source.html"
        if not source.is_file():
            continue
        title, markdown, _ = fetch_parse.html_to_markdown(source.read_bytes(),
                                                          "https://example.org/")
        if (page / "expected.html").is_file():
            expected = _reference(page / "expected.html").text_content()
            f1s.append(bag_scores(tokens(markdown_text(markdown)), tokens(expected))[2])
        wanted = json.loads(meta.read_text(encoding="utf-8")).get("title") if meta.is_file() else None
        if wanted:
            pages += 1
            same += fold(title) == fold(wanted)
    return {"pages": pages, "same": same, "f1_pages": len(f1s),
            "f1_mean": statistics.fmean(f1s) if f1s else 0.0}


if __name__ == "__main__":
    sys.exit(main())
