"""Session artifacts (`client.beta.agents.sessions.artifacts`): the files a completed `openai_hosted` Turn left new or
changed under /workspace/outputs, published as immutable S3 objects that outlive the Environment.

- Dispatch puts an upload form in a hosted Turn's `turn.start` (`upload_form`): a presigned POST that writes only
  under `artifacts/{tenant}/{session}/{turn}/`, each object at most MAX_ARTIFACT_BYTES, for the Turn's timeout.
- The hosted Runtime uploads the files before it reports `turn.completed`, listing them (`artifacts`: path, key,
  size_bytes) and what it did not publish (`artifacts_skipped`: path, reason: over a limit, not a regular file).
- The completion's commit (`publish`, from the Runtime gateway's observations) verifies each object (under the
  Turn's prefix, present, the size stated) and writes one row per artifact in the Session's partition, so a client
  that sees the Session `idle` can list them; what it refuses joins `x_agents_core.artifacts_skipped` on the Turn.
  `self_hosted` and `none` Sessions publish nothing; neither do failed or cancelled Turns.
- Reads: list (cursor, `environment_id` filter, `order`), retrieve, content (streamed), delete (the artifact only).
  Deleting the Session deletes its artifacts' bytes (`forget_session`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Optional

from agents_contract import files as contract
from agents_contract import jsonutil
from agents_contract.errors import NotFound

from .. import keys
from ..ids import new_id, now
from ..observability import logger
from ..pagination import ListParams, page
from ..store import DynamoStore, TransactionConflict
from .objects import ObjectStore, artifact_prefix, default_objects

if TYPE_CHECKING:
    from .. import engine

KIND = "artifact"


def upload_form(tenant: str, session_id: str, turn_id: str, seconds: int,
                objects: Optional[ObjectStore] = None) -> dict[str, Any]:
    """What a hosted Turn's `turn.start` carries to publish its outputs (environment.hosted.artifacts)."""
    objects = objects or default_objects()
    prefix = artifact_prefix(tenant, session_id, turn_id)
    return {**objects.presigned_post(prefix, contract.MAX_ARTIFACT_BYTES, seconds), "key_prefix": prefix,
            "max_file_bytes": contract.MAX_ARTIFACT_BYTES, "max_files": contract.MAX_ARTIFACTS_PER_TURN,
            "max_turn_bytes": contract.MAX_ARTIFACT_BYTES_PER_TURN, "outputs": contract.OUTPUTS}


def publish(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any],
            objects: Optional[ObjectStore] = None) -> None:
    """In the commit of a hosted Turn's `turn.completed`: one row per verified artifact."""
    entries, skipped = msg.get("artifacts"), msg.get("artifacts_skipped")
    if not (entries or skipped):
        return  # most completions: the snapshot is not even read
    environment = draft.snapshot.environment
    if environment.get("type") != "openai_hosted":
        return
    from ..environments.placement import session_environment_id

    objects = objects or default_objects()
    env_id = session_environment_id(draft.session_id, environment)
    prefix = artifact_prefix(draft.tenant, draft.session_id, turn.id)
    refused = [{"path": str(s.get("path"))[:4096], "reason": str(s.get("reason"))[:200]}
               for s in (skipped if isinstance(skipped, list) else [])[:contract.MAX_ARTIFACTS_PER_TURN]
               if isinstance(s, dict)]
    total, published = 0, 0
    for entry in entries if isinstance(entries, list) else []:
        path = contract.artifact_path(entry.get("path")) if isinstance(entry, dict) else None
        key, size = (entry.get("key"), entry.get("size_bytes")) if isinstance(entry, dict) else (None, None)
        reason = None
        if path is None or not isinstance(key, str) or not key.startswith(prefix) or "/" in key[len(prefix):] \
                or isinstance(size, bool) or not isinstance(size, int) or size < 0:
            reason = "not an upload of this Turn's outputs"
        elif published >= contract.MAX_ARTIFACTS_PER_TURN or total + size > contract.MAX_ARTIFACT_BYTES_PER_TURN:
            reason = "over the Turn's artifact limits"
        elif objects.size(key) != size:
            reason = "its upload is missing or not the size stated"
        if reason is not None:
            refused.append({"path": str(entry.get("path") if isinstance(entry, dict) else entry)[:4096],
                            "reason": reason})
            continue
        total, published = total + size, published + 1
        record = {"id": new_id("art"), "session_id": draft.session_id, "turn_id": turn.id, "environment_id": env_id,
                  "path": path, "size_bytes": size, "created_at": now()}
        draft.put_row({**keys.artifact(draft.tenant, draft.session_id, record["id"]), "kind": KIND,
                       "environment_id": env_id, "object_key": key, "doc": jsonutil.dumps(record)}, new=True)
    if refused:
        logger.warning("artifacts not published", extra={"turn_id": turn.id, "count": len(refused)})
        turn.set(x_agents_core={**(turn.doc.get("x_agents_core") or {}), "artifacts_skipped": refused})


