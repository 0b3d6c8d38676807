"""The DynamoDB store: the only module that touches boto3.

One table (keys PK/SK, GSI1 GSI1PK/GSI1SK; every key and prefix is built by `keys`). Every tenant-owned
key starts with the tenant id, so a foreign id is simply absent (404). Every state change is one
TransactWriteItems with condition expressions, and the same transaction writes its outbox record (commit
first, publish after).
AWS errors become domain errors here.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Optional

from botocore.config import Config
from botocore.exceptions import ClientError

from agents_contract.errors import AgentsError, Conflict, InvalidRequest, NotFound, ServerError, Unavailable

from .attributes import TypeDeserializer, TypeSerializer
from .aws import botocore_session
from .keys import GSI1PK, GSI1SK, PK, SK, address, api_key
from .observability import logger
from .settings import get_settings

_ser = TypeSerializer()
_de = TypeDeserializer()
ITEM_LIMIT_BYTES = 400 * 1024
TRANSACTION_ENTRIES = 100
TRANSACTION_BYTES = 4 * 1024 * 1024
ITEM_TOO_LARGE = "The change is too large to store: one stored item holds at most 400 KB."
TRANSACTION_TOO_LARGE = "The change is too large to commit at once: one transaction holds at most 100 writes and 4 MB."
_THROTTLES = {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
              "TransactionInProgressException", "InternalServerError"}


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


# ---- (de)serialization ---------------------------------------------------------------------------

def pack(text: str) -> bytes:
    """A large JSON attribute (a Session's snapshot, an outbox record's events) stored compressed:
    write units follow item size, and JSON shrinks 3-5x."""
    return zlib.compress(text.encode(), 6)


def unpack(value: Any) -> str:
    """The JSON text of a packed attribute: bytes or a boto3 Binary (reads), or the base64 text a
    stream record's image carries (Powertools leaves B values encoded); JSON text stored before
    packing is returned as it is."""
    if isinstance(value, str):
        if value[:1] in ("[", "{", ""):
            return value
        value = base64.b64decode(value)
    raw = getattr(value, "value", value)
    return zlib.decompress(bytes(raw)).decode()


def marshal(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _ser.serialize(v) for k, v in item.items() if v is not None}


def unmarshal(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _de.deserialize(v) for k, v in item.items()}


def _value_size(value: dict[str, Any]) -> int:
    """DynamoDB's size of one AttributeValue (names and strings in UTF-8 bytes)."""
    kind, v = next(iter(value.items()))
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        return len(str(v).lstrip("-").replace(".", "")) // 2 + 2
    if kind == "B":
        return len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_size(x) + 1 for k, x in v.items())
    if kind == "L":
        return 3 + sum(_value_size(x) + 1 for x in v)
    if kind == "SS":
        return sum(len(x.encode()) for x in v)
    if kind == "NS":
        return sum(len(str(x)) // 2 + 2 for x in v)
    return sum(len(x) for x in v)  # BS


def item_size(marshalled: dict[str, Any]) -> int:
    """The size DynamoDB counts against its 400 KB item limit."""
    return sum(len(k.encode()) + _value_size(v) for k, v in marshalled.items())


class CommitTooLarge(InvalidRequest):
    """A change needs more than DynamoDB allows: one item holds at most 400 KB; one transaction at
    most 100 writes and 4 MB. Answered as a 400 naming the limit (never a DynamoDB 400 -> 500)."""


PK_BYTES, SK_BYTES = 2048, 1024  # DynamoDB's key size limits


def oversized(key: dict[str, str]) -> bool:
    """A key longer than DynamoDB allows: built from a caller's id, it can name no stored item."""
    return len(str(key.get(PK, "")).encode()) > PK_BYTES or len(str(key.get(SK, "")).encode()) > SK_BYTES


@dataclass
class Page:
    items: list[dict[str, Any]]
    has_more: bool


@dataclass
class Transaction:
    """Builder for one TransactWriteItems call."""

    table: str
    entries: list[dict[str, Any]] = field(default_factory=list)
    bytes: int = 0  # what DynamoDB counts against the 4 MB transaction limit (items written, values set)

    def put(self, item: dict[str, Any], condition: Optional[str] = None, names: Optional[dict] = None,
            values: Optional[dict] = None, return_old: bool = False) -> Transaction:
        marshalled = marshal(item)
        size = item_size(marshalled)
        if size > ITEM_LIMIT_BYTES:
            raise CommitTooLarge(ITEM_TOO_LARGE, param=None)
        entry: dict[str, Any] = {"TableName": self.table, "Item": marshalled}
        self._condition(entry, condition, names, values, return_old)
        self.entries.append({"Put": entry})
        self.bytes += size
        return self

    def update(self, key: dict[str, str], expression: str, condition: Optional[str] = None,
               names: Optional[dict] = None, values: Optional[dict] = None, return_old: bool = False) -> Transaction:
        entry: dict[str, Any] = {"TableName": self.table, "Key": marshal(key), "UpdateExpression": expression}
        self._condition(entry, condition, names, values, return_old)
        self.entries.append({"Update": entry})
        self.bytes += item_size(entry["Key"]) + item_size(entry.get("ExpressionAttributeValues") or {})
        return self

    def fits(self, entries: int = 0, size: int = 0) -> bool:
        """Whether `entries` more writes of `size` bytes still fit in this transaction."""
        return len(self.entries) + entries <= TRANSACTION_ENTRIES and self.bytes + size <= TRANSACTION_BYTES

    def check(self, key: dict[str, str], condition: str, names: Optional[dict] = None,
              values: Optional[dict] = None) -> Transaction:
        entry: dict[str, Any] = {"TableName": self.table, "Key": marshal(key)}
        self._condition(entry, condition, names, values, False)
        self.entries.append({"ConditionCheck": entry})
        return self

    def delete(self, key: dict[str, str], condition: Optional[str] = None, names: Optional[dict] = None,
               values: Optional[dict] = None) -> Transaction:
        entry: dict[str, Any] = {"TableName": self.table, "Key": marshal(key)}
        self._condition(entry, condition, names, values, False)
        self.entries.append({"Delete": entry})
        return self

    @staticmethod
    def _condition(entry: dict[str, Any], condition: Optional[str], names: Optional[dict],
                   values: Optional[dict], return_old: bool) -> None:
        if condition:
            entry["ConditionExpression"] = condition
        if names:
            entry["ExpressionAttributeNames"] = names
        if values:
            entry["ExpressionAttributeValues"] = marshal(values)
        if return_old:
            entry["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"


class TransactionConflict(Exception):
    """A condition failed; `reasons[i]` is the old item (or None) of entry i that failed."""

    def __init__(self, reasons: list[Optional[dict[str, Any]]], codes: list[str]):
        super().__init__("transaction condition failed")
        self.reasons = reasons
        self.codes = codes


class Contention(Exception):
    """DynamoDB refused the write for load (throttling, a conflicting transaction): retry it."""


class DynamoStore:
    """Concrete store over one DynamoDB table (client injected for tests)."""

    def __init__(self, table_name: str, client: Any):
        self.table = table_name
        self.client = client

    # -- primitives --------------------------------------------------------------------------
    def new_transaction(self) -> Transaction:
        return Transaction(self.table)

    def get(self, key: dict[str, str], consistent: bool = True) -> Optional[dict[str, Any]]:
        if oversized(key):
            return None  # no item has such a key (DynamoDB would refuse the request: a 500 for a caller's id)
        try:
            out = self.client.get_item(TableName=self.table, Key=marshal(key), ConsistentRead=consistent)
        except ClientError as exc:
            raise _domain(exc) from exc
        item = out.get("Item")
        return unmarshal(item) if item else None

    def batch_get(self, keys: list[dict[str, str]], consistent: bool = True) -> dict[tuple[str, str], dict[str, Any]]:
        """BatchGetItem, consistent unless asked (one request for up to 100 keys; unprocessed keys retried)."""
        found: dict[tuple[str, str], dict[str, Any]] = {}
        pending = {self.table: {"Keys": [marshal(k) for k in keys], "ConsistentRead": consistent}}
        try:
            for _ in range(8):
                out = self.client.batch_get_item(RequestItems=pending)
                for raw in out.get("Responses", {}).get(self.table, []):
                    item = unmarshal(raw)
                    found[address(item)] = item
                pending = out.get("UnprocessedKeys") or {}
                if not pending:
                    return found
        except ClientError as exc:
            raise _domain(exc) from exc
        raise Unavailable()

    def transact_get(self, keys: list[dict[str, str]]) -> Optional[list[Optional[dict[str, Any]]]]:
        """TransactGetItems: the items as of one instant (one request, serializable with every
        transaction); None when DynamoDB cancelled the read for a concurrent write, so the caller
        reads them another way."""
        if any(oversized(k) for k in keys):
            return [self.get(k) for k in keys]
        try:
            out = self.client.transact_get_items(
                TransactItems=[{"Get": {"TableName": self.table, "Key": marshal(k)}} for k in keys])
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("TransactionCanceledException", "TransactionConflictException"):
                return None
            raise _domain(exc) from exc
        return [unmarshal(r["Item"]) if r.get("Item") else None for r in out["Responses"]]

    def update_returning(self, key: dict[str, str], expression: str, condition: Optional[str] = None,
                         values: Optional[dict] = None, names: Optional[dict] = None) -> Optional[dict[str, Any]]:
        """One UpdateItem; the item as it is after it (ALL_NEW), None when the condition failed."""
        kwargs: dict[str, Any] = {"TableName": self.table, "Key": marshal(key), "UpdateExpression": expression,
                                  "ReturnValues": "ALL_NEW"}
        if condition:
            kwargs["ConditionExpression"] = condition
        if values:
            kwargs["ExpressionAttributeValues"] = marshal(values)
        if names:
            kwargs["ExpressionAttributeNames"] = names
        try:
            return unmarshal(self.client.update_item(**kwargs)["Attributes"])
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return None
            raise _domain(exc) from exc

    def put(self, item: dict[str, Any], condition: Optional[str] = None) -> None:
        kwargs: dict[str, Any] = {"TableName": self.table, "Item": marshal(item)}
        if condition:
            kwargs["ConditionExpression"] = condition
        try:
            self.client.put_item(**kwargs)
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise Conflict("The resource already exists.") from exc
            raise _domain(exc) from exc

    def transact(self, tx: Transaction) -> None:
        if not tx.entries:
            return
        if not tx.fits():
            raise CommitTooLarge(TRANSACTION_TOO_LARGE, param=None)
        try:
            self.client.transact_write_items(TransactItems=tx.entries)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            if error.get("Code") == "TransactionCanceledException":
                reasons = exc.response.get("CancellationReasons") or []
                codes = [r.get("Code", "None") for r in reasons]
                if "ConditionalCheckFailed" in codes:
                    raise TransactionConflict(
                        [unmarshal(r["Item"]) if r.get("Item") else None for r in reasons], codes
                    ) from exc
                if any(c in ("TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded")
                       for c in codes):
                    raise Contention(codes) from exc
                if "ValidationError" in codes:  # an entry's new item passed 400 KB
                    raise CommitTooLarge(ITEM_TOO_LARGE, param=None) from exc
            if error.get("Code") in _THROTTLES:
                raise Contention(error.get("Code")) from exc
            if error.get("Code") == "ValidationException" and "size" in str(error.get("Message", "")).lower():
                raise CommitTooLarge(ITEM_TOO_LARGE if "item" in str(error.get("Message", "")).lower()
                                     else TRANSACTION_TOO_LARGE, param=None) from exc
            raise _domain(exc) from exc

    def query(self, *, pk: str, sk_prefix: Optional[str] = None, index: Optional[str] = None,
              after: Optional[str] = None, limit: int = 100, ascending: bool = True,
              filter_expression: Optional[str] = None, names: Optional[dict] = None,
              values: Optional[dict] = None, consistent: bool = False) -> Page:
        """One page of a partition (or of GSI1), `after` exclusive, at most `limit` items."""
        if len(pk.encode()) > PK_BYTES or (after is not None and len(after.encode()) > SK_BYTES):
            return Page([], False)  # names nothing stored (and DynamoDB would refuse the request)
        pk_name, sk_name = (GSI1PK, GSI1SK) if index else (PK, SK)
        names = {"#pk": pk_name, "#sk": sk_name, **(names or {})}
        values = {":pk": pk, **(values or {})}
        condition = "#pk = :pk"
        if after is not None:
            condition += " AND #sk > :after" if ascending else " AND #sk < :after"
            values[":after"] = after
            if sk_prefix:  # keep within the prefix on the open side
                if ascending:
                    condition = "#pk = :pk AND #sk BETWEEN :after AND :end"
                    values[":end"] = sk_prefix + "\uffff"
                else:
                    condition = "#pk = :pk AND #sk BETWEEN :start AND :after"
                    values[":start"] = sk_prefix
        elif sk_prefix:
            condition += " AND begins_with(#sk, :prefix)"
            values[":prefix"] = sk_prefix
        kwargs: dict[str, Any] = {
            "TableName": self.table, "KeyConditionExpression": condition, "ScanIndexForward": ascending,
            "ExpressionAttributeNames": names, "ExpressionAttributeValues": marshal(values),
        }
        if index:
            kwargs["IndexName"] = index
        elif consistent:
            kwargs["ConsistentRead"] = True
        if filter_expression:
            kwargs["FilterExpression"] = filter_expression
        if "#sk" not in condition:
            del names["#sk"]
        found: list[dict[str, Any]] = []
        try:
            while True:
                kwargs["Limit"] = limit + 1 - len(found) if not filter_expression else max(limit + 1, 25)
                out = self.client.query(**kwargs)
                for raw in out.get("Items", []):
                    item = unmarshal(raw)
                    if after is not None and item.get(sk_name) == after:
                        continue  # BETWEEN is inclusive
                    found.append(item)
                if len(found) > limit or "LastEvaluatedKey" not in out:
                    break
                kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]
        except ClientError as exc:
            raise _domain(exc) from exc
        return Page(found[:limit], len(found) > limit)

    def delete_partition(self, pk: str) -> int:
        """Delete every item of a partition (a Session and its Turns, Items, calls, outbox)."""
        keys: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": self.table, "KeyConditionExpression": f"{PK} = :pk",
                                  "ExpressionAttributeValues": {":pk": {"S": pk}},
                                  "ProjectionExpression": f"{PK}, {SK}"}
        try:
            while True:
                out = self.client.query(**kwargs)
                keys += out.get("Items", [])
                if "LastEvaluatedKey" not in out:
                    break
                kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]
            for start in range(0, len(keys), 25):
                requests = [{"DeleteRequest": {"Key": k}} for k in keys[start:start + 25]]
                pending: dict[str, Any] = {self.table: requests}
                for _ in range(8):
                    out = self.client.batch_write_item(RequestItems=pending)
                    pending = out.get("UnprocessedItems") or {}
                    if not pending:
                        break
                else:
                    raise Unavailable()
        except ClientError as exc:
            raise _domain(exc) from exc
        return len(keys)

    def delete(self, key: dict[str, str], condition: Optional[str] = None) -> bool:
        kwargs: dict[str, Any] = {"TableName": self.table, "Key": marshal(key)}
        if condition:
            kwargs["ConditionExpression"] = condition
        try:
            self.client.delete_item(**kwargs)
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise _domain(exc) from exc
        return True

    # -- API keys ----------------------------------------------------------------------------
    def tenant_for_api_key(self, key: str) -> Optional[str]:
        item = self.get(api_key(hash_api_key(key)), consistent=False)
        if not item or item.get("revoked"):
            return None
        return item["tenant"]

    def put_api_key(self, key: str, tenant: str, created_at: int) -> None:
        """Only the SHA-256 of the key is stored, with a short prefix to recognise it by."""
        self.put({**api_key(hash_api_key(key)), "tenant": tenant, "created_at": created_at,
                  "prefix": key[:8]}, condition="attribute_not_exists(PK)")


def _domain(exc: ClientError) -> AgentsError:
    code = exc.response.get("Error", {}).get("Code", "")
    if code in _THROTTLES:
        return Unavailable()
    if code == "ResourceNotFoundException":
        return NotFound()
    logger.error("DynamoDB error", extra={"aws_error_code": code, "aws_error": str(exc)[:300]})
    return ServerError()


def dynamodb_client(endpoint_url: Optional[str] = None, region: Optional[str] = None,
                    emulator: bool = False) -> Any:
    """emulator: the endpoint is the local stack's moto, which checks no signature, so it gets fixed dummy
    credentials (a newcomer has none, and real ones have no business there)."""
    settings = get_settings()
    credentials = {"aws_access_key_id": "local", "aws_secret_access_key": "local"} if emulator else {}  # noqa: S106
    return botocore_session().create_client(
        "dynamodb",
        endpoint_url=endpoint_url or settings.dynamodb_endpoint_url,
        region_name=region or settings.aws_region,
        config=Config(retries={"mode": "standard", "max_attempts": 5}),
        **credentials,
    )


@lru_cache(maxsize=1)
def default_store() -> DynamoStore:
    """The cached factory: one client per execution environment."""
    return DynamoStore(get_settings().table_name, dynamodb_client())
