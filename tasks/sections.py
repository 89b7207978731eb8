"""Split stage: pages (as Markdown) → sections by headings, chunked to the model's window.

Rules (the pure core, `split_markdown`):
- `##`, `###` and `####` start sections; `#` is the page title; `#####`+ stay in the text.
  A page that heads its sections with `#` as well (two or more after its title line, each
  standing alone between blank lines: an HTML page with an <h1> per section) reads every
  heading one level deeper (`#` starts a section, `###` and `####` both read as level 4).
- Fence-aware: a `#` inside a ``` or ~~~ block is code, not a heading (fences and
  headings are read by `packs.markdown`, CommonMark's rules).
- Text before the first section heading is the intro section, titled with the page title.
- Every heading yields a section, even one with no body, so the pack mirrors the page.
- Headings and titles are stored as the text a reader sees (`packs.markdown.inline_text`):
  "#### [crypto/tls](/pkg/crypto/tls/)" is "crypto/tls", emphasis markers and the backticks
  of code spans go (the code's characters stay exactly), HTML entities are resolved, and a
  shortcut reference ("## [1.2.0] - 2024-01-02") loses its brackets when the page defines
  it. A heading's link target is not lost: the fetch stage collects it with the page's
  links (LINKS_TO).
- A section's heading path starts at the page title: "Pods > Pod lifecycle > Restart policy",
  so the title is part of what the vectors and the full-text index see for every section,
  never twice, and without a navigation heading ("Table of contents"): `path_below`.
- A page with no title (no front matter title, no `#` heading, no HTML <title>) that opens
  with a heading (mdBook chapters open with `## Chapter name`) takes that heading as its
  title; only a page with neither falls back to the last segment of its URL.
- Template directives of doc generators (mdBook `{{#include}}`, Hugo shortcodes, MDX
  components such as `<Listing>`) are removed first (tasks/clean.py).
- A section longer than `max_words` is cut into chunks at paragraph boundaries, and a
  paragraph longer than that at sentence ends, never at a hard line wrap inside a sentence
  (a code block: at line ends); each chunk starts with the last blocks (or sentences) of
  the previous one, up to `overlap_words` words. A lead-in (a short paragraph ending in
  ":", or in "," as "In particular," does, before a list, table or code block) never ends a
  chunk: it opens the next one, with what it introduces (a bare connective of at most
  packs/text.py's CONNECTIVE_WORDS words, with the sentence before it), and with the
  listing's caption between them when there is one ('<span class="filename">Filename:
  src/main.rs</span>' in mdBook pages).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from packs import format as fmt
from packs import text as text_rules
from packs.markdown import LISTING_CAPTION, heading, iter_lines_with_fences, reference_labels
from tasks.clean import clean_markdown
from tasks.link_graph import canonical_url
from tasks.page_headings import (
    clean_heading,
    heading_level,
    page_title,
    path_below,
    sections_under_titles,
)
from tasks.section_pieces import (
    ITEM_LINE,
    split_big_block,
    word_count,
    wrapped_sentences,
)

SPLITTER_VERSION = "split-v18"  # v2: long lines cut at sentence ends; v3: leading heading as title
# v4: fences and headings by packs.markdown (indented fences, "## C#", "```ls```" is no fence)
# v5: template directives (mdBook includes, Hugo shortcodes, MDX components) removed first
# v6: a hard-wrapped paragraph over the window is cut between sentences, not at a wrap
# v7: a lead-in ("... such as:") opens the chunk of what it introduces, never ends one
# v8: headings and titles as a reader sees them (links, emphasis, entities rendered)
# v9 (issue 46): a long line is cut at packs/text.py's sentence ends (never after e.g.,
# i.e., an initial or inside a code span; after a closing quote)
# v10 (issue 47): a short paragraph ending in "," ("In particular,") leads its list as ":" does
# v11: a paragraph too long to carry whole leaves its last sentence, when that is the lead-in,
# to the list it introduces
# v12: a bare connective lead-in ("In particular,") takes the sentence before it along
# v13: a page that heads its sections with `#` (two or more after its title, each standing
# alone) reads each heading one level deeper: its `#` sections are sections, not body text
# v15: a listing's caption between a lead-in and its code block ('<span class="filename">')
# goes with them: the lead-in is still one, and neither ends a chunk (v14, a draft that
# carried every run of lead-ins, was never released); v16-17: paths by `path_below` ("Events >
# Error events", not "Events > Events > ..."; "npm-ci > Description", no "Table of contents")
# v18: a sentence hard-wrapped inside a quote ("> ... the\n> module's code in:") is one
HEADING_SEP = " > "

# The end of a lead-in: prose that introduces the list, table or code block after it.
# A lead-in ends in ":" ("such as:"), or in "," when it is the paragraph's end and a list,
# table or code block follows ("In particular,": the sentence goes on in the list).
_LEADIN = re.compile(r":[\"'”’)\]*_`]*\s*$")
_COMMA_LEADIN = re.compile(r",[\"'”’)\]*_`]*\s*$")  # prose only: a list's items end so


@dataclass(frozen=True)
class RawSection:
    title: str
    heading_path: tuple[str, ...]
    level: int  # 1 = intro, 2-4 = heading level
    body: str


@dataclass(frozen=True)
class Chunk:
    title: str
    heading_path: str
    level: int
    position: int  # order of the section in the page
    chunk: int  # order of the chunk within the section
    content: str
    is_code: bool


def sections_from_markdown(text: str, page_title: str) -> list[RawSection]:
    """Cut Markdown into raw sections by ##–#### headings (see module docstring);
    `page_title` is used as given (`page_title()` renders it)."""
    title = page_title.strip() or "Untitled"
    refs = reference_labels(text)
    stack: list[tuple[int, str]] = []  # (level, heading) for levels 2-4
    current_title, current_level = title, 1
    current_path: tuple[str, ...] = (title,)
    body: list[str] = []
    out: list[RawSection] = []
    seen_heading = False

    def flush() -> None:
        text_body = "\n".join(body).strip()
        if seen_heading or text_body:
            out.append(RawSection(current_title, current_path, current_level, text_body))

    lines = list(iter_lines_with_fences(text))
    heads = [None if in_code else heading(line) for line, in_code in lines]
    shift = sections_under_titles(lines, heads)
    for k, ((line, _), h) in enumerate(zip(lines, heads)):
        if h and not h.text:
            h = None  # an empty heading ("##") stays in the text
        if h and h.level == 1 and not body and not seen_heading:
            continue  # the page's own title line
        level = heading_level(lines, k, h, shift) if h else 0
        if h and h.level == 1 and level < 2:
            body.append(clean_heading(h.text, refs))
            continue
        if h and 2 <= level <= 4 + shift:
            flush()
            level = min(level, 4)
            name = clean_heading(h.text, refs) or "(untitled)"
            stack = [(lv, n) for lv, n in stack if lv < level] + [(level, name)]
            current_title, current_level = name, level
            current_path = (title, *path_below(title, [n for _, n in stack]))
            body = []
            seen_heading = True
            continue
        body.append(line)
    flush()
    return out


def _blocks(body: str) -> list[tuple[str, bool]]:
    """Blocks of a body: prose paragraphs (split on blank lines) and whole code blocks."""
    blocks: list[tuple[str, bool]] = []
    current: list[str] = []
    current_code = False
    for line, in_code in iter_lines_with_fences(body):
        if current and (in_code != current_code or (not in_code and not line.strip())):
            blocks.append(("\n".join(current), current_code))
            current = []
        if not in_code and not line.strip():
            continue
        current_code = in_code
        current.append(line)
    if current:
        blocks.append(("\n".join(current), current_code))
    return blocks


def chunk_text(body: str, max_words: int, overlap_words: int) -> list[str]:
    """Pack blocks (and the pieces of over-long blocks) into chunks of ≤ max_words, each
    starting with the previous chunk's trailing units up to overlap_words words. A lead-in
    (prose of at most max_words // 3 words ending with ":" or "," before a list, table or code
    block) never ends a chunk: it opens the next one, with what it introduces (cut so that
    its first piece fits beside the lead-in), a listing's caption between them
    (packs/markdown.py `LISTING_CAPTION`) with it. One before a paragraph introduced what
    the page lacks (a listing a template directive included) and stays where it is."""
    if max_words <= 0:
        raise ValueError("max_words must be positive")
    if word_count(body) <= max_words:
        return [body]
    blocks = _blocks(body)
    units: list[tuple[str, str, bool]] = []  # (text, separator before it, is a lead-in)
    for k, (block, is_code) in enumerate(blocks):
        lead = sum(word_count(u[0]) for u in _leading_tail(units))
        room = max_words - lead  # what a lead-in before it leaves of the window
        if word_count(block) > room:
            pieces = split_big_block(block, room, is_code)
            pieces = [(pieces[0][0], "\n\n"), *pieces[1:]]
        else:
            pieces = [(block, "\n\n")]
        last = pieces[-1][0]  # only a block's end introduces the next block
        after = next((j for j in range(k + 1, len(blocks)) if not _is_caption(*blocks[j])),
                     len(blocks))  # the next block that is no listing's caption
        introduces = after < len(blocks) and (blocks[after][1]
                                              or ITEM_LINE.match(blocks[after][0]) is not None)
        # prose that ends as a lead-in does (or a caption), before what it would introduce
        leading = introduces and not is_code and bool(
            _LEADIN.search(last) or (_COMMA_LEADIN.search(last) and not ITEM_LINE.match(last))
            or _is_caption(block, is_code))
        if leading and word_count(last) > max_words // 3:
            # A long paragraph whose last sentence is the lead-in ("... the indicated
            # effects on the pod. In particular,"): that sentence goes with the list, and
            # the one before it too when the lead-in is a bare connective.
            said = wrapped_sentences(last)
            tail = said[-1][0] if len(said) > 1 else ""
            if len(said) > 2 and word_count(tail) <= text_rules.CONNECTIVE_WORDS:
                # A bare connective ("In particular,") says nothing alone: the sentence
                # before it goes along when both fit.
                two = said[-2][0] + said[-1][1] + tail
                if last.endswith(two) and word_count(two) <= max_words // 3:
                    tail = two
            if tail and last.endswith(tail) and word_count(tail) <= max_words // 3:
                cut = len(last) - len(tail)
                head = last[:cut].rstrip()
                pieces = [*pieces[:-1], (head, pieces[-1][1]),
                          (tail, last[len(head):cut] or " ")]
                last = tail
        leads = leading and word_count(last) <= max_words // 3
        units += [(text, sep, False) for text, sep in pieces[:-1]]
        units.append((last, pieces[-1][1], leads))
    chunks: list[list[tuple[str, str, bool]]] = []
    current: list[tuple[str, str, bool]] = []
    count = head = 0  # head: units of `current` that repeat the end of the last chunk
    for unit in units:
        n = word_count(unit[0])
        if current and count + n > max_words:
            carried = _leading_tail(current)
            del current[len(current) - len(carried):]
            lead = sum(word_count(u[0]) for u in carried)
            overlap: list[tuple[str, str, bool]] = []
            kept = 0
            if len(current) > head:  # else the chunk would only repeat the last one's end
                chunks.append(current)
                for prev in reversed(current):
                    m = word_count(prev[0])
                    if kept + m > overlap_words or kept + m + lead + n > max_words:
                        break
                    overlap.insert(0, prev)
                    kept += m
            current, count, head = overlap + carried, kept + lead, len(overlap)
        current.append(unit)
        count += n
    if current:
        chunks.append(current)
    return ["".join(text if i == 0 else sep + text for i, (text, sep, _) in enumerate(c))
            for c in chunks]


def _is_caption(block: str, is_code: bool) -> bool:
    return not is_code and LISTING_CAPTION.match(block.strip()) is not None


def _leading_tail(units: list[tuple[str, str, bool]]) -> list[tuple[str, str, bool]]:
    """The lead-in that ends `units` (with the caption after it, or the caption alone),
    which goes with what comes next; empty when `units` ends otherwise."""
    if not units or not units[-1][2]:
        return []
    if len(units) > 1 and units[-2][2] and _is_caption(units[-1][0], False):
        return units[-2:]
    return units[-1:]


def code_fraction(text: str) -> float:
    """Share of words inside code fences."""
    total = code = 0
    for line, in_code in iter_lines_with_fences(text):
        n = word_count(line)
        total += n
        code += n if in_code else 0
    return code / total if total else 0.0


def split_markdown(
    text: str, page_title: str, max_words: int = 300, overlap_words: int = 40
) -> list[Chunk]:
    """The pure core: one page's Markdown → ordered chunks (see module docstring)."""
    chunks: list[Chunk] = []
    for position, sec in enumerate(sections_from_markdown(text, page_title)):
        path = HEADING_SEP.join(sec.heading_path)
        body = sec.body or sec.title
        for i, part in enumerate(chunk_text(body, max_words, overlap_words)):
            chunks.append(
                Chunk(sec.title, path, sec.level, position, i, part, code_fraction(part) > 0.5)
            )
    return chunks


