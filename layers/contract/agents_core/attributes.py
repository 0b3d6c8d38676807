"""DynamoDB AttributeValues <-> Python values, without boto3.

Reads use the deserializer Powertools already ships for DynamoDB stream images (numbers -> Decimal,
`B` -> bytes), so an item reads the same from GetItem and from a stream record. Writes follow boto3's
`TypeSerializer` rules exactly (tests/unit/test_attributes.py compares the two): importing boto3 for
them alone would cost every cold start boto3 and s3transfer on top of botocore.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from decimal import Clamped, Context, Decimal, Inexact, Overflow, Rounded, Underflow
from typing import Any

from aws_lambda_powertools.shared.dynamodb_deserializer import TypeDeserializer

__all__ = ["TypeDeserializer", "TypeSerializer"]

# DynamoDB numbers: 38 digits of precision, exponent -130..125; anything else is an error, never rounded.
DYNAMODB_CONTEXT = Context(Emin=-128, Emax=126, prec=38, traps=[Clamped, Overflow, Inexact, Rounded, Underflow])


def _is_number(value: Any) -> bool:
    if isinstance(value, float):
        raise TypeError("Float types are not supported. Use Decimal types instead.")
    return isinstance(value, (int, Decimal))  # a bool here is inside a set: a number, as in boto3


def _number(value: Any) -> str:
    text = str(DYNAMODB_CONTEXT.create_decimal(value))
    if text in ("Infinity", "NaN"):
        raise TypeError("Infinity and NaN not supported")
    return text


class TypeSerializer:
    """Python -> AttributeValue: None NULL, bool BOOL, int/Decimal N, str S, bytes B, sets SS/NS/BS,
    Mapping M, list/tuple L (boto3's TypeSerializer.serialize)."""

    def serialize(self, value: Any) -> dict[str, Any]:
        if value is None:
            return {"NULL": True}
        if isinstance(value, bool):
            return {"BOOL": value}
        if _is_number(value):
            return {"N": _number(value)}
        if isinstance(value, str):
            return {"S": value}
        if isinstance(value, (bytes, bytearray)):
            return {"B": value}
        if isinstance(value, Set):
            if all(_is_number(v) for v in value):
                return {"NS": [_number(v) for v in value]}
            if all(isinstance(v, str) for v in value):
                return {"SS": list(value)}
            if all(isinstance(v, (bytes, bytearray)) for v in value):
                return {"BS": list(value)}
        elif isinstance(value, Mapping):
            return {"M": {k: self.serialize(v) for k, v in value.items()}}
        elif isinstance(value, (list, tuple)):
            return {"L": [self.serialize(v) for v in value]}
        raise TypeError(f'Unsupported type "{type(value)}" for value "{value}"')
