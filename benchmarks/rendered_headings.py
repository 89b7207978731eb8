"""Do a pack's headings, titles and entity names read as the page shows them? Counts of the
ones that still carry Markdown or HTML markup, on a docs corpus whose headings are links.

    python benchmarks/rendered_headings.py [--work out/bench] [--pack NAME=PACK_DIR ...]
        [--out benchmarks/results/rendered_headings.md]

The corpus is benchmarks/data/release_notes/: release notes of a made-up language, "Tern",
written for this benchmark in the shape real release notes take (`#### [crypto/tls](/pkg/
crypto/tls/)` under `### Minor changes to the library`, reference links, code spans,
emphasis and HTML entities in headings; one page served as HTML, the others as Markdown)
plus a few package pages the headings link to. It is served over loopback and built with
the real flow and the offline extractor (`common.build_cached`, under --work). `--pack`
adds the same counts for packs built elsewhere (the retrieval benchmark's Kubernetes and
Rust book packs).

Counted, over the current build's Parquet tables:
  heading paths    sections whose heading path holds link syntax ("](", the issue's
                   measure; a reference link's "][" is counted as markup below), and
                   holding any markup at all (link syntax, a pair of emphasis markers, an
                   HTML entity, an inline tag, a backtick)
  titles           article titles, the same two ways
  entity names     entities whose name holds link syntax, and any markup
  links            LINKS_TO edges, and those from a release-notes page to a package page
                   (the targets of the headings' links: they are to count as links)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402
from packs import format as fmt  # noqa: E402

CORPUS = ROOT / "benchmarks" / "data" / "release_notes"
NAME = "release-notes"
HTML = "text/html; charset=utf-8"
LINK_SYNTAX = re.compile(r"\]\(")  # the measure; "][" is in JSONPath ("[*].image")
# Link syntax, a pair of emphasis markers around words, an HTML entity, an inline tag, a
# backtick (a heading path shows code without them).
MARKUP = re.compile(
    r"\]\(|\]\[|(?<![\w*])(\*\*?|__?)(?=[^\s*_])[^*_]*?[^\s*_]\1(?![\w*])|"
    r"&(?:#\d+|#x[0-9a-f]+|[a-z]+\d*);|</?(?:a|code|em|strong|b|i|span)\b[^>]*>|`", re.I)


def corpus_pages() -> list[common.Page]:
    """The release notes (at /doc/<stem>) and package pages (at /pkg/<name>/)."""
    pages = []
    for path in sorted(CORPUS.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(CORPUS)
        text = path.read_text(encoding="utf-8")
        if rel.parts[0] == "pkg":
            url = "/" + "/".join(rel.parts[:-1]) + "/"
        else:
            url = f"/doc/{path.stem}"
        kind = HTML if path.suffix == ".html" else common.MARKDOWN
        pages.append(common.Page(url, path.stem, text, kind))
    return pages


def counts(pack: Path) -> tuple[dict[str, int], dict[str, list[str]]]:
    """The counts of the module docstring for one pack, and a few examples of each."""
    import pyarrow.parquet as pq

    from benchmarks.graph_precision import tables_dir

    tables = tables_dir(pack)

    def column(name: str, col: str) -> list[str]:
        return [v or "" for v in pq.read_table(tables / f"{name}.parquet",
                                               columns=[col]).column(col).to_pylist()]

    paths = column(fmt.SECTIONS, "heading_path")
    titles = column(fmt.ARTICLES, "title")
    names = column(fmt.ENTITIES, "name")
    urls = dict(zip(column(fmt.ARTICLES, "id"), column(fmt.ARTICLES, "url")))
    edges = list(zip(column(fmt.LINKS, "source_id"), column(fmt.LINKS, "target_id")))
    out: dict[str, int] = {}
    examples: dict[str, list[str]] = {}
    for label, values in (("heading paths", paths), ("titles", titles), ("entity names", names)):
        linked = sorted({v for v in values if LINK_SYNTAX.search(v)})
        marked = sorted({v for v in values if MARKUP.search(v)})
        out[f"{label}"] = len(values)
        out[f"{label} with ']('"] = sum(bool(LINK_SYNTAX.search(v)) for v in values)
        out[f"{label} with any markup"] = sum(bool(MARKUP.search(v)) for v in values)
        examples[f"{label} with ']('"] = linked[:5]
        examples[f"{label} with any markup"] = marked[:5]
    out["LINKS_TO edges"] = len(edges)
    out["edges from release notes to package pages"] = sum(
        "/doc/" in urls.get(s, "") and "/pkg/" in urls.get(d, "") for s, d in edges)
    return out, examples


def report(rows: list[tuple[str, dict[str, int], dict[str, list[str]]]]) -> str:
    keys = list(rows[0][1])
    lines = ["| count | " + " | ".join(name for name, _, _ in rows) + " |",
             "|---|" + "---|" * len(rows)]
    lines += [f"| {k} | " + " | ".join(str(c.get(k, "")) for _, c, _ in rows) + " |"
              for k in keys]
    for name, _, examples in rows:
        shown = [(k, v) for k, v in examples.items() if v]
        if shown:
            lines += ["", f"examples, {name}:"]
            lines += [f"  {k}: {v!r}" for k, vs in shown for v in vs]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=common.DEFAULT_WORK)
    ap.add_argument("--pack", action="append", default=[], metavar="NAME=PACK_DIR")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    print(common.machine_line(), file=sys.stderr)
    pages = corpus_pages()
    print(f"building {NAME}: {len(pages)} pages (cached under {args.work})", file=sys.stderr)
    built = common.build_cached(NAME, pages, args.work, description="Tern release notes")
    print(f"{NAME}: {'reused' if built.reused else f'built in {built.seconds:.0f} s'}",
          file=sys.stderr)
    rows = [(NAME, *counts(built.pack_dir))]
    for spec in args.pack:
        name, _, path = spec.partition("=")
        if not path:
            ap.error(f"--pack takes NAME=PACK_DIR, got {spec!r}")
        print(f"counting {name} ({path})", file=sys.stderr)
        rows.append((name, *counts(Path(path))))
    text = common.machine_line() + "\n\n" + report(rows)
    common.print_report(text, args.out, "Markup in headings, titles and entity names",
                        "rendered_headings.py", argv)


if __name__ == "__main__":
    main()
