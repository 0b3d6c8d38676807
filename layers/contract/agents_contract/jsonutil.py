"""Lossless JSON: numbers keep their original value.

Saved Agents keep every pinned value, including numbers that binary64 cannot hold, so request
bodies are parsed with `Decimal` floats and Python ints, and written back exactly.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from decimal import Decimal, InvalidOperation
from typing import Any

from .errors import InvalidRequest
from .limits import MAX_JSON_DEPTH

_NONCE = secrets.token_hex(8)
_MARK = f"@@num{_NONCE}:"


def _parse_constant(name: str) -> Any:
    # NaN and Infinity are not JSON.
    raise ValueError(f"invalid JSON number {name}")


def _parse_int(text: str) -> Any:
    # `-0` is a different binary64 value from `0` (its sign): a Decimal keeps it, an int cannot.
    return Decimal(text) if text == "-0" else int(text)


def loads(text: str | bytes) -> Any:
    """Parse JSON keeping exact numbers (floats become Decimal, and so does the integer -0)."""
    return json.loads(text, parse_float=Decimal, parse_int=_parse_int, parse_constant=_parse_constant)


UNPARSABLE = "We could not parse the JSON body of your request. The API expects a JSON payload."
TOO_DEEP = (f"The request body is nested too deeply: JSON objects and arrays may nest at most {MAX_JSON_DEPTH} "
            "levels.")
# Only a \uD800-\uDFFF escape can put a surrogate into a parsed string (raw surrogate bytes are not
# UTF-8), so bodies without one skip the search.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def loads_request(data: bytes) -> Any:
    """A request body -> JSON value: exact numbers, strings that are Unicode scalar values (no lone
    surrogate, which no store or encoder can keep) and at most MAX_JSON_DEPTH levels of nesting.
    Runs before anything else looks at the body."""
    try:
        value = loads(data)
    except RecursionError:
        raise InvalidRequest(TOO_DEEP, param=None) from None
    except ValueError:
        raise InvalidRequest(UNPARSABLE, param=None) from None
    if data.count(b"[") + data.count(b"{") > MAX_JSON_DEPTH and _depth_exceeds(value, MAX_JSON_DEPTH):
        raise InvalidRequest(TOO_DEEP, param=None)
    if _SURROGATE_ESCAPE.search(data):
        where = _surrogate_path(value)
        if where is not None:
            path = render(where)
            raise InvalidRequest(
                f"Invalid value for '{path or 'body'}': the string contains an unpaired Unicode surrogate; "
                "strings must be valid Unicode.", param=path or None)
    return value


def _depth_exceeds(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _surrogate_path(value: Any) -> tuple[Any, ...] | None:
    """Where the first string (or member name) holding a lone surrogate is, or None."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return path
        elif isinstance(node, dict):
            for key, child in node.items():
                if _SURROGATE.search(key):
                    return path
                stack.append((child, (*path, key)))
        elif isinstance(node, list):
            stack.extend((child, (*path, i)) for i, child in enumerate(node))
    return None


def render(path: tuple[Any, ...]) -> str:
    """('agent', 'tools', 0, 'name') -> 'agent.tools[0].name' (a member name is shown escaped)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = part.encode("utf-8", "backslashreplace").decode()
            out = f"{out}.{text}" if out else text
    return out


def binary64_exact(value: int | Decimal) -> bool:
    """True when reading the number as an IEEE binary64 double and writing it back keeps its value."""
    try:
        as_float = float(value)
    except (OverflowError, InvalidOperation):
        return False
    if as_float in (float("inf"), float("-inf")):
        return False
    return Decimal(repr(as_float)) == Decimal(value)


def _prepare(obj: Any, raw: dict[str, str]) -> Any:
    if isinstance(obj, dict):
        return {k: _prepare(v, raw) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_prepare(v, raw) for v in obj]
    if isinstance(obj, Decimal):
        token = f"{_MARK}{len(raw)}"
        raw[token] = _decimal_text(obj)
        return token
    return obj


def _decimal_text(d: Decimal) -> str:
    text = str(d)
    # str(Decimal) may give '1E+2'; JSON accepts exponents in that form ('1E+2' is valid JSON).
    return text


def _has_decimal(obj: Any) -> bool:
    if isinstance(obj, Decimal):
        return True
    if isinstance(obj, dict):
        return any(_has_decimal(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(_has_decimal(v) for v in obj)
    return False


def dumps(obj: Any, *, sort_keys: bool = False) -> str:
    """Compact JSON with Decimals written exactly as parsed."""
    if not _has_decimal(obj):
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys)
    raw: dict[str, str] = {}
    text = json.dumps(_prepare(obj, raw), separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys)
    for token, number in raw.items():
        text = text.replace(f'"{token}"', number, 1)
    return text


def digest(obj: Any) -> str:
    """SHA-256 of the canonical form (sorted keys, exact numbers): presence and content preserved."""
    return hashlib.sha256(dumps(obj, sort_keys=True).encode()).hexdigest()
