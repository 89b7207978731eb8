"""The items of a whole-pack answer and where they come from, without the database
(packs/retrieval/whole_pack.py queries the graph and puts them together):

- `Sec` (a section of the question's region, weighted) and `Item` (a name with the span of
  its section that quotes it);
- `spans`: the quotable spans of a section (the offline answer's units and the lines of
  its code blocks), `quote_span`: the shortest that names an item (one that does not end
  with ":" first), `quote_of`: the first of an item's sections whose quote does not;
  `clause`: the clause of a quote that names the item, `shown_span`: what the list shows
  of the quote its items share;
- `page_items`: for an across question, each region section's best passage holding two or
  more of the question's terms;
- `table_heads`: the first cells of table rows under a first header that names what the
  question asks for; `code_span_items`: the code spans of the region no entity names (the
  commands its code blocks run: whole_pack_commands.py);
- `set_aside`: what a list question sets aside ("besides plain kubectl commands");
  `names_subject`: whether a name is the question's own subject, no item of it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache

from packs import text as text_rules
from packs.citations import no_marker
from packs.markdown import fence_spans
from packs.retrieval.segment import segment
from packs.retrieval.units import heading_only

MAX_SPAN = 40  # characters of a code span read as an item's name
HEAD_WEIGHT = 3.0  # an item named with the noun asked for ("init containers" for "containers")
MAX_HEADER_WORDS = 6  # a table header cell is a label, not a sentence
CLAUSE_WORDS = 20  # a listed item's quote is at most this many words (`clause`)


@dataclass
class Sec:
    article_id: str
    id: str
    url: str
    title: str
    heading_path: str
    content: str
    position: int
    weight: float = 0.0


@dataclass
class Item:
    name: str
    section: Sec
    start: int
    end: int
    score: float
    extra: list[str] = field(default_factory=list)
    etype: str = ""  # an entity type, or "code", "command", "row", "typed", "heading"
    pages: int = 1  # the pages of the region that name it
    typed: bool = False  # a page names it beside the noun asked for (whole_pack_beyond.py)

    def bold(self) -> str:
        """Its name as a list shows it: bold, and a code span where its section writes it
        as one ("**`Coin`**": as the page shows it)."""
        code = f"`{self.name}`"
        if "`" not in self.name and no_marker(self.name) == self.name and (
                code in self.section.content):
            return f"**{code}**"
        return bold(self.name)


def bold(name: str) -> str:
    """An item's name as a list shows it: bold, no bracket of it read as a citation."""
    return f"**{no_marker(name)}**"


def sec_of(row: list) -> Sec:
    art, sid, url, title, heading, content, pos = row
    return Sec(art or "", sid, url or "", title or "", heading or "", content or "",
               int(pos or 0))


def spans(sec: Sec) -> list[tuple[int, int]]:
    """Quotable spans of a section: the offline answer's units (packs/retrieval/units.py:
    sentences of whole paragraphs, list items, table rows, one-line code), not lead-ins,
    and the lines of its code blocks (`source <(kubectl completion bash)`); none when its
    text is only its heading (`units.heading_only`)."""
    return list(_spans(sec.content, sec.heading_path))


@lru_cache(maxsize=2048)  # a list question quotes each of its items from the same sections
def _spans(content: str, heading_path: str) -> tuple[tuple[int, int], ...]:
    if heading_only(content, heading_path):
        return ()
    out = [(u.start, u.end) for u in segment(content)
           if u.kind in ("sentence", "item", "row", "paragraph")
           or (u.kind == "code" and "\n" not in u.display.strip())]
    for start, end in code_lines(content):
        out.append((start, end))
    return tuple(out)


@lru_cache(maxsize=2048)  # the region's sections are read for spans, commands and programs
def code_lines(content: str) -> tuple[tuple[int, int], ...]:
    """(start, end) of each non-blank line, 2 to 120 characters, inside a code block."""
    out = []
    for a, b in fence_spans(content):
        for m in re.finditer(r"[^\n]+", content[a:b]):
            line = m.group(0).strip()
            if 2 <= len(line) <= 120 and not line.startswith(("```", "~~~")):
                at = a + m.start() + m.group(0).find(line)
                out.append((at, at + len(line)))
    return tuple(out)


# A span that ends by introducing something ("... will fail:"): quoted alone, it shows a
# lead-in without the code or list it introduces.
_INTRODUCES = re.compile(r":[*_`\"')\]]*\s*$")


