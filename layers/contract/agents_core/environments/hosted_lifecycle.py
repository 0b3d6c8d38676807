"""Hosted Environments on the operator's hosts: affinity to a host, and the lifecycle it drives.

An openai_hosted Environment is prepared once, on the disk of the host whose Runtime first claims one
of its Turns: that claim binds it (`host_id` on the Environment, in the claim's transaction), and from
then on only that host's connections may serve it. Membership rows let a host's connections find its
Environments: `HOST#{host_id}` / `CONN#{connection_id}` (one per connected hosted Runtime of the host)
and `HOST#{host_id}` / `ENV#{env_id}` (tenant, Environment). Moving a workspace to another host
(checkpoints: `suspended`, resumed elsewhere) is not built: a gone host's Environment expires.
"""

from __future__ import annotations

from typing import Any, Optional

from agents_contract.errors import Conflict, InvalidRequest, NotFound

from .. import engine, keys
from ..ids import now
from ..store import DynamoStore, TransactionConflict
from .placement import session_environment_id
from .resource import LIVE, emit, final_message, turn_error


def host_is_connected(store: DynamoStore, host_id: str) -> bool:
    """Whether a hosted Runtime of this host is connected now (a row past its TTL counts as gone)."""
    rows = store.query(**keys.connections_of_host(host_id), limit=20, consistent=True).items
    return any(int(r.get("ttl", 0)) > now() for r in rows)


def _members(store: DynamoStore, host_id: str) -> list[dict[str, Any]]:
    return store.query(**keys.environments_of_host(host_id), limit=1000, consistent=True).items


def bind_host(draft: engine.Draft, env_id: str, env: Optional[dict[str, Any]], host_id: str) -> None:
    """The claim of a Turn by a hosted Runtime binds its Environment to that host (first claim only:
    the condition keeps a concurrent claim by another host from binding it twice). A Session create
    that writes its Environment in the same commit folds the binding into that write (`bound_host`)."""
    member = {**keys.host_environment(host_id, env_id), "kind": "host_environment", "tenant": draft.tenant,
              "environment_id": env_id, "host_id": host_id}
    if draft.environment_in_commit:
        draft.bound_host = host_id
        draft.tx.put(member)
        return
    if env is None or env.get("host_id") == host_id:
        return
    draft.tx.update(keys.environment(draft.tenant, env_id), "SET host_id = :h",
                    "attribute_exists(PK) AND attribute_not_exists(host_id)", values={":h": host_id})
    draft.tx.put(member)


def _move(store: DynamoStore, tenant: str, env_id: str, to: str, allowed: tuple[str, ...],
          host_id: Optional[str] = None) -> bool:
    """One status change of a hosted Environment, with its event on the Environment's most recent
    Session (none for an Environment no Session used yet); conditional on the status it left."""
    def apply(tx_owner: Any, env: dict[str, Any]) -> None:
        tx_owner.update(keys.environment(tenant, env_id), "SET #s = :to", "#s = :from", names={"#s": "status"},
                        values={":to": to, ":from": env["status"]})

    for _ in range(5):
        env = store.get(keys.environment(tenant, env_id))
        if env is None or env.get("status") not in allowed or (host_id and env.get("host_id") != host_id):
            return False
        if env.get("session_id"):
            def work(draft: engine.Draft) -> bool:
                current = store.get(keys.environment(tenant, env_id))
                if current is None or current.get("status") not in allowed:
                    return False
                apply(draft.tx, current)
                emit(draft, to, {**current, "status": to})
                return True

            try:
                return engine.run(store, tenant, env["session_id"], work)
            except NotFound:  # its most recent Session was deleted: the change goes without an event
                pass
        tx = store.new_transaction()
        apply(tx, env)
        try:
            store.transact(tx)
            return True
        except TransactionConflict:
            continue
    return False


def host_connected(store: DynamoStore, host_id: str, connection_id: str) -> None:
    """A hosted Runtime of `host_id` said hello: it is one of the host's connections, and the host's
    Environments left `disconnected` are available again (`ready`, or `pending` if never prepared)."""
    store.put({**keys.host_connection(host_id, connection_id), "kind": "host_connection", "host_id": host_id,
               "connection_id": connection_id, "ttl": now() + 2 * 3600})
    for member in _members(store, host_id):
        env = store.get(keys.environment(member["tenant"], member["environment_id"]))
        if env is not None and env.get("status") == "disconnected":
            _move(store, member["tenant"], member["environment_id"], "ready" if env.get("prepared_at") else "pending",
                  ("disconnected",), host_id)


def host_disconnected(store: DynamoStore, host_id: str, connection_id: str) -> None:
    """A hosted connection closed: when no other connection of its host remains, that host's
    Environments are `disconnected` (their Turns wait, bounded, for the host to come back)."""
    store.delete(keys.host_connection(host_id, connection_id))
    if host_is_connected(store, host_id):
        return
    for member in _members(store, host_id):
        _move(store, member["tenant"], member["environment_id"], "disconnected", ("pending", "ready", "connected"),
              host_id)


