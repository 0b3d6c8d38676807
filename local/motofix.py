"""Two fidelity fixes to moto's DynamoDB for the local stack and tests (emulation only; nothing
here runs in AWS):

1. Serializable operations. moto's backend takes no lock, so concurrent requests (threads of the
   local servers) can interleave inside a transaction. Every backend operation runs under one lock.
2. TransactWriteItems checks every condition before applying anything, as DynamoDB does. moto
   applies entries one by one and, on a failed condition, restores deep copies of whole tables
   (once per entry), which costs O(table size) per transaction and re-emits nothing consistently.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

LOCK = threading.RLock()
_installed = False

_LOCKED = ("get_item", "put_item", "update_item", "delete_item", "query", "scan", "batch_get_item",
           "batch_write_item", "create_table", "delete_table", "describe_table", "update_time_to_live")


def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
    )

    with LOCK:
        if len(transact_items) > 100:
            raise TooManyTransactionsException()
        seen: set[tuple[str, str]] = set()
        plan: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = []
        errors: list[Any] = []
        for entry in transact_items:
            op_type, op = next(iter(entry.items()))
            table_name = op["TableName"]
            table = self.get_table(table_name)
            if op_type == "Put":
                attrs = op["Item"]
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]
            marker = (str(table_name), str(dict(sorted(key.items()))))
            if marker in seen:
                raise MultipleTransactionsException()
            seen.add(marker)
            current = self.get_item(table_name, key)
            condition = op.get("ConditionExpression")
            if condition is not None:
                check = get_filter_expression(condition, op.get("ExpressionAttributeNames"),
                                              op.get("ExpressionAttributeValues"))
                if not check.expr(current):
                    old = None
                    if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                        old = current.to_json()["Attributes"]
                    errors.append(("ConditionalCheckFailed", "The conditional request failed", old))
                    continue
            errors.append((None, None, None))
            plan.append((op_type, table_name, key, op))
        if any(code is not None for code, _, _ in errors):
            raise TransactionCanceledException(errors)
        for op_type, table_name, key, op in plan:
            if op_type == "Put":
                self.put_item(table_name, op["Item"])
            elif op_type == "Delete":
                self.delete_item(table_name, key)
            elif op_type == "Update":
                self.update_item(table_name, key, update_expression=op["UpdateExpression"],
                                 expression_attribute_names=op.get("ExpressionAttributeNames"),
                                 expression_attribute_values=op.get("ExpressionAttributeValues"))


def _locked(method: Any) -> Any:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with LOCK:
            return method(*args, **kwargs)

    return wrapper


def install() -> None:
    global _installed
    if _installed:
        return
    from moto.dynamodb.models import DynamoDBBackend

    for name in _LOCKED:
        setattr(DynamoDBBackend, name, _locked(getattr(DynamoDBBackend, name)))
    DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign]
    _installed = True
