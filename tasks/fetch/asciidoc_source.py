"""AsciiDoc for the fetch stage (pure): an .adoc page (a project's docs on GitHub, an
Antora or Asciidoctor site's sources) as Markdown, so the splitter finds its sections and
code blocks.

    title, markdown, links = asciidoc_document(text, url)

What is kept:
- **section titles** (`= Title`, `== Section`, ... and the `#` form) as ATX headings of the
  same level; the document title (`= Title`) is the page's title;
- **delimited blocks**: listing (`----`) and literal (`....`) blocks as ``` fences, with the
  language of a `[source,lang]` line above them; example, sidebar and quote blocks (`====`,
  `****`, `____`) as their text; comment blocks (`////`) and passthrough blocks (`++++`) left
  out;
- **admonitions** (`NOTE: ...`, `[TIP]` above a block) as a paragraph that opens with their
  name in bold;
- **lists**: `*`/`-` items (any depth) as `-` items, `.` items as numbered ones;
- **inline markup**: `https://host/path[text]`, `link:path[text]` and `<<id,text>>` as links
  or text; `+literal+` as `literal`.

Attribute entries (`:toc:`), block attribute lines (`[#id]`), comments (`//`), anchors and
`include::`/`image::`/`toc::` macros are no text. Then `markdown_document` reads the result.
"""

from __future__ import annotations

import re

from tasks.fetch.markdown_source import markdown_document

_TITLE = re.compile(r"^(={1,6}|#{1,6})\s+(\S.*?)\s*(?:\1)?$")
_DELIMITERS = {"----": "code", "....": "code", "====": "text", "****": "text", "____": "text",
               "--": "text", "////": "skip", "++++": "skip", "|===": "text"}
_ATTRIBUTE_LINE = re.compile(r"^\[[^\]]*\]$")
_SOURCE = re.compile(r"^\[(?:source|listing)?\s*,\s*([\w+#.-]+)[^\]]*\]$|^\[source\]$")
_ADMONITION = re.compile(r"^(NOTE|TIP|IMPORTANT|WARNING|CAUTION):\s+(.*)$")
_ADMONITION_BLOCK = re.compile(r"^\[(NOTE|TIP|IMPORTANT|WARNING|CAUTION)\]$")
_ENTRY = re.compile(r"^:!?[\w-]+!?:(?:\s.*)?$")  # an attribute entry (":toc: left")
_MACRO_LINE = re.compile(r"^(?:include|image|toc|ifdef|ifndef|ifeval|endif)::.*\[.*\]$")
_LIST = re.compile(r"^(\*{1,5}|-)\s+(.*)$")
_ORDERED = re.compile(r"^(\.{1,5})\s+(.*)$")
_BLOCK_TITLE = re.compile(r"^\.([^.\s].*)$")
_URL_MACRO = re.compile(r"((?:https?://|mailto:)[^\s\[]+)\[([^\]]*)\]")
_LINK_MACRO = re.compile(r"link:([^\s\[]+)\[([^\]]*)\]")
_XREF = re.compile(r"<<([^,>]+)(?:,\s*([^>]+))?>>|xref:([^\s\[]+)\[([^\]]*)\]")
_PLUS = re.compile(r"(?<![\w+])\+([^+\n]+)\+(?![\w+])")
_ANCHOR = re.compile(r"\[\[[^\]]*\]\]|anchor:[\w-]+\[[^\]]*\]")
_NAMES = {"NOTE": "Note", "TIP": "Tip", "IMPORTANT": "Important", "WARNING": "Warning",
          "CAUTION": "Caution"}


def asciidoc_document(text: str, url: str) -> tuple[str | None, str, list[str]]:
    """An .adoc page as (title, markdown, links) (see the module docstring)."""
    return markdown_document(asciidoc_to_markdown(text), url)


