"""XQuAD (English): does the offline (extractive) answer contain the gold answer text?

    python benchmarks/xquad_answers.py [--data ../shared/data] [--work out/bench] [--split both]

The pack is the one benchmarks/xquad.py builds (one page per article, one section per
paragraph; reused when cached). Every question is searched once with the default pipeline
and the gate off, then answered offline from that one search result in several ways:
- baseline: the first sentence of the top section;
- baseline: the previous extractive answer (the sentence with the most question keywords
  in each of the top 3 sections, cut at every '.', '?' or '!' after 3 words, in rank order);
- the product: `packs.retrieval.synthesis.extractive_answer` (what `ask()` answers with no
  API key), and its first bullet alone (one sentence, as long as the first baseline).
A question counts when one of its gold answers occurs in the answer (case-folded,
whitespace-normalised, the label line left out). Two columns: `gate on` is what a user gets
(a question the default confidence gate refuses has no answer; the gate's decision depends
only on the best similarity, so it is recomputed from the same search), `gate off` answers
every question. Also printed: the mean words per answer and how often the gold paragraph
was among the 5 cited sections the answer draws on (a ceiling for every row). Writes the
output to benchmarks/results/xquad_answers.md. Tune on dev, report test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common, xquad  # noqa: E402

COLS = ("gate on", "gate off", "words")
RESULTS = ROOT / "benchmarks" / "results" / "xquad_answers.md"


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


def contains(answer: str, golds: list[str]) -> bool:
    a = _fold(answer)
    return any(_fold(g) in a for g in golds if g.strip())


def previous_answer(question: str, cited) -> str:
    """The extractive answer before this benchmark existed (kept here as a baseline)."""
    from packs.retrieval.quality import keywords

    def split(text: str) -> list[str]:
        out, buf = [], []
        for tok in text.replace("\n", " ").split(" "):
            if not tok:
                continue
            buf.append(tok)
            if tok.endswith((".", "?", "!")) and len(buf) > 3:
                out.append(" ".join(buf))
                buf = []
        return out + ([" ".join(buf)] if buf else [])

    q = keywords(question)
    lines = []
    for s in cited[:3]:
        sentences = split(s.content) or [s.content.strip()]
        lines.append(max(sentences, key=lambda x: len(q & keywords(x))))
    return "\n".join(lines)


def body(answer: str) -> str:
    """The answer without its label line (and the blank line after it)."""
    return "\n".join(line for line in answer.splitlines()[1:] if line.strip())


def items(articles: list[dict], base_url: str, dev_articles: int):
    """{"dev": [(question, [gold answers], gold paragraph URL#heading)], "test": [...]}"""
    split: dict[str, list] = {"dev": [], "test": []}
    for n, a in enumerate(articles):
        for i, p in enumerate(a["paragraphs"]):
            for qa in p["qas"]:
                split["dev" if n < dev_articles else "test"].append(
                    (qa["question"], [x["text"] for x in qa["answers"]],
                     (f"{base_url}/xquad/{n}", xquad.heading(i))))
    return split


def run(pack, qs, log=print) -> list[tuple[str, dict]]:
    """One search per question with the gate off; the gate's decision is recomputed from
    the best similarity (it depends on nothing else), so both columns come from one run."""
    from packs.retrieval import gate
    from packs.retrieval.extractive import first_sentence
    from packs.retrieval.synthesis import extractive_answer

    labels = ("baseline: first sentence of the top section",
              "baseline: previous extractive answer (3 sentences)",
              "product: extractive answer (up to 3 sentences)",
              "product: its first bullet only")
    hits = {k: [] for k in labels}  # (contains, words, gated) per question
    limit = pack.manifest.embedding.gate_threshold
    ceiling = []
    t0 = time.perf_counter()
    for k, (question, golds, (url, head)) in enumerate(qs, start=1):
        result = pack.search(question, use_cache=False, gate_threshold=-1.0)
        gated = not gate.passes(result.best_similarity, limit)
        cited = result.cited()
        ceiling.append((any(s.url == url and s.heading_path.endswith(head)
                            for s in cited[:5]), gated))
        answer, _ = extractive_answer(question, cited) if cited else ("", [])
        texts = [first_sentence(cited[0].content) if cited else "",
                 previous_answer(question, cited),
                 body(answer), (body(answer).splitlines() or [""])[0]]
        for label, text in zip(labels, texts):
            hits[label].append((contains(text, golds), len(text.split()), gated))
        if k % 100 == 0:
            log(f"  {k}/{len(qs)} questions, {time.perf_counter() - t0:.0f} s")
    rows = []
    for label, r in hits.items():
        rows.append((label, {"gate on": statistics.fmean(ok and not g for ok, _, g in r),
                             "gate off": statistics.fmean(ok for ok, _, _ in r),
                             "words": f"{statistics.fmean(w for _, w, _ in r):.1f}"}))
    rows.append(("ceiling: gold paragraph among the 5 sections answers use",
                 {"gate on": statistics.fmean(ok and not g for ok, g in ceiling),
                  "gate off": statistics.fmean(ok for ok, _ in ceiling), "words": ""}))
    log(f"  {sum(g for _, g in ceiling)} of {len(qs)} questions gated by the default gate "
        f"({limit}); ms per question (search + all answers): "
        f"{1000 * (time.perf_counter() - t0) / len(qs):.0f}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--dev-articles", type=int, default=xquad.DEV_ARTICLES)
    ap.add_argument("--split", choices=("dev", "test", "both"), default="both")
    ap.add_argument("--out", type=Path, default=RESULTS, help="Markdown file for the output")
    args = ap.parse_args(argv)
    data = args.data / "qa" / "xquad"
    if not (data / "xquad.en.json").is_file():
        print(f"skipped: no XQuAD at {data} (pass --data DIR holding qa/xquad/)")
        return 0
    printed: list[str] = []

    def log(line: str) -> None:
        print(line, flush=True)
        printed.append(line)

    log(common.machine_line())
    articles = xquad.load(data)
    built = common.build_cached("xquad", xquad.pages(articles), args.work,
                                description="XQuAD English (evaluation benchmark)")
    log(f"pack: {built.pack_dir} "
        f"({'reused' if built.reused else f'built in {built.seconds:.0f} s'}; "
        f"{built.counts['sections']} sections); model {common.MODEL}")
    split = items(articles, built.base_url, args.dev_articles)
    names = ("dev", "test") if args.split == "both" else (args.split,)

    from packs import KnowledgePack

    with KnowledgePack.open(built.pack_dir) as pack:
        for name in names:
            log(f"\n{name} split ({len(split[name])} questions), share whose gold answer "
                "text is in the answer:")
            rows = run(pack, split[name], log)
            log(common.table(rows, COLS))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        "# XQuAD (English): gold answer text in the offline answer\n\n"
        f"- Command: `python benchmarks/xquad_answers.py --split {args.split}` "
        "(HF_HUB_OFFLINE=1)\n"
        "- Tuned on dev (articles 0-23): extractive.SECTION_PRIOR, HEADING_WEIGHT, "
        "NUMBER_BONUS, per_section; test = articles 24-47.\n"
        "- `gate on`: as a user gets it (a gated question has no answer to contain the "
        "text); `gate off`: every question answered.\n\n"
        "Output, as printed:\n\n```\n" + "\n".join(printed) + "\n```\n", encoding="utf-8")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
