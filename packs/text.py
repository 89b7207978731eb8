"""The text rules of the query side, in one place: words, stop words, stems, sentences and
identifiers. Every tokenizer of packs/ and tasks/ is to read text through this module
(issue #39); a component calibrated on text (the gate, the answer selector's weights)
names the `TEXT_RULES_VERSION` it was tuned on, so a change here says what to re-measure.

- `words(text)`: lower-cased word tokens. A dotted, dashed or slashed name stays one word
  ("pack.toml", "kube-proxy", "apps/v1") and also yields its parts, so a question that
  writes "kube proxy" still meets "kube-proxy".
- `stem(word)` (packs/word_forms.py): the Porter (1980) stemmer, so "configuring",
  "configured" and "configuration" meet at "configur". Words with digits or underscores,
  and words of 3 letters or fewer, are left as they are (identifiers, versions, acronyms).
- `terms(text)`: the stems of the words that are not STOP_WORDS.
- `singular(word)` (packs/word_forms.py): a readable singular, not a stem ("policies" →
  "policy", where Porter gives "polici"). tasks/extract/entities.py makes an entity name's
  merge key with it ("Pods" and "Pod" are one entity): a change to it changes entity ids.
- `sentence_spans(text, start, end)`: sentence ends in a paragraph: ".", "?" or "!" before
  a capital, a digit, an opening quote or a code span; never after an abbreviation (e.g.,
  i.e., etc., vs.) or an initial, never inside a `code span`. A line break is not a
  sentence end: a paragraph hard-wrapped at 80 columns is one text ("Keep these rules in
  mind as we\\nwork through ..." is one sentence). `sentences(text)` gives the strings,
  each on one line.
- `identifiers(text)`: code spans and identifier-like words as written: `--flags`,
  snake_case, camelCase / CamelCase with an inner capital or led by an acronym
  ("HTTPRoute", "CSIDriver"; not "PVCs"), dotted names, paths, ALL_CAPS names with an
  underscore or digit. `has_number(text)`: a digit outside a list marker.
- Named patterns other modules match with (NUMBER, CAPITALISED, EMPHASIS, BOLD,
  QUESTION_IDENTIFIER, PATH, QUOTED, SNAKE_CASE, TYPE_PATH, ACRONYM, SHORT_CODE_SPAN, ...):
  each rule written once, here, so a text rule changes in one module.
- `tokens(text)`: the plain tokens, lower-cased runs of letters, digits and underscores
  ("kube-proxy" is "kube", "proxy"), for counting and hashing: the confidence gate's
  vocabulary and word pairs (`gate_terms`), the quality filter's keywords, query analysis
  and the full-text query's words.
- `gate_terms(text)` / `content_terms(text)`: `stem` of every token, and of the tokens
  that are not STOP_WORDS or single characters (the gate's and the title match's terms;
  tables/terms.json is counted with them, so a pack's vocabulary follows this version).
- `raw_words(text)`: the words as written (case kept, inner `.:/+#-` kept: "daemon.json",
  "C++", "kube-proxy"); `is_name_word(word)`: a capitalised word of letters only ("Swarm",
  "AWS"; not "CD8"); `CAMEL_CASE`: CamelCase and camelCase words, each hump a capital
  followed by lower-case letters or digits ("NodePort", "getPods"; not "PodIP").

Rules that stay elsewhere, on purpose:
- `packs/db.py` `fts_query_text` passes the full-text query `tokens` unstemmed: Kuzu's
  FTS index applies its own stemmer and stop words to the query, as it did to the sections.
- `packs/filters.py` looks language names up with its own word rule, a letter then letters,
  digits, `+` or `#` ("C++", "C#"; "pod.yaml" names YAML): the keys of a name list.
- `tasks/vectors.py` `key_phrases` (RAKE) splits phrases at punctuation and stop words:
  its phrase boundaries are part of the keyword vectors' text (KEYWORD_VERSION); changing
  them re-embeds every pack's keyword vectors.
- `tasks/sections.py` counts words as whitespace runs for its size limit (it cuts an
  over-long line with this module's `sentence_spans`): a change to either re-splits every
  pack (SPLITTER_VERSION).
"""

from __future__ import annotations

import re
from functools import lru_cache

from packs.word_forms import NOT_PLURAL, singular, stem  # noqa: F401 (this module's rules)

