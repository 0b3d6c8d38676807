"""Request shape -> wire model, with the official protocol error messages.

pydantic does the validation (strict, unknown members forbidden); this module only translates its
first error into the official wording: missing, unknown, invalid type, invalid value.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from . import wire
from .errors import InvalidRequest

M = TypeVar("M", bound=BaseModel)

# The members after which pydantic puts a discriminated union's tag into `loc`.
_UNIONS: dict[str, tuple[str, ...]] = {
    "tools": wire.TOOL_TYPES,
    "transport": wire.TRANSPORT_TYPES,
    "format": wire.TEXT_FORMAT_TYPES,
    "environment": wire.ENVIRONMENT_TYPES,
    "events": wire.INPUT_EVENT_TYPES,
    "content": wire.CONTENT_TYPES,
    "output": wire.CONTENT_TYPES,
    "input": (),
    "auth": wire.CREDENTIAL_AUTH_TYPES,
    "token_endpoint_auth": wire.TOKEN_ENDPOINT_AUTH_TYPES,
}
_ALL_TAGS = {tag for tags in _UNIONS.values() for tag in tags} | {"string", "array"}
_ALL_TAGS |= {"agent.session.input.mcp_approval_request_result,agent.session.input.computer_use_approval_request_result"}

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


def render_path(loc: tuple[Any, ...] | list[Any], prefix: str = "") -> str:
    parts: list[str] = [prefix] if prefix else []
    out = ".".join(parts)
    previous: Any = None
    for element in loc:
        if isinstance(element, int):
            out += f"[{element}]"
        elif isinstance(element, str) and element in _ALL_TAGS and _union_member(previous):
            continue  # pydantic's union tag, not a member of the request
        elif isinstance(element, str) and "," in element and _union_member(previous):
            continue
        else:
            out = f"{out}.{element}" if out else element
        previous = element
    return out


def _union_member(previous: Any) -> bool:
    return isinstance(previous, int) or previous in _UNIONS


def _tags_for(loc: tuple[Any, ...]) -> tuple[str, ...]:
    for element in reversed(loc):
        if isinstance(element, str) and element in _UNIONS:
            return _UNIONS[element]
    return ()


def translate(error: dict[str, Any], prefix: str = "") -> InvalidRequest:
    kind = error["type"]
    loc = tuple(error["loc"])
    value = error.get("input")
    path = render_path(loc, prefix)
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return InvalidRequest(f"Missing required parameter: '{path}'.", param=path)
    if kind == "union_tag_not_found" and "string_or_array" in str(ctx.get("discriminator")):
        return InvalidRequest(
            f"Invalid type for '{path}': expected a string or an array, but got {json_type_name(value)} instead.",
            param=path,
        )
    if kind == "union_tag_not_found":
        path = render_path(loc + ("type",), prefix)
        return InvalidRequest(f"Missing required parameter: '{path}'.", param=path)
    if kind == "extra_forbidden":
        return InvalidRequest(f"Unknown parameter: '{path}'.", param=path)
    if kind == "union_tag_invalid":
        tag = ctx.get("tag")
        path = render_path(loc + ("type",), prefix)
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
        raise translate(_first_error(exc), prefix) from None
    return parsed
