"""Entity names as a reader sees them: Markdown and HTML markup around a name resolved.

Both extractors (Claude and the offline heuristics) may hand over a name the way the page
source writes it: a link (`[crypto/tls](/pkg/crypto/tls/)`), emphasis (`**Pod**`,
`_main.rs_`), an HTML entity (`&lt;T&gt;`), an inline tag (`<code>Vec</code>`). `rendered`
turns such a name into the text a reader sees, with the splitter's rendering of headings
(packs.markdown.inline_text), so that the linked name and the plain name resolve to one
entity (tasks/extract/entities.py calls it before anything else) and no entity is displayed
with its markup. Pure; never raises.
"""

from __future__ import annotations

import functools
import re

from packs.markdown import inline_text

_EXTENSION_MARK = re.compile(r"\.[A-Za-z0-9]{1,5}_$")


@functools.lru_cache(maxsize=65536)  # pure, and names repeat across a pack's sections
def rendered(name: str) -> str:
    """`name` as a reader sees it: `packs.markdown.inline_text`, the one rendering of
    headings, titles and names (link and image syntax reduced to the link text, emphasis
    markers and inline tags removed, HTML entities and escapes resolved, code spans' text
    kept as written without their backticks, whitespace runs as one space), then a stray
    emphasis marker an extractor cut a name out with dropped ("garden.rs_")."""
    text = inline_text(name)
    if text.endswith("_") and not text.startswith("_") and (
            "_" not in text[:-1] or _EXTENSION_MARK.search(text)):
        text = text[:-1]
    return text
