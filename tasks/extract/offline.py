"""The offline extractor: deterministic regex heuristics for builds without ANTHROPIC_API_KEY.

It is clearly worse than Claude and says so (OFFLINE_NOTE goes into the manifest), but it
gives demos a usable graph: code identifiers, defined terms and heading topics as entities,
same-sentence co-occurrence as relationships, and the lead sentences of a section as facts
about its topic. Output has the same shape as the Claude tool output (see extract.py), so both
extractors share entity resolution and table assembly.

What it finds, per section:
- the **topic**: the last heading in the heading path that is not generic ("Overview",
  "Examples", ...), else the page title without a " | Site" suffix; typed "code" when it
  looks like an identifier, else "concept";
- **code**: `backticked` names ("command" when they contain a space), CamelCase,
  snake_case and dotted.paths in prose (fenced code blocks are skipped);
- **terms**: **bold** phrases, "X is a/an/the ..." definitions, "Long Name (ACR)" with the
  acronym as an alias, and Title Case phrases of 2–4 words;
- **relationships**: CO_OCCURS_WITH between entities in the same sentence and between the
  topic and each entity, at most MAX_RELATIONSHIPS per section;
- **facts**: up to two lead sentences, attached to the topic.

Pure and fast (regexes only; thousands of sections per second).
"""

from __future__ import annotations

import re

from packs import text as text_rules
from packs.markdown import heading, list_marker, replace_fences

# bump when the heuristics change; v2: ~~~ fences skipped too; v3: sentences of whole
# paragraphs (packs/text.py), so a hard-wrapped line no longer ends a fact mid-sentence
OFFLINE_VERSION = f"offline-v3+{text_rules.TEXT_RULES_VERSION}"
OFFLINE_NOTE = (
    "offline heuristic extractor (no ANTHROPIC_API_KEY): entities are code identifiers, "
    "defined terms and headings found by pattern; relationships are same-sentence "
    "co-occurrence (CO_OCCURS_WITH); facts are lead sentences. Set ANTHROPIC_API_KEY and "
    "rebuild for LLM extraction."
)
CO_OCCURS = "CO_OCCURS_WITH"
MAX_ENTITIES = 40
MAX_RELATIONSHIPS = 40
MAX_FACTS = 2

GENERIC_HEADINGS = frozenset({
    "overview", "introduction", "intro", "example", "examples", "usage", "summary",
    "see also", "next steps", "what's next", "whats next", "prerequisites", "before you begin",
    "installation", "install", "getting started", "notes", "note", "references", "reference",
    "background", "details", "description", "contents", "table of contents", "faq",
    "conclusion", "parameters", "arguments", "returns", "return value", "options",
    "cleaning up", "cleanup", "feedback", "further reading", "related", "resources",
})

_HEADING_SPLIT = re.compile(r"\s+[>›»/]\s+")
_NUMBERING = re.compile(r"^\s*(?:#+\s*)?(?:\d+(?:\.\d+)*\.?|[IVX]+\.)?\s*")
_TITLE_SUFFIX = re.compile(r"\s+[|–—-]\s+[^|–—-]+$")
_BACKTICK = re.compile(r"`([^`\n]{1,80})`")
_BOLD = re.compile(r"\*\*([^*\n]{2,60})\*\*")
_CAMEL = text_rules.CAMEL_CASE
_SNAKE = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b")
_DOTTED = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]+)+(?:\(\))?")
_ACRONYM_DEF = re.compile(r"\b([A-Z][a-z]+(?:[ -][A-Z][a-z]+){1,5})\s+\(([A-Z][A-Z0-9]{1,5}s?)\)")
_DEFINITION = re.compile(
    r"^(?:An?\s+|The\s+)?(`[^`]{1,60}`|[A-Z][\w-]*(?:\s+[A-Z][\w-]*){0,4})\s+(?:is|are)\s+"
    r"(?:an?|the|one)\s"
)
_BARE_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,5}s?\b")
_TITLE_PHRASE = re.compile(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+){1,3}\b")
_LEADING_STOP = re.compile(r"^(?:The|A|An|This|These|That|Those|In|On|For|To|If|When|Use|With)\s+")
_IDENT_LIKE = re.compile(r"^[A-Za-z_][\w.:/-]*(?:\(\))?$")
_MD_NOISE = re.compile(r"\*\*|__|\[([^\]]*)\]\([^)]*\)")


def _clean_heading(text: str) -> str:
    text = _NUMBERING.sub("", text.strip()).strip().rstrip("¶#").strip()
    return text.strip("`").strip()


def topic_of(page_title: str, heading_path: str) -> str:
    """The main entity name of a section: last non-generic heading, else the page title."""
    for part in reversed(_HEADING_SPLIT.split(heading_path or "")):
        name = _clean_heading(part)
        if name and name.lower().rstrip(":") not in GENERIC_HEADINGS and len(name) <= 80:
            return name
    title = _TITLE_SUFFIX.sub("", (page_title or "").strip()).strip()
    return title if len(title) <= 80 else ""


