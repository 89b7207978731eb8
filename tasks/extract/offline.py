"""The offline extractor: deterministic heuristics for builds without ANTHROPIC_API_KEY.

It is worse than Claude and says so (OFFLINE_NOTE goes into the manifest), but its graph is
meant to be read: precision first. Output has the same shape as the Claude tool output
(tasks/extract/schema.py), so both extractors share entity resolution and table assembly.

What it finds, per section (prose only: fenced code, tables and HTML are skipped, and each
sentence is read as rendered text, links as their text):
- **commands run in shell blocks** (`offline_names.run_commands`): the program and its
  subcommands, for programs the prose names (items that live only in code);
- **identifiers**: code spans and identifiers written in prose (CamelCase, snake_case,
  `Type::path`), judged and typed by tasks/extract/offline_names.py (`code_entity`: stop-
  entities such as literals, hosts, placeholders and expressions are left out; the types
  are flag, environment_variable, function, setting, file, version, command, code);
- **terms**: **bold** phrases, "X is a/an ..." definitions, "Long Name (ACR)" with the
  acronym as an alias;
- **the topic**: the section's last heading when it is a noun phrase that its text names
  (`heading_entity`: a task, a question or a generic heading is no entity);
- **relationships**: what a sentence states between two of its names (offline_text.py:
  REPLACES, SET_BY, ADDED_IN, IS_A, USES, ... or CO_OCCURS_WITH for a plain verb), never
  names merely listed together;
- **facts**: whole sentences that read on its own (`is_fact`), up to MAX_FACTS, each
  about the first name it holds (else the topic).

Pure and fast (regexes only; thousands of sections per second).
"""

from __future__ import annotations

import re

from packs import text as text_rules
from packs.markdown import fence_spans, heading, list_marker, replace_fences
from tasks.extract.names import rendered
from tasks.extract.offline_names import GENERIC_WORDS, code_entity, heading_entity, run_commands
from tasks.extract.offline_text import find_word, is_fact, stated_relations

# bump when the heuristics change; v2: ~~~ fences skipped too; v3: sentences of whole
# paragraphs; v4 (issue 48): stop-entities, identifier types, headings only when named,
# whole-sentence facts, stated relations; v5: code spans kept whole in facts, bold
# labels of steps and parts are no terms; v6: a page title may be one plain word; v7: the
# code spans of table cells; v8: generic heading heads, quantified definition subjects;
# v9 (issue 48b): a path is a function only when called, cut names and expressions out, keys
# under a domain are code, facts with pointers or an example's one-letter names out, commands
# run in shell blocks, attributes and TOML table headers (the entity model that judges what
# these rules propose runs in the resolve stage); v9 (issue 51): names rendered by
# packs.markdown.inline_text, the splitter's rendering of headings; v10: both; v11: a name of
# digits and punctuation alone is no entity (a journal volume in bold in a reference list,
# "**95** (15): 9047-52.", had been a term), unless it is a version; v12: facts that point
# back ("But ...", "of that default", "If you don't, ...", "the second arm") out; v13: paths
# and keys with a placeholder part, headings that open with a preposition, macros as code
OFFLINE_VERSION = f"offline-v13+{text_rules.TEXT_RULES_VERSION}"
OFFLINE_NOTE = (
    "offline heuristic extractor (no ANTHROPIC_API_KEY): entities are identifiers, defined "
    "terms and headings that name a thing, found by pattern and typed by their form; "
    "relationships are what a sentence states between two names (REPLACES, SET_BY, "
    "ADDED_IN, IS_A, ..., CO_OCCURS_WITH for a plain verb); facts are whole sentences that "
    "read on their own. Set ANTHROPIC_API_KEY and rebuild for LLM extraction."
)
CO_OCCURS = "CO_OCCURS_WITH"
MAX_ENTITIES = 40
MAX_RELATIONSHIPS = 40
MAX_FACTS = 3

_HEADING_SPLIT = re.compile(r"\s+[>›»]\s+")
_NUMBERING = re.compile(r"^\s*(?:#+\s*)?(?:\d+(?:\.\d+)*\.?|[IVX]+\.)?\s+")
_TITLE_SUFFIX = re.compile(r"\s+[|–—-]\s+[^|–—-]+$")
# The identifier, acronym and emphasis rules are packs/text.py's (one home per text rule).
_BACKTICK = text_rules.SHORT_CODE_SPAN
_BOLD = text_rules.BOLD
_CAMEL = text_rules.CAMEL_CASE
_SNAKE = text_rules.SNAKE_CASE
_PATHLIKE = text_rules.TYPE_PATH
_ACRONYM_DEF = text_rules.ACRONYM_DEFINED
_DEFINITION = re.compile(
    r"^(?:An?\s+|The\s+)?(`[^`]{1,60}`|[A-Z][\w-]*(?:\s+[A-Z][\w-]*){0,3})\s+(?:is|are)\s+"
    r"(?:an?|the|one)\s"
)
_BARE_ACRONYM = text_rules.ACRONYM
_NO_NAME = re.compile(r"[\d\W_]+")  # digits and punctuation: a number, a date, a marker
_LEADING_STOP = re.compile(r"^(?:The|A|An|This|These|That|Those|In|On|For|To|If|When|Use|With)\s+")
_LINKS = re.compile(r"!?\[([^\]]*)\]\((?:[^()]|\([^()]*\))*\)|<https?://[^>]*>")
_HTML = re.compile(r"</?(?:a|abbr|b|br|code|del|em|i|img|ins|kbd|mark|p|s|samp|small|span|"
                   r"strong|sub|sup|tt|u|var|div|sup)(?:\s[^<>]*)?/?>", re.I)
