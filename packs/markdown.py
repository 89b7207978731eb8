"""Markdown block structure, one set of rules for the build and the query side: code fences,
ATX headings, list items.

Code fences follow CommonMark (https://spec.commonmark.org/0.31.2/#fenced-code-blocks):
- an opening fence is 3 or more backticks or tildes; a backtick fence's info string may not
  contain a backtick (so "```ls```" on a line is a code span, not a fence);
- the info string's first word is the block's language ("```yaml title=a.yaml" → yaml;
  Pandoc's "``` {.python}" → python);
- a closing fence uses the opener's character, is at least as long, and carries nothing
  but spaces after it, so a "```" line inside a "````" or "~~~" block is code;
- an unclosed fence runs to the end of the text.
One departure, because this parser does not track containers: a fence may be indented any
amount and sit behind blockquote markers ("> ```rust"). CommonMark measures indentation
from the enclosing list item or quote, and real docs nest fences in both (a "```shell"
indented 4 spaces under "1. Step"); counting from the margin would read those as prose.

Headings are ATX headings (CommonMark): up to 3 spaces, 1–6 `#`, then a space or the end
of the line; a closing run of `#` goes only when a space precedes it ("## C#" is "C#").
List items are bullet (`-`, `*`, `+`) or ordered (1–9 digits then `.` or `)`) markers
followed by a space or the end of the line.

Inline text (`inline_text`) is what a reader sees of a heading, a title or a name written in
Markdown: the one rendering the build (heading paths, titles) and the query side share.

Everything here is pure and works line by line; nothing raises on odd text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

# Group 1: indentation and any blockquote markers, 2: the fence run, 3: the info string
# (untrimmed).
_FENCE_MARGIN = r"(?:[ \t]*>)*[ \t]*"
FENCE_LINE = re.compile(rf"^({_FENCE_MARGIN})(`{{3,}}|~{{3,}})(.*)$")
# The language word of an info string: the first word, an optional Pandoc "{." before it.
_INFO_PREFIX = r"[ \t]*\{?[ \t]*\.?"
_LANGUAGE_WORD = r"[A-Za-z0-9_+#.-]+"
_LANGUAGE = re.compile(f"{_INFO_PREFIX}({_LANGUAGE_WORD})")
HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
LIST_ITEM = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
# A paragraph that is one HTML element of a few words: the caption of the listing after it
# ('<span class="filename">Filename: src/main.rs</span>', as mdBook pages write one between
# a lead-in and its code block).
LISTING_CAPTION = re.compile(r"^<(span|p|div|figcaption|em|strong)\b[^<>]*>[^<>]{1,80}</\1>$")

LineKind = Literal["text", "open", "code", "close"]


@dataclass(frozen=True)
class Fence:
    """An opening fence: its character run ("```", "~~~~") and its info string (trimmed)."""

    run: str
    info: str

    @property
    def language(self) -> str:
        """The info string's first word ("" when there is none), Pandoc braces dropped."""
        m = _LANGUAGE.match(self.info)
        return m.group(1) if m else ""

    def closed_by(self, line: str) -> bool:
        """Whether `line` closes this fence (same character, at least as long, nothing after)."""
        m = FENCE_LINE.match(line)
        return bool(m and m.group(2)[0] == self.run[0] and len(m.group(2)) >= len(self.run)
                    and not m.group(3).strip())


def opening_fence(line: str) -> Fence | None:
    """The fence `line` opens, or None when it is not an opening fence line."""
    m = FENCE_LINE.match(line)
    if not m:
        return None
    run, info = m.group(2), m.group(3).strip()
    if run[0] == "`" and "`" in info:
        return None  # "```ls```": an inline code span
    return Fence(run, info)


def line_kinds(lines: Iterable[str]) -> Iterator[tuple[str, LineKind, Fence | None]]:
    """(line, kind, the fence it belongs to) for each line: "text" outside fences (fence
    None), "open" and "close" for fence lines, "code" for the lines between them. An
    unclosed fence's lines are all "code" to the end."""
    fence: Fence | None = None
    for line in lines:
        if fence is None:
            fence = opening_fence(line)
            yield line, ("text" if fence is None else "open"), fence
        elif fence.closed_by(line):
            yield line, "close", fence
            fence = None
        else:
            yield line, "code", fence


def iter_lines_with_fences(text: str) -> Iterator[tuple[str, bool]]:
    """(line, in_code) for each line of `text`; fence lines themselves count as code."""
    for line, kind, _ in line_kinds(text.splitlines()):
        yield line, kind != "text"


