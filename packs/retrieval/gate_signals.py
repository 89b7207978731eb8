"""The confidence gate's signals: what a search tells about whether the pack holds the
answer (the verdict and its calibration are packs/retrieval/gate.py).

The best vector similarity alone cannot tell: questions about a neighbouring technology
("How do I write a Nomad job file?" asked of the Kubernetes docs) reach the similarities
of in-domain questions. What they lack is the *words*: their distinctive terms are not in
the pack, or not in the sections retrieval found, or not in the combinations the pack uses.
So the gate (packs/retrieval/gate.py) scores nine signals

    similarity  best vector similarity minus the model's base threshold
                (manifest.embedding.gate_threshold), so one set of weights fits models
                whose similarities sit at different heights
    margin      best similarity minus the mean of the top 10
    coverage    share of the question's terms, weighted by their IDF in the pack, found
                in the top 3 fused sections (heading path + text)
    section_coverage  the same share in the best single one of those 3 sections (a
                question about a tool the docs name in passing is covered piecemeal: the
                tool in one section, the rest of the question in others)
    unknown     IDF-weighted share of the question's terms the pack never uses
    specific    number (max 3) of the question's specific words — capitalised words
                after the first, acronyms, code-like words — that do not occur as a
                phrase in those top 3 ("Nomad", "daemon.json", "GOMAXPROCS")
    pairs       share of the question's adjacent content-word pairs that are adjacent in
                those top 3 too (a neighbouring tool's question combines the pack's words
                in ways the pack does not)
    pack_pairs  the same pairs, weighted by their terms' IDF, found adjacent anywhere in
                the pack ("docker daemon" is there, "live restore" or "registry mirrors"
                are not): tables/terms.json keeps a hash of every adjacent pair
    names       number (max 2) of the question's multi-word names — runs of capitalised
                words after the first ("Docker Swarm", "Erlang BEAM", "AWS Secrets
                Manager") — that the pack never writes: one of their adjacent word pairs
                is in none of its sections. A pack that documents a tool writes its name;
                one that mentions "Docker" and "Swarm" apart does not document Docker Swarm

and two that only a technical pack (see `Vocabulary.technical`: its sections hold code)
scores; they are 0 for prose. A documentation site that names a tool without documenting
it mentions it in passing, where an encyclopaedia or a paper's abstract that names
something once is often exactly what a question asks about:

    doc_specific  `specific` again, in a technical pack
    doc_rare_names  number (max 2) of the question's capitalised words (letters only:
                "HAProxy", "Podman") that a technical pack uses, but in only a few
                sections (RARE_SECTIONS, or 0.1% of them in a large pack)

and one that corrects the others for a small technical pack:

    small       ln(SMALL_PACK / sections) for a technical pack of fewer than SMALL_PACK
                sections (at most ln(SMALL_PACK / SMALLEST_MEASURED)), else 0. Every
                vocabulary signal reads a small pack's words as a sample of its topic:
                a 30-page pack of the Kubernetes docs lacks words and word pairs its own
                questions use, and writes the name of a page's subject ("GPU",
                "MicroProfile") in fewer than RARE_SECTIONS sections, so the in-domain
                questions look like a neighbouring tool's. Its weight is
                not fitted with the others (it is 0 on every calibration pack) but chosen
                on small packs cut from the Kubernetes docs and the Rust book
                (benchmarks/gate_small_packs.py)

The words are read with packs/text.py (TEXT_RULES_VERSION): plain tokens, Porter stems,
one stop-word list, for the question and the pack's vocabulary (tables/terms.json) alike.
"""

from __future__ import annotations

import base64
import math
import re
import zlib
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packs import text as text_rules
from packs.markdown import opening_fence

# The signals benchmarks/gate_calibration.py fits on the four calibration packs, and the
# small-pack correction, whose weight benchmarks/gate_small_packs.py chooses.
FITTED_SIGNALS = ("similarity", "margin", "coverage", "section_coverage", "unknown",
                  "specific", "pairs", "pack_pairs", "names", "doc_specific", "doc_rare_names")
