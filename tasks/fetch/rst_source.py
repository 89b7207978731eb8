"""reStructuredText for the fetch stage (pure): an .rst page (a Sphinx project's sources on
GitHub, a README.rst) as Markdown, so the splitter finds its sections and code blocks.

    title, markdown, links = rst_document(text, url)

Read as plain text, a page was one section with its "=====" lines in it. What is kept:
- **section titles** (a line of text under, or between, lines of one punctuation character)
  as ATX headings, the level of each adornment style in the order the page first uses it,
  as docutils assigns them;
- **literal blocks** (a paragraph ending in "::", then an indented block) and the
  `code-block`, `code` and `sourcecode` directives as ``` fences (with the language);
- **admonitions** (`note`, `warning`, `versionadded` ...) as a paragraph that opens with
  their name in bold; the bodies of other directives as text, and what is no text
  (`toctree`, `image`, `include`, comments, link targets, substitution definitions) left out;
- **inline markup**: ``literal`` as `literal`, `text <url>`_ as a Markdown link, a role's
  text (:func:`os.path.join` as `os.path.join`, :doc:`Install <install>` as Install).

The fields that open a page (":title: ...") are its front matter: with a `:title:`, its first
title style is a `##` section. Indentation outside code is dropped (in Markdown it would make
code blocks of block quotes and definitions); nested lists come out flat. Then
`markdown_document` reads the result: the front matter's title, else the first `#` heading,
is the title; links are resolved against `url`.
"""

from __future__ import annotations

import json
import re

from tasks.fetch.markdown_source import markdown_document

# ":title: AWS CLI S3 Configuration"; not a role (":mod:`email` Package Architecture")
_FIELD = re.compile(r"^:([\w -]+):(?:\s+(.*))?$")
_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}\s*$")  # a line of one punctuation character
_DIRECTIVE = re.compile(r"^\.\.\s+([\w:-]+)::\s*(.*)$")
_CODE_DIRECTIVES = frozenset({"code-block", "code", "sourcecode", "highlight-block"})
_ADMONITIONS = {"note": "Note", "warning": "Warning", "tip": "Tip", "important": "Important",
                "caution": "Caution", "danger": "Danger", "attention": "Attention",
                "hint": "Hint", "error": "Error", "seealso": "See also", "todo": "To do",
                "versionadded": "New in version", "versionchanged": "Changed in version",
                "deprecated": "Deprecated since version", "admonition": ""}
_DROPPED = frozenset({"toctree", "image", "figure", "include", "literalinclude", "contents",
                      "raw", "only", "index", "meta", "highlight", "autosummary", "sectnum",
                      "tabularcolumns", "rubric", "currentmodule", "module"})
_LITERAL = re.compile(r"``(.+?)``")
_LINK = re.compile(r"`([^`<]+?)\s*<([^>`]+)>`__?")
_REF = re.compile(r"`([^`<]+?)`__?(?!\w)")
_ROLE = re.compile(r":(?:[\w-]+:)?([\w-]+):`([^`]+)`")
_CODE_ROLES = frozenset({"func", "meth", "class", "attr", "mod", "obj", "data", "const", "exc",
                         "envvar", "option", "program", "command", "file", "samp", "kbd",
                         "code", "makevar", "setting", "type", "member", "var", "macro",
                         "struct", "enum", "function"})


def rst_document(text: str, url: str) -> tuple[str | None, str, list[str]]:
    """An .rst page as (title, markdown, links) (see the module docstring)."""
    return markdown_document(rst_to_markdown(text), url)


def rst_to_markdown(text: str) -> str:
    """The Markdown of reStructuredText `text` (see the module docstring). Never raises."""
    lines = text.replace("\r\n", "\n").replace("\t", "    ").split("\n")
    out: list[str] = []
    styles: list[tuple[str, bool]] = []
    i = 0
    while i < len(lines) and (m := _FIELD.match(lines[i])):  # the page's fields (docinfo)
        if m.group(1).lower() == "title" and (m.group(2) or "").strip():
            out += ["---", f"title: {json.dumps(m.group(2).strip())}", "---", ""]
        i += 1
    para: list[str] = []  # the lines of the open paragraph: inline markup may span them

    def flush() -> None:
        if para:
            out.extend(_inline("\n".join(para)).split("\n"))
            para.clear()

    while i < len(lines):
        line = lines[i]
        title = _title_at(lines, i)
        if title is not None:
            flush()
            text_line, style, used = title
            if style not in styles:
                styles.append(style)
            level = min(styles.index(style) + 1 + (out[:1] == ["---"]), 6)
            out += ["", f"{'#' * level} {_inline(text_line.strip())}", ""]
            i += used
            continue
        m = _DIRECTIVE.match(line.strip()) if not line.startswith((" ", "\t")) else None
        if m or line.strip() == "..":
            flush()
            i = _directive(lines, i, m, out)
            continue
        if line.lstrip().startswith(".. "):  # a comment, a link target, a substitution
            flush()
            i = _skip_block(lines, i + 1, _indent(line))
            continue
        stripped = line.strip()
        if stripped.endswith("::") and not stripped.startswith(".."):
            lead = stripped[:-2].rstrip()
            if lead:
                para.append(lead + (":" if not stripped.endswith(" ::") else ""))
            flush()
            body, i = _indented_block(lines, i + 1, _indent(line))
            out += _fence(body, "")
            continue
        if stripped:
            para.append(stripped)
        else:
            flush()
            out.append("")
        i += 1
    flush()
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip() + "\n"


