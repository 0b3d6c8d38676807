"""Items are written exactly as boto3's TypeSerializer would write them, and read as Powertools reads
stream images (agents_core.attributes), without importing boto3 on the handlers' path."""

from decimal import Decimal

import pytest
from boto3.dynamodb.types import TypeDeserializer as Boto3Deserializer
from boto3.dynamodb.types import TypeSerializer as Boto3Serializer

from agents_core.attributes import TypeDeserializer, TypeSerializer

VALUES = [
    None, True, False, 0, -7, 2 ** 53, Decimal("1.5"), Decimal("-0.000001"), Decimal("1E+2"),
    "", "text", "é✓", b"", b"\x00\xffpacked", bytearray(b"ab"),
    [], [1, "a", None, [True]], (1, 2), {}, {"a": {"b": [Decimal("2.25"), {"c": b"x"}]}},
    {1, 2}, {"x", "y"}, {b"p", b"q"}, {True, 2}, set(),
]


def _id(value):
    """A test id that is the same in every process (xdist workers must collect the same tests): sets
    sorted, no object addresses."""
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(repr(v) for v in value)) + "}"
    if type(value) is object:
        return "object()"
    return repr(value)


@pytest.mark.parametrize("value", VALUES, ids=_id)
def test_serialize_writes_what_boto3_writes(value):
    ours, theirs = TypeSerializer().serialize(value), Boto3Serializer().serialize(value)
    if isinstance(value, (set, frozenset)):  # set order is arbitrary: compare members
        assert list(ours) == list(theirs)
        assert sorted(map(repr, next(iter(ours.values())))) == sorted(map(repr, next(iter(theirs.values()))))
    else:
        assert ours == theirs


@pytest.mark.parametrize("value", [1.5, Decimal("NaN"), Decimal("Infinity"), Decimal("1" * 39), Decimal("1E+200"),
                                   object(), {1, "a"}, {1.5}], ids=_id)
def test_serialize_rejects_what_boto3_rejects(value):
    errors = []
    for serializer in (TypeSerializer(), Boto3Serializer()):
        with pytest.raises(Exception) as caught:
            serializer.serialize(value)
        errors.append((type(caught.value), str(caught.value)))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("value", [v for v in VALUES if not isinstance(v, (set, bytes, bytearray))] + [b"zz"], ids=_id)
def test_a_written_value_reads_back_as_boto3_reads_it(value):
    stored = Boto3Serializer().serialize(value)
    ours, theirs = TypeDeserializer().deserialize(stored), Boto3Deserializer().deserialize(stored)
    assert ours == theirs  # boto3 wraps B in Binary (equal to its bytes); Powertools gives the bytes
