"""Entity names as a reader sees them: Markdown and HTML markup around a name resolved.

Both extractors (Claude and the offline heuristics) may hand over a name the way the page
source writes it: a link (`[crypto/tls](/pkg/crypto/tls/)`), emphasis (`**Pod**`,
`_main.rs_`), an HTML entity (`&lt;T&gt;`), an inline tag (`<code>Vec</code>`). `rendered`
turns such a name into the text a reader sees, so that the linked name and the plain name
resolve to one entity (tasks/extract/entities.py calls it before anything else) and no entity
is displayed with its markup. Pure; never raises.
"""

from __future__ import annotations

import functools
import html
import re

_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\((?:[^()]|\([^()]*\))*\)")
_REF_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
# Inline HTML tags by name: `<T>` in `Vec<T>` is a type parameter, not a tag.
_TAG = re.compile(r"</?(?:a|abbr|b|br|code|del|em|i|img|ins|kbd|mark|p|s|samp|small|span|"
                  r"strong|sub|sup|tt|u|var)(?:\s[^<>]*)?/?>", re.I)
# Emphasis wrapping a run of text: **x**, __x__, *x*, _x_ (not inside a word: snake_case
# and glob stars keep their characters).
_STRONG = re.compile(r"(?<![\w*])\*\*(?=\S)(.+?)(?<=\S)\*\*(?![\w*])|"
                     r"(?<![\w_])__(?![a-z0-9_]+__)(?=\S)(.+?)(?<=\S)__(?![\w_])")
_EMPH = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*]+?)(?<=[^\s*])\*(?![\w*])|"
                   r"(?<![\w_])_(?=[^\s_])([^_]+?)(?<=[^\s_])_(?![\w_])")
_SPACE = re.compile(r"\s+")
_EXTENSION_MARK = re.compile(r"\.[A-Za-z0-9]{1,5}_$")


def _group(match: re.Match[str]) -> str:
    return next((g for g in match.groups() if g is not None), "")


@functools.lru_cache(maxsize=65536)  # pure, and names repeat across a pack's sections
def rendered(name: str) -> str:
    """`name` without its Markdown or HTML markup: link and image syntax reduced to the
    link text, emphasis markers and inline tags removed, HTML entities resolved, a code
    span around the whole name unwrapped, whitespace runs as one space."""
    text = _IMAGE.sub(lambda m: m.group(1), name)
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _REF_LINK.sub(lambda m: m.group(1), text)
    text = _TAG.sub("", text)
    for _ in range(2):  # nested: **_x_**
        text = _STRONG.sub(_group, text)
        text = _EMPH.sub(_group, text)
    text = html.unescape(text)
    text = _SPACE.sub(" ", text).strip()
    if len(text) > 2 and text.startswith("`") and text.endswith("`") and "`" not in text[1:-1]:
        text = text[1:-1].strip()
    # A name cut out of emphasis leaves a stray marker at one end ("garden.rs_").
    if text.endswith("_") and not text.startswith("_") and (
            "_" not in text[:-1] or _EXTENSION_MARK.search(text)):
        text = text[:-1]
    return text