def _title_at(lines: list[str], i: int) -> tuple[str, tuple[str, bool], int] | None:
    """(title text, (character, overlined), lines used) when a section title starts at
    line `i`, else None."""
    line = lines[i]
    over = _ADORNMENT.match(line)
    if over and i + 2 < len(lines):
        text, under = lines[i + 1], _ADORNMENT.match(lines[i + 2])
        if (under and under.group(1) == over.group(1) and text.strip()
                and not _ADORNMENT.match(text) and len(line.rstrip()) >= len(text.rstrip())):
            return text, (over.group(1), True), 3
    if (line.strip() and not line.startswith((" ", "\t")) and not over and i + 1 < len(lines)
            and (i == 0 or not lines[i - 1].strip())):
        under = _ADORNMENT.match(lines[i + 1])
        if under and len(lines[i + 1].rstrip()) >= min(len(line.rstrip()), 4):
            return line, (under.group(1), False), 2
    return None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _indented_block(lines: list[str], i: int, base: int) -> tuple[list[str], int]:
    """The lines indented deeper than `base` from line `i` on (blank lines inside kept),
    dedented, and the index after them."""
    start = i
    while i < len(lines) and not lines[i].strip():
        i += 1
    body: list[str] = []
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > base):
        body.append(lines[i])
        i += 1
    while body and not body[-1].strip():
        body.pop()
    depth = min((_indent(b) for b in body if b.strip()), default=0)
    return [b[depth:] for b in body], (i if body else start)


def _skip_block(lines: list[str], i: int, base: int) -> int:
    return _indented_block(lines, i, base)[1]


def _fence(body: list[str], language: str) -> list[str]:
    while body and not body[0].strip():
        body = body[1:]
    if not body:
        return []
    return ["", f"```{language}", *body, "```", ""]


def _directive(lines: list[str], i: int, m: re.Match[str] | None, out: list[str]) -> int:
    """Write the directive at line `i` (its match `m`; None for a bare ".." comment) to
    `out`; the index of the line after it."""
    base = _indent(lines[i])
    body, after = _indented_block(lines, i + 1, base)
    if m is None:
        return after
    name, argument = m.group(1).lower().split(":")[-1], m.group(2).strip()
    options = 0
    while options < len(body) and body[options].lstrip().startswith(":") and re.match(
            r"^\s*:[\w -]+:", body[options]):
        options += 1
    content = body[options:]
    if name in _CODE_DIRECTIVES:
        out += _fence(content, argument.split()[0] if argument else "")
    elif name in _ADMONITIONS:
        label = _ADMONITIONS[name]
        head = f"**{label} {argument}:**" if label and argument and name.startswith(
            ("version", "deprecated")) else f"**{label or argument}:**"
        text = [_inline(c.strip()) for c in content]
        first = " ".join(t for t in text[:1] if t)
        out += ["", f"{head} {first}".rstrip(), *text[1:], ""]
    elif name not in _DROPPED:
        out += ["", *(_inline(c.strip()) for c in content), ""]
    return after


def _inline(text: str) -> str:
    """RST inline markup as Markdown (literals, links, roles, references)."""
    text = _LITERAL.sub(lambda m: f"`{m.group(1)}`", text)
    text = _LINK.sub(lambda m: f"[{m.group(1).strip()}]({m.group(2).strip()})", text)

    def role(m: re.Match[str]) -> str:
        name, body = m.group(1), m.group(2)
        shown = re.sub(r"\s*<[^>]*>$", "", body).lstrip("~!") or body
        if name in _CODE_ROLES:
            return f"`{shown.split('.')[-1] if body.startswith('~') else shown}`"
        return shown

    text = _ROLE.sub(role, text)
    return _REF.sub(lambda m: m.group(1), text)
