"""What Claude must return for one section, as pydantic models: the validator AND the tool
schema (one source of truth), plus item-level salvage.

The tool's `input_schema` is generated from these models (`tool_schema`), so the schema
the API fills and the validator that reads the answer cannot drift apart. The rule that
makes it safe: **every value the schema allows also validates.** Where the two differ, the
validator is the more lenient one:

- names (entity name, relationship source/target, fact entity) and fact text must hold a
  letter or digit: the schema says `minLength: 1, pattern: "[^\\W_]"` (read with Unicode
  semantics, as Python does; an ECMA engine reads it as ASCII, which is stricter), the
  validator checks the same after trimming whitespace that every regex engine calls
  whitespace;
- long free text (descriptions, evidence, fact text) is cut at its `maxLength`, never
  refused; names longer than theirs are refused (a 300-character "name" is not one);
- an unknown entity type becomes "other", a relation is normalised to UPPER_SNAKE (and
  RELATED_TO when nothing is left), blank or over-long aliases are left out;
- keys the schema does not declare are ignored; `aliases` may be missing; `type`,
  `description` and `evidence` are required by the schema but defaulted by the validator;
- lists may be empty or longer than `maxItems` (the schema's item counts guide the model,
  they are not a reason to lose an answer).

**Salvage** (`salvage`): an answer is validated item by item. Valid entities,
relationships and facts are kept; invalid ones are dropped and counted by reason
("entities.name: string_too_long"). The answer as a whole is unusable only when it is not
an object or has none of the three lists; `Salvaged.lost_most` says when the dropped items
outnumber the kept ones (the caller then asks once for a repair).
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from tasks.extract.entities import normalize_name

ENTITY_TYPES = (
    "concept", "term", "code", "api", "command", "config_option", "library", "tool",
    "product", "service", "protocol", "standard", "data_format", "organization", "person",
    "other",
)
# Identifier types the offline extractor infers from a name's form (tasks/extract/
# offline_names.py). The validator accepts them; the tool schema asks Claude for
# ENTITY_TYPES alone, so Claude's requests, and the answers cached under them, are unchanged.
OFFLINE_TYPES = ("setting", "flag", "environment_variable", "function", "file", "version")
ALL_TYPES = ENTITY_TYPES + OFFLINE_TYPES
LISTS = ("entities", "relationships", "facts")
MAX_ENTITIES, MAX_RELATIONSHIPS, MAX_FACTS = 25, 25, 15
MAX_NAME_CHARS = 200
MAX_TEXT_CHARS = 1000
MAX_ALIASES = 10
DEFAULT_RELATION = "RELATED_TO"
# Whitespace in Python, ECMA-262 and Unicode (White_Space) alike: trimming only these means
# a string the schema's pattern accepts under any engine is never trimmed to nothing.
_SPACE = " \t\n\r\f\v\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008" \
         "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
HAS_WORD = r"[^\W_]"  # a letter or digit (Unicode)


def _trim(value: Any) -> Any:
    return value.strip(_SPACE) if isinstance(value, str) else value


def _has_word(value: str) -> str:
    if not any(c.isalnum() for c in value) or not normalize_name(value):
        raise ValueError("must contain a letter or digit")
    return value


def _cut(limit: int):
    def cut(value: Any) -> Any:
        return _trim(value)[:limit] if isinstance(value, str) else value
    return cut


def _entity_type(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    v = _trim(value).lower().replace(" ", "_").replace("-", "_")
    return v if v in ALL_TYPES else "other"


def _relation(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    return re.sub(r"[^A-Za-z0-9]+", "_", value).strip("_").upper() or DEFAULT_RELATION


Name = Annotated[str, BeforeValidator(_trim),
                 Field(min_length=1, max_length=MAX_NAME_CHARS,
                       json_schema_extra={"pattern": HAS_WORD})]
Text = Annotated[str, BeforeValidator(_cut(MAX_TEXT_CHARS)),
                 Field(json_schema_extra={"maxLength": MAX_TEXT_CHARS})]
WordText = Annotated[str, BeforeValidator(_cut(MAX_TEXT_CHARS)),
                     Field(min_length=1, json_schema_extra={"maxLength": MAX_TEXT_CHARS,
                                                            "pattern": HAS_WORD})]
EntityType = Annotated[Literal[ALL_TYPES], BeforeValidator(_entity_type),  # type: ignore[valid-type]
                       Field(json_schema_extra={"enum": list(ENTITY_TYPES)})]
Relation = Annotated[str, BeforeValidator(_relation),
                     Field(json_schema_extra={"pattern": "^[A-Z][A-Z0-9_]*$"})]


class _Item(BaseModel):
    model_config = ConfigDict(extra="ignore")
    # What the tool schema lists as required (the validator may default some of them).
    SCHEMA_REQUIRED: ClassVar[tuple[str, ...]] = ()


class EntityOut(_Item):
    SCHEMA_REQUIRED = ("name", "type", "description")

    name: Name = Field(description="The name as written in the text, without markdown.")
    type: EntityType = Field(default="other", description="What kind of thing it is.")
    description: Text = Field(default="", description="One sentence: what it is, per this "
                                                      "section.")
    aliases: list[str] = Field(
        default_factory=list, description="Other spellings and acronyms used in the text.",
        json_schema_extra={"maxItems": MAX_ALIASES,
                           "items": {"type": "string", "maxLength": MAX_NAME_CHARS}})

    @field_validator("name")
    @classmethod
    def _name_has_word(cls, v: str) -> str:
        return _has_word(v)

    @field_validator("aliases", mode="before")
    @classmethod
    def _clean_aliases(cls, v: Any) -> Any:
        # An unusable alias is left out; it never costs the entity.
        if not isinstance(v, list):
            return v
        out: list[str] = []
        for a in v:
            a = _trim(a) if isinstance(a, str) else ""
            if a and len(a) <= MAX_NAME_CHARS and any(c.isalnum() for c in a) and a not in out:
                out.append(a)
        return out


class RelationshipOut(_Item):
    SCHEMA_REQUIRED = ("source", "relation", "target", "evidence")

    source: Name = Field(description="An entity name from your entities list.")
    relation: Relation = Field(default=DEFAULT_RELATION,
                               description="A short verb phrase in UPPER_SNAKE_CASE.")
    target: Name = Field(description="An entity name from your entities list.")
    evidence: Text = Field(default="", description="The sentence that supports it, quoted "
                                                   "or closely paraphrased.")

    @field_validator("source", "target")
    @classmethod
    def _name_has_word(cls, v: str) -> str:
        return _has_word(v)


class FactOut(_Item):
    SCHEMA_REQUIRED = ("text", "entity")

    text: WordText = Field(description="A standalone statement, true without the section.")
    entity: Name = Field(description="The entity name (from your list) it is about.")

    @field_validator("text", "entity")
    @classmethod
    def _has_word(cls, v: str) -> str:
        return _has_word(v)


class Extraction(_Item):
    """What one documentation section says: its entities, relationships and facts."""

    SCHEMA_REQUIRED = LISTS

    entities: list[EntityOut] = Field(
        default_factory=list, json_schema_extra={"minItems": 1, "maxItems": MAX_ENTITIES},
        description="At least one: the section's topic.")
    relationships: list[RelationshipOut] = Field(
        default_factory=list, json_schema_extra={"maxItems": MAX_RELATIONSHIPS})
    facts: list[FactOut] = Field(default_factory=list,
                                 json_schema_extra={"maxItems": MAX_FACTS})


_ITEM_MODELS: dict[str, type[_Item]] = {
    "entities": EntityOut, "relationships": RelationshipOut, "facts": FactOut}
_MODELS = {m.__name__: m for m in (Extraction, EntityOut, RelationshipOut, FactOut)}


# --- the schema -----------------------------------------------------------------------------


def _clean(node: Any, defs: dict, model: str | None = None) -> Any:
    """Inline $refs, drop titles and defaults, and apply each model's SCHEMA_REQUIRED."""
    if isinstance(node, list):
        return [_clean(n, defs) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return _clean(defs[name], defs, name)
    out = {k: _clean(v, defs) for k, v in node.items()
           if k not in ("title", "default", "$defs")}
    if model in _MODELS and out.get("type") == "object":
        out["required"] = list(_MODELS[model].SCHEMA_REQUIRED)
    return out


def extraction_schema() -> dict:
    """The JSON schema of one section's answer, generated from `Extraction`."""
    raw = Extraction.model_json_schema()
    return _clean(raw, raw.get("$defs", {}), "Extraction")


EXTRACTION_SCHEMA = extraction_schema()


def batch_schema(n: int) -> dict:
    """The schema of an answer for `n` sections: one extraction per `section_i` key."""
    props = {}
    for i in range(1, n + 1):
        props[section_key(i)] = {**copy.deepcopy(EXTRACTION_SCHEMA),
                                 "description": f'What <section id="{section_key(i)}"> says.'}
    return {"type": "object", "properties": props, "required": list(props)}


def section_key(i: int) -> str:
    return f"section_{i}"


# --- salvage --------------------------------------------------------------------------------


@dataclass
class Salvaged:
    """A section's answer after item-level validation."""

    extraction: Extraction
    dropped: Counter = field(default_factory=Counter)  # reason -> items dropped
    kept: int = 0

    @property
    def dropped_items(self) -> int:
        return sum(self.dropped.values())

    @property
    def lost_most(self) -> bool:
        """More items were dropped than kept: worth one repair round."""
        return self.dropped_items > self.kept

    @property
    def quality(self) -> float:
        total = self.kept + self.dropped_items
        return self.kept / total if total else 1.0


_WHY = {"missing": "missing", "string_too_short": "empty", "too_short": "empty",
        "string_too_long": "too long", "too_long": "too long", "string_type": "not a string",
        "list_type": "not a list", "literal_error": "unknown value"}


def _reason(kind: str, error: ValidationError) -> str:
    """A short, countable reason: "entities.name: empty", "facts.entity: missing"."""
    first = error.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ()) if not isinstance(p, int))
    etype = first.get("type", "invalid")
    why = _WHY.get(etype)
    if why is None:
        why = str(first.get("msg", etype)).removeprefix("Value error, ")
    return f"{kind}.{loc}: {why}" if loc else f"{kind}: {why}"


