"""A caller's id becomes part of a DynamoDB key; DynamoDB refuses keys over 2048 (partition) or 1024
(sort) bytes with a ValidationException, which would surface as a 500. Such a key names nothing stored,
so the store answers "not found" / an empty page without asking DynamoDB (moto does not enforce the
limits, so this is checked here, against a client that fails the test if it is called)."""

import pytest

from agents_core.store import DynamoStore, oversized


class NoCalls:
    def __getattr__(self, name):
        raise AssertionError(f"DynamoDB was asked ({name}) with a key it would refuse")


LONG = "x" * 1025


@pytest.mark.parametrize("key", [{"PK": "T#t#SESSION#" + "s" * 2048, "SK": "S"}, {"PK": "T#t", "SK": "TURN#" + LONG}])
def test_an_oversized_key_names_nothing_and_is_never_sent(key):
    store = DynamoStore("table", NoCalls())
    assert oversized(key)
    assert store.get(key) is None
    assert store.transact_get([key]) == [None]


def test_a_query_with_an_oversized_partition_or_cursor_is_an_empty_page():
    store = DynamoStore("table", NoCalls())
    assert store.query(pk="T#" + "p" * 2049).items == []
    page = store.query(pk="T#t#SESSION#s", sk_prefix="TURN#", after="TURN#" + LONG)
    assert page.items == [] and page.has_more is False


def test_keys_within_the_limits_are_not_oversized():
    assert not oversized({"PK": "T#" + "p" * 2000, "SK": "s" * 1024})
    assert oversized({"PK": "T#t", "SK": "é" * 513})  # bytes, not characters