def fence_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) character offsets of each fenced block in `text`, fence lines included
    (the closing line's newline is not); an unclosed block ends at the end of the text."""
    spans: list[tuple[int, int]] = []
    pos, start = 0, None
    for line, kind, _ in line_kinds(text.split("\n")):
        if kind == "open":
            start = pos
        end = pos + len(line)
        if kind == "close" and start is not None:
            spans.append((start, end))
            start = None
        pos = end + 1
    if start is not None:
        spans.append((start, len(text)))
    return spans


def replace_fences(text: str, repl: str | None = None) -> str:
    """`text` with each fenced block (fence lines included) replaced by `repl`, or by as
    many spaces as it had characters when `repl` is None (offsets stay put)."""
    out: list[str] = []
    last = 0
    for a, b in fence_spans(text):
        out.append(text[last:a])
        out.append(" " * (b - a) if repl is None else repl)
        last = b
    out.append(text[last:])
    return "".join(out)


def fence_languages(text: str) -> list[str]:
    """Language words of the text's opening fences, in order, as written (not normalised);
    fences without an info string are left out."""
    return [f.language for _, kind, f in line_kinds(text.splitlines())
            if kind == "open" and f is not None and f.language]


def fence_opener_pattern(words: str) -> str:
    """A regex source (Python and RE2 alike) matching, per line, an opening fence whose
    language word is one of `words` (an alternation, already escaped). It works on stored
    text with no parser at hand (a database's regexp_matches), so it cannot tell an opener
    from a fence-like line inside a code block."""
    return (rf"^{_FENCE_MARGIN}(?:`{{3,}}|~{{3,}}){_INFO_PREFIX}(?:{words})"
            r"(?:[^A-Za-z0-9_+#.-]|$)")


@dataclass(frozen=True)
class Heading:
    level: int
    text: str  # trimmed; "" for an empty heading ("##")


def heading(line: str) -> Heading | None:
    """The ATX heading `line` is, or None (a `#` inside code is the caller's business: ask
    `line_kinds` first)."""
    m = HEADING.match(line)
    if not m:
        return None
    return Heading(len(m.group(1)), (m.group(2) or "").strip())


def list_marker(line: str) -> re.Match[str] | None:
    """The list-item marker at the start of `line` (indentation, marker and the spaces
    after it: `match.end()` is where the item's text starts), or None."""
    return LIST_ITEM.match(line)


# --- inline text ---------------------------------------------------------------------------
# A code span: a backtick run, then the shortest text up to a run of the same length,
# within one block: it may run over a line break, not over a blank line or into the next
# list item (a stray backtick in one bullet of an answer must not pair with the next one's
# and hide the markers between them).
CODE_SPAN = re.compile(r"(`+)(?!`)(?:[^\n]|\n(?![ \t]*(?:\n|(?:[-*+]|\d{1,9}[.)])[ \t])))*?"
                       r"(?<!`)\1(?!`)")


def outside_code_spans(text: str, fn: Callable[[str], str]) -> str:
    """`text` with `fn` applied to each stretch between its code spans; the code spans
    stay exactly as written (nothing inside one is markup)."""
    if "`" not in text:
        return fn(text)
    out: list[str] = []
    last = 0
    for m in CODE_SPAN.finditer(text):
        out += [fn(text[last:m.start()]), m.group(0)]
        last = m.end()
    out.append(fn(text[last:]))
    return "".join(out)

# Code spans and backslash escapes are read first (CommonMark: they bind tighter than links
# and emphasis) and stand in the text as private-use placeholders while the markup around
# them goes, so nothing inside a code span is ever rewritten.
_PLACEHOLDER = 0xF0000  # Supplementary Private Use Area-A: never in a page's text
_SLOT = re.compile("[\U000F0000-\U000FFFFD]")
_ESCAPABLE = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_BRACKETED = r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]"  # link text: one level of nested brackets
_DESTINATION = (r"\(\s*(?:<[^<>\n]*>|(?:[^\s()]|\([^\s()]*\))*)"  # (dest "title")
                r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)")
_IMAGE = re.compile("!" + _BRACKETED + _DESTINATION)
_LINK = re.compile(_BRACKETED + _DESTINATION)
_FULL_REFERENCE = re.compile(_BRACKETED + r"\[([^\[\]]*)\]")
_SHORTCUT_REFERENCE = re.compile(_BRACKETED + r"(?![\[(])")
_AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*|[\w.+-]+@[\w-]+(?:\.[\w-]+)+)>")
# Inline HTML, by tag name only, so that `Vec<T>` and "<name>" placeholders stay.
_INLINE_TAG = re.compile(
    r"</?(?:a|abbr|b|big|br|cite|code|del|dfn|em|font|i|img|ins|kbd|mark|p|q|s|samp|small|span|"
    r"strike|strong|sub|sup|time|tt|u|var|wbr)(?:\s[^<>]*)?/?>", re.I)