def salvage(data: Any) -> Salvaged:
    """Validate a tool input item by item.

    Returns the valid items with the dropped ones counted by reason. Raises ValueError
    when the answer is unusable as a whole: not an object, none of entities /
    relationships / facts is a list, or items were given and none of them is valid.
    """
    if not isinstance(data, dict):
        raise ValueError(f"the answer is {type(data).__name__}, expected an object")
    lists = {k: data.get(k) for k in LISTS}
    if not any(isinstance(v, list) for v in lists.values()):
        raise ValueError("the answer has none of entities, relationships, facts as a list")
    dropped: Counter = Counter()
    kept: dict[str, list] = {k: [] for k in LISTS}
    for kind, items in lists.items():
        if items is None:
            continue
        if not isinstance(items, list):
            dropped[f"{kind}: not a list"] += 1
            continue
        model = _ITEM_MODELS[kind]
        for item in items:
            if not isinstance(item, dict):
                dropped[f"{kind}: not an object"] += 1
                continue
            try:
                kept[kind].append(model.model_validate(item))
            except ValidationError as exc:
                dropped[_reason(kind, exc)] += 1
    n_kept = sum(len(v) for v in kept.values())
    if n_kept == 0 and dropped:
        reasons = "; ".join(f"{r} x{n}" for r, n in dropped.most_common(4))
        raise ValueError(f"no item of the answer is valid ({reasons})")
    return Salvaged(Extraction.model_construct(**kept), dropped, n_kept)


def parse_extraction(data: Any) -> Extraction:
    """A stored (already salvaged) answer back as an Extraction; ValueError if it no longer
    validates whole (a cache row from an older schema is then a miss)."""
    result = salvage(data)
    if result.dropped:
        raise ValueError(f"stored extraction no longer validates: {dict(result.dropped)}")
    return result.extraction


def dump_extraction(value: Extraction) -> dict:
    return value.model_dump(mode="json")