SIGNALS = (*FITTED_SIGNALS, "small")
TOP_SECTIONS = 3
MAX_SPECIFIC = 3
MAX_NAMES = 2
# A technical pack's word is used "in passing" in at most this many sections (or 0.1% of
# them, whichever is more).
RARE_SECTIONS = 10
# The share of sections holding fenced code at which a pack counts as fully technical.
TECHNICAL_SHARE = 0.1
# A technical pack of fewer sections than this is "small" (the smallest calibration pack,
# the Rust book, has 1,791).
SMALL_PACK = 1000
# The smallest pack the `small` weight was chosen on has 138 sections: below this many the
# correction stays at its value here rather than grow without a measurement (a six-section
# pack would otherwise pass a question none of whose words it uses).
SMALLEST_MEASURED = 130

# --- terms (packs/text.py) --------------------------------------------------------------


def terms(text: str) -> list[str]:
    """The text's terms: `packs.text.gate_terms` (Porter stems of every token), in order."""
    return text_rules.gate_terms(text)


def question_terms(question: str) -> list[str]:
    """The question's distinct terms without stop words or single characters."""
    return list(dict.fromkeys(words_in_order(question)))


def words_in_order(text: str) -> list[str]:
    """The text's terms without stop words or single characters (`packs.text.content_terms`),
    in order, repeats kept."""
    return text_rules.content_terms(text)


def specific_words(question: str) -> list[str]:
    """The question's specific words, as written: capitalised words after the first,
    acronyms and code-like words (digits, underscores, dots, slashes, colons, CamelCase).
    Hyphenated lower-case compounds are not: paraphrases coin them ("per-environment",
    "pre-filled") as often as tool names use them. Nor are words that start with a digit
    ("15", "2015", "40mg/day", "7-day-old"): numbers and measurements are not names, and
    the passage that answers a question often writes them differently."""
    out: dict[str, None] = {}
    for i, m in enumerate(text_rules.raw_word_spans(question)):
        word = m.group(0).rstrip(".:")
        if word[:1].isdigit():
            continue
        code_like = bool(re.search(r"[0-9_]|[a-z][A-Z]|\w[.:/]\w", word))
        capitalised = i > 0 and word[:1].isupper()
        if (code_like or capitalised) and word.lower() not in text_rules.STOP_WORDS:
            out.setdefault(word, None)
    return list(out)


def name_runs(question: str) -> list[str]:
    """The question's multi-word names, as written: runs of two or more capitalised words
    (letters only, not stop words, not the question's first word) with nothing but
    spaces between them ("Azure Container Instances", "Docker Swarm"). None in a question
    whose every word is capitalised ("How To Configure Cargo Workspaces"): its capitals
    say nothing about names."""
    matches = text_rules.raw_word_spans(question)
    content = [w for w in (m.group(0) for m in matches[1:])
               if w.isalpha() and len(w) > 1 and w.lower() not in text_rules.STOP_WORDS]
    if len(content) >= 3 and all(w[:1].isupper() for w in content):
        return []
    out: dict[str, None] = {}
    run: list[str] = []
    end = 0

    def close() -> None:
        if len(run) > 1:
            out.setdefault(" ".join(run), None)

    for i, m in enumerate(matches):
        word = m.group(0)
        is_name = (i > 0 and text_rules.is_name_word(word)
                   and word.lower() not in text_rules.STOP_WORDS)
        if is_name and run and not question[end:m.start()].strip():
            run.append(word)
        else:
            close()
            run = [word] if is_name else []
        end = m.end()
    close()
    return list(out)


def _phrase(text: str) -> str:
    """Lower-cased words joined by single spaces, padded: for whole-phrase lookups."""
    return " " + " ".join(text_rules.tokens(text)) + " "