def _looks_like_code(name: str) -> bool:
    return bool(
        _IDENT_LIKE.match(name)
        and (("_" in name) or ("." in name) or name.endswith("()") or _CAMEL.fullmatch(name))
    )


def _blocks(prose: str) -> list[str]:
    """Paragraphs and list items of `prose` (fences already blanked), each one text: the
    lines of a paragraph hard-wrapped at 80 columns belong together. Headings and table
    rows are left out."""
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in prose.splitlines():
        marker = list_marker(line)
        stripped = line.strip()
        if not stripped or heading(line) or stripped.startswith("|"):
            current = []
            continue
        if marker or not current:
            current = [line[marker.end():].strip() if marker else stripped]
            blocks.append(current)
        else:
            current.append(stripped)
    return [" ".join(b) for b in blocks if b and b[0]]


def _sentences(prose: str) -> list[str]:
    return [s for block in _blocks(prose) for s in text_rules.sentences(block)]


def _plain(sentence: str) -> str:
    return _MD_NOISE.sub(lambda m: m.group(1) or "", sentence).strip()


def extract_offline(page_title: str, heading_path: str, content: str) -> dict:
    """One section's entities/relationships/facts in the Claude tool-output shape:
    {"entities": [{name, type, description, aliases}], "relationships": [{source, relation,
    target, evidence}], "facts": [{text, entity}]}. Deterministic; never raises on odd text."""
    prose = replace_fences(content or "", "\n")
    sentences = _sentences(prose)
    entities: dict[str, dict] = {}  # lower-cased name -> entity
    per_sentence: list[tuple[str, list[str]]] = []
    acronyms: dict[str, str] = {}  # "HPA" -> "Horizontal Pod Autoscaler", from this section

    def add(name: str, etype: str, description: str = "", alias: str | None = None) -> str | None:
        name = name.strip().strip("`").strip()
        if len(name) < 2 or len(name) > 80:
            return None
        key = name.lower()
        ent = entities.get(key)
        if ent is None:
            if len(entities) >= MAX_ENTITIES:
                return None
            ent = entities[key] = {"name": name, "type": etype, "description": "", "aliases": []}
        if description and not ent["description"]:
            ent["description"] = description[:300]
        if alias and alias not in ent["aliases"]:
            ent["aliases"].append(alias)
        return ent["name"]

    topic = topic_of(page_title, heading_path)
    lead = _plain(sentences[0]) if sentences else ""
    if topic:
        add(topic, "code" if _looks_like_code(topic) else "concept", lead)

    for sentence in sentences:
        plain = _plain(sentence)
        found: list[str] = []

        def note(name: str | None, found: list[str] = found) -> None:
            if name and name not in found:
                found.append(name)

        m = _DEFINITION.match(sentence)
        if m:
            note(add(_LEADING_STOP.sub("", m.group(1)), "term", plain))
        for m in _ACRONYM_DEF.finditer(sentence):
            long_name = add(_LEADING_STOP.sub("", m.group(1)), "term", plain, alias=m.group(2))
            if long_name:
                acronyms[m.group(2)] = long_name
            note(long_name)
        for m in _BARE_ACRONYM.finditer(sentence):
            note(acronyms.get(m.group(0)))
        for m in _BACKTICK.finditer(sentence):
            inner = m.group(1).strip()
            note(add(inner, "command" if " " in inner else "code", plain))
        for m in _BOLD.finditer(sentence):
            note(add(m.group(1), "term", plain))
        unticked = _BACKTICK.sub(" ", sentence)
        for rx in (_DOTTED, _SNAKE, _CAMEL):
            for m in rx.finditer(unticked):
                note(add(m.group(0), "code", plain))
        for m in _TITLE_PHRASE.finditer(unticked):
            phrase = _LEADING_STOP.sub("", m.group(0))
            if " " in phrase or "-" in phrase:
                note(add(phrase, "concept", plain))
        if found:
            per_sentence.append((plain, found))

    relationships: list[dict] = []
    seen_pairs: set[tuple[str, str]] = set()

    def relate(a: str, b: str, evidence: str) -> None:
        pair = (min(a, b), max(a, b))
        if a == b or pair in seen_pairs or len(relationships) >= MAX_RELATIONSHIPS:
            return
        seen_pairs.add(pair)
        relationships.append(
            {"source": a, "relation": CO_OCCURS, "target": b, "evidence": evidence[:300]}
        )

    for plain, names in per_sentence:
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                relate(a, b, plain)
    topic_name = entities[topic.lower()]["name"] if topic and topic.lower() in entities else ""
    if topic_name:
        for plain, names in per_sentence:
            for b in names:
                relate(topic_name, b, plain)

    facts = []
    anchor = topic_name or next(iter(entities.values()), {}).get("name", "")
    if anchor:
        for sentence in sentences:
            text = _plain(sentence)
            if 20 <= len(text) <= 400 and not text.endswith(":"):
                facts.append({"text": text, "entity": anchor})
                if len(facts) >= MAX_FACTS:
                    break
    return {"entities": list(entities.values()), "relationships": relationships, "facts": facts}
