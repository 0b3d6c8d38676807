"""Invocations: "each invocation records an attempt to send a task to a session".

An occurrence of the schedule (or `invocations.create`, manual) records an `agent.automation.invocation`:
`queued`, then `completed` once delivered (not when the work is done), `failed` with `{code, message}` on a
permanent failure, or `skipped` (`pending_delivery`) when the automation's previous delivery is still queued.

Delivery is at least once and idempotent per occurrence: a scheduled invocation's id is derived from the
automation and the occurrence (`<aws.scheduler.scheduled-time>`), and the Session a `new_session` target
creates is named in the invocation before it is created, so a retried occurrence finds its invocation and
creates that same Session (`sessions.create(..., session_id=...)` is conditional on it not existing).
An `existing_session` target gets the instructions as a user message (a new Turn, or a steer of the running
one, as any message), under the invocation id as its Idempotency-Key. A `failed` target Session pauses the
automation with `pause_reason: target_session_failed`.
"""

from __future__ import annotations

import hashlib
from typing import Any, Optional

from agents_contract import jsonutil
from agents_contract.errors import AgentsError, NotFound

from .. import keys
from ..ids import _encode, new_id, now
from ..observability import logger
from ..pagination import ListParams, page
from ..store import DynamoStore, TransactionConflict
from . import manage, views

TARGET_FAILED = "target_session_failed"


def occurrence_id(automation_id: str, scheduled_at: int) -> str:
    """One invocation id per occurrence, time-sortable like every other id."""
    digest = int.from_bytes(hashlib.sha256(f"{automation_id}@{scheduled_at}".encode()).digest()[:10], "big")
    return f"ainv_{_encode(scheduled_at * 1000, 10)}{_encode(digest, 16)}"


def _message(instructions: str) -> dict[str, Any]:
    return {"events": [{"type": "agent.session.input.message", "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": instructions}]}]}]}


def _record(store: DynamoStore, tenant: str, automation: dict[str, Any], invocation: dict[str, Any],
            pending: bool) -> Optional[dict[str, Any]]:
    """Write the invocation (and, for a queued one, mark it the automation's pending delivery) unless this
    occurrence already has one: then that one is returned."""
    tx = store.new_transaction().put(invocation, "attribute_not_exists(PK)", return_old=True)
    if pending:
        tx.update(keys.automation(tenant, automation["id"]), "SET pending = :i, fired = :t",
                  "attribute_exists(PK)", values={":i": invocation["id"], ":t": True})
    try:
        store.transact(tx)
    except TransactionConflict as conflict:
        if conflict.reasons and conflict.reasons[0] is not None:
            return conflict.reasons[0]
        raise NotFound() from None  # the automation was deleted meanwhile
    return None


def _finish(store: DynamoStore, tenant: str, automation: dict[str, Any], invocation: dict[str, Any],
            status: str, session_id: Optional[str], error: Optional[dict[str, str]] = None) -> dict[str, Any]:
    invocation |= {"status": status, "session_id": session_id, "error": jsonutil.dumps(error) if error else None}
    sets, values = ["#st = :st"], {":st": status, ":queued": "queued"}
    if session_id:
        sets.append("session_id = :sid")
        values[":sid"] = session_id
    if error:
        sets.append("#e = :e")
        values[":e"] = invocation["error"]
    tx = store.new_transaction().update(
        keys.invocation(tenant, automation["id"], invocation["id"]), "SET " + ", ".join(sets), "#st = :queued",
        names={"#st": "status", **({"#e": "error"} if error else {})}, values=values)
    completes = automation["type"] == "once" and invocation.get("scheduled_at") is not None
    tx.update(keys.automation(tenant, automation["id"]),
              "REMOVE pending" + (" SET #s = :completed" if completes else ""), "pending = :i",
              names={"#s": "status"} if completes else None,
              values={":i": invocation["id"], **({":completed": "completed"} if completes else {})})
    try:
        store.transact(tx)
    except TransactionConflict:
        pass  # another attempt of this occurrence finished it first (or the automation is gone)
    return views.invocation_resource(invocation)