def _bigrams(tokens: Sequence[str]) -> set[tuple[str, str]]:
    return set(zip(tokens, tokens[1:]))


def pair_hash(first: str, second: str) -> int:
    """A stable 32-bit hash (CRC-32) of an adjacent pair of terms, as stored in a pack."""
    return zlib.crc32(f"{first} {second}".encode())


def text_pairs(text: str) -> set[int]:
    """The hashes of a text's adjacent content-word pairs (`words_in_order`)."""
    words = words_in_order(text)
    return {pair_hash(a, b) for a, b in zip(words, words[1:])}


def encode_pairs(hashes: Iterable[int]) -> str:
    """Pair hashes as stored in tables/terms.json: base64 of sorted little-endian uint32."""
    arr = array("I", sorted(set(hashes)))
    if arr.itemsize != 4:  # pragma: no cover - every platform we run on has 4-byte "I"
        raise RuntimeError("array('I') is not 32-bit here")
    if array("I", [1]).tobytes() != b"\x01\0\0\0":  # pragma: no cover - big-endian host
        arr.byteswap()
    return base64.b64encode(arr.tobytes()).decode("ascii")


def decode_pairs(text: str) -> array:
    """The sorted pair hashes of `encode_pairs`."""
    arr = array("I")
    arr.frombytes(base64.b64decode(text))
    if array("I", [1]).tobytes() != b"\x01\0\0\0":  # pragma: no cover - big-endian host
        arr.byteswap()
    return arr


@dataclass(frozen=True)
class Vocabulary:
    """Section frequency of every term of a pack (see `terms`), the section count, the
    sorted hashes of every adjacent content-word pair of its sections (`text_pairs`;
    None when unknown: the pack_pairs signal then counts every pair as seen), and how many
    sections hold fenced code (`has_code`; 0 when unknown: the pack then counts as prose)."""

    df: Mapping[str, int]
    sections: int
    pairs: Sequence[int] | None = None
    code_sections: int = 0

    @property
    def technical(self) -> float:
        """0 (prose) to 1 (documentation with code): the share of sections holding fenced
        code, over TECHNICAL_SHARE, capped at 1. The Kubernetes docs (33%) and the Rust
        book (53%) are fully technical; SciFact and XQuAD (0%) are prose."""
        if self.sections <= 0:
            return 0.0
        return max(0.0, min(1.0, self.code_sections / self.sections / TECHNICAL_SHARE))

    def idf(self, term: str) -> float:
        return math.log((self.sections + 1) / (self.df.get(term, 0) + 0.5))

    def has_pair(self, first: str, second: str) -> bool:
        if self.pairs is None:
            return True
        h = pair_hash(first, second)
        i = bisect_left(self.pairs, h)
        return i < len(self.pairs) and self.pairs[i] == h


# --- signals -------------------------------------------------------------------


# Where a question names the corpus itself ("Which keywords does the book cover for
# looping?", "according to the docs"): those words are about the pack, not in it.
_SELF_REFERENCE = re.compile(
    r"\b(?:according to |in )?(?:the|this) (?:book|docs|documentation|guide|manual)(?:'s)?"
    r"(?: (?:covers?|mentions?|describes?|discuss(?:es)?|shows?|explains?|introduces?|"
    r"talks? about|says?)\b)?", re.I)


