"""HTML written by documentation generators, as the build reads it: rustdoc's API pages,
Node.js's API pages, a Sphinx page, C libraries' DocBook and gtk-doc manuals and npm's
command pages, from the copies their toolchains and Debian's packages install.

    python benchmarks/generator_pages.py [--rustdoc DIR] [--node DIR] [--sphinx FILE]
        [--folder DIR ...] [--out FILE]

--rustdoc: a rustdoc tree (`rustup doc` installs one at
~/.rustup/toolchains/<toolchain>/share/doc/rust/html); --node: Node.js's API docs (Debian's
nodejs-doc: /usr/share/doc/nodejs/api); --sphinx: a page Sphinx wrote (Python's IDLE help,
idlelib/help.html, ships with CPython). Each page goes through
`tasks.fetch.parse.html_to_markdown`, the code a build runs. Printed per page:

- rustdoc: of its items (the <section> of each method, required method and variant), how
  many come out as a Markdown heading naming them, and the page's words;
- Node.js: its <pre> code blocks (one per <code>: a tabbed example holds two) against the
  fenced blocks of the Markdown, and whether the title is the page's own part of its
  <title> (not "Node.js ... Documentation", the site's name);
- Sphinx: the h2-h4 headings of its main content that come out as Markdown headings, and
  its words;
- folders of pages, or single pages (--folder, repeatable; by default libxslt's gtk-doc
  manual from libxslt1-dev, libtasn1's from libtasn1-6-dev, Valgrind's DocBook manual from
  valgrind, npm's command pages from npm's own install, and MANUALS, the one-page manuals
  of Debian packages: texinfo's, DocBook's, AsciiDoc's, GCC's release notes): per entry,
  the h1-h6 headings outside <nav>, <header> and <footer> against the Markdown's headings
  outside code blocks, the <pre> blocks against its fenced code blocks, and the words of
  the page's text against the Markdown's.

Skips a tree that is absent, with a message.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import lxml.html  # noqa: E402

from benchmarks import common  # noqa: E402
from packs.markdown import line_kinds  # noqa: E402
from tasks.fetch.parse import html_to_markdown  # noqa: E402

RUST_PAGES = ("std/option/enum.Option.html", "std/vec/struct.Vec.html",
              "std/collections/struct.HashMap.html", "std/string/struct.String.html",
              "std/result/enum.Result.html", "std/process/struct.Command.html",
              "std/iter/trait.Iterator.html", "std/fs/struct.File.html")
NODE_PAGES = ("fs", "path", "events", "child_process", "buffer", "process", "http", "url",
              "stream", "crypto")
_ITEMS = ('//section[starts-with(@id, "method.") or starts-with(@id, "tymethod.") '
          'or starts-with(@id, "variant.")]')
_FENCE = re.compile(r"^```", re.M)


def rustdoc(folder: Path, log) -> None:
    total = found = 0
    for page in RUST_PAGES:
        raw = (folder / page).read_bytes()
        names = {s.get("id").split(".", 1)[1].split("-")[0]
                 for s in lxml.html.document_fromstring(raw).xpath(_ITEMS)}
        _, markdown, _ = html_to_markdown(raw, f"http://127.0.0.1/{page}")
        heads = "\n".join(h for h in markdown.splitlines() if h.startswith("#"))
        heads = heads.replace("\\_", "_")
        got = sum(1 for n in names if re.search(rf"\b{re.escape(n)}\b", heads))
        log(f"  {page:40s} items {len(names):4d}  as headings {got:4d}  "
            f"words {len(markdown.split()):6d}")
        total, found = total + len(names), found + got
    log(f"rustdoc: {found} of {total} items come out as headings")


def node(folder: Path, log) -> None:
    blocks = fenced = titled = 0
    for name in NODE_PAGES:
        raw = (folder / f"{name}.html").read_bytes()
        tree = lxml.html.document_fromstring(raw)
        codes = sum(max(len(pre.findall("code")), 1) for pre in tree.iter("pre"))
        own = tree.findtext(".//title", "").split("|")[0].strip()
        title, markdown, _ = html_to_markdown(raw, f"http://127.0.0.1/api/{name}.html")
        fences = len(_FENCE.findall(markdown)) // 2
        log(f"  {name:14s} code blocks {codes:4d}  fenced {fences:4d}  title {title!r}")
        blocks, fenced, titled = blocks + codes, fenced + fences, titled + (title == own)
    log(f"node: {fenced} fenced of {blocks} code blocks; {titled} of {len(NODE_PAGES)} pages "
        "titled by their own part of the <title>")


def sphinx(page: Path, log) -> None:
    raw = page.read_bytes()
    main = lxml.html.document_fromstring(raw).xpath('//div[@role="main"]')
    wanted = [" ".join(h.text_content().replace("¶", "").split())
              for h in (main[0].iter("h2", "h3", "h4") if main else ())]
    _, markdown, _ = html_to_markdown(raw, "http://127.0.0.1/library/idle.html")
    heads = {h.lstrip("#").strip() for h in markdown.splitlines() if h.startswith("#")}
    got = sum(1 for w in wanted if w in heads)
    log(f"sphinx: {page}: {got} of {len(wanted)} headings kept, "
        f"{len(markdown.split())} words")


FOLDERS = (Path("/usr/share/doc/libxslt1-dev/gtk-doc/html/libxslt"),
           Path("/usr/share/gtk-doc/html/libtasn1"), Path("/usr/share/doc/valgrind/html"),
           Path("/usr/lib/node_modules/npm/docs/output/commands"))
MANUALS = tuple(Path("/usr/share/doc") / m for m in (
    "bc/bc.html", "time/time.html", "nettle-dev/nettle.html", "bzip2/manual.html",
    "fontconfig/fontconfig-user.html", "xtrans-dev/xtrans.html",
    "libexpat1-dev/expat.html/reference.html", "python3/python-policy.html",
    "base-passwd/users-and-groups.html", "ninja-build/manual.html", "gcc-12-base/NEWS.html"))


def folder_pages(folder: Path, log) -> None:
    counts = [0] * 6  # headings, kept; <pre>, fenced; words, kept
    for page in sorted(folder.glob("*.html")) if folder.is_dir() else [folder]:
        raw = page.read_bytes()
        _, markdown, _ = html_to_markdown(raw, f"http://127.0.0.1/{page.name}")
        tree = lxml.html.document_fromstring(raw)  # as bytes, its XML declaration is read
        for chrome in tree.xpath("//script|//style|//nav|//header|//footer"):
            chrome.drop_tree()
        kinds = list(line_kinds(markdown.splitlines()))
        found = (len(tree.xpath("//h1|//h2|//h3|//h4|//h5|//h6")),
                 sum(k == "text" and re.match(r"#{1,6} \S", line) is not None
                     for line, k, _ in kinds),
                 len(tree.xpath("//pre")), sum(k == "open" for _, k, _ in kinds),
                 len(tree.text_content().split()), len(markdown.split()))
        counts = [a + b for a, b in zip(counts, found)]
    heads, kept, pres, fenced, words, out = counts
    log(f"folder: {folder}: {kept} headings of {heads}, {fenced} code blocks fenced of "
        f"{pres}, {out} words of {words}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rustdoc", type=Path, default=Path.home() / ".rustup" / "toolchains"
                    / "stable-x86_64-unknown-linux-gnu" / "share" / "doc" / "rust" / "html")
    ap.add_argument("--node", type=Path, default=Path("/usr/share/doc/nodejs/api"))
    ap.add_argument("--sphinx", type=Path, default=Path(sys.base_prefix) / "lib"
                    / f"python{sys.version_info.major}.{sys.version_info.minor}" / "idlelib"
                    / "help.html")
    ap.add_argument("--folder", type=Path, action="append", default=None,
                    help="a folder of a generator's pages (repeatable)")
    ap.add_argument("--out", type=Path, default=None, help="Markdown file for the output")
    args = ap.parse_args(argv)
    log, printed = common.printing_log()
    log(common.machine_line())
    for name, folder, run in (("rustdoc", args.rustdoc, rustdoc), ("node", args.node, node)):
        if (folder / ("std" if name == "rustdoc" else "fs.html")).exists():
            run(folder, log)
        else:
            log(f"skipped {name}: no pages under {folder}")
    if args.sphinx.is_file():
        sphinx(args.sphinx, log)
    else:
        log(f"skipped sphinx: no page at {args.sphinx}")
    for folder in args.folder or (*FOLDERS, *MANUALS):
        if folder.is_file() or any(folder.glob("*.html")):
            folder_pages(folder, log)
        else:
            log(f"skipped folder: no pages under {folder}")
    if args.out:
        command = " ".join(["python benchmarks/generator_pages.py", *(argv or sys.argv[1:])])
        args.out.write_text("# Documentation generators' HTML, as the build reads it\n\n"
                            f"- Command: `{command}`\n\n```\n" + "\n".join(printed)
                            + "\n```\n", encoding="utf-8")
        print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