def words_for_window(max_seq_length: int) -> int:
    """Words that fit a model window of max_seq_length tokens, leaving room for the path.

    English prose runs about 1.3 wordpiece tokens a word and code more, so 0.55 of the
    window in words keeps nearly every chunk untruncated.
    """
    return max(64, int(max_seq_length * 0.55))


SECTION_SCHEMA = {
    "id": pl.Utf8, "article_id": pl.Utf8, "url": pl.Utf8, "page_title": pl.Utf8,
    "title": pl.Utf8, "heading_path": pl.Utf8, "level": pl.Int64, "position": pl.Int64,
    "chunk": pl.Int64, "content": pl.Utf8, "content_hash": pl.Utf8, "word_count": pl.Int64,
    "is_code": pl.Boolean,
}


def split_pages(pages: pl.DataFrame, max_words: int, overlap_words: int) -> pl.DataFrame:
    """Pages (url, title, text) → the sections table (columns SECTION_SCHEMA)."""
    rows = []
    for page in pages.iter_rows(named=True):
        title, text = page_title(page["title"], page["url"], clean_markdown(page["text"] or ""))
        art = fmt.article_id(canonical_url(page["url"]))
        for c in split_markdown(text, title, max_words, overlap_words):
            chash = fmt.content_hash(c.heading_path + "\n" + c.content)
            rows.append({
                "id": fmt.section_id(page["url"], c.heading_path, chash, c.chunk),
                "article_id": art, "url": page["url"], "page_title": title,
                "title": c.title, "heading_path": c.heading_path, "level": c.level,
                "position": c.position, "chunk": c.chunk, "content": c.content,
                "content_hash": chash, "word_count": word_count(c.content),
                "is_code": c.is_code,
            })
    df = pl.DataFrame(rows, schema=SECTION_SCHEMA)
    # Identical sections on one page (e.g. two empty "Example" headings) would share an id.
    return df.unique(subset="id", keep="first", maintain_order=True)
