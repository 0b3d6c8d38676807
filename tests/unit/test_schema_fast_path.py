"""The flat Draft 2020-12 meta-schema (the fast path of `parser.schema_error`) decides exactly as
the original one: the same verdict on thousands of generated schemas, valid and invalid."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import jsonschema
import jsonschema_rs
import pytest

from agents_contract import parser

_SCHEMA_KEYWORDS = ("items", "contains", "additionalProperties", "propertyNames", "if", "then", "else", "not",
                    "unevaluatedItems", "unevaluatedProperties", "contentSchema")
_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")
_SCHEMA_ARRAYS = ("prefixItems", "allOf", "anyOf", "oneOf")
_OTHER = ("type", "const", "enum", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
          "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
          "maxProperties", "minProperties", "required", "dependentRequired", "dependencies", "title",
          "description", "default", "deprecated", "readOnly", "writeOnly", "examples", "format",
          "contentEncoding", "contentMediaType", "$id", "$schema", "$ref", "$anchor", "$dynamicRef",
          "$dynamicAnchor", "$vocabulary", "$comment", "$recursiveAnchor", "$recursiveRef", "x-vendor")
_STRINGS = ("object", "string", "integer", "number", "array", "boolean", "null", "nope", "", "a", "#", "#/a",
            "http://x.example/s", "https://json-schema.org/draft/2020-12/schema", "urn:x", "a b", "\\", "::",
            "^[a-z]+$", "(", "[", "\\d+", "(?<n>a)", "a{2,1}", "x#y#z", "_anchor", "1bad", "date-time",
            "http://[::1", "%zz")


def _scalar(rng: random.Random) -> Any:
    pick = rng.randrange(12)
    if pick < 4:
        return rng.choice(_STRINGS)
    if pick < 6:
        return rng.choice((-3, -1, 0, 1, 2, 7, 10**20))
    if pick == 6:
        return rng.choice((0.0, 0.5, -1.5, 2.0))
    if pick == 7:
        return rng.choice((Decimal("1.5"), Decimal("-0.25"), Decimal("3")))
    if pick == 8:
        return rng.choice((True, False))
    if pick == 9:
        return None
    if pick == 10:
        return [rng.choice(_STRINGS) for _ in range(rng.randrange(4))]
    return {rng.choice(_STRINGS): rng.choice((True, 1, "x")) for _ in range(rng.randrange(3))}


def _schema(rng: random.Random, depth: int) -> Any:
    if depth > 3 or rng.random() < 0.15:
        return rng.choice((True, False, {}, {"type": "string"})) if rng.random() < 0.8 else _scalar(rng)
    out: dict[str, Any] = {}
    for _ in range(rng.randrange(5)):
        kind = rng.randrange(10)
        if kind < 2:
            out[rng.choice(_SCHEMA_KEYWORDS)] = _schema(rng, depth + 1)
        elif kind < 4:
            key = rng.choice(_SCHEMA_MAPS)
            value: Any = {rng.choice(_STRINGS): _schema(rng, depth + 1) for _ in range(rng.randrange(3))}
            out[key] = value if rng.random() < 0.9 else _scalar(rng)
        elif kind < 5:
            key = rng.choice(_SCHEMA_ARRAYS)
            out[key] = [_schema(rng, depth + 1) for _ in range(rng.randrange(3))] if rng.random() < 0.9 else _scalar(rng)
        else:
            out[rng.choice(_OTHER)] = _scalar(rng)
    return out


@pytest.fixture(scope="module")
def validators() -> tuple[Any, Any]:
    original = jsonschema_rs.Draft202012Validator(jsonschema.Draft202012Validator.META_SCHEMA, validate_formats=True)
    return original, parser._fast_meta_validator()


def test_flat_meta_schema_decides_as_the_original(validators: tuple[Any, Any]) -> None:
    original, flat = validators
    rng = random.Random(20260512)
    verdicts = {True: 0, False: 0}
    for _ in range(6000):
        schema = _schema(rng, 0)
        expected = original.is_valid(schema)
        assert flat.is_valid(schema) is expected, schema
        verdicts[expected] += 1
    assert min(verdicts.values()) > 500  # both verdicts well exercised


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "nope"}}},
    {"type": "object", "properties": {"a": {"items": {"minLength": -1}}}},
    {"$defs": {"x": {"pattern": "("}}},
    {"dependencies": {"a": ["b", "b"]}},
    {"definitions": {"a": {"type": 3}}},
    {"allOf": []},
    {"$id": "a#frag"},
    {"$recursiveAnchor": "1bad"},
    {"contentSchema": {"enum": 1}},
    {"unevaluatedProperties": {"required": [1]}},
    {"propertyNames": {"$vocabulary": {"urn:x": 1}}},
])
def test_flat_meta_schema_rejects_nested_mistakes(validators: tuple[Any, Any], schema: dict[str, Any]) -> None:
    original, flat = validators
    assert original.is_valid(schema) is False
    assert flat.is_valid(schema) is False
    assert parser.schema_error(schema) is not None


def test_flat_meta_schema_refuses_an_unknown_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError):
        parser._static_refs({"$dynamicRef": "#other"})
    with pytest.raises(ValueError):
        parser._static_refs({"$ref": "meta/core"})
    from jsonschema_specifications import REGISTRY

    contents = REGISTRY.contents

    def altered(uri: str, change: dict[str, Any]) -> Any:
        def fake(asked: str) -> Any:
            value = contents(asked)
            return {**value, **change} if asked == uri else value
        return fake

    base = "https://json-schema.org/draft/2020-12/"
    for uri, change in [
        (base + "schema", {"allOf": []}),
        (base + "meta/core", {"type": "object"}),
        (base + "meta/core", {"allOf": [{}]}),
        (base + "meta/content", {"properties": {"format": {"type": "string"}}}),
    ]:
        monkeypatch.setattr(type(REGISTRY), "contents", lambda self, asked, fake=altered(uri, change): fake(asked))
        with pytest.raises(ValueError):
            parser.flat_meta_schema()