# Emphasis: a `*` run may open inside a word, a `_` run only at a word's edge (CommonMark's
# flanking rules, so snake_case and `2 * 3 * 4` keep their characters).
_STAR = re.compile(r"(?<!\*)(\*{1,3})(?=[^\s*])(.*?[^\s*])\1(?!\*)")
# A dunder name (`__init__`, `__main__`) is a name, not strong emphasis: CommonMark would
# show "init", but a page, a heading or an extractor that writes one means the name.
_UNDERSCORE = re.compile(r"(?<![\w_])(_{1,3})(?![A-Za-z0-9]\w*__(?!\w))(?=[^\s_])(.*?[^\s_])\1"
                         r"(?![\w_])")
_STRIKE = re.compile(r"(?<!~)~~(?=[^\s~])(.*?[^\s~])~~(?!~)")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")


# A link reference definition line: "[label]: destination" (optionally a title after it).
LINK_DEFINITION = re.compile(r"^ {0,3}\[((?:[^\[\]\\]|\\.)+)\]:\s*\S+(\s+[\"'(].*)?\s*$")


def reference_label(label: str) -> str:
    """A link reference label as CommonMark matches it: case-folded, whitespace runs as one
    space, ends trimmed."""
    return " ".join(label.split()).casefold()


def reference_labels(text: str) -> frozenset[str]:
    """The labels (`reference_label`) of the link reference definitions of `text`, outside
    code fences: what a shortcut reference (`[Unreleased]`) links to on that page."""
    if "]:" not in text:
        return frozenset()
    return frozenset(reference_label(m.group(1)) for line, kind, _ in line_kinds(text.splitlines())
                     if kind == "text" and (m := LINK_DEFINITION.match(line)))


def _protect(text: str, kept: list[str]) -> str:
    """`text` with each code span (its content, delimiters dropped, CommonMark's one
    padding space trimmed) and each backslash-escaped character replaced by a placeholder
    whose value is appended to `kept`."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] in _ESCAPABLE:
            kept.append(text[i + 1])
            out.append(chr(_PLACEHOLDER + len(kept) - 1))
            i += 2
            continue
        if ch == "`":
            j = i
            while j < n and text[j] == "`":
                j += 1
            run = text[i:j]
            close = re.compile(f"(?<!`){run}(?!`)").search(text, j)
            if close is None:  # an unmatched run is literal backticks
                out.append(run)
                i = j
                continue
            code = text[j:close.start()].replace("\n", " ")
            if len(code) > 2 and code[0] == code[-1] == " " and code.strip():
                code = code[1:-1]
            kept.append(code)
            out.append(chr(_PLACEHOLDER + len(kept) - 1))
            i = close.end()
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def inline_text(text: str, references: Collection[str] = ()) -> str:
    """What a reader sees of one line of inline Markdown (a heading, a title, a name):
    a link or image as its text (`[crypto/tls](/pkg/crypto/tls/)` is "crypto/tls"), a
    reference link as its text, a shortcut reference (`[Unreleased]`) only when its label
    is one of `references` (labels as `reference_label` gives them; otherwise the page
    shows the brackets), an autolink as its address, inline HTML tags (`<code>`, `<a>`,
    `<em>`, ...) dropped with their text kept, emphasis and strikethrough markers dropped,
    backslash escapes and HTML entities (`&amp;`, `&#39;`) resolved, whitespace runs as
    one space. A code span is kept as code: its characters exactly as written (no markup
    inside it is read), its backtick delimiters dropped, as for every other marker (a
    heading path is plain text; "The `--force` flag" reads "The --force flag"). One
    departure from CommonMark: a dunder name (`__init__`) stays a name. Pure; never
    raises. Render source text once: the result is text, not Markdown (a code span
    `*args*` reads "*args*", which read again would be "args")."""
    if not text:
        return ""
    kept: list[str] = []
    out = _protect(text, kept)
    if "[" in out:
        out = _IMAGE.sub(r"\1", out)
        out = _LINK.sub(r"\1", out)
        out = _FULL_REFERENCE.sub(r"\1", out)
        if references:
            out = _SHORTCUT_REFERENCE.sub(
                lambda m: m.group(1) if reference_label(m.group(1)) in references
                else m.group(0), out)
    if "<" in out:
        out = _AUTOLINK.sub(r"\1", out)
        out = _INLINE_TAG.sub("", out)
    for _ in range(3):  # nested: ***x***, **_x_**
        before = out
        if "*" in out:
            out = _STAR.sub(r"\2", out)
        if "_" in out:
            out = _UNDERSCORE.sub(r"\2", out)
        if "~~" in out:
            out = _STRIKE.sub(r"\1", out)
        if out == before:
            break
    if "&" in out:
        out = _ENTITY.sub(lambda m: html.unescape(m.group(0)), out)
    out = " ".join(out.split())
    if kept:
        out = _SLOT.sub(lambda m: kept[ord(m.group(0)) - _PLACEHOLDER], out)
    return out.strip()
