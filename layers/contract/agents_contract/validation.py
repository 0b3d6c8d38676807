"""Request shape -> wire model, with the official protocol error messages.

pydantic does the validation (strict, unknown members forbidden); this module only translates its
first error into the official wording: missing, unknown, invalid type, invalid value.
"""

from __future__ import annotations

import re
import types
from decimal import Decimal
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, Discriminator, Tag, ValidationError
from pydantic.fields import FieldInfo

from . import wire
from .errors import InvalidRequest

M = TypeVar("M", bound=BaseModel)

# The supported values an official message lists for a union (in the official order), by the member
# that holds the union.
_UNIONS: dict[str, tuple[str, ...]] = {
    "tools": wire.TOOL_TYPES,
    "transport": wire.TRANSPORT_TYPES,
    "format": wire.TEXT_FORMAT_TYPES,
    "environment": wire.ENVIRONMENT_TYPES,
    "events": wire.INPUT_EVENT_TYPES,
    "content": wire.CONTENT_TYPES,
    "output": wire.CONTENT_TYPES,
    "auth": wire.CREDENTIAL_AUTH_TYPES,
    "token_endpoint_auth": wire.TOKEN_ENDPOINT_AUTH_TYPES,
}

_TYPE_NAMES = {
    "string_type": "a string",
    "bool_type": "a boolean",
    "int_type": "an integer",
    "float_type": "a number",
    "decimal_type": "a number",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "an array",
}


def json_type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, (float, Decimal)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "an unsupported value"


def quoted_list(values: tuple[str, ...] | list[str]) -> str:
    """'a', 'b', and 'c' (two values: 'a' and 'b')."""
    q = [f"'{v}'" for v in values]
    if len(q) == 1:
        return q[0]
    if len(q) == 2:
        return f"{q[0]} and {q[1]}"
    return ", ".join(q[:-1]) + ", and " + q[-1]


def render_path(schema: Any, loc: tuple[Any, ...] | list[Any], prefix: str = "") -> str:
    """The request path of pydantic's error location `loc` for a value validated as `schema` (a model
    class or any annotation): `name.member[0].member`, prefix first.

    pydantic puts the tag of the variant it chose into `loc` after a discriminated union; that tag is
    not a member of the request and is left out. Only that: the walk follows `schema` alongside `loc`,
    so a segment is dropped only where `schema` has a discriminated union and the segment is one of
    its tags, never because a member is named like some union's tag elsewhere ('text', 'function').
    Where the schema cannot be followed (an unknown member, a free-form object), the rest is rendered
    as it is.
    """
    out = prefix
    shape = _shape(schema)
    for element in loc:
        if isinstance(shape, _Union) and isinstance(element, str):
            variant = shape.variant(element)
            if variant is not None:
                shape = _shape(variant)
                continue  # pydantic's union tag, not a member of the request
        if isinstance(element, int):
            out += f"[{element}]"
        else:
            out = _member(out, str(element))
        shape = _child(shape, element)
    return out


