"""Which of the offline extractor's entities a reader would call correct: a small logistic
model over features of each name in its pack, fitted on hand-labelled samples
(benchmarks/graph_model.py, on benchmarks/data/graph_labels*/) with its weights kept as data
(tasks/extract/graph_model.json).

The extractor's rules (offline_names.py, offline_text.py) propose; these models judge what
the rules cannot see from one section: whether a name is an example's own (a variable the
prose discusses, a placeholder object name, a path of one example) or a thing of the domain.
The features are about how the pack writes and uses the name, never the name itself: its
type; its shape (case pattern, separators, digits, a sigil, length); how
  many sections and pages name it, and where (code spans, bare prose, code blocks,
  headings, tables); the words next to it ("the `x` variable", "the `parse` method", "for
  example"); the share of its word parts that the pack's prose uses as plain lower-case
  words (a dictionary drawn from the pack itself, so it fits any language of docs).

Pure: `PackText` indexes plain (page, heading path, content) triples; `entity_scores`
returns probabilities. Never raises on odd text.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from packs import text as text_rules
from packs.markdown import fence_spans

MODEL_FILE = Path(__file__).with_name("graph_model.json")
# The weights are part of what a build computed: a refitted model rebuilds the graph.
MODEL_DIGEST = hashlib.sha256(MODEL_FILE.read_bytes()).hexdigest()[:12]
TYPES = ("code", "concept", "term", "command", "flag", "function", "setting", "file",
         "version", "environment_variable")
_WORD = re.compile(r"[A-Za-z0-9_]+")
_ALPHA = re.compile(r"[A-Za-z]+")
_SPAN = text_rules.SHORT_CODE_SPAN
_PROSE_WORD = re.compile(r"(?<![\w`.$/-])[a-z]{2,}(?![\w`/-])")
# Words beside a name that say what it is: an example's own value, or a thing of the domain.
_VAR_CUES = frozenset("""variable variables value values parameter parameters argument
arguments instance instances replace your placeholder example e.g""".split())
_THING_CUES = frozenset("""function functions method methods type types trait traits macro
macros field fields struct structs enum enums module modules crate crates command commands
flag flags option options setting settings key keys annotation annotations label labels
resource resources object objects plugin plugins feature gate gates api attribute
attributes keyword keywords operator operators policy policies controller file files
directory variant variants interface interfaces endpoint endpoints signal metric""".split())
_DETERMINER = re.compile(r"(?:the|a|an|your|my|our|this|that|these|those) ", re.I)
_EXAMPLE_CUES = re.compile(r"\b(?:for example|e\.g\.|such as|for instance|like this|"
                           r"in this example|named|called)\b", re.I)


@dataclass
class _Section:
    page: str
    heading: str
    content: str
    prose: str  # fences blanked
    code: str  # the fences' text
    spans: list[str] = field(default_factory=list)


class PackText:
    """A pack's sections indexed for the features: which sections hold a word, and which
    lower-case words its prose uses on how many pages. `sections`: (page url, heading path,
    content) triples, in any order: they are read sorted, so the features (which read the
    first sections that hold a name) do not depend on the order they come in (the model is
    fitted on a published pack's sections and applied to the build's)."""

    def __init__(self, sections: list[tuple[str, str, str]]) -> None:
        sections = sorted(sections, key=lambda s: (s[0] or "", s[1] or "", s[2] or ""))
        self.sections: list[_Section] = []
        self.by_word: dict[str, set[int]] = defaultdict(set)
        pages_of_word: dict[str, set[str]] = defaultdict(set)
        for i, (page, heading, content) in enumerate(sections):
            content = content or ""
            fences = fence_spans(content)
            code = "\n".join(content[a:b] for a, b in fences)
            prose, last = [], 0
            for a, b in fences:
                prose.append(content[last:a])
                last = b
            prose.append(content[last:])
            text = "\n".join(prose)
            sec = _Section(page or "", heading or "", content, text, code,
                           [m.group(1).strip() for m in _SPAN.finditer(text)])
            self.sections.append(sec)
            for w in set(_WORD.findall(content.lower())) | set(
                    _WORD.findall((heading or "").lower())):
                self.by_word[w].add(i)
            for w in set(_PROSE_WORD.findall(_SPAN.sub(" ", text))):
                pages_of_word[w].add(sec.page)
        self.pages = max(1, len({s.page for s in self.sections}))
        self.prose_df = {w: len(p) for w, p in pages_of_word.items()}

    def holding(self, name: str) -> list[int]:
        """The sections whose content or heading holds `name` (case-insensitive)."""
        words = _WORD.findall(name.lower())
        if not words:
            return []
        sets = sorted((self.by_word.get(w, set()) for w in set(words)), key=len)
        found = set(sets[0]).intersection(*sets[1:])
        low = name.lower()
        return sorted(i for i in found if low in self.sections[i].content.lower()
                      or low in self.sections[i].heading.lower())

    def plain_share(self, name: str) -> float:
        """The mean, over the name's word parts, of how widely the pack's prose uses the
        part as a plain lower-case word (log pages / log all pages): `home` and `result`
        are words, `unwrap` and `kubelet` are names."""
        parts = [p.lower() for chunk in _ALPHA.findall(name)
                 for p in text_rules.CAMEL_PART.findall(chunk) if len(p) >= 2]
        if not parts:
            return 0.0
        scale = math.log1p(self.pages)
        return sum(math.log1p(self.prose_df.get(p, 0)) / scale for p in parts) / len(parts)


def _bounded(text: str, name: str) -> list[int]:
    """Where `name` occurs in `text` not glued to a word character."""
    out, at = [], text.find(name)
    while at >= 0 and len(out) < 50:
        end = at + len(name)
        if (at == 0 or not (text[at - 1].isalnum() or text[at - 1] == "_")) and (
                end >= len(text) or not (text[end].isalnum() or text[end] == "_")):
            out.append(at)
        at = text.find(name, at + 1)
    return out


def _shape(name: str) -> dict[str, float]:
    words = name.split()
    return {
        "has_space": float(len(words) > 1),
        "words": min(len(words), 6) / 6,
        "log_len": math.log(1 + len(name)) / 4,
        "lower_word": float(bool(re.fullmatch(r"[a-z]+", name))),
        "snake": float(bool(re.fullmatch(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+", name))),
        "kebab": float(bool(re.fullmatch(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+", name))),
        "camel": float(bool(re.fullmatch(r"[a-z]+[A-Z]\w*", name))),
        "pascal": float(bool(re.fullmatch(r"[A-Z][a-z0-9]+[A-Z]\w*", name))),
        "upper": float(bool(re.fullmatch(r"[A-Z][A-Z0-9_]+", name))),
        "capitalised": float(bool(re.fullmatch(r"[A-Z][a-z]+", name))),
        "title_phrase": float(len(words) > 1 and name[:1].isupper()),
        "digit": float(any(c.isdigit() for c in name)),
        "digit_tail": float(bool(re.search(r"[-_.]?\d+$", name)) and not name.isdigit()),
        "slash": float("/" in name),
        "colon": float(":" in name and "::" not in name),
        "path_sep": float("::" in name),
        "angle": float("<" in name),
        "sigil": float(name[:1] in "$*&.#[@'" or name.endswith(("..", ":", "="))),
        "dash_start": float(name.startswith("-")),
        "dot": float("." in name.strip(".")),
    }


def entity_features(name: str, etype: str, text: PackText) -> dict[str, float]:
    """The entity model's features of `name` (its type `etype`) in the pack `text`."""
    feats = {f"type_{t}": float(etype == t) for t in TYPES}
    feats.update(_shape(name))
    held = text.holding(name)
    pages = {text.sections[i].page for i in held}
    spans = bare = fenced = headed = tabled = var = thing = example = 0
    for i in held[:60]:
        sec = text.sections[i]
        spans += sum(s == name or s.startswith(name + " ") for s in sec.spans)
        fenced += bool(_bounded(sec.code, name))
        headed += bool(_bounded(sec.heading.lower(), name.lower()))
        for line in sec.prose.splitlines():
            at = _bounded(line, name)
            if not at:
                continue
            if line.lstrip().startswith("|"):
                tabled += 1
                continue
            for a in at[:3]:
                before = _WORD.findall(line[max(0, a - 40):a].lower())[-2:]
                after = _WORD.findall(line[a + len(name):a + len(name) + 40].lower())[:2]
                near = set(before) | set(after)
                var += bool(near & _VAR_CUES)
                thing += bool(near & _THING_CUES)
                bare += line[a - 1:a] != "`"
            example += bool(_EXAMPLE_CUES.search(line))
    seen = max(1, spans + bare)
    as_code = spans + fenced > 0  # written as code somewhere: in a code span or a block
    one_page = float(len(pages) <= 1)
    local_shape = feats["lower_word"] or feats["snake"] or feats["camel"]
    feats.update({
        # what the shape means depends on reach: a lower-case name of one page is an
        # example's variable more often than one the pack names on many pages
        "one_page_lower": one_page * local_shape,
        "one_page_file": one_page * feats["type_file"],
        "kebab_digit": feats["kebab"] * feats["digit_tail"],
        "cue_balance": (thing - var) / seen,
        "log_sections": math.log1p(len(held)) / 4,
        "log_pages": math.log1p(len(pages)) / 4,
        "one_page": one_page,
        "span_share": spans / seen,
        "bare_share": bare / seen,
        "in_code": float(fenced > 0),
        "code_share": fenced / max(1, len(held[:60])),
        "in_heading": float(headed > 0),
        "table_only": float(tabled > 0 and spans + bare == 0),
        "var_cue": var / seen,
        "thing_cue": thing / seen,
        "example_cue": min(example, 3) / 3,
        "plain_share": text.plain_share(name),
        # typed as code but never written as code: a product or plain word ("AppArmor")
        "code_never_code": feats["type_code"] * float(not as_code),
        "determiner": float(bool(_DETERMINER.match(name))),
    })
    return feats


@functools.cache
def load_model(path: Path = MODEL_FILE) -> dict:
    """The fitted model: {"entity": {...}} with its feature names, means, scales, weights,
    bias, threshold and what it was fitted on. Raises FileNotFoundError when the file is
    missing (the package ships it)."""
    return json.loads(path.read_text(encoding="utf-8"))


def probability(feats: dict[str, float], model: dict) -> float:
    """P(correct) of one item under a fitted logistic `model`."""
    z = model["bias"]
    for name, mean, scale, w in zip(model["features"], model["mean"], model["scale"],
                                    model["weights"]):
        z += w * (feats.get(name, 0.0) - mean) / scale
    return 1 / (1 + math.exp(-max(-30.0, min(30.0, z))))


def entity_scores(entities: list[tuple[str, str]], text: PackText,
                  model: dict | None = None) -> list[float]:
    """P(correct) of each (name, type) in the pack `text`."""
    m = (model or load_model())["entity"]
    return [probability(entity_features(n, t, text), m) for n, t in entities]