def signals(question: str, similarities: Sequence[float], top_texts: Sequence[str],
            vocab: Vocabulary, base_similarity: float) -> dict[str, float]:
    """The twelve signals of the module docstring, on the question less the words that
    name the corpus itself (`_SELF_REFERENCE`).

    `similarities`: the vector candidates' similarities, best first; `top_texts`: heading
    path + text of the best fused sections (the first TOP_SECTIONS are used)."""
    question = _SELF_REFERENCE.sub(" ", question)
    words = question_terms(question)
    top = list(top_texts[:TOP_SECTIONS])
    per_section = [set(terms(text)) for text in top]
    seen: set[str] = set().union(*per_section)
    seen_pairs: set[tuple[str, str]] = set()
    for text in top:
        seen_pairs |= _bigrams(words_in_order(text))
    phrases = _phrase(" ".join(top))
    idf = {t: vocab.idf(t) for t in words}
    total = sum(idf.values())

    def covered(found: set[str]) -> float:
        return sum(v for t, v in idf.items() if t in found) / total if total else 0.0

    ordered = words_in_order(question)
    pairs = _bigrams(ordered)
    pair_weight = {p: idf.get(p[0], 0.0) + idf.get(p[1], 0.0) for p in pairs}
    pair_total = sum(pair_weight.values())
    best = similarities[0] if similarities else 0.0
    head = list(similarities[:10])
    named = specific_words(question)
    specific = float(min(MAX_SPECIFIC, sum(_phrase(w) not in phrases for w in named)))
    return {
        "similarity": best - base_similarity,
        "margin": best - sum(head) / len(head) if head else 0.0,
        "coverage": covered(seen),
        "section_coverage": max((covered(found) for found in per_section), default=0.0),
        "unknown": (sum(v for t, v in idf.items() if not vocab.df.get(t)) / total
                    if total else 0.0),
        "specific": specific,
        "pairs": sum(p in seen_pairs for p in pairs) / len(pairs) if pairs else 1.0,
        "pack_pairs": (sum(w for p, w in pair_weight.items() if vocab.has_pair(*p)) / pair_total
                       if pair_total else 1.0),
        "names": float(min(MAX_NAMES, sum(not _pack_writes(name, vocab)
                                          for name in name_runs(question)))),
        "doc_specific": vocab.technical * specific,
        "doc_rare_names": vocab.technical * min(MAX_NAMES, len(_rare(named, vocab))),
        "small": vocab.technical * smallness(vocab.sections),
    }


def smallness(sections: int) -> float:
    """ln(SMALL_PACK / sections) below SMALL_PACK sections, else 0, with sections counted
    as at least SMALLEST_MEASURED (0 for an empty pack: it has no vocabulary to correct)."""
    if sections <= 0 or sections >= SMALL_PACK:
        return 0.0
    return math.log(SMALL_PACK / max(sections, SMALLEST_MEASURED))


def rare_names(question: str, vocab: Vocabulary) -> list[str]:
    """The question's capitalised words, letters only, that the pack uses in at least one
    and at most RARE_SECTIONS sections (or 0.1% of them)."""
    return _rare(specific_words(question), vocab)


def _rare(specific: Iterable[str], vocab: Vocabulary) -> list[str]:
    limit = max(RARE_SECTIONS, vocab.sections / 1000)
    return [w for w in specific
            if text_rules.is_name_word(w)
            and 0 < vocab.df.get(text_rules.stem(w.lower()), 0) <= limit]


def _pack_writes(name: str, vocab: Vocabulary) -> bool:
    """Whether every adjacent word pair of `name` is adjacent somewhere in the pack."""
    words = words_in_order(name)
    return all(vocab.has_pair(a, b) for a, b in zip(words, words[1:]))


def count_vocabulary(texts: Iterable[str]) -> Vocabulary:
    """The Vocabulary of section texts (heading path + content): each term of `terms`
    counted once per section, every adjacent pair (`text_pairs`) and the sections with
    code (`has_code`). Pure Python, for packs built without tables/terms.json or with one
    from before pair hashes."""
    df: Counter[str] = Counter()
    hashes: set[int] = set()
    n = code = 0
    for text in texts:
        df.update(set(terms(text)))
        hashes |= text_pairs(text)
        code += has_code(text)
        n += 1
    return Vocabulary(dict(df), n, array("I", sorted(hashes)), code)


def has_code(text: str) -> bool:
    """Whether a section's Markdown opens a fenced code block (the build writes HTML's
    <pre> as one, too)."""
    return any(opening_fence(line) for line in text.splitlines())
