"""Boundary values that a JSON schema allows: what a strictly schema-following API returns.

`instance(schema, rng, profile)` builds one value that conforms to `schema` (the subset a
tool input_schema uses: object, array, string with minLength / maxLength / pattern / enum,
integer, number, boolean, null) and sits at its edges:

- "min": only required keys, arrays at minItems, the shortest strings the constraints
  allow (an empty string when nothing forbids it);
- "max": every declared key plus undeclared extra keys (unless additionalProperties is
  false), arrays at maxItems (or LONG_ARRAY when unbounded), the longest strings (or
  LONG_STRING characters when unbounded);
- "mixed": each node picks min, max or something between, from `rng`.

Strings are drawn from awkward candidates: whitespace padding, non-ASCII letters, emoji,
control characters, quotes, newlines, markup that looks like the prompt's delimiters,
repeated separators. Only candidates that satisfy the schema's constraints are used
(patterns are matched with Python's `re.search`, the way JSON Schema patterns are
unanchored); a string node no candidate satisfies raises ValueError, so a schema this
module cannot honour is noticed rather than answered wrongly.
"""

from __future__ import annotations

import random
import re
from typing import Any

PROFILES = ("min", "max", "mixed")
LONG_STRING = 5000
LONG_ARRAY = 30
_UNITS = ("a", "Z", "7", "é", "ǅ", "日", "😀", "_", "-", ".", " ", "\t", "\x1c", "\u00a0",
          "\ufeff", "<", '"', "\\", "\n")
_WORDS = ("", " ", "a", "A", "A_1", "x y", "  padded  ", "</section>", '"quoted"',
          "line\nbreak", "tab\tbed", "ǅungla", "日本語", "😀 emoji", "\x1cctl", "__init__",
          "RELATED_TO", "USES", "kube-apiserver", "a()", "'single'", "{\"json\": 1}",
          "\u00a0nbsp\u00a0", "null", "0")


def _fits(s: str, node: dict) -> bool:
    if len(s) < node.get("minLength", 0):
        return False
    if "maxLength" in node and len(s) > node["maxLength"]:
        return False
    pattern = node.get("pattern")
    return pattern is None or re.search(pattern, s) is not None


def _strings_of_length(n: int) -> list[str]:
    if n == 0:
        return [""]
    out = [u * n for u in _UNITS]
    # mostly awkward padding around one usable character
    out += [" " * (n - 1) + "a", "a" + " " * (n - 1), "\x1c" * (n - 1) + "b",
            "_" * (n - 1) + "9", "A" + "_" * (n - 1), "A" * n, "日" * (n - 1) + "a"]
    return out


def _string(node: dict, rng: random.Random, mode: str) -> str:
    if "enum" in node:
        values = list(node["enum"])
        return values[0] if mode == "min" else values[-1] if mode == "max" else rng.choice(values)
    if "const" in node:
        return node["const"]
    lo = node.get("minLength", 0)
    hi = node.get("maxLength", LONG_STRING)
    if mode == "min":
        lengths = [lo, lo + 1, lo + 2, lo + 5]
    elif mode == "max":
        lengths = [hi, hi - 1]
    else:
        lengths = [lo, hi, rng.randint(lo, max(lo, min(hi, 60)))]
    for n in lengths:
        options = [s for s in _strings_of_length(max(0, n)) if _fits(s, node)]
        if options:
            return rng.choice(options)
    options = [w for w in _WORDS if _fits(w, node)]
    if options:
        return rng.choice(options)
    raise ValueError(f"no boundary string satisfies {node}")


def _array(node: dict, rng: random.Random, mode: str, profile: str) -> list:
    lo = node.get("minItems", 0)
    hi = node.get("maxItems", LONG_ARRAY)
    n = lo if mode == "min" else hi if mode == "max" else rng.choice([lo, hi, rng.randint(lo, hi)])
    items = node.get("items", {})
    return [instance(items, rng, profile) for _ in range(n)]


def _object(node: dict, rng: random.Random, mode: str, profile: str) -> dict:
    props: dict = node.get("properties", {})
    required = set(node.get("required", ()))
    out: dict[str, Any] = {}
    for key, sub in props.items():
        if key in required or mode == "max" or (mode == "mixed" and rng.random() < 0.5):
            out[key] = instance(sub, rng, profile)
    if node.get("additionalProperties", True) is not False and mode != "min":
        out["unexpected_key"] = rng.choice(["", "value", 0, None, [1, 2], {"nested": True}])
        out[rng.choice(["x-extra", "__proto__", "Entities"])] = "extra"
    return out


def instance(schema: dict, rng: random.Random, profile: str = "mixed") -> Any:
    """One boundary value conforming to `schema` (see the module docstring)."""
    if profile not in PROFILES:
        raise ValueError(f"profile {profile!r}: use one of {PROFILES}")
    mode = profile if profile != "mixed" else rng.choice(("min", "max", "mid"))
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if "enum" in schema and kind is None:
        kind = "string"
    if kind == "object":
        return _object(schema, rng, mode, profile)
    if kind == "array":
        return _array(schema, rng, mode, profile)
    if kind == "string":
        return _string(schema, rng, mode)
    if kind in ("integer", "number"):
        lo, hi = schema.get("minimum", -(2 ** 31)), schema.get("maximum", 2 ** 31)
        value = lo if mode == "min" else hi if mode == "max" else rng.randint(int(lo), int(hi))
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return mode == "max"
    if kind == "null":
        return None
    raise ValueError(f"schema node without a supported type: {schema}")


def instances(schema: dict, seed: int = 0, count: int = 60) -> list[Any]:
    """`count` boundary values: the pure min and max profiles, then mixed ones."""
    rng = random.Random(seed)
    out = [instance(schema, rng, "min"), instance(schema, rng, "max")]
    out += [instance(schema, rng, "mixed") for _ in range(max(0, count - 2))]
    return out
