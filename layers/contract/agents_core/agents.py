"""Agent logic: save, read, update, list, delete. Saving never qualifies execution."""

from __future__ import annotations

from typing import Any

from agents_contract import jsonutil, parser, resources
from agents_contract.errors import NotFound, Unavailable

from . import keys
from .ids import new_id, now
from .pagination import ListParams, page
from .store import Contention, DynamoStore, TransactionConflict


def _item(tenant: str, record: dict[str, Any], version: int) -> dict[str, Any]:
    return {**keys.agent(tenant, record["id"]), **keys.listed_agent(tenant, record["id"]),
            "kind": "agent", "doc": jsonutil.dumps(record), "version": version}


def load(store: DynamoStore, tenant: str, agent_id: str) -> tuple[dict[str, Any], int]:
    item = store.get(keys.agent(tenant, agent_id))
    if item is None:
        raise NotFound()
    return jsonutil.loads(item["doc"]), int(item["version"])


def create(store: DynamoStore, tenant: str, body: Any) -> dict[str, Any]:
    request = parser.parse_agent_create(body)
    ts = now()
    record = {
        "id": new_id("agent"),
        "created_at": ts,
        "updated_at": ts,
        "name": body.get("name"),
        "metadata": body.get("metadata") or {},
        "config": parser.config_as_sent(request, raw=body),
        "harness": request.x_agents_core.harness if request.x_agents_core else None,
    }
    store.transact(store.new_transaction().put(_item(tenant, record, 1), "attribute_not_exists(PK)"))
    return resources.agent_resource(record)


def retrieve(store: DynamoStore, tenant: str, agent_id: str) -> dict[str, Any]:
    return resources.agent_resource(load(store, tenant, agent_id)[0])


def update(store: DynamoStore, tenant: str, agent_id: str, body: Any) -> dict[str, Any]:
    """Given members replace saved ones; an optimistic version check makes concurrent updates safe."""
    request = parser.parse_agent_update(body)
    for _ in range(5):
        record, version = load(store, tenant, agent_id)
        record = dict(record)
        record["config"] = parser.merge_config(record["config"], parser.config_as_sent(request, raw=body))
        if "name" in body:
            record["name"] = body["name"]
        if "metadata" in body:
            record["metadata"] = body["metadata"] or {}
        record["updated_at"] = now()
        tx = store.new_transaction().put(
            _item(tenant, record, version + 1), "version = :v", values={":v": version}, return_old=True
        )
        try:
            store.transact(tx)
        except TransactionConflict as conflict:
            if conflict.reasons and conflict.reasons[0] is None:
                raise NotFound() from None
            continue
        except Contention:
            continue
        return resources.agent_resource(record)
    raise Unavailable()


def delete(store: DynamoStore, tenant: str, agent_id: str) -> dict[str, Any]:
    if not store.delete(keys.agent(tenant, agent_id), "attribute_exists(PK)"):
        raise NotFound()
    return {"id": agent_id, "object": "agent.deleted", "deleted": True}


def list_page(store: DynamoStore, tenant: str, params: ListParams) -> dict[str, Any]:
    if params.after is not None and store.get(keys.agent(tenant, params.after)) is None:
        raise NotFound()  # a cursor that names no Agent of this tenant
    result = store.query(**keys.agents_of_tenant(tenant), after=params.after, limit=params.limit,
                         ascending=params.ascending)
    return page([resources.agent_resource(jsonutil.loads(i["doc"])) for i in result.items], result.has_more)
