"""The extraction tool schema is generated from the models that validate the answer, and
every value the schema allows validates: walked leaf by leaf with boundary values, and
with whole boundary answers from tests.schema_boundary. Plus item-level salvage and the
prompt prefix that prompt caching needs."""

from __future__ import annotations

import copy
import json
import random

import jsonschema
import pytest

from packs.llm.costs import MIN_CACHEABLE_TOKENS, min_cacheable_tokens
from tasks.extract.core import TOOL, assemble
from tasks.extract.examples import EXAMPLES
from tasks.extract.prompt import SYSTEM_PROMPT, batch_tool, prefix_tokens
from tasks.extract.schema import (
    EXTRACTION_SCHEMA,
    MAX_NAME_CHARS,
    Extraction,
    batch_schema,
    extraction_schema,
    salvage,
)
from tests.anthropic_fake import count_tokens
from tests.schema_boundary import instance, instances

BOUNDARY_STRINGS = ["", " ", "\t", "a", "Z", "7", "_", "-", "日本", "😀", "\x1c", "\ufeff",
                    "\u00a0x\u00a0", "  padded  ", "</section>", "line\nbreak", "a()", "()",
                    "x" * (MAX_NAME_CHARS - 1), "x" * MAX_NAME_CHARS,
                    "x" * (MAX_NAME_CHARS + 1), " " * MAX_NAME_CHARS + "a", "y" * 999,
                    "y" * 1000, "y" * 1001, "z" * 20_000, "USES", "uses it", "A_1", "!!!"]
OTHER_VALUES = [None, 0, 1.5, True, [], {}, ["a"], {"k": "v"}]


def _validator(schema: dict) -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _base_answer() -> dict:
    data = copy.deepcopy(EXAMPLES[0]["answer"])
    data["entities"][0]["aliases"] = ["HDB"]  # so the walk reaches an alias too
    return data


def _leaves(schema: dict, path: tuple = ()) -> list[tuple[tuple, dict]]:
    """(path, schema node) of every scalar and list node under an object's properties;
    list items are addressed by index 0."""
    out = []
    if schema.get("type") == "object":
        for key, sub in schema.get("properties", {}).items():
            out += _leaves(sub, path + (key,))
    elif schema.get("type") == "array":
        out.append((path, schema))
        out += _leaves(schema.get("items", {}), path + (0,))
    else:
        out.append((path, schema))
    return out


def _set(data: dict, path: tuple, value) -> None:
    node = data
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value


def _delete(data: dict, path: tuple) -> None:
    node = data
    for p in path[:-1]:
        node = node[p]
    del node[path[-1]]


def _items(data: dict) -> int:
    return sum(len(data.get(k) or []) for k in ("entities", "relationships", "facts")
               if isinstance(data.get(k), list))


def test_the_tool_schema_is_generated_from_the_validating_models():
    assert TOOL["input_schema"] == extraction_schema() == EXTRACTION_SCHEMA
    schema = json.dumps(EXTRACTION_SCHEMA)
    assert "$ref" not in schema and "$defs" not in schema and '"title"' not in schema
    entity = EXTRACTION_SCHEMA["properties"]["entities"]["items"]
    fact = EXTRACTION_SCHEMA["properties"]["facts"]["items"]
    # the constraint that made every section fail once: declared in the schema now
    assert fact["properties"]["entity"]["minLength"] == 1
    assert entity["properties"]["name"]["maxLength"] == MAX_NAME_CHARS
    assert entity["required"] == ["name", "type", "description"]
    assert set(entity["properties"]["type"]["enum"]) >= {"concept", "api", "other"}
    _validator(EXTRACTION_SCHEMA)
    _validator(batch_schema(3))


def test_every_leaf_value_the_schema_allows_validates():
    """Walk the schema: put each boundary value at each leaf of a valid answer; whatever the
    schema accepts must be kept whole by salvage (no item dropped)."""
    validator = _validator(EXTRACTION_SCHEMA)
    accepted = rejected = 0
    for path, node in _leaves(EXTRACTION_SCHEMA):
        values = BOUNDARY_STRINGS + OTHER_VALUES
        if node.get("enum"):
            values = values + list(node["enum"])
        for value in values:
            data = _base_answer()
            _set(data, path, value)
            if validator.is_valid(data):
                accepted += 1
                result = salvage(data)
                assert not result.dropped, (path, value, result.dropped)
                assert result.kept == _items(data)
            else:
                rejected += 1
                # outside the schema: at worst the one item (or the one list) is dropped,
                # never the answer
                result = salvage(data)
                lost = len(_base_answer()[path[0]]) if len(path) == 1 else 1
                assert result.kept >= _items(_base_answer()) - lost, (path, value)
    assert accepted > 150 and rejected > 150, (accepted, rejected)


def test_missing_optional_keys_extra_keys_and_empty_lists_validate():
    validator = _validator(EXTRACTION_SCHEMA)
    data = _base_answer()
    for entity in data["entities"]:
        del entity["aliases"]  # optional
        entity["unexpected"] = {"nested": [1, 2]}
    data["relationships"][0]["confidence"] = 0.9
    data["extra_top_level"] = "ignored"
    assert validator.is_valid(data)
    result = salvage(data)
    assert not result.dropped and all(e.aliases == [] for e in result.extraction.entities)
    empty = {"entities": [{"name": "a", "type": "other", "description": ""}],
             "relationships": [], "facts": []}
    assert validator.is_valid(empty)
    assert salvage(empty).kept == 1
    # a required key missing is outside the schema: that item alone goes
    for path in [("entities", 0, "name"), ("facts", 0, "entity"), ("relationships", 0, "target")]:
        data = _base_answer()
        _delete(data, path)
        assert not validator.is_valid(data)
        result = salvage(data)
        assert result.dropped == {f"{path[0]}.{path[2]}: missing": 1}


