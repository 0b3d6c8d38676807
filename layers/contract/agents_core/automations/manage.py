"""Automations: create, retrieve, list, update, delete, pause and resume (`client.beta.agents.automations`).

"Saves an active automation without invoking it immediately." Everything is checked before anything is
written: the body's shape, the cron expression and time zone (or a future `run_at`), and a `new_session`
target by Session admission itself (`sessions.admit`: the same messages and params as `sessions.create`);
an `existing_session` target names a Session of the tenant (404 otherwise). Then the schedule is created
and the automation item written; if the write fails the schedule is deleted again.

A `new_session` target may carry confidential values (`env`, `setup_commands`, inline files), so it is
stored KMS-sealed (agents_core.vault_crypto, context: tenant and automation id) and only its redacted
view (automations.views) is kept in the clear.
"""

from __future__ import annotations

from typing import Any, Optional

from agents_contract import automations as contract
from agents_contract import jsonutil
from agents_contract.errors import Conflict, InvalidRequest, NotFound

from .. import keys
from ..ids import new_id, now
from ..pagination import ListParams, page
from ..store import DynamoStore, TransactionConflict
from . import views
from .schedules import Schedules, default_schedules

DEVELOPER = {"type": "developer"}


# ---- the target -------------------------------------------------------------------------------------

def _sealing_context(tenant: str, automation_id: str) -> dict[str, str]:
    return {"tenant": tenant, "automation_id": automation_id}