def _load(store: DynamoStore, tenant: str, session_id: str, artifact_id: str) -> dict[str, Any]:
    item = store.get(keys.artifact(tenant, session_id, artifact_id))
    if item is None or item.get("kind") != KIND:
        raise NotFound()
    return item


def _session(store: DynamoStore, tenant: str, session_id: str) -> None:
    if store.get(keys.session(tenant, session_id)) is None:
        raise NotFound()


def list_page(store: DynamoStore, tenant: str, session_id: str, params: ListParams,
              query: dict[str, str]) -> dict[str, Any]:
    _session(store, tenant, session_id)
    after = None
    if params.after is not None:
        _load(store, tenant, session_id, params.after)  # a cursor that names no artifact of this Session: 404
        after = keys.artifact_sk(params.after)
    environment_id = query.get("environment_id") or None
    filters = {"filter_expression": "environment_id = :env", "values": {":env": environment_id}} \
        if environment_id else {}
    result = store.query(**keys.artifacts_of_session(tenant, session_id), after=after, limit=params.limit,
                         ascending=params.ascending, consistent=True, **filters)
    return page([contract.artifact_resource(jsonutil.loads(i["doc"])) for i in result.items], result.has_more)


def retrieve(store: DynamoStore, tenant: str, session_id: str, artifact_id: str) -> dict[str, Any]:
    return contract.artifact_resource(jsonutil.loads(_load(store, tenant, session_id, artifact_id)["doc"]))


def content(store: DynamoStore, objects: ObjectStore, tenant: str, session_id: str,
            artifact_id: str) -> tuple[int, Iterator[bytes]]:
    return objects.read(_load(store, tenant, session_id, artifact_id)["object_key"])


def delete(store: DynamoStore, objects: ObjectStore, tenant: str, session_id: str, artifact_id: str) -> dict[str, Any]:
    """The artifact only (not the live Environment file, not a Files API object)."""
    item = _load(store, tenant, session_id, artifact_id)
    tx = store.new_transaction().delete(keys.artifact(tenant, session_id, artifact_id), "kind = :k",
                                        values={":k": KIND})
    try:
        store.transact(tx)
    except TransactionConflict:
        raise NotFound() from None
    objects.delete([item["object_key"]])
    return {"id": artifact_id, "object": "agent.session.artifact.deleted", "deleted": True}


def object_keys(store: DynamoStore, tenant: str, session_id: str) -> list[str]:
    """Every artifact object of a Session (read before its partition is deleted)."""
    found, after = [], None
    while True:
        result = store.query(**keys.artifacts_of_session(tenant, session_id), after=after, limit=1000, consistent=True)
        found += [i["object_key"] for i in result.items if i.get("kind") == KIND]
        if not result.has_more:
            return found
        after = keys.sort_key(result.items[-1])


def forget_session(tenant: str, object_keys_: list[str], objects: Optional[ObjectStore] = None) -> None:
    """A deleted Session's artifacts' bytes (after its rows are gone)."""
    if object_keys_:
        (objects or default_objects()).delete(object_keys_)