# text-v2: irregular plurals ("appendices", "indices") meet their singular (word_forms.py)
TEXT_RULES_VERSION = "text-v2"

STOP_WORDS = frozenset("""
a about above after again all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had
has have having he her here hers how i if in into is it its itself just me more most my no
nor not now of off on once only or other our out over own same she should so some such than
that the their them then there these they this those through to too under until up very was
we were what when where which while who whom why will with would you your
""".split())

# A lead-in this short ("In particular,", "For example:") says nothing alone: the chunker
# (tasks/sections.py) and the answer units (packs/retrieval/units.py) keep it with the
# sentence before it.
CONNECTIVE_WORDS = 3

# A plain token: letters, digits and underscores (of lower-cased text; the build counts a
# pack's vocabulary with this pattern in polars).
TOKEN_PATTERN = r"[a-z0-9_]+"
_TOKEN = re.compile(TOKEN_PATTERN)
# A word of a text as written: letters/digits with inner dots, dashes, colons, slashes.
_RAW = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/+#-]*[A-Za-z0-9_+#]|[A-Za-z0-9_]")
_NAME_WORD = re.compile(r"[A-Z][A-Za-z]+")
CAMEL_CASE = re.compile(r"\b(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+|[a-z]+(?:[A-Z][a-z0-9]+)+)\b")


def fold(text: str) -> str:
    """`text` case-folded, whitespace runs as one space, ends trimmed: how a gold string, a
    question or an item's name is compared with an answer's text."""
    return " ".join(text.casefold().split())


def tokens(text: str) -> list[str]:
    """Lower-cased runs of letters, digits and underscores, in order, repeats kept."""
    return _TOKEN.findall(text.lower())


def gate_terms(text: str) -> list[str]:
    """`stem` of every token of `text`, in order, repeats kept."""
    return [stem(t) for t in _TOKEN.findall(text.lower())]


def content_terms(text: str) -> list[str]:
    """`stem` of the tokens of `text` that are neither STOP_WORDS (checked before stemming:
    "does" is not "doe") nor single characters, in order, repeats kept."""
    return [stem(t) for t in _TOKEN.findall(text.lower()) if t not in STOP_WORDS and len(t) > 1]


def raw_words(text: str) -> list[str]:
    """The words of `text` as written (see the module docstring), in order."""
    return _RAW.findall(text)


def raw_word_spans(text: str) -> list[re.Match]:
    """The matches of `raw_words`, for callers that need where each word sits."""
    return list(_RAW.finditer(text))


def is_name_word(word: str) -> bool:
    """Whether `word` is a capitalised word of letters only, two or more ("Swarm", "AWS")."""
    return _NAME_WORD.fullmatch(word) is not None


# A word: letters, digits and underscores, with inner dots, dashes and slashes kept.
_WORD = re.compile(r"[a-z0-9_]+(?:[.\-/][a-z0-9_]+)*")
_PART = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """Lower-cased words in order; a compound ("kube-proxy", "max_surge") is followed by
    its parts."""
    out: list[str] = []
    for w in _WORD.findall(text.lower()):
        out.append(w)
        if not w.isalnum():
            parts = _PART.findall(w)
            if len(parts) > 1:
                out.extend(parts)
    return out


def terms(text: str) -> list[str]:
    """Stems of the words of `text` that are not stop words, in order, repeats kept."""
    return list(_terms(text))


# The same sections' units are read for question after question (an answer reads its
# units' terms several times): their terms are kept, as `stem` keeps stems.
TEXT_CACHE = 32768


@lru_cache(maxsize=TEXT_CACHE)
def _terms(text: str) -> tuple[str, ...]:
    return tuple(stem(w) for w in words(text) if w not in STOP_WORDS)


# The humps of a camel-case word ("PersistentVolume" → "Persistent", "Volume"; "HTTPServer"
# → "HTTP", "Server").
CAMEL_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def name_terms(text: str) -> list[str]:
    """`terms` of a heading or title, with the other ways a name in it is written: each run
    of two or three words joined ("Persistent Volumes" also gives the term of
    "PersistentVolumes") and the parts of a word written in camel case ("PersistentVolume"
    also gives "persistent", "volume"), so a question that writes the name one way meets
    a heading that writes it the other."""
    return list(_name_terms(text))