def _member(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class _Union:
    """A discriminated union: each tag pydantic may put into `loc`, with the variant it selects."""

    def __init__(self, variants: dict[str, Any]) -> None:
        self.variants = variants

    def variant(self, tag: str) -> Any:
        if tag in self.variants:
            return self.variants[tag]
        # A variant with several literal tags may be named by all of them, comma-separated.
        chosen = {id(self.variants[t]): self.variants[t] for t in tag.split(",") if t in self.variants}
        if len(chosen) == 1 and all(t in self.variants for t in tag.split(",")):
            return next(iter(chosen.values()))
        return None


def _shape(annotation: Any, discriminator: Any = None) -> Any:
    """`annotation` with Annotated and Optional taken off: a model class, list[...], dict[...], a
    `_Union` when it is a discriminated union, or None when there is no structure to follow."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation, *metadata = get_args(annotation)
            for meta in metadata:  # Field(discriminator=...) or Discriminator(...)
                found = meta.discriminator if isinstance(meta, FieldInfo) else meta
                if isinstance(found, Discriminator) or (isinstance(meta, FieldInfo) and isinstance(found, str)):
                    discriminator = found
            continue
        if origin is Union or origin is types.UnionType:
            members = [m for m in get_args(annotation) if m is not type(None)]
            if len(members) == 1:  # Optional[X]: null is no separate branch in `loc`
                annotation = members[0]
                continue
            if discriminator is None:
                return None  # a plain union names its members by their types; nothing to follow
            return _Union(_variants(members, discriminator))
        break
    if origin in (list, dict) or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return annotation
    return None


def _variants(members: list[Any], discriminator: Any) -> dict[str, Any]:
    variants: dict[str, Any] = {}
    if isinstance(discriminator, Discriminator) and callable(discriminator.discriminator):
        for member in members:  # each member is Annotated[..., Tag(tag)]
            for meta in get_args(member)[1:] if get_origin(member) is Annotated else ():
                if isinstance(meta, Tag):
                    variants[meta.tag] = member
        return variants
    name = discriminator.discriminator if isinstance(discriminator, Discriminator) else discriminator
    for member in members:
        model = _shape(member, discriminator)
        if isinstance(model, _Union):  # a nested union: its tags select its own variants
            variants.update(model.variants)
            continue
        field = _field(model, name) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is not None and get_origin(field.annotation) is Literal:
            for value in get_args(field.annotation):
                variants[str(value)] = member
    return variants


def _field(model: type[BaseModel], name: str) -> FieldInfo | None:
    for field_name, field in model.model_fields.items():
        if name in (field_name, field.alias, field.validation_alias):
            return field
    return None


def _child(shape: Any, element: Any) -> Any:
    """The shape at `element` inside `shape` (None: nothing more to follow)."""
    if shape is None or isinstance(shape, _Union):
        return None
    if isinstance(shape, type) and issubclass(shape, BaseModel):
        field = _field(shape, element) if isinstance(element, str) else None
        return None if field is None else _shape(field.annotation, field.discriminator)
    origin, args = get_origin(shape), get_args(shape)
    if origin is list and isinstance(element, int) and args:
        return _shape(args[0])
    if origin is dict and isinstance(element, str) and len(args) == 2:
        return _shape(args[1])
    return None


def _tags_for(loc: tuple[Any, ...]) -> tuple[str, ...]:
    for element in reversed(loc):
        if isinstance(element, str) and element in _UNIONS:
            return _UNIONS[element]
    return ()


def translate(schema: Any, error: dict[str, Any], prefix: str = "") -> InvalidRequest:
    """The official message for pydantic's `error`, met validating a value as `schema`."""
    kind = error["type"]
    loc = tuple(error["loc"])
    value = error.get("input")
    path = render_path(schema, loc, prefix)
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return InvalidRequest(f"Missing required parameter: '{path}'.", param=path)
    if kind == "union_tag_not_found" and "string_or_array" in str(ctx.get("discriminator")):
        return InvalidRequest(
            f"Invalid type for '{path}': expected a string or an array, but got {json_type_name(value)} instead.",
            param=path,
        )
    if kind == "union_tag_not_found":
        path = _member(path, "type")
        return InvalidRequest(f"Missing required parameter: '{path}'.", param=path)
    if kind == "extra_forbidden":
        return InvalidRequest(f"Unknown parameter: '{path}'.", param=path)
    if kind == "union_tag_invalid":
        tag = ctx.get("tag")
        path = _member(path, "type")
        tags = _tags_for(loc) or tuple(re.findall(r"'([^']*)'", ctx.get("expected_tags", "")))
        if not isinstance(value.get("type") if isinstance(value, dict) else None, str):
            return InvalidRequest(
                f"Invalid type for '{path}': expected a string, but got {json_type_name(value.get('type'))} instead.",
                param=path,
            )
        return InvalidRequest(f"Invalid value: '{tag}'. Supported values are: {quoted_list(tags)}.", param=path)
    if kind == "literal_error":
        expected = tuple(re.findall(r"'([^']*)'", ctx.get("expected", "")))
        if not isinstance(value, str):
            return InvalidRequest(
                f"Invalid type for '{path}': expected a string, but got {json_type_name(value)} instead.", param=path
            )
        return InvalidRequest(f"Invalid value: '{value}'. Supported values are: {quoted_list(expected)}.", param=path)
    if kind in ("too_short", "too_long"):
        return InvalidRequest(f"Invalid '{path}': {error['msg'].lower()}.", param=path)
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        return InvalidRequest(f"Invalid '{path}': {error['msg'].lower()}.", param=path)
    if kind in _TYPE_NAMES or kind.endswith("_type"):
        expected = _TYPE_NAMES.get(kind, "a valid value")
        if kind == "union_type" or kind == "is_instance_of":
            expected = "a valid value"
        return InvalidRequest(
            f"Invalid type for '{path}': expected {expected}, but got {json_type_name(value)} instead.", param=path
        )
    if kind == "value_error" and ctx.get("error") is not None:  # a field validator's own sentence
        return InvalidRequest(f"Invalid '{path}': {ctx['error']}.", param=path)
    # Any other pydantic complaint: still the official envelope, never a 500.
    return InvalidRequest(f"Invalid value for '{path}': {error['msg']}.", param=path)


def _first_error(exc: ValidationError) -> dict[str, Any]:
    errors = exc.errors(include_url=False)
    # Union members each report; the shortest location is the caller's actual mistake.
    return min(errors, key=lambda e: (_union_noise(e), len(e["loc"])))


def _union_noise(error: dict[str, Any]) -> int:
    # Errors from trying a non-matching member of a plain (non-discriminated) union.
    loc = error["loc"]
    return 1 if any(isinstance(x, str) and ("[" in x or x in ("str", "list", "function-after")) for x in loc) else 0


def parse(model: type[M], body: Any, *, prefix: str = "") -> M:
    if not isinstance(body, dict):
        where = prefix or "body"
        raise InvalidRequest(
            f"Invalid type for '{where}': expected an object, but got {json_type_name(body)} instead.",
            param=prefix or None,
        )
    try:
        parsed = model.model_validate(body)
    except ValidationError as exc:
        raise translate(model, _first_error(exc), prefix) from None
    return parsed
