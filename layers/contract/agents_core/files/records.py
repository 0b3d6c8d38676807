"""Files (`client.files`): create, retrieve, list, delete, content. The bytes are an S3 object
(`objects.file_key`), the metadata one item of the table (`keys.file`, listed on GSI1 `T#{tenant}#FILES`).

Create validates everything before it writes: the object first, then the item under
`attribute_not_exists` (a failed item removes the object again), so a rejected request leaves S3 and the
table as they were. Delete removes the item first (the id names nothing from then on), then the bytes.
A file of another tenant is a different key in both stores: 404.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

from agents_contract import files as contract
from agents_contract import jsonutil
from agents_contract.errors import InvalidRequest, NotFound

from .. import keys
from ..ids import new_id, now
from ..pagination import page
from ..store import DynamoStore, TransactionConflict
from .objects import ObjectStore, file_key

KIND = "file"


def new_file_id() -> str:
    return "file-" + new_id("f").split("_", 1)[1]  # the official form: `file-` and time-sortable characters


def file_item(tenant: str, record: dict[str, Any]) -> dict[str, Any]:
    return {**keys.file(tenant, record["id"]), **keys.listed_file(tenant, record["id"]), "kind": KIND,
            "purpose": record["purpose"], "doc": jsonutil.dumps(record)}


def put_file(store: DynamoStore, objects: ObjectStore, tenant: str, record: dict[str, Any], data: bytes) -> None:
    """The bytes, then the item; nothing stays behind when the item cannot be written."""
    key = file_key(tenant, record["id"])
    objects.put(key, data, record.get("mime_type") or "application/octet-stream")
    try:
        store.transact(store.new_transaction().put(file_item(tenant, record), "attribute_not_exists(PK)"))
    except BaseException:
        objects.delete([key])
        raise


def create(store: DynamoStore, objects: ObjectStore, tenant: str, content_type: Optional[str],
           body: bytes) -> dict[str, Any]:
    from . import forms  # python-multipart ships with the files function only (functions/files)

    form = forms.parse(content_type, body, contract.MAX_FORM_BYTES)
    purpose = contract.check_purpose(form.fields.get("purpose"))
    contract.refuse_expiry(any(name.startswith("expires_after") for name in form.fields))
    unknown = sorted((set(form.fields) | set(form.files)) - {"purpose", "file"}
                     - {n for n in form.fields if n.startswith("expires_after")})
    if unknown:
        raise InvalidRequest(f"Unknown parameter: '{unknown[0]}'.", param=unknown[0], code="unknown_parameter")
    part = form.files.get("file")
    if part is None:
        raise InvalidRequest("Missing required parameter: 'file'.", param="file")
    filename = contract.check_filename(part.filename)
    mime = contract.check_mime_type(part.content_type or "application/octet-stream", param="file")
    contract.check_size(len(part.data), contract.MAX_CREATE_BYTES, "file",
                        "The file (use client.uploads for larger files)")
    record = {"id": new_file_id(), "bytes": len(part.data), "created_at": now(), "filename": filename,
              "purpose": purpose, "mime_type": mime}
    put_file(store, objects, tenant, record, bytes(part.data))
    return contract.file_resource(record)


def load(store: DynamoStore, tenant: str, file_id: str) -> dict[str, Any]:
    """The tenant's file record, or 404 (another tenant's id names nothing here)."""
    item = store.get(keys.file(tenant, file_id))
    if item is None or item.get("kind") != KIND:
        raise NotFound()
    return jsonutil.loads(item["doc"])


def retrieve(store: DynamoStore, tenant: str, file_id: str) -> dict[str, Any]:
    return contract.file_resource(load(store, tenant, file_id))


def list_page(store: DynamoStore, tenant: str, query: dict[str, str]) -> dict[str, Any]:
    after, limit, ascending, purpose = contract.files_list_params(query)
    if after is not None and store.get(keys.file(tenant, after)) is None:
        raise NotFound()  # a cursor that names no file of this tenant
    filters = {"filter_expression": "purpose = :purpose", "values": {":purpose": purpose}} if purpose else {}
    result = store.query(**keys.files_of_tenant(tenant), after=after, limit=limit, ascending=ascending, **filters)
    return page([contract.file_resource(jsonutil.loads(i["doc"])) for i in result.items], result.has_more)


def delete(store: DynamoStore, objects: ObjectStore, tenant: str, file_id: str) -> dict[str, Any]:
    tx = store.new_transaction().delete(keys.file(tenant, file_id), "kind = :k", values={":k": KIND})
    try:
        store.transact(tx)
    except TransactionConflict:
        raise NotFound() from None
    objects.delete([file_key(tenant, file_id)])
    return {"id": file_id, "object": "file", "deleted": True}


def content(store: DynamoStore, objects: ObjectStore, tenant: str,
            file_id: str) -> tuple[dict[str, Any], int, Iterator[bytes]]:
    record = load(store, tenant, file_id)
    size, chunks = objects.read(file_key(tenant, file_id))
    return record, size, chunks
