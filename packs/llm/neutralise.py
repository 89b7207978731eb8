"""One neutraliser for the delimiters of every prompt (the build's extraction prompt and
the query side's answer prompt).

A prompt wraps untrusted text (page text, a question, few-shot examples) in tags of its
own, such as `<section>` or `<pack_context_3f9c…>`. Text that holds something a model
could read as one of those tags could end its block early and speak as the prompt.
`neutralise(text, names)` finds every tag-shaped string whose name is one of `names` and
escapes its opening bracket as `&lt;`. Tag-shaped means:

- an opening bracket: ASCII `<`, fullwidth `＜` (U+FF1C), small `﹤` (U+FE64), or a
  look-alike (`〈` U+3008 and U+2329, `⟨` U+27E8, `‹` U+2039, `˂` U+02C2, `ᐸ` U+1438);
- then, in any mix, white space (line breaks too), invisible format characters (zero-width
  space and joiners, soft hyphen, word joiner, BOM) and at most one slash (`/`, `\\`,
  fullwidth `／` `＼`, `∕`, `⁄`, `⧸`, `﹨`);
- then a name of ours in any case, fullwidth letters included (compared after NFKC and
  case folding; invisible characters inside it are skipped), ending where anything but a
  letter follows (a bracket ends it too): `</section>`, `< /section >`,
  `＜/ＳＥＣＴＩＯＮ＞`, `</example_1>`, `<pack_context_3f9c>`, `<section>` with a
  zero-width space inside; not `<sections>` or `<textarea>`.

Only the bracket changes, so the text reads the same to a model, and nothing but a tag of
ours is touched (page text is full of `<div>` and `Vec<T>`, and citations quote it).
Names are given by each prompt (EXTRACTION_TAGS, ANSWER_TAGS). The result never holds a
tag-shaped string of those names, and neutralising it again changes nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

OPENERS = "<\uff1c\ufe64\u3008\u2329\u27e8\u2039\u02c2\u1438"
SLASHES = "/\\\uff0f\uff3c\u2215\u2044\u29f8\ufe68"
# What a tag of ours is called in each prompt (a name also covers name_1, name-2, ...).
EXTRACTION_TAGS = ("section", "page_title", "heading_path", "text", "example", "examples")
ANSWER_TAGS = ("pack_context", "question", "example", "examples")

_OPENER = re.compile(f"[{re.escape(OPENERS)}]")
_OPENER_SET = frozenset(unicodedata.normalize("NFKC", c).casefold() for c in OPENERS)
_SLASH = frozenset(unicodedata.normalize("NFKC", c) for c in SLASHES) | set(SLASHES)
# How far past a bracket a tag's name can start and run (spaces, a slash, the name).
WINDOW = 96


def _folded(text: str) -> str:
    """NFKC, case-folded, without invisible format characters (category Cf)."""
    norm = unicodedata.normalize("NFKC", text).casefold()
    return "".join(c for c in norm if unicodedata.category(c) != "Cf")


def _names_tag(after: str, names: tuple[str, ...]) -> bool:
    """Whether `after` (what follows a bracket) starts with spaces, at most one slash and a
    name of ours that no letter continues."""
    rest = _folded(after[:WINDOW])
    i = 0
    while i < len(rest) and rest[i].isspace():
        i += 1
    if i < len(rest) and rest[i] in _SLASH:
        i += 1
        while i < len(rest) and rest[i].isspace():
            i += 1
    for name in names:
        end = i + len(name)
        # A bracket ends a name even when it is a letter (ᐸ is): escaping it must not
        # turn the name before it into a tag.
        if rest.startswith(name, i) and (end >= len(rest) or not rest[end].isalpha()
                                         or rest[end] in _OPENER_SET):
            return True
    return False


def neutralise(text: str, names: Iterable[str]) -> str:
    """`text` with the opening bracket of every tag-shaped string naming one of `names`
    replaced by `&lt;` (see the module doc). Pure; never raises for any str."""
    folded_names = tuple(sorted({_folded(n) for n in names}, key=len, reverse=True))
    out: list[str] = []
    last = 0
    for m in _OPENER.finditer(text):
        if _names_tag(text[m.end():m.end() + WINDOW], folded_names):
            out.append(text[last:m.start()])
            out.append("&lt;")
            last = m.end()
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def tag_shaped(text: str, names: Iterable[str]) -> list[int]:
    """The positions of the brackets that open a tag-shaped string of `names` in `text`
    (what `neutralise` escapes; empty for its output)."""
    folded_names = tuple(_folded(n) for n in names)
    return [m.start() for m in _OPENER.finditer(text)
            if _names_tag(text[m.end():m.end() + WINDOW], folded_names)]
