"""A page's headings as the split stage reads them (tasks/sections.py): a heading's text as
a reader sees it, the page's title (its own, else its leading heading, else its URL's last
segment), whether the page heads its sections with `#` as it does its title (an HTML
page with an <h1> per section), so that every heading reads one level deeper, and what of
its headings a section's heading path names (`path_below`).
"""

from __future__ import annotations

import re

from packs.markdown import Heading, heading, inline_text, iter_lines_with_fences, reference_labels


def clean_heading(text: str, references: frozenset[str] = frozenset()) -> str:
    """A heading's text as a reader sees it (`references`: the page's link labels)."""
    text = re.sub(r"\s*\{#[^}]*\}\s*$", "", text)  # Hugo/Pandoc heading anchors
    return inline_text(text, references)


def isolated(lines: list[tuple[str, bool]], k: int) -> bool:
    """Whether line k stands alone, a blank line (or the text's end) on each side, and
    unindented: a heading, not one of a run of `#` comment lines a fence did not hold."""
    return (not lines[k][0][:1].isspace()
            and all(not (0 <= j < len(lines)) or not lines[j][0].strip() for j in (k - 1, k + 1)))


def sections_under_titles(lines: list[tuple[str, bool]], heads: list[Heading | None]) -> int:
    """1 when the page heads its sections with `#` as it does its title (an HTML page with
    an <h1> per section: Google's SRE book), so each level reads one deeper; else 0. Two
    such headings after the title line, each standing alone, are needed. `heads`: each
    line's heading (None outside one, or in code)."""
    titles, started = 0, False
    for k, ((line, _), h) in enumerate(zip(lines, heads)):
        if h and h.level == 1 and h.text:
            titles += started and isolated(lines, k)
        started = started or bool(line.strip())
    return int(titles >= 2)


def heading_level(lines: list[tuple[str, bool]], k: int, h: Heading, shift: int) -> int:
    """The level line k's heading `h` is read at: one deeper on a page that heads its
    sections with `#` (`shift` 1); a `#` line that does not stand alone is no section (0)."""
    return h.level + shift if h.level > 1 or isolated(lines, k) else 0


def leading_heading(text: str) -> tuple[str, str] | None:
    """(heading as a reader sees it, the text after it) when the first non-blank line
    outside code fences is a heading of level 1-4 with some text; else None."""
    lines = text.splitlines()
    for i, (line, in_code) in enumerate(iter_lines_with_fences(text)):
        if not line.strip():
            continue
        h = None if in_code else heading(line)
        if h and h.level <= 4 and (shown := clean_heading(h.text, reference_labels(text))):
            return shown, "\n".join(lines[i + 1:])
        return None
    return None


def page_title(title: str | None, url: str, text: str) -> tuple[str, str]:
    """(title, text) of a page: its own title as a reader sees it (a front matter or `#`
    title may be Markdown: "`kubectl` cheat sheet"); else its leading heading, taken out of
    the text (it is the title line); else the last segment of its URL."""
    if title and (shown := inline_text(title, reference_labels(text))):
        return shown, text
    lead = leading_heading(text)
    if lead is not None:
        return lead
    return url.rstrip("/").rsplit("/", 1)[-1], text


# A heading that names the page's navigation, not a topic (npm's pages put their content
# under "## Table of contents").
_NAVIGATION_HEADING = re.compile(r"(table of )?contents|on this page|in this (article|page)",
                                 re.I)
_SECTION_NUMBER = re.compile(r"^(\d+(\.\d+)*\.?|[A-Z]\.)\s+")


def path_below(title: str, names: list[str]) -> list[str]:
    """The heading path's names after the title: a top heading that repeats the title (its
    section number aside: "1 Measuring Program Resource Use") is not said twice, and a
    navigation heading ("Table of contents") heads only its own section."""
    def plain(name: str) -> str:
        return _SECTION_NUMBER.sub("", name).casefold()
    return [n for i, n in enumerate(names)
            if not (i == 0 and plain(n) == plain(title))
            and not (i < len(names) - 1 and _NAVIGATION_HEADING.fullmatch(n.strip()))]
