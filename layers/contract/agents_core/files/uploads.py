"""Uploads (`client.uploads`): a file too large for one request, sent in parts and completed into a File.

- create: the Upload item (`keys.upload`, pending, expires an hour after creation; the table's TTL removes it
  a day after that).
- parts.create: each part's bytes are their own S3 object (`objects.part_key`) and the part an item of the
  Upload's partition (`keys.upload_part`), so parts may arrive in any order and size.
- complete: the listed parts, in the caller's order, are composed into the File's object with one S3 multipart
  upload (`ObjectStore.compose`); their sizes must add up to the Upload's `bytes` and their MD5 match `md5`
  when given. Then the Upload (completed, with its File) and the File item commit in one transaction, and the
  parts go.
- cancel: the Upload is cancelled and its parts go.
A foreign or unknown upload id is 404; a part or completion on an Upload that is not pending is a 400 saying why.
"""

from __future__ import annotations

from typing import Any, Optional

from agents_contract import files as contract
from agents_contract import jsonutil
from agents_contract.errors import InvalidRequest, NotFound

from .. import keys
from ..ids import new_id, now
from ..store import DynamoStore, TransactionConflict
from .objects import ObjectStore, file_key, part_key
from .records import file_item, new_file_id

KIND, PART_KIND = "upload", "upload_part"
RETAIN_SECONDS = 86_400  # an ended Upload stays readable this long after it expires


def _status(item: dict[str, Any]) -> str:
    status = item["status"]
    if status == "pending" and now() >= jsonutil.loads(item["doc"])["expires_at"]:
        return "expired"
    return status


def _resource(item: dict[str, Any]) -> dict[str, Any]:
    file = item.get("file")
    return contract.upload_resource(jsonutil.loads(item["doc"]), _status(item),
                                    jsonutil.loads(file) if file else None)


def _load(store: DynamoStore, tenant: str, upload_id: str) -> dict[str, Any]:
    item = store.get(keys.upload(tenant, upload_id))
    if item is None or item.get("kind") != KIND:
        raise NotFound()
    return item


def _pending(store: DynamoStore, tenant: str, upload_id: str) -> dict[str, Any]:
    item = _load(store, tenant, upload_id)
    status = _status(item)
    if status != "pending":
        raise InvalidRequest(f"The upload {upload_id} is {status}; only a pending upload takes parts or completes.",
                             param=None, code="upload_not_pending")
    return item


def create(store: DynamoStore, tenant: str, body: Any) -> dict[str, Any]:
    fields = contract.parse_upload_create(body)
    created = now()
    record = {"id": new_id("upload"), "created_at": created, "expires_at": created + contract.UPLOAD_TTL_SECONDS,
              **fields}
    item = {**keys.upload(tenant, record["id"]), "kind": KIND, "status": "pending", "doc": jsonutil.dumps(record),
            "ttl": record["expires_at"] + RETAIN_SECONDS}
    store.transact(store.new_transaction().put(item, "attribute_not_exists(PK)"))
    return _resource(item)


def add_part(store: DynamoStore, objects: ObjectStore, tenant: str, upload_id: str, content_type: Optional[str],
             body: bytes) -> dict[str, Any]:
    _pending(store, tenant, upload_id)
    from . import forms  # python-multipart ships with the files function only (functions/files)

    form = forms.parse(content_type, body, contract.MAX_PART_BYTES + 64 * 1024)
    unknown = sorted((set(form.fields) | set(form.files)) - {"data"})
    if unknown:
        raise InvalidRequest(f"Unknown parameter: '{unknown[0]}'.", param=unknown[0], code="unknown_parameter")
    part = form.files.get("data")
    if part is None:
        raise InvalidRequest("Missing required parameter: 'data'.", param="data")
    contract.check_size(len(part.data), contract.MAX_PART_BYTES, "data", "The part")
    record = {"id": new_id("part"), "created_at": now(), "upload_id": upload_id}
    key = part_key(tenant, upload_id, record["id"])
    objects.put(key, bytes(part.data))
    item = {**keys.upload_part(tenant, upload_id, record["id"]), "kind": PART_KIND, "size": len(part.data),
            "doc": jsonutil.dumps(record), "ttl": jsonutil.loads(_load(store, tenant, upload_id)["doc"])["expires_at"]
            + RETAIN_SECONDS}
    tx = (store.new_transaction().put(item, "attribute_not_exists(PK)")
          .check(keys.upload(tenant, upload_id), "#s = :pending", names={"#s": "status"}, values={":pending": "pending"}))
    try:
        store.transact(tx)
    except BaseException:
        objects.delete([key])
        raise
    return contract.part_resource(record)


