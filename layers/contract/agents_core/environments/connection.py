"""An Environment's connection state: connected, disconnected, and the action pending input waits on.

"An offline self_hosted Environment with pending input shows {environment_id, type:
"environment_connection"}": the commit that queues the input adds the action, the claim that a
connection makes clears it, and the input waits a bounded time (`environment_wait_seconds`). A
connection is an enrolled Runtime's (`enrollment`) or an exec-server's joined on a host (`exec_server_hosts`).
"""

from __future__ import annotations

from typing import Any, Optional

from agents_contract.errors import NotFound

from .. import engine, keys
from ..ids import now
from ..store import DynamoStore
from .placement import environment_id
from .resource import emit

CONNECTION_ACTION = "environment_connection"


def is_connected(env: Optional[dict[str, Any]]) -> bool:
    return bool(env and env.get("connection_id"))


def connection_action(env_id: str) -> dict[str, Any]:
    return {"environment_id": env_id, "type": CONNECTION_ACTION}


def ask_for_connection(draft: engine.Draft, env_id: str) -> None:
    """Pending input on an offline self_hosted Environment: the action, and the Session waits for it."""
    if not any(a.get("type") == CONNECTION_ACTION for a in draft.required_actions):
        draft.required_actions = [*draft.required_actions, connection_action(env_id)]
        draft.dirty = True
    if draft.status != "requires_action":
        draft.status = "requires_action"
        draft.emit_session("agent.session.requires_action")


def clear_connection_action(draft: engine.Draft) -> bool:
    """The Environment connected (or the waiting input ended): the action goes."""
    kept = [a for a in draft.required_actions if a.get("type") != CONNECTION_ACTION]
    if len(kept) == len(draft.required_actions):
        return False
    draft.required_actions = kept
    draft.dirty = True
    return True

def mark_connected(store: DynamoStore, tenant: str, env_id: str, connection_id: str) -> Optional[dict[str, Any]]:
    """The Environment's connection said hello: status `connected`, the event on its Session."""
    env = store.get(keys.environment(tenant, env_id))
    if env is None:
        return None

    def work(draft: engine.Draft) -> dict[str, Any]:
        updated = {**env, "status": "connected", "connection_id": connection_id}
        draft.tx.update(keys.environment(tenant, env_id), "SET #s = :s, connection_id = :c, connected_at = :now",
                        "attribute_exists(PK)", names={"#s": "status"},
                        values={":s": "connected", ":c": connection_id, ":now": now()})
        emit(draft, "connected", updated)
        return updated

    return engine.run(store, tenant, env["session_id"], work)


def mark_disconnected(store: DynamoStore, tenant: str, env_id: str, connection_id: str) -> bool:
    """The Environment's current connection closed (a replaced one changes nothing)."""
    env = store.get(keys.environment(tenant, env_id))
    if env is None or env.get("connection_id") != connection_id:
        return False

    def work(draft: engine.Draft) -> bool:
        current = store.get(keys.environment(tenant, env_id))
        if current is None or current.get("connection_id") != connection_id:
            return False  # a newer connection took over meanwhile
        draft.tx.update(keys.environment(tenant, env_id), "SET #s = :s REMOVE connection_id", "attribute_exists(PK)",
                        names={"#s": "status"}, values={":s": "disconnected"})
        emit(draft, "disconnected", {**current, "status": "disconnected"})
        return True

    try:
        return engine.run(store, tenant, env["session_id"], work)
    except NotFound:
        return False


def session_environment_state(store: DynamoStore, tenant: str, session_id: str) -> Optional[dict[str, Any]]:
    return store.get(keys.environment(tenant, environment_id(session_id)))
