"""`openai_hosted` Environment files of `type: "file_id"`: the tenant's Files, resolved when the Environment is
admitted and delivered when it is prepared.

- Admission (Session create, `environments.create`): each id must name a File of the tenant (a foreign or
  missing id: 404 naming `environment.files[i].file_id`, before anything is written); the public view takes the
  File's size.
- Preparation (Dispatch, into the claimed Turn's `turn.start`): each entry gets a short-lived presigned GET URL
  of the File's object, which the hosted Runtime downloads into the workspace (the bytes never pass through the
  table or the WebSocket API). A File deleted since admission arrives without a URL, and preparation fails
  naming it.
"""

from __future__ import annotations

from typing import Any, Optional

from agents_contract.errors import NotFound

from ..store import DynamoStore
from . import records
from .objects import ObjectStore, file_key

URL_SECONDS = 900  # a preparation downloads its files right after turn.start


def resolve(store: DynamoStore, tenant: str, environment: dict[str, Any], at: str = "environment") -> dict[str, Any]:
    """The public openai_hosted view with each `file_id` entry's size; 404 naming the entry for an id that is not
    one of the tenant's Files."""
    files = environment.get("files") or []
    if not any(f.get("type") == "file_id" for f in files):
        return environment
    resolved = []
    for i, entry in enumerate(files):
        if entry.get("type") == "file_id":
            try:
                record = records.load(store, tenant, entry["file_id"])
            except NotFound:
                raise NotFound(f"No such File object: {entry['file_id']}.", param=f"{at}.files[{i}].file_id") from None
            entry = {**entry, "size_bytes": record["bytes"]}
        resolved.append(entry)
    return {**environment, "files": resolved}


def deliver(store: DynamoStore, tenant: str, preparation: dict[str, Any],
            objects: Optional[ObjectStore] = None) -> dict[str, Any]:
    """The preparation as `turn.start` carries it: each `file_id` entry with its size and a presigned URL."""
    files = preparation.get("files") or []
    if not any("file_id" in f for f in files):
        return preparation
    from .objects import default_objects

    objects = objects or default_objects()
    out = []
    for entry in files:
        if "file_id" in entry:
            try:
                record = records.load(store, tenant, entry["file_id"])
            except NotFound:
                out.append(entry)  # deleted since admission: the Runtime fails the preparation naming it
                continue
            entry = {**entry, "size_bytes": record["bytes"],
                     "url": objects.presigned_get(file_key(tenant, entry["file_id"]), URL_SECONDS)}
        out.append(entry)
    return {**preparation, "files": out}