@lru_cache(maxsize=TEXT_CACHE)
def _name_terms(text: str) -> tuple[str, ...]:
    out = terms(text)
    for part in text.split(" > "):  # a heading path: no name runs across its headings
        plain = re.findall(r"[A-Za-z0-9]+", part)
        for n in (2, 3):
            out += [stem("".join(plain[i:i + n]).lower()) for i in range(len(plain) - n + 1)]
    for word in re.findall(r"[A-Za-z0-9]+", text):
        parts = CAMEL_PART.findall(word)
        if len(parts) > 1:
            out += [stem(x.lower()) for x in parts if x.lower() not in STOP_WORDS]
    return tuple(out)


# --- sentences ---------------------------------------------------------------------------------

_END = re.compile(r"[.!?][\"'”’)\]*_]*(?=\s+(?:[\"'“‘(\[*_]*[A-Z0-9]|`))")
ABBREVIATIONS = frozenset("""e.g i.e etc vs cf al approx fig figs no nos eq eqs mr mrs ms dr st
jr sr prof inc ltd co corp dept est vol ch sec p pp""".split())
_LAST_WORD = re.compile(r"([\w.]+)\Z")


def _in_code(text: str, start: int, pos: int) -> bool:
    return text.count("`", start, pos) % 2 == 1


def _abbreviation(text: str, start: int, pos: int) -> bool:
    """Whether the '.' at `pos` ends an abbreviation or an initial, not a sentence."""
    if text[pos] != ".":
        return False
    word = _LAST_WORD.search(text, max(start, pos - 40), pos)
    if not word:
        return False
    w = word.group(1).lower()
    return (w.rstrip(".") in ABBREVIATIONS or (len(w) == 1 and w.isalpha())
            or re.fullmatch(r"([a-z]\.)+[a-z]", w) is not None)


def trim_span(text: str, start: int, end: int) -> tuple[int, int]:
    """The span text[start:end] without its leading and trailing whitespace."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of each sentence of text[start:end], a paragraph or a list item's text,
    trimmed; line breaks inside it are soft (see the module docstring)."""
    end = len(text) if end is None else end
    out, s = [], start
    for m in _END.finditer(text, start, end):
        if _in_code(text, s, m.start()) or _abbreviation(text, s, m.start()):
            continue
        a, b = trim_span(text, s, m.end())
        if a < b:
            out.append((a, b))
        s = m.end()
    a, b = trim_span(text, s, end)
    if a < b:
        out.append((a, b))
    return out


def one_line(text: str) -> str:
    """`text` with every run of whitespace (line breaks included) as one space."""
    return " ".join(text.split())


def sentences(text: str) -> list[str]:
    """The sentences of a paragraph, each on one line."""
    return [one_line(text[a:b]) for a, b in sentence_spans(text)]


# --- identifiers and numbers -------------------------------------------------------------------

# A Markdown code span on one line (group 1: its contents).
CODE_SPAN = re.compile(r"`([^`\n]+)`")
_IDENTIFIER = re.compile(
    r"(?<![\w-])(?:--?[a-z][\w-]*(?:=[^\s;,)]+)?"  # --flag, -o, --flag=value
    r"|[A-Za-z_]\w*(?:::\w+)+(?:\(\))?"  # Rust and C++ paths: Vec::new()
    r"|[A-Za-z_]\w*_\w+"  # snake_case, SNAKE_CASE
    r"|[a-z]+[A-Z]\w*"  # camelCase
    r"|[A-Z][a-z0-9]+[A-Z]\w*"  # CamelCase with an inner capital
    r"|[A-Z]{2,}[A-Z][a-z]{2,}\w*"  # an acronym, then CamelCase: HTTPRoute, CSIDriver
    r"|[A-Za-z_][\w-]*(?:[./][A-Za-z_][\w-]*)+(?:\(\))?"  # dotted names, paths
    r"|[A-Z][A-Z0-9]*\d[A-Z0-9]*"  # ALL CAPS with a digit
    r"|\w+\(\))")  # call()


def code_spans(text: str) -> list[str]:
    """The contents of the `code spans` of `text`, in order."""
    return [m.group(1).strip() for m in CODE_SPAN.finditer(text) if m.group(1).strip()]