def quote_span(sec: Sec, name: str) -> tuple[int, int] | None:
    """The span of `sec` an item named `name` is quoted by: the shortest of 3 to 80 words
    that names it, one that does not end with ":" before one that does."""
    low = name.lower()
    best, key = None, None
    for start, end in spans(sec):
        text = sec.content[start:end]
        if low in text.lower() and 3 <= len(text.split()) <= 80:
            k = (_INTRODUCES.search(text) is not None, end - start)
            if key is None or k < key:
                best, key = (start, end), k
    return best


def quote_of(secs: list[Sec], name: str) -> tuple[Sec, tuple[int, int] | None]:
    """The first of `secs` (best first) whose quote of `name` (`quote_span`) does not end
    with ":", else the first that quotes it at all, with that quote; (secs[0], None) when
    none names it."""
    found: tuple[Sec, tuple[int, int] | None] = (secs[0], None)
    for sec in secs:
        span = quote_span(sec, name)
        if span is None:
            continue
        if _INTRODUCES.search(sec.content[span[0]:span[1]]) is None:
            return sec, span
        if found[1] is None:
            found = (sec, span)
    return found


# Where a quote may be cut into clauses: after a comma, semicolon, colon or closing
# parenthesis, around a dash, before an opening parenthesis.
_CLAUSE_CUT = re.compile(r"[,;:)]\s+|\s+[—–-]\s+|\s(?=\()")