_EMPHASIS_MARK = text_rules.EMPHASIS_MARK
# A bold label that names a step, a task or a part of the document, not a thing.
_LABEL = re.compile(r"^(?:chapter|section|step|part|appendix|listing|figure|table)\s+\w+$|"
                    r"^(?:using|use|debug|debugging|create|creating|run|running|install|"
                    r"installing|configure|configuring|check|checking|update|updating|add|"
                    r"adding|remove|removing|set|setting|enable|disable|option|method|"
                    r"approach|solution|example|scenario)\b", re.I)
_NOT_TERMS = frozenset({"note", "warning", "caution", "important", "tip", "example",
                        "deprecated", "beta", "alpha", "stable", "optional", "required",
                        "default", "feature state", "info", "danger", "todo"})


def _clean_heading(text: str) -> str:
    text = _NUMBERING.sub("", text.strip()).strip().rstrip("¶#").strip()
    return rendered(text).strip()


def topic_of(page_title: str, heading_path: str, prose: str = "") -> str:
    """The section's subject: its last heading (or the page title) that names a thing its
    text names too (`offline_names.heading_entity`); "" when none does."""
    parts = [p for p in _HEADING_SPLIT.split(heading_path or "") if p.strip()]
    candidates = [(_clean_heading(parts[-1]), len(parts) == 1)] if parts else []
    title = _TITLE_SUFFIX.sub("", (page_title or "").strip()).strip()
    if len(parts) <= 1 and title:
        candidates.append((rendered(title), True))
    for name, is_title in candidates:
        found = heading_entity(name, prose, title=is_title)
        if found:
            return found
    return ""


def _blocks(prose: str) -> list[str]:
    """Paragraphs and list items of `prose` (fences already blanked), each one text: the
    lines of a paragraph hard-wrapped at 80 columns belong together. Headings, table rows
    and HTML blocks are left out; a blockquote's lines lose their markers."""
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in prose.splitlines():
        line = re.sub(r"^\s*(?:>\s?)+", "", line)
        marker = list_marker(line)
        stripped = line.strip()
        if not stripped or heading(line) or stripped.startswith(("|", "<", "{{", "[")):
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
    """The sentence as rendered: link text without targets, no tags, no emphasis marks;
    code spans are kept as written (`_`, `<T>` and `<=` are code, not markup)."""
    if not any(c in sentence for c in "*_<["):
        return sentence.strip()  # nothing to render (most sentences)
    parts = re.split(r"(`[^`\n]*`)", _LINKS.sub(lambda m: m.group(1) or "", sentence))
    return "".join(p if p.startswith("`") or not any(c in p for c in "*_<")
                   else _EMPHASIS_MARK.sub("", _HTML.sub("", p)) for p in parts).strip()


def _first_line(prose: str, name: str) -> str:
    """A description for a name found in code: the first prose sentence naming its
    program, else ""."""
    program = name.split()[0]
    return next((s for s in _sentences(prose) if program in s), "")[:300]


class _Entities:
    """The section's entities by lower-cased name, in order found, capped at MAX_ENTITIES."""

    def __init__(self) -> None:
        self.by_key: dict[str, dict] = {}

    def add(self, name: str, etype: str, description: str = "",
            alias: str | None = None) -> str | None:
        name = rendered(name).strip().strip("`").strip()
        if len(name) < 2 or len(name) > 80 or name.lower() in GENERIC_WORDS or (
                etype != "version" and _NO_NAME.fullmatch(name)):
            return None
        key = name.lower()
        ent = self.by_key.get(key)
        if ent is None:
            if len(self.by_key) >= MAX_ENTITIES:
                return None
            ent = self.by_key[key] = {"name": name, "type": etype, "description": "",
                                      "aliases": []}
        if description and not ent["description"]:
            ent["description"] = description[:300]
        if alias and alias not in ent["aliases"]:
            ent["aliases"].append(alias)
        return ent["name"]