def identifiers(text: str) -> list[str]:
    """Code spans and identifier-like words of `text` as written, in order, no repeats."""
    found = code_spans(text)
    plain = CODE_SPAN.sub(" ", text)
    found.extend(w for w in (m.group(0).rstrip(".") for m in _IDENTIFIER.finditer(plain))
                 if w.lower() not in ABBREVIATIONS)
    return list(dict.fromkeys(f for f in found if f))


def has_number(text: str) -> bool:
    """Whether `text` writes a number (a digit that does not continue a word)."""
    return NUMBER.search(text) is not None


# --- patterns other modules match with ---------------------------------------------------------
# Each kept as the module that reads it wrote it (issue 46 moved them here, so that a text
# rule changes, and is versioned, in one module); where two readers want other edges, the
# names say which is which. tests/test_house.py checks that no module outside this one
# compiles a pattern that finds identifiers in running text.

# A number as written: a digit that does not continue a word, then digits and separators
# ("1.25", "10%", "3:00", "2026-01-01"). `has_number` is whether a text has one.
NUMBER = re.compile(r"(?<![\w.])\d[\d,.:/%-]*")
# A number written as a word ("every two minutes", "twice"); "one" is too often a pronoun.
NUMBER_WORD = re.compile(
    r"\b(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|"
    r"thirty|forty|fifty|sixty|hundred|thousand|million|billion|once|twice|dozen|half)\b",
    re.I)
# A capitalised word after a space, bracket or quote ("Rust", "O'Brien", "U.S."): a name.
CAPITALISED = re.compile(r"(?<=[\s(\"'“‘])[A-Z][\w'’.-]*[A-Za-z0-9]")
# A term introduced in italics or bold ("are called _consuming adapters_"; group 1).
EMPHASIS = re.compile(r"(?<![\w*_])[_*]{1,2}([^_*\s][^_*]{0,60}?)[_*]{1,2}(?![\w*_])")
# A bold phrase, **x** or __x__ (group 1 or 2).
BOLD = re.compile(r"\*\*([^*\n]{2,60})\*\*|(?<!\w)__([^_\n]{2,60})__(?!\w)")
# The * and _ marks of emphasis, to remove them from rendered text.
EMPHASIS_MARK = re.compile(r"(?<![\w*])\*{1,2}(?=\S)|(?<=\S)\*{1,2}(?![\w*])|"
                           r"(?<![\w_])_{1,2}(?=[^\s_])|(?<=[^\s_])_{1,2}(?![\w_])")
# A code span of at most 80 characters (group 1): longer ones are examples, not names.
SHORT_CODE_SPAN = re.compile(r"`([^`\n]{1,80})`")
# A term in quotes or backticks, up to 80 characters (one of groups 1-3).
QUOTED = re.compile(r"\"([^\"]{1,80})\"|'([^']{1,80})'|`([^`]{1,80})`")

# The names a question writes (query analysis): snake_case, dotted.name, call().
QUESTION_IDENTIFIER = re.compile(r"\b[A-Za-z_][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b"  # snake_case
                                 r"|\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b"  # dotted.name
                                 r"|\b[A-Za-z_]\w*\(\)")  # call()
# A file path with at least one slash, after a space or at the start (group 1).
PATH = re.compile(r"(?:^|\s)((?:~|\.{1,2})?/?[\w.-]+(?:/[\w.-]+)+/?)")
# Names in prose (the offline extractor), not part of a longer dotted or slashed word:
# snake_case, and Rust paths (`Type::path`, `Vec::new()`, `vec::vec!`).
SNAKE_CASE = re.compile(r"(?<![\w./-])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w/-])")
TYPE_PATH = re.compile(r"(?<![\w./-])[A-Za-z_]\w*(?:::[A-Za-z_]\w*)+(?:\(\)|!)?")
# A name inside a sentence, not its first word: CamelCase ("DaemonSet") or upper case ("TLS");
# the offline fact model's `has_name` (tasks/extract/judge_facts.py).
INNER_NAME = re.compile(r"(?<!^)\b(?:[A-Z][a-z]+[A-Z]\w*|[A-Z]{2,}\b)")
# An acronym ("TLS", "CRDs"), and one defined by its long form ("Role Based Access Control
# (RBAC)": groups 1 and 2).
ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,5}s?\b")
ACRONYM_DEFINED = re.compile(
    r"\b([A-Z][a-z]+(?:[ -][A-Z][a-z]+){1,5})\s+\(([A-Z][A-Z0-9]{1,5}s?)\)")