def _parts(store: DynamoStore, tenant: str, upload_id: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    after = None
    while True:
        result = store.query(**keys.parts_of_upload(tenant, upload_id), after=after, limit=1000, consistent=True)
        for item in result.items:
            found[jsonutil.loads(item["doc"])["id"]] = item
        if not result.has_more:
            return found
        after = keys.sort_key(result.items[-1])


def complete(store: DynamoStore, objects: ObjectStore, tenant: str, upload_id: str, body: Any) -> dict[str, Any]:
    item = _pending(store, tenant, upload_id)
    part_ids, md5 = contract.parse_upload_complete(body)
    record = jsonutil.loads(item["doc"])
    parts = _parts(store, tenant, upload_id)
    missing = [p for p in part_ids if p not in parts]
    if missing:
        raise InvalidRequest(f"The part {missing[0]} is not a part of the upload {upload_id}.", param="part_ids")
    total = sum(int(parts[p]["size"]) for p in part_ids)
    if total != record["bytes"]:
        raise InvalidRequest(f"The parts hold {total} bytes, but the upload was created for {record['bytes']} bytes.",
                             param="part_ids")
    file_record = {"id": new_file_id(), "bytes": total, "created_at": now(), "filename": record["filename"],
                   "purpose": record["purpose"], "mime_type": record["mime_type"]}
    key = file_key(tenant, file_record["id"])
    digest = objects.compose(key, [part_key(tenant, upload_id, p) for p in part_ids], record["mime_type"])
    if md5 is not None and digest != md5:
        objects.delete([key])
        raise InvalidRequest(f"The parts' MD5 is {digest}, not the md5 given ({md5}); nothing was completed.",
                             param="md5")
    file = contract.file_resource(file_record)
    tx = (store.new_transaction()
          .update(keys.upload(tenant, upload_id), "SET #s = :completed, #f = :file", "#s = :pending",
                  names={"#s": "status", "#f": "file"},
                  values={":completed": "completed", ":file": jsonutil.dumps(file), ":pending": "pending"})
          .put(file_item(tenant, file_record), "attribute_not_exists(PK)"))
    try:
        store.transact(tx)
    except TransactionConflict:
        objects.delete([key])
        raise InvalidRequest(f"The upload {upload_id} is no longer pending.", param=None,
                             code="upload_not_pending") from None
    except BaseException:
        objects.delete([key])
        raise
    _forget_parts(store, objects, tenant, upload_id, parts)
    return _resource({**item, "status": "completed", "file": jsonutil.dumps(file)})


def cancel(store: DynamoStore, objects: ObjectStore, tenant: str, upload_id: str) -> dict[str, Any]:
    item = _pending(store, tenant, upload_id)
    tx = store.new_transaction().update(keys.upload(tenant, upload_id), "SET #s = :cancelled", "#s = :pending",
                                        names={"#s": "status"},
                                        values={":cancelled": "cancelled", ":pending": "pending"})
    try:
        store.transact(tx)
    except TransactionConflict:
        raise InvalidRequest(f"The upload {upload_id} is no longer pending.", param=None,
                             code="upload_not_pending") from None
    _forget_parts(store, objects, tenant, upload_id, _parts(store, tenant, upload_id))
    return _resource({**item, "status": "cancelled"})


def _forget_parts(store: DynamoStore, objects: ObjectStore, tenant: str, upload_id: str,
                  parts: dict[str, dict[str, Any]]) -> None:
    objects.delete([part_key(tenant, upload_id, p) for p in parts])
    for part_id in parts:
        store.delete(keys.upload_part(tenant, upload_id, part_id))
