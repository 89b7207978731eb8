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

Everything here is pure and works line by line; nothing raises on odd text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
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