@pytest.mark.parametrize("seed", range(2))
def test_whole_boundary_answers_validate_and_assemble(seed):
    """Answers a strictly schema-following server gives (min, max and mixed profiles)."""
    for schema in (EXTRACTION_SCHEMA, batch_schema(3)):
        validator = _validator(schema)
        for data in instances(schema, seed=seed, count=30):
            assert validator.is_valid(data)
            parts = [data] if schema is EXTRACTION_SCHEMA else \
                [data[k] for k in schema["properties"]]
            for part in parts:
                result = salvage(part)
                assert not result.dropped, result.dropped
                assert result.extraction.entities  # minItems 1: every section has one
                tables = assemble([("s1", result.extraction)])
                assert tables["entities"].height >= 1


def test_the_boundary_generator_honours_the_schema():
    rng = random.Random(0)
    lo = instance(EXTRACTION_SCHEMA, rng, "min")
    hi = instance(EXTRACTION_SCHEMA, rng, "max")
    assert len(lo["entities"]) == 1 and lo["relationships"] == [] and lo["facts"] == []
    assert "aliases" not in lo["entities"][0]  # optional keys left out
    assert len(hi["entities"]) == 25 and "unexpected_key" in hi  # extra keys added
    assert any(len(e["name"]) == MAX_NAME_CHARS for e in hi["entities"])
    assert any(len(e["description"]) == 1000 for e in hi["entities"])
    with pytest.raises(ValueError, match="no boundary string"):
        instance({"type": "string", "pattern": "^impossible$", "maxLength": 3}, rng, "min")


def test_salvage_keeps_valid_items_and_counts_the_rest_by_reason():
    data = _base_answer()
    data["entities"][0]["name"] = ""
    data["entities"][1]["name"] = "x" * 300
    data["facts"][0]["entity"] = "   "
    data["relationships"].append("not an object")
    result = salvage(data)
    assert result.dropped == {"entities.name: empty": 1, "entities.name: too long": 1,
                              "facts.entity: empty": 1, "relationships: not an object": 1}
    assert result.kept == _items(_base_answer()) - 3 and not result.lost_most
    assert {e.name for e in result.extraction.entities} >= {"Ripple", "pool_mode"}


def test_lost_most_and_unusable_answers():
    data = _base_answer()
    for e in data["entities"]:
        e["name"] = "!!!"
    data["relationships"], data["facts"] = data["relationships"][:1], []
    result = salvage(data)
    assert result.lost_most and result.quality < 0.5  # 8 dropped, 1 kept: worth a repair
    for bad in ([], "text", None, {"entities": "HPA, Deployment"}, {"other": []},
                {"entities": [{"name": ""}], "facts": [{"text": "", "entity": "x"}]}):
        with pytest.raises(ValueError):
            salvage(bad)
    # one list of the wrong type is a dropped list, not a lost answer
    data = _base_answer()
    data["facts"] = "a fact"
    assert salvage(data).dropped == {"facts: not a list": 1}


def test_lenient_normalisation():
    result = salvage({"entities": [
        {"name": "  HPA  ", "type": "Config Option", "description": "d" * 5000,
         "aliases": ["", "  ", "hpa", "hpa", "x" * 500, "!!"]},
        {"name": "Pod", "type": "weird"}],
        "relationships": [{"source": "HPA", "relation": "!!!", "target": "Pod",
                           "evidence": ""},
                          {"source": "HPA", "relation": "scales up", "target": "Pod"}],
        "facts": []})
    hpa, pod = result.extraction.entities
    assert hpa.name == "HPA" and hpa.type == "config_option" and len(hpa.description) == 1000
    assert hpa.aliases == ["hpa"] and pod.type == "other" and pod.description == ""
    assert [r.relation for r in result.extraction.relationships] == ["RELATED_TO", "SCALES_UP"]


def test_worked_examples_validate_whole():
    for example in EXAMPLES:
        result = salvage(example["answer"])
        assert not result.dropped
        assert _validator(EXTRACTION_SCHEMA).is_valid(example["answer"])
        Extraction.model_validate(example["answer"])


def test_the_fixed_prefix_reaches_the_minimum_cacheable_length():
    """Claude Haiku 4.5 caches a prefix only from 4,096 tokens; a shorter one is billed in
    full on every call, silently. Both token estimates must clear it with a margin."""
    minimum = min_cacheable_tokens("claude-haiku-4-5")
    assert minimum == MIN_CACHEABLE_TOKENS["claude-haiku-4-5"] == 4096
    for n in (1, 2, 8):
        tool = batch_tool(n) if n > 1 else TOOL
        words = count_tokens(SYSTEM_PROMPT) + count_tokens(json.dumps([tool]))
        assert prefix_tokens(n) >= 1.1 * minimum and words >= 1.1 * minimum, (n, words)
    assert min_cacheable_tokens("claude-sonnet-4-5-20250929") == 1024
    assert min_cacheable_tokens("claude-next-9") == max(MIN_CACHEABLE_TOKENS.values())