def _deliver(store: DynamoStore, tenant: str, automation: dict[str, Any], invocation: dict[str, Any]) -> dict[str, Any]:
    target = manage.target(tenant, automation)
    session_id = invocation["planned_session"]
    try:
        if target["type"] == "new_session":
            from .. import sessions

            body = {k: v for k, v in target.items() if k != "type"}
            sessions.create(store, tenant, body, session_id=session_id)
        else:
            session = store.get(keys.session(tenant, session_id))
            if session is None:
                return _finish(store, tenant, automation, invocation, "failed", session_id,
                               {"code": "session_not_found", "message": "The target Session no longer exists."})
            if session["status"] == "failed":
                manage.pause(store, tenant, automation["id"], reason=TARGET_FAILED)
                return _finish(store, tenant, automation, invocation, "failed", session_id,
                               {"code": TARGET_FAILED, "message": "The target Session is failed; the automation "
                                                                  "is paused."})
            from .. import results

            results.submit(store, tenant, session_id, _message(target["instructions"]),
                           idempotency_key=invocation["id"])
    except AgentsError as err:  # a refusal (4xx): the delivery fails, the occurrence is done
        if err.status in (429, 503) and invocation.get("scheduled_at") is not None:
            raise  # over a quota or busy: not permanent; EventBridge Scheduler retries this same occurrence
        logger.info("automation delivery refused", extra={"automation_id": automation["id"], "code": err.code})
        return _finish(store, tenant, automation, invocation, "failed", None,
                       {"code": err.code or err.type, "message": str(err.message)})
    return _finish(store, tenant, automation, invocation, "completed", session_id)


def invoke(store: DynamoStore, tenant: str, automation_id: str, scheduled_at: Optional[int] = None) -> dict[str, Any]:
    """One occurrence (`scheduled_at`) or a manual invocation (None): recorded, then delivered."""
    automation = manage.load(store, tenant, automation_id)
    scheduled = scheduled_at is not None
    invocation_id = occurrence_id(automation_id, scheduled_at) if scheduled else new_id("ainv")
    if scheduled and automation["status"] != "active":
        existing = store.get(keys.invocation(tenant, automation_id, invocation_id))
        if existing is None:  # a straggler of a paused or completed schedule
            logger.info("occurrence of an inactive automation ignored", extra={"automation_id": automation_id})
            return {}
        automation = dict(automation)
    ts = now()
    source = {"type": "automation", "automation": views.automation_resource(automation)} if scheduled \
        else {"type": "manual"}
    target_type = automation.get("target_type")
    invocation: dict[str, Any] = {
        **keys.invocation(tenant, automation_id, invocation_id), "kind": "automation_invocation",
        "id": invocation_id, "automation_id": automation_id, "created_at": ts, "source": jsonutil.dumps(source),
        "scheduled_at": scheduled_at, "status": "queued", "skip_reason": None, "error": None, "session_id": None,
        "planned_session": new_id("sess") if target_type == "new_session" else automation.get("target_session"),
    }
    pending = automation.get("pending")
    if pending and pending != invocation_id:
        # the previous delivery of this automation is still queued: this occurrence is skipped
        invocation |= {"status": "skipped", "skip_reason": "pending_delivery"}
        existing = _record(store, tenant, automation, invocation, pending=False)
        return views.invocation_resource(existing or invocation)
    existing = _record(store, tenant, automation, invocation, pending=True) if pending != invocation_id \
        else store.get(keys.invocation(tenant, automation_id, invocation_id))
    if existing is not None:
        if existing["status"] != "queued":
            return views.invocation_resource(existing)  # this occurrence was delivered (or decided) before
        invocation = existing  # a retry: the same invocation, the same planned Session
    automation = manage.load(store, tenant, automation_id)
    return _deliver(store, tenant, automation, invocation)


def list_page(store: DynamoStore, tenant: str, automation_id: str, params: ListParams) -> dict[str, Any]:
    manage.load(store, tenant, automation_id)
    after = keys.invocation_sk(params.after) if params.after else None
    if after is not None and store.get(keys.invocation(tenant, automation_id, params.after)) is None:
        raise NotFound()
    result = store.query(**keys.invocations_of_automation(tenant, automation_id), after=after, limit=params.limit,
                         ascending=params.ascending, consistent=True)
    return page([views.invocation_resource(i) for i in result.items], result.has_more)


def retrieve(store: DynamoStore, tenant: str, automation_id: str, invocation_id: str) -> dict[str, Any]:
    item = store.get(keys.invocation(tenant, automation_id, invocation_id))
    if item is None:
        raise NotFound()
    return views.invocation_resource(item)