def _terms(sentence: str, plain: str, ents: _Entities, acronyms: dict[str, str]) -> list[str]:
    """Defined terms of a sentence: a definition's subject, bold phrases, acronyms."""
    found = []
    m = _DEFINITION.match(sentence)
    if m:
        subject = _LEADING_STOP.sub("", m.group(1)).strip("`")
        if subject.lower() not in GENERIC_WORDS and not subject.lower().startswith(
                ("it ", "this", "there", "here", "all ", "some ", "many ", "most ", "each ",
                 "every ", "both ", "other ", "no ")):
            found.append(ents.add(subject, "term", plain))
    for m in _ACRONYM_DEF.finditer(plain):
        long_name = ents.add(_LEADING_STOP.sub("", m.group(1)), "term", plain, alias=m.group(2))
        if long_name:
            acronyms[m.group(2)] = long_name
        found.append(long_name)
    for m in _BARE_ACRONYM.finditer(plain):
        found.append(acronyms.get(m.group(0)))
    for m in _BOLD.finditer(sentence):
        phrase = _plain(m.group(1) or m.group(2)).strip(" .:")
        if (phrase.lower() not in _NOT_TERMS and 1 <= len(phrase.split()) <= 4
                and phrase[:1].isalnum() and not _LABEL.match(phrase)):
            found.append(ents.add(phrase, "term", plain))
    return [f for f in found if f]


def _identifiers(sentence: str, plain: str, source: str, ents: _Entities) -> list[str]:
    """Identifiers of a sentence, judged by `code_entity` against the section's `source`
    (its Markdown, code blocks included: how the page uses a name tells what it is)."""
    found = []
    linked = _LINKS.sub(lambda x: x.group(1) or "", sentence) if "[" in sentence else sentence
    for m in _BACKTICK.finditer(linked):
        judged = code_entity(m.group(1), plain, source)
        if judged:
            found.append(ents.add(judged[0], judged[1], plain))
    unticked = _BACKTICK.sub(" ", plain) if "`" in plain else plain
    for rx in (_PATHLIKE, _SNAKE, _CAMEL):
        for m in rx.finditer(unticked):
            judged = code_entity(m.group(0), plain, source)
            if judged:
                found.append(ents.add(judged[0], judged[1], plain))
    return [f for f in found if f]


def extract_offline(page_title: str, heading_path: str, content: str) -> dict:
    """One section's entities/relationships/facts in the Claude tool-output shape:
    {"entities": [{name, type, description, aliases}], "relationships": [{source, relation,
    target, evidence}], "facts": [{text, entity}]}. Deterministic; never raises on odd text."""
    prose = replace_fences(content or "", "\n")
    sentences = _sentences(prose)
    ents = _Entities()
    acronyms: dict[str, str] = {}
    topic = topic_of(page_title, heading_path, _plain(prose))
    plains = [_plain(s) for s in sentences]
    if topic:
        topic = ents.add(topic, "concept", plains[0] if plains else "") or ""
    per_sentence: list[tuple[str, list[str]]] = []
    for sentence, plain in zip(sentences, plains):
        names = _terms(sentence, plain, ents, acronyms) + _identifiers(sentence, plain,
                                                                        content or "", ents)
        if topic and find_word(plain.lower(), topic.lower()) >= 0:
            names.append(topic)
        per_sentence.append((plain, list(dict.fromkeys(names))))

    # Table cells name things too (a field, a flag, a trait per row): their code spans are
    # entities (no facts or relations: a row is no sentence).
    for row in re.findall(r"(?m)^\s*\|(.+)\|\s*$", prose):
        if not re.fullmatch(r"[\s|:-]*", row):
            _identifiers(row, _plain(row), content or "", ents)
    # Commands run in shell blocks: items that live only in code ("kubeadm token create").
    for a, b in fence_spans(content or ""):
        block = (content or "")[a:b]
        first = block.split("\n", 1)[0].lower()
        if re.search(r"shell|bash|console|\bsh\b|powershell|cmd|zsh", first) or re.search(
                r"(?m)^\s*\$ ", block):
            for command in run_commands(block.split("\n", 1)[-1], prose):
                ents.add(command, "command", _first_line(prose, command))
    relationships: list[dict] = []
    seen: set[tuple[str, str, str]] = set()
    for plain, names in per_sentence:
        for a, rel, b in stated_relations(plain, names):
            if (a, rel, b) in seen or len(relationships) >= MAX_RELATIONSHIPS:
                continue
            seen.add((a, rel, b))
            relationships.append({"source": a, "relation": rel, "target": b,
                                  "evidence": plain[:300]})

    facts = []
    for plain, names in per_sentence:
        anchor = names[0] if names else topic
        if anchor and is_fact(plain):
            facts.append({"text": plain, "entity": anchor})
            if len(facts) >= MAX_FACTS:
                break
    return {"entities": list(ents.by_key.values()), "relationships": relationships,
            "facts": facts}
