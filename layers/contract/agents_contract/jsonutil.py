"""Lossless JSON: numbers keep their original value.

Saved Agents keep every pinned value, including numbers that binary64 cannot hold, so request
bodies are parsed with `Decimal` floats and Python ints, and written back exactly.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from decimal import Decimal, InvalidOperation
from typing import Any

_NONCE = secrets.token_hex(8)
_MARK = f"@@num{_NONCE}:"


def _parse_constant(name: str) -> Any:
    # NaN and Infinity are not JSON.
    raise ValueError(f"invalid JSON number {name}")


def loads(text: str | bytes) -> Any:
    """Parse JSON keeping exact numbers (floats become Decimal)."""
    return json.loads(text, parse_float=Decimal, parse_constant=_parse_constant)


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