def clause(text: str, name: str, limit: int = CLAUSE_WORDS) -> tuple[int, int]:
    """(start, end) in `text` (an item's quote) of what the list shows of it: the whole
    quote when it has at most `limit` words; else the longest run of its clauses that
    names the item (`name`, as `quote_span` finds it) in at most `limit` words, else the
    whole quote up to half as long again, else `limit` words around the name. A list of
    twenty items quoted whole reads as twenty paragraphs; the clause that names each is
    its evidence (on the whole-pack dev questions: 57 to 115 fewer words a list answer,
    item recall within 0.01 of the whole quotes). No cut splits a `code span`, bold text or
    a link."""
    if len(text.split()) <= limit:
        return 0, len(text)
    at = text.lower().find(name.lower())
    if at < 0:
        return 0, len(text)
    cuts = [0, *(m.end() for m in _CLAUSE_CUT.finditer(text)
                 if text.count("`", 0, m.start()) % 2 == 0), len(text)]
    best: tuple[int, int, int] | None = None
    for i, a in enumerate(cuts):
        if a > at:
            break
        for b in cuts[i + 1:]:
            n = len(text[a:b].split())
            if n > limit:
                break
            if b >= at + len(name) and n >= 3 and (best is None or n > best[2]):
                best = (a, b, n)
    if best is None and len(text.split()) <= limit * 3 // 2:
        return 0, len(text)  # no clause to show alone, and the quote a sentence to read
    if best is None:
        words = list(re.finditer(r"\S+", text))
        k = next(i for i, m in enumerate(words) if m.end() > at)
        lo = max(0, min(k - limit // 3, len(words) - limit))
        a, b = words[lo].start(), words[min(len(words), lo + limit) - 1].end()
    else:
        a, b = best[0], best[1]
    piece = text[a:b]
    if piece.count("`") % 2 or piece.count("**") % 2 or piece.count("[") != piece.count("]"):
        return 0, len(text)  # the cut splits a code span, bold or a link: the quote whole
    return a, a + len(piece.rstrip(" ,;:(—–-"))


def shown_span(group: list[Item]) -> tuple[int, int]:
    """(start, end) in its section of what a bullet shows of the quote its items share:
    the clause that names them (`clause`) when it names every one, else the whole quote;
    a table row and a line of code whole."""
    first = group[0]
    quote = first.section.content[first.start:first.end]
    if quote.lstrip().startswith("|") or any(
            x <= first.start and first.end <= y for x, y in fence_spans(first.section.content)):
        return first.start, first.end
    a, b = clause(quote, first.name)
    if any(item.name.lower() not in quote[a:b].lower() for item in group):
        return first.start, first.end
    return first.start + a, first.start + b


def page_items(by_id: dict[str, Sec], question: str, limit: int = 12,
               per_page: int = 3, scaffold: set[str] = frozenset(),
               idf: Callable[[str], float] | None = None) -> list[Item]:
    """For an across question: the region's sections whose best passage (sentence, list
    item, table row, code line) holds at least two of the question's terms, less the
    `scaffold` (the words that make it an across question: "what changed ... from release
    to release" asks about its subject, not about releases), each an item named by its
    heading with that passage, best first, at most `per_page` of a page. A term found
    counts its `idf` in the pack over the question's rarest term's (1 each without `idf`):
    "the u8 type ... from integers to the web server" is about `u8` more than servers."""
    asked = set(text_rules.terms(question)) - scaffold
    rarity = {t: idf(t) if idf else 1.0 for t in asked}
    rarest = max(rarity.values(), default=0.0)
    weight = {t: v / rarest if rarest > 0 else 1.0 for t, v in rarity.items()}
    best: list[tuple[float, Sec, tuple[int, int]]] = []
    for sec in by_id.values():
        top = None
        for start, end in spans(sec):
            found = asked & set(text_rules.terms(sec.content[start:end]))
            heading = len(asked & set(text_rules.terms(sec.heading_path.split(" > ")[-1])))
            hits = sum(weight[t] for t in found)
            score = hits + 0.5 * heading + sec.weight
            if len(found) >= 2 and (top is None or score > top[0]):
                top = (score, sec, (start, end))
        if top:
            best.append(top)
    best.sort(key=lambda b: (-b[0], b[1].url, b[1].position))
    out: list[Item] = []
    pages: dict[str, int] = defaultdict(int)
    for score, sec, (a, b) in best:
        if len(out) >= limit or pages[sec.article_id] >= per_page:
            continue
        pages[sec.article_id] += 1
        out.append(Item(sec.heading_path.split(" > ")[-1] or sec.title, sec, a, b, score,
                        etype="page"))
    return out


def table_heads(by_id: dict[str, Sec], question: str, head: str | None
                ) -> list[tuple[float, str, Sec]]:
    """(weight, name, section) of the first cells of table rows whose first column's
    header names what the question asks for ("Resource Name" for "which resources can a
    ResourceQuota cap"): a table of the region lists its items, though the graph may hold
    no entity for a cell (`services.nodeports`)."""
    asked = set(text_rules.terms(question)) | ({head} if head else set())
    out = []
    for sec in by_id.values():
        if "|" not in sec.content:
            continue  # no table (segment's rows are pipe-table lines)
        for u in segment(sec.content):
            if u.kind != "row" or ": " not in u.display:
                continue
            header, _, rest = u.display.partition(": ")
            if ";" in header or len(header.split()) > MAX_HEADER_WORDS:
                continue  # no header: a row of a chunk its table's header is not in
            cell = rest.split("; ")[0].strip().strip("`*_ ")
            if (cell and len(cell) <= 60 and asked & set(text_rules.terms(header))
                    and cell.lower() in sec.content[u.start:u.end].lower()):
                out.append((sec.weight, cell, sec))
    return out


def scored_names(at: dict[str, list[Sec]], asked: list[str], head: str | None,
            idf: Callable[[str], float]) -> list[tuple[float, str, list[Sec]]]:
    """(score, name, its sections best first) of each name of `at` (name → the sections
    that write it) but the question's own subject: the weights of its sections times its
    rarity (the IDF of its rarest word), times HEAD_WEIGHT when it names what is asked."""
    out = []
    for name, secs in at.items():
        named = text_rules.terms(name)
        if not named or names_subject(named, asked):
            continue
        score = sum(s.weight for s in secs) * max(idf(w) for w in named)
        if head and head in named:
            score *= HEAD_WEIGHT
        out.append((score, name, sorted(secs, key=lambda s: -s.weight)))
    return out


def code_span_items(by_id: dict[str, Sec], known: set[str], asked: list[str],
                    head: str | None, idf: Callable[[str], float]
                    ) -> list[tuple[float, str, list[Sec]]]:
    """(score, name, its sections best first) of the `code spans` of the region's sections
    that no item of the graph names (`known`, lower-cased): the offline graph holds no
    entity for many a `#[should_panic]` or `Sub`. A span scores as an entity does: the
    weights of its sections times its rarity (the IDF of its rarest word), times HEAD_WEIGHT
    when it names what is asked (`head`); the question's own subject is no item."""
    at: dict[str, list[Sec]] = defaultdict(list)
    for sec in by_id.values():
        for span in dict.fromkeys(text_rules.code_spans(sec.content)):
            if 2 <= len(span) <= MAX_SPAN and span.lower() not in known:
                at[span].append(sec)
    return scored_names(at, asked, head, idf)


# A key a configuration file in a code block sets: YAML ("storageClassName: manual",
# "- capacity:"), JSON ('"serving": true') or TOML ("SystemdCgroup = true").
_KEY_LINE = re.compile(r"""^\s*(?:-\s+)?(?:"([A-Za-z_][\w.-]{1,50})"\s*:|([A-Za-z_][\w./-]{1,50})"""
                       r"""\s*:(?=\s|$)|([A-Za-z_][\w.-]{1,50})\s*=\s*[^\s=][^;]*$)""")


def config_key_items(by_id: dict[str, Sec], known: set[str], asked: list[str],
                     head: str | None, idf: Callable[[str], float]
                     ) -> list[tuple[float, str, list[Sec]]]:
    """(score, name, its sections best first) of the keys the region's code blocks set
    (`_KEY_LINE`: a manifest's `capacity`, a config.toml's `SystemdCgroup`) that no item
    of the graph or code span names (`known`, lower-cased), scored as code spans are
    (`scored_names`): a question about fields or settings asks for them, and a manifest
    writes a field once, as a key, not in prose."""
    at: dict[str, list[Sec]] = defaultdict(list)
    for sec in by_id.values():
        for key, _ in _set_keys(sec.content):
            if key.lower() not in known and sec not in at[key]:
                at[key].append(sec)
    return scored_names(at, asked, head, idf)


def key_line(sec: Sec, key: str) -> tuple[int, int] | None:
    """The span of the first code line of `sec` that sets `key` (`config_key_items`): a
    key's quote when no passage of 3 words or more names it (`quote_span`)."""
    return next((span for found, span in _set_keys(sec.content) if found == key), None)


def _set_keys(content: str) -> Iterator[tuple[str, tuple[int, int]]]:
    """(key, the span of its line) of each code line of `content` that sets a key
    (`_KEY_LINE`), in order."""
    for start, end in code_lines(content):
        m = _KEY_LINE.match(content[start:end])
        if m:
            yield next(g for g in m.groups() if g), (start, end)


# "Which tools besides plain kubectl commands ...": what the question sets aside.
ASIDE_WORDS = r"besides|other than|apart from|aside from|except(?: for)?"
EXCEPT = re.compile(rf"\b(?:{ASIDE_WORDS}|beyond)"
                     r"\s+(?:((?:[\w.`'-]+\s*){1,5}?)(?=[,?]|\s+(?:do|does|did|can|could|what|"
                     r"which|to|in|on|for|are|is|that|you|we)\b|$)|((?:[\w.`'-]+\s*){1,3}))",
                     re.I)
_PLAIN = frozenset(text_rules.terms("plain simple simply ordinary normal just usual"))
_ASIDE_TERMS = frozenset(text_rules.terms("besides other than apart from aside except for"))
# What a question sets aside before it asks, all of it: "Apart from cargo, rustc and rustup
# themselves, what ...", "Besides writing manifests by hand, which ...".
ASIDE_FIRST = re.compile(rf"^\s*(?:{ASIDE_WORDS})\b(?:[^?]*?,\s*(?=(?:what|which|who|how|"
                         r"where|list|name)\b)|[^,?]*,\s*)", re.I)


def set_aside(question: str, head: str | None) -> set[str]:
    """The terms of what a list question sets aside ("besides plain kubectl commands":
    kubectl, command), less those it asks with elsewhere ("Which kinds of dependencies ...
    besides normal dependencies" still asks for dependencies)."""
    out: set[str] = set()
    rest = question
    first = ASIDE_FIRST.match(question)
    if first:
        out |= set(text_rules.terms(first.group(0))) - _PLAIN - _ASIDE_TERMS
        rest = question[first.end():]
    for m in EXCEPT.finditer(question):
        out |= set(text_rules.terms(m.group(1) or m.group(2))) - _PLAIN
        rest = rest.replace(m.group(0), " ")
    # A term the question also asks with elsewhere is what it asks for.
    return out - set(text_rules.terms(rest)) - ({head} if head else set())


def names_subject(name: list[str], asked: list[str]) -> bool:
    """Whether a name (its terms) is the question's own subject (its terms `asked`): the
    name's terms in a row in the question ("kubectl", "DNS policy" for "which DNS policies
    ..."), not words the question has apart ("cargo run" for "which cargo commands ...
    build, check and run a project")."""
    n = len(name)
    return not n or any(asked[i:i + n] == name for i in range(len(asked) - n + 1))
