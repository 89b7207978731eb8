"""Template directives of documentation generators, removed from a page's Markdown before
it is split (pure; called by tasks/sections.py).

Sources written for a site generator keep the generator's directives, which no reader of
the published page sees, and which otherwise end up in section text, vectors and answers:

- mdBook: `{{#include path}}`, `{{#rustdoc_include path:anchor}}`, `{{#playground ...}}`,
  `{{#title ...}}` and `{{#template ...}}`. They pull in files that are not part of the page
  (the code listings of the Rust book), so they go; a code fence left empty by that goes
  too (an empty block is noise in the text and in answers).
- Hugo shortcodes `{{< name ... >}}`, `{{% name ... %}}` and their closing tags: the fetch
  stage already removes them from Markdown pages (`tasks.fetch.markdown_source.strip_shortcodes`,
  which keeps a `text="..."` parameter and the text between paired tags); done again here
  for text that reached the splitter another way. Idempotent.
- MDX / JSX components on lines of their own: `<Listing number="4-4" caption="...">`,
  `</Listing>`, `<Tabs>`, `<TabItem value="x">`, `<Callout type="warning" />`. The tag
  goes, the text between an opening and a closing tag stays, and a `caption`, `title` or
  `label` attribute becomes a line of text ("Listing 4-4: Transferring ownership of return
  values"), since the page shows it and the prose refers to it. A capitalised tag inside a
  line of prose is left alone (`Vec<T>`, `Box<dyn Error>` are types, not components).

Code fences are read as packs.markdown reads them; nothing inside a fence is touched but
mdBook includes (which only appear there, standing for the listing's code).
"""

from __future__ import annotations

import re

from packs.markdown import iter_lines_with_fences, opening_fence
from tasks.fetch.markdown_source import strip_shortcodes

CLEAN_VERSION = "clean-v1"

_MDBOOK = re.compile(r"\{\{#(?:include|rustdoc_include|playground|title|template)\b[^}]*\}\}")
# A line that is one JSX component tag: <Name ...>, </Name>, <Name ... />, <Name.Sub>.
_JSX_LINE = re.compile(
    r"""^\s*<(/?)([A-Z][\w.]*)((?:\s+[\w-]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|\{[^{}]*\}|[^\s>"']+))?)*)"""
    r"\s*(/?)>\s*$")
_ATTR = re.compile(r"""\b([\w-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|\{["'`]([^"'`]*)["'`]\})""")
_SHOWN_ATTRS = ("caption", "title", "label")


def _jsx_text(name: str, attrs: str) -> str | None:
    """The text a component tag shows on the page: its caption (or title or label), with
    a listing's number; None when it shows none."""
    values = {m.group(1).lower(): next(g for g in m.groups()[1:] if g is not None)
              for m in _ATTR.finditer(attrs)}
    shown = next((values[a].strip() for a in _SHOWN_ATTRS if values.get(a, "").strip()), None)
    if shown is None:
        return None
    number = values.get("number", "").strip()
    return f"{name} {number}: {shown}" if number else shown


def _drop_empty_fences(lines: list[str]) -> list[str]:
    """`lines` without code blocks whose body is blank (after the includes went)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        fence = opening_fence(lines[i])
        if fence is None:
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not fence.closed_by(lines[j]):
            j += 1
        block = lines[i:j + 1]
        if any(line.strip() for line in lines[i + 1:j]):
            out.extend(block)
        i = j + 1
    return out


def clean_markdown(text: str) -> str:
    """`text` without the template directives of the module docstring; text that has none
    comes back unchanged."""
    if "{{" not in text and "<" not in text:
        return text
    text = strip_shortcodes(text) if ("{{<" in text or "{{%" in text) else text
    lines: list[str] = []
    changed = False
    for line, in_code in iter_lines_with_fences(text):
        if "{{#" in line:
            stripped = _MDBOOK.sub("", line)
            if stripped != line:
                changed = True
                if not stripped.strip():
                    continue
                line = stripped
        if not in_code and "<" in line:
            m = _JSX_LINE.match(line)
            if m:
                changed = True
                shown = None if m.group(1) else _jsx_text(m.group(2), m.group(3))
                if shown:
                    lines.extend([shown, ""])
                continue
        lines.append(line)
    if not changed:
        return text
    cleaned = "\n".join(_drop_empty_fences(lines))
    return re.sub(r"\n{3,}", "\n\n", cleaned)