def idle(store: DynamoStore, host_id: str, message: dict[str, Any]) -> None:
    """`environment.idle` from a hosted Runtime: the Environment's sandbox stopped after idling, its
    workspace kept: `connected` -> `ready`. Only the host that holds the Environment may say so."""
    env_id = message.get("environment_id")
    if not isinstance(env_id, str) or not env_id.startswith("env_") or len(env_id) > 128:
        raise InvalidRequest("Invalid 'environment_id': expected an Environment id (env_...).", param="environment_id")
    member = store.get(keys.host_environment(host_id, env_id))
    env = store.get(keys.environment(member["tenant"], env_id)) if member else None
    if env is None or env.get("host_id") != host_id:
        raise InvalidRequest(f"Invalid 'environment_id': this host holds no Environment '{env_id}'.",
                             param="environment_id")
    _move(store, member["tenant"], env_id, "ready", ("connected",), host_id)  # type: ignore[index]


def _error(raw: Any) -> dict[str, str]:
    """The SDK's environment error object {code, message, type}, from what a Runtime reported."""
    if not isinstance(raw, dict):
        raise InvalidRequest("Invalid 'error': a failed turn.environment carries {code, message, type}.", param="error")
    out = {}
    for name, limit in (("code", 64), ("message", 1000), ("type", 64)):
        value = raw.get(name)
        if not isinstance(value, str) or not value:
            raise InvalidRequest(f"Invalid 'error.{name}': expected a nonempty string.", param=f"error.{name}")
        out[name] = value.encode("utf-8", "replace").decode()[:limit]
    return out


def observe_turn(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: Any) -> None:
    """`turn.environment`, inside a Turn's channel: the hosted Environment's state as the Runtime
    prepares and starts its sandbox. `connected` with `prepared` (first preparation) -> `ready` then
    `connected`; `failed` fails the Environment (its event carries the error) and the Turn, and with it
    the Session ("failed" with the reason)."""
    status, prepared = msg.get("status"), msg.get("prepared", False)
    if status not in ("connected", "failed"):
        raise InvalidRequest("Invalid 'status': expected 'connected' or 'failed'.", param="status")
    if not isinstance(prepared, bool):
        raise InvalidRequest("Invalid 'prepared': expected a boolean.", param="prepared")
    error = _error(msg.get("error")) if status == "failed" else None
    environment = draft.snapshot.environment
    if environment.get("type") != "openai_hosted":
        raise InvalidRequest("turn.environment reports an openai_hosted Environment; this Session has none.",
                             param="action")
    env_id = session_environment_id(draft.session_id, environment)
    key = keys.environment(draft.tenant, env_id)
    env = draft.store.get(key)
    if env is None or env.get("status") not in LIVE:
        return  # deleted, or already final: nothing to change
    names, values = {"#s": "status"}, {":old": env["status"]}
    if error is not None:
        values.update({":f": "failed", ":e": error})
        draft.tx.update(key, "SET #s = :f, #err = :e", "#s = :old", names={**names, "#err": "error"}, values=values)
        emit(draft, "failed", {**env, "status": "failed"}, turn.id, error=error)
        message = f"The Environment {env_id} failed: {error['message']}"
        turn.set(error=turn_error(message), x_agents_core={**(turn.doc.get("x_agents_core") or {}),
                                                           "error": {"message": message}})
        out.terminal, out.token = "failed", turn.task_token  # the Turn cannot run without its Environment
        turn.set(closing="failed")
        draft.dirty = True
        return
    first = prepared and not env.get("prepared_at")
    if not first and env["status"] == "connected":
        return
    values.update({":c": "connected", ":now": now()})
    draft.tx.update(key, "SET #s = :c, active_at = :now" + (", prepared_at = :now" if first else ""), "#s = :old",
                    names=names, values=values)
    if first:
        emit(draft, "ready", {**env, "status": "ready"}, turn.id)
    emit(draft, "connected", {**env, "status": "connected"}, turn.id)


def expire(draft: engine.Draft, env: dict[str, Any], turn_id: Optional[str] = None) -> None:
    """The host that holds the Environment's workspace is gone past the bound: `expired` (final)."""
    draft.tx.update(keys.environment(draft.tenant, env["id"]), "SET #s = :x", "#s = :old", names={"#s": "status"},
                    values={":x": "expired", ":old": env["status"]})
    emit(draft, "expired", {**env, "status": "expired"}, turn_id)


def refuse_input(store: DynamoStore, tenant: str, session_id: str, environment: dict[str, Any]) -> None:
    """Input to a Session whose Environment is final (`expired`, `failed`) can never run: 409, nothing written."""
    if environment.get("type") != "openai_hosted":
        return
    env_id = session_environment_id(session_id, environment)
    env = store.get(keys.environment(tenant, env_id))  # type: ignore[arg-type]
    if env is not None and env.get("status") in ("expired", "failed"):
        raise Conflict(final_message(env))
    if env is None:  # a named Environment whose own Session was deleted, and it with it
        raise Conflict(f"The Environment {env_id} no longer exists (it was deleted with the Session that created "
                       "it). Create a Session with a new Environment.")