def _admit_target(store: DynamoStore, tenant: str, target: Any,
                  creator_session: Optional[str] = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The target as stored (its raw JSON) and as shown, once it is admitted."""
    if isinstance(target, contract.NewSessionTarget):
        from .. import sessions

        body = target.session_body()
        admitted = sessions.admit(store, tenant, body)  # 400/404 exactly as sessions.create, nothing written
        return {"type": "new_session", **body}, views.new_session_target_view(body, admitted.snapshot)
    if creator_session is not None and target.session_id != creator_session:
        raise InvalidRequest("An agent-created automation targets its creator Session; 'target.session_id' "
                             "cannot change.", param="target.session_id")
    if store.get(keys.session(tenant, target.session_id)) is None:
        raise NotFound()
    shown = {"type": "existing_session", "session_id": target.session_id, "instructions": target.instructions}
    return shown, shown


def _target_fields(store: DynamoStore, tenant: str, automation_id: str, raw: dict[str, Any],
                   shown: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {"target_view": jsonutil.dumps(shown), "target_type": raw["type"]}
    if raw["type"] == "new_session":
        from ..vault_crypto import default_sealer

        fields["target_sealed"] = default_sealer().seal(jsonutil.dumps(raw), _sealing_context(tenant, automation_id))
        fields["target_session"] = None
    else:
        fields["target_session"] = raw["session_id"]
    return fields


def target(tenant: str, item: dict[str, Any]) -> dict[str, Any]:
    """The stored target as it was sent (an invocation's delivery reads it)."""
    if item.get("target_type") == "new_session":
        from ..vault_crypto import default_sealer

        return jsonutil.loads(default_sealer().open(item["target_sealed"], _sealing_context(tenant, item["id"])))
    return jsonutil.loads(item["target_view"])


# ---- create -----------------------------------------------------------------------------------------

def create(store: DynamoStore, tenant: str, body: Any, created_by: Optional[dict[str, Any]] = None,
           schedules: Optional[Schedules] = None) -> dict[str, Any]:
    request = contract.parse_create(body)
    creator = (created_by or DEVELOPER).get("session_id")
    raw, shown = _admit_target(store, tenant, request.target, creator)
    automation_id = new_id("auto")
    item: dict[str, Any] = {
        **keys.automation(tenant, automation_id), **keys.listed_automation(tenant, automation_id),
        "kind": "automation", "id": automation_id, "tenant": tenant, "type": request.type, "name": request.name,
        "metadata": dict(request.metadata or {}), "created_at": now(), "status": "active", "pause_reason": None,
        "created_by": jsonutil.dumps(created_by or DEVELOPER), "pending": None, "fired": False,
        **_target_fields(store, tenant, automation_id, raw, shown),
    }
    if isinstance(request, contract.PeriodicCreate):
        item |= {"expression": request.expression, "timezone": request.timezone}
    else:
        item["run_at"] = request.run_at
    schedules = schedules or default_schedules()
    schedules.create(tenant, item)
    try:
        store.put(item, "attribute_not_exists(PK)")
    except Exception:
        schedules.delete(automation_id)
        raise
    return views.automation_resource(item)


# ---- read -------------------------------------------------------------------------------------------

def load(store: DynamoStore, tenant: str, automation_id: str) -> dict[str, Any]:
    item = store.get(keys.automation(tenant, automation_id))
    if item is None:
        raise NotFound()
    return item


def retrieve(store: DynamoStore, tenant: str, automation_id: str) -> dict[str, Any]:
    return views.automation_resource(load(store, tenant, automation_id))


def list_page(store: DynamoStore, tenant: str, params: ListParams, query: dict[str, str]) -> dict[str, Any]:
    if params.after is not None and store.get(keys.automation(tenant, params.after)) is None:
        raise NotFound()  # a cursor that names no automation of this tenant
    session_id = query.get("session_id")
    result = store.query(**keys.automations_of_tenant(tenant), after=params.after, limit=params.limit,
                         ascending=params.ascending,
                         filter_expression="target_session = :s" if session_id else None,
                         values={":s": session_id} if session_id else None)
    return page([views.automation_resource(i) for i in result.items], result.has_more)


# ---- update, pause, resume, delete -----------------------------------------------------------------

def _commit(store: DynamoStore, item: dict[str, Any], previous: dict[str, Any]) -> None:
    """Replace the automation item, conditioned on what this request read (a concurrent change: 409)."""
    try:
        store.transact(store.new_transaction().put(
            item, "attribute_exists(PK) AND #s = :s AND #n = :n",
            names={"#s": "status", "#n": "name"}, values={":s": previous["status"], ":n": previous["name"]}))
    except TransactionConflict:
        raise Conflict("The automation changed meanwhile; retry the request.") from None


def update(store: DynamoStore, tenant: str, automation_id: str, body: Any,
           schedules: Optional[Schedules] = None, creator_session: Optional[str] = None) -> dict[str, Any]:
    """"`expression`/`timezone` periodic only; `run_at` only before a one-time scheduled invocation exists;
    `target` replaced whole (type and creator session retained); `metadata` replaced whole.\""""
    request = contract.parse_update(body)
    item = load(store, tenant, automation_id)
    previous = dict(item)
    if item["type"] != "periodic":
        for member in ("expression", "timezone"):
            if request.given(member):
                raise InvalidRequest(f"'{member}' is only accepted for periodic automations.", param=member)
    if item["type"] != "once" and request.given("run_at"):
        raise InvalidRequest("'run_at' is only accepted for one-time automations.", param="run_at")
    if request.given("run_at") and (item.get("fired") or item["status"] == "completed"):
        raise InvalidRequest("'run_at' can only change before the one-time scheduled invocation exists.",
                             param="run_at")
    reschedule = False
    for member in ("expression", "timezone", "run_at"):
        if request.given(member):
            item[member] = getattr(request, member)
            reschedule = True
    if request.given("name"):
        item["name"] = request.name
    if request.given("metadata"):
        item["metadata"] = dict(request.metadata or {})
    if request.given("target"):
        if request.target.type != item["target_type"]:
            raise InvalidRequest(f"An automation keeps its target type; expected a '{item['target_type']}' target.",
                                 param="target.type")
        creator = jsonutil.loads(item["created_by"]).get("session_id") or creator_session
        raw, shown = _admit_target(store, tenant, request.target, creator)
        item |= _target_fields(store, tenant, automation_id, raw, shown)
    if item["type"] == "periodic" and request.given("expression"):
        contract.eventbridge_cron(item["expression"])
    _commit(store, item, previous)
    if reschedule:
        (schedules or default_schedules()).update(tenant, item)
    return views.automation_resource(item)


def pause(store: DynamoStore, tenant: str, automation_id: str, reason: Optional[str] = None,
          schedules: Optional[Schedules] = None) -> dict[str, Any]:
    """Pauses future scheduled delivery without stopping an active Session."""
    item = load(store, tenant, automation_id)
    if item["status"] == "completed":
        raise Conflict("A completed one-time automation cannot be paused.")
    if item["status"] == "paused" and reason is None:
        return views.automation_resource(item)
    previous = dict(item)
    item |= {"status": "paused", "pause_reason": reason}
    _commit(store, item, previous)
    (schedules or default_schedules()).update(tenant, item)
    return views.automation_resource(item)


def resume(store: DynamoStore, tenant: str, automation_id: str,
           schedules: Optional[Schedules] = None) -> dict[str, Any]:
    item = load(store, tenant, automation_id)
    if item["type"] == "once" and not item.get("pending") and int(item["run_at"]) <= now():
        raise InvalidRequest("This one-time automation's run_at has passed; update it with a future 'run_at' "
                             "first.", param="run_at")
    if item["status"] == "active":
        return views.automation_resource(item)
    previous = dict(item)
    item |= {"status": "active", "pause_reason": None, "fired": False if item["type"] == "once" else item["fired"]}
    _commit(store, item, previous)
    (schedules or default_schedules()).update(tenant, item)
    return views.automation_resource(item)


def delete(store: DynamoStore, tenant: str, automation_id: str,
           schedules: Optional[Schedules] = None) -> dict[str, Any]:
    """Deletes the automation, its schedule and its invocations; the target Session is left alone."""
    load(store, tenant, automation_id)
    (schedules or default_schedules()).delete(automation_id)
    store.delete_partition(keys.automation_partition(tenant, automation_id))
    return {"id": automation_id, "object": "agent.automation.deleted", "deleted": True}
