"""Callouts and tabs of Markdown dialects as plain Markdown (tasks/fetch/markdown_source.py).

MkDocs Material writes a callout as a marker line and a block indented under it, and a tab
the same way; Docusaurus and VitePress fence a callout with `:::` lines:

    !!! note "Before you start"          **Note: Before you start**
        You need Python 3.11.       ->
                                         You need Python 3.11.
    === "pip"                            **pip**
        ``` sh                      ->
        pip install mkdocs-material      ``` sh
        ```                              pip install mkdocs-material
                                         ```
    :::tip Build
    Run `npm run build`.            ->   **Tip: Build**
    :::
                                         Run `npm run build`.

Left as they were, the markers read as words of the answer ('!!! note "Before you start" You
need ...'), and a list or a paragraph indented under a marker is no list or paragraph. The
block keeps its text, dedented, after a bold line naming it; a tab's name leads into its
content as a lead-in does. Lines in a top-level code fence are never read as markers. An MDX
page's `import` and one-line `export` statements (`import Tabs from '@theme/Tabs';`) go too
(`plain_callouts` drops them outside fences); its components are read by tasks/clean.py.
"""

from __future__ import annotations

import re

from packs.markdown import line_kinds

# !!! note "Title", ??? tip, ???+ warning "" (MkDocs Material / Python-Markdown admonitions)
_CALLOUT = re.compile(r'^(?:!!!|\?\?\?\+?)\s+([\w-]+)(?:\s+"([^"]*)")?\s*$')
_TAB = re.compile(r'^===\+?\s+"([^"]*)"\s*$')  # === "Tab" (pymdownx.tabbed)
_COLON_OPEN = re.compile(r"^(:{3,})\s*([\w-]+)(?:\s+(.*?))?\s*$")  # :::tip Title
_MDX_STATEMENT = re.compile(r"""^(?:import\s+(?:[\w*{}\s,]+\s+from\s+)?['"][^'"]+['"];?"""
                            r"|export\s+(?:default\s+)?(?:const|let|var|function)\s+\w+.*)\s*$")


def plain_callouts(text: str) -> str:
    """`text` with its callouts and tabs written as plain Markdown (the module docstring)."""
    lines = text.split("\n")
    kinds = [kind for _, kind, _ in line_kinds(lines)]  # fences read as the splitter reads them
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        callout, tab, colon = _CALLOUT.match(line), _TAB.match(line), _COLON_OPEN.match(line)
        if kinds[i] != "text":  # a fence's line: code, as written
            out.append(line)
            i += 1
        elif _MDX_STATEMENT.match(line):
            i += 1
        elif callout or tab:
            name = _name(callout.group(1), callout.group(2)) if callout else tab.group(1)
            i, body = _indented(lines, i + 1)
            out += ([f"**{name}**", ""] if name else []) + plain_callouts(body).split("\n")
        elif colon:
            close = re.compile(rf"^{colon.group(1)}\s*$")
            end = next((j for j in range(i + 1, len(lines)) if close.match(lines[j])), None)
            if end is None:  # no closing line: not a callout
                out.append(line)
                i += 1
                continue
            name = _name(colon.group(2), colon.group(3))
            body = plain_callouts("\n".join(lines[i + 1:end]))
            out += [f"**{name}**", "", *body.split("\n"), ""]
            i = end + 1
        else:
            out.append(line)
            i += 1
    return "\n".join(out)


def _name(kind: str, title: str | None) -> str:
    """"Note: Before you start" (or "Note"); "" for an empty title given as ""."""
    if title is not None and not title.strip():
        return ""
    kind = kind.replace("-", " ").capitalize()
    return f"{kind}: {title.strip()}" if title else kind


def _indented(lines: list[str], i: int) -> tuple[int, str]:
    """(the index after the block indented under a marker from `lines[i]` on, the block
    dedented by one level); blank lines inside it stay, leading ones go, trailing ones are
    left after it."""
    block: list[str] = []
    while i < len(lines) and (not lines[i].strip() or lines[i].startswith(("    ", "\t"))):
        block.append(lines[i][4:] if lines[i].startswith("    ") else lines[i][1:])
        i += 1
    while block and not block[-1].strip():
        block.pop()
        i -= 1
    while block and not block[0].strip():
        block.pop(0)
    return i, "\n".join(block)