def asciidoc_to_markdown(text: str) -> str:
    """The Markdown of AsciiDoc `text` (see the module docstring). Never raises."""
    lines = text.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    para: list[str] = []  # the lines of the open paragraph: inline markup may span them
    language, admonition = "", ""
    i = 0

    def flush() -> None:
        if para:
            out.extend(_inline("\n".join(para)).split("\n"))
            para.clear()

    while i < len(lines):
        line = lines[i].strip()
        if line and not _special(line):
            para.append(line)
            i += 1
            continue
        flush()
        delimiter = _delimiter(line)
        if delimiter is not None:
            body, i = _delimited(lines, i, line)
            kind = _DELIMITERS[delimiter]
            if kind == "code":
                out += ["", f"```{language}", *body, "```", ""]
            elif kind == "text":
                shown = [_inline(b.strip().lstrip("|").strip()) for b in body]
                if admonition:
                    first = next((k for k, b in enumerate(shown) if b), None)
                    if first is not None:
                        shown[first] = f"**{admonition}:** {shown[first]}"
                out += ["", *shown, ""]
            language, admonition = "", ""
            continue
        i += 1
        if line.startswith("//") or _ENTRY.match(line) or _MACRO_LINE.match(line):
            continue
        m = _SOURCE.match(line)
        if m:
            language = m.group(1) or ""
            continue
        m = _ADMONITION_BLOCK.match(line)
        if m:
            admonition = _NAMES[m.group(1)]
            continue
        if _ATTRIBUTE_LINE.match(line) or _ANCHOR.fullmatch(line):
            continue
        m = _TITLE.match(line)
        if m and (not out or not out[-1].strip() or out[-1].startswith("#")):
            out += ["", f"{'#' * len(m.group(1))} {_inline(m.group(2))}", ""]
            continue
        m = _ADMONITION.match(line)
        if m:
            out.append(f"**{_NAMES[m.group(1)]}:** {_inline(m.group(2))}")
            continue
        m = _LIST.match(line)
        if m:
            out.append(f"- {_inline(m.group(2))}")
            continue
        m = _ORDERED.match(line)
        if m:
            out.append(f"1. {_inline(m.group(2))}")
            continue
        m = _BLOCK_TITLE.match(line)
        if m and (not out or not out[-1].strip()):
            out.append(f"**{_inline(m.group(1))}**")
            out.append("")
            continue
        if line == "+":  # a list continuation: the next block belongs to the item
            continue
        out.append(_inline(line))
    flush()
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip() + "\n"


def _special(line: str) -> bool:
    """Whether `line` is anything but plain paragraph text (a title, a delimiter, a list
    item, an attribute, a comment, a macro ...)."""
    return bool(_delimiter(line) is not None or line.startswith(("//", "[", ":", "=", "#"))
                or line == "+" or _ADMONITION.match(line) or _LIST.match(line)
                or _ORDERED.match(line) or _BLOCK_TITLE.match(line)
                or _MACRO_LINE.match(line))


def _delimiter(line: str) -> str | None:
    """The delimited block `line` opens, by its delimiter's kind ("----" for any run of
    four or more dashes ...), or None."""
    if line in _DELIMITERS:
        return line
    if len(line) >= 4 and len(set(line)) == 1 and line[:4] in _DELIMITERS:
        return line[:4]
    return None


def _delimited(lines: list[str], i: int, opener: str) -> tuple[list[str], int]:
    """The lines of the block opened at line `i` by `opener` (up to the same delimiter) and
    the index after its closing line (the end of the page when it never closes)."""
    j = i + 1
    while j < len(lines) and lines[j].rstrip() != opener:
        j += 1
    return [b.rstrip() for b in lines[i + 1:j]], min(j + 1, len(lines))


def _inline(text: str) -> str:
    """AsciiDoc inline markup as Markdown (links, cross references, +literals+)."""
    text = _ANCHOR.sub("", text)
    text = _LINK_MACRO.sub(lambda m: f"[{m.group(2) or m.group(1)}]({m.group(1)})", text)
    text = _URL_MACRO.sub(lambda m: f"[{m.group(2) or m.group(1)}]({m.group(1)})", text)
    text = _XREF.sub(lambda m: (m.group(2) or m.group(1)) if m.group(1) is not None
                     else (m.group(4) or m.group(3)), text)
    return _PLUS.sub(lambda m: f"`{m.group(1)}`", text)
