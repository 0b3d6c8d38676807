"""Environments: the workspace a Session's Turns run in, its enrollment and its connection state.

"Native workspace tools and Environment Plugin MCP are part of the Environment." A workspace Session
(`self_hosted`, `openai_hosted`) has an Environment `env_...` owned by the tenant. A self_hosted
Environment is connected by the tenant's own machine with an enrollment: a short-lived, single-use
token (stored hashed) that the reference Runtime exchanges, at its first `runtime.hello`, for a
durable credential bound to that Environment (stored hashed; a newer enrollment replaces it). Such a
connection serves exactly that Environment's Sessions (`runtimes.connections.may_serve`).

"An offline self_hosted Environment with pending input shows {environment_id, type:
"environment_connection"}": the commit that queues the input adds the action, the claim that a
connection makes clears it, and the input waits a bounded time (`environment_wait_seconds`).

Stored items (one table):
- Environment: `T#{tenant}#ENV#{env_id}` / `E` (type, session, status, current connection, the
  hash of its durable credential); GSI1 `T#{tenant}#ENVS#{type}` lists a tenant's Environments.
- Enrollment: `ENROLL#{sha256(token)}` / `N` (tenant, Environment, expiry, used_at); TTL.
- Durable credential: `RT#{sha256(credential)}` / `R` (kind environment_credential, tenant, Environment).
"""

from __future__ import annotations

import hashlib
import secrets
import shlex
from typing import Any, Optional

from agents_contract.errors import InvalidRequest, NotFound
from agents_contract.validation import json_type_name

from . import engine
from .ids import new_id, now
from .pagination import ListParams, page
from .placement import environment_id
from .settings import get_settings
from .store import DynamoStore, TransactionConflict, unpack

TYPES = ("openai_hosted", "self_hosted")
ENROLLMENT_PREFIX = "enr-"
CREDENTIAL_PREFIX = "rte-"
CONNECTION_ACTION = "environment_connection"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def env_key(tenant: str, env_id: str) -> dict[str, str]:
    return {"PK": f"T#{tenant}#ENV#{env_id}", "SK": "E"}


def remote_url() -> str:
    """The URL a machine connects to for a self_hosted Environment: this deployment's WebSocket API."""
    return get_settings().websocket_url or ""


def new_item(tenant: str, session_id: str, environment: dict[str, Any], ts: int) -> Optional[dict[str, Any]]:
    """The Environment item a workspace Session creates with itself (None for `environment: none`)."""
    kind = environment.get("type")
    if kind not in TYPES:
        return None
    env_id = environment_id(session_id)
    return {**env_key(tenant, env_id), "kind": "environment", "id": env_id, "tenant": tenant, "type": kind,
            "session_id": session_id, "status": "pending", "created_at": ts,
            "workspace_directory": environment.get("workspace_directory"),
            "GSI1PK": f"T#{tenant}#ENVS#{kind}", "GSI1SK": env_id}


def resource(item: dict[str, Any]) -> dict[str, Any]:
    """The SDK's EnvironmentInfo."""
    return {"id": item["id"], "object": "agent.environment", "type": item["type"], "status": item["status"],
            "files": [], "plugins": [], "skills": []}


def state(item: dict[str, Any], error: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The SDK's AgentSessionEnvironmentState, carried by `agent.session.environment.*` events."""
    return {"id": item["id"], "type": item["type"], "status": item["status"], "error": error}


def load(store: DynamoStore, tenant: str, env_id: str) -> dict[str, Any]:
    item = store.get(env_key(tenant, env_id)) if env_id.startswith("env_") and len(env_id) <= 128 else None
    if item is None:
        raise NotFound()
    return item


def retrieve(store: DynamoStore, tenant: str, env_id: str) -> dict[str, Any]:
    return resource(load(store, tenant, env_id))


def list_page(store: DynamoStore, tenant: str, params: ListParams, query: dict[str, str]) -> dict[str, Any]:
    kind = query.get("type", "openai_hosted")  # the SDK's default
    if kind not in TYPES:
        raise InvalidRequest(f"Invalid value: '{kind[:64]}'. Supported values are: 'openai_hosted' and "
                             "'self_hosted'.", param="type")
    if params.after is not None:
        cursor = store.get(env_key(tenant, params.after)) if params.after.startswith("env_") else None
        if cursor is None or cursor["type"] != kind:
            raise NotFound()  # a cursor that names no Environment of this list
    result = store.query(pk=f"T#{tenant}#ENVS#{kind}", index="GSI1", after=params.after, limit=params.limit,
                         ascending=params.ascending)
    return page([resource(i) for i in result.items], result.has_more)


# ---- enrollment ------------------------------------------------------------------------------------

def enroll(store: DynamoStore, tenant: str, env_id: str, body: Any) -> dict[str, Any]:
    """`POST /v1/agents/environments/{id}/enrollments` (this project's extension): a short-lived,
    single-use token and the command line that connects a machine with it (the token travels in an
    environment variable, never an argument others can read with `ps`)."""
    if body is not None and body != {}:
        if not isinstance(body, dict):
            raise InvalidRequest(f"Invalid type for 'body': expected an object, but got "
                                 f"{json_type_name(body)} instead.", param=None)
        name = sorted(body)[0]
        raise InvalidRequest(f"Unknown parameter: '{name[:64]}'.", param=name[:64])
    item = load(store, tenant, env_id)
    if item["type"] != "self_hosted":
        raise InvalidRequest("Only a self_hosted Environment is connected with an enrollment; an openai_hosted "
                             "Environment runs on this deployment's hosted Runtimes.", param=None)
    token = ENROLLMENT_PREFIX + secrets.token_urlsafe(32)
    settings = get_settings()
    expires_at = now() + settings.enrollment_ttl_seconds
    store.put({"PK": f"ENROLL#{_hash(token)}", "SK": "N", "kind": "enrollment", "tenant": tenant,
               "environment_id": env_id, "session_id": item["session_id"], "expires_at": expires_at,
               "created_at": now(), "ttl": expires_at + 3600}, condition="attribute_not_exists(PK)")
    return {"object": "agent.environment.enrollment", "environment_id": env_id, "token": token,
            "expires_at": expires_at, "command": connect_command(token, item, store)}


def connect_command(token: str, item: dict[str, Any], store: DynamoStore) -> str:
    """The shell command that connects this machine as the Environment's Runtime."""
    words = ["python", "-m", "runtime", "--url", remote_url(), "--workspace", item.get("workspace_directory")
             or "/workspace"]
    session = store.get({"PK": f"T#{item['tenant']}#SESSION#{item['session_id']}", "SK": "S"}, consistent=False)
    harness = None
    if session is not None:
        harness = engine.Snapshot.from_json(unpack(session["snapshot"])).harness
    if harness:
        words += ["--harness", harness]
        if harness in ("codex", "claude_code"):
            words += ["--native", harness]
    return f"AGENTS_CORE_ENROLLMENT_TOKEN={shlex.quote(token)} " + " ".join(shlex.quote(w) for w in words)


def enrollment_for_token(store: DynamoStore, token: str) -> Optional[dict[str, Any]]:
    """A valid enrollment (unused, unexpired) for `$connect`, or None."""
    if not token.startswith(ENROLLMENT_PREFIX) or len(token) > 256:
        return None
    item = store.get({"PK": f"ENROLL#{_hash(token)}", "SK": "N"})
    if item is None or item.get("used_at") or int(item["expires_at"]) <= now():
        return None
    return item


def credential_for_token(store: DynamoStore, token: str) -> Optional[dict[str, Any]]:
    """The durable credential of an enrolled machine (`RT#` item of kind environment_credential)."""
    if not token.startswith(CREDENTIAL_PREFIX) or len(token) > 256:
        return None
    item = store.get({"PK": f"RT#{_hash(token)}", "SK": "R"})
    if item is None or item.get("kind") != "environment_credential":
        return None
    env = store.get(env_key(item["tenant"], item["environment_id"]))
    if env is None or env.get("credential_hash") != _hash(token):
        return None  # replaced by a newer enrollment, or the Environment is gone
    return item


class EnrollmentUsed(InvalidRequest):
    pass


def exchange(store: DynamoStore, enrollment_hash: str) -> tuple[str, dict[str, Any]]:
    """Spend the enrollment once and mint the Environment's durable credential, replacing any earlier
    one, in one transaction. Returns the credential (shown only to the connecting Runtime)."""
    enrollment = store.get({"PK": f"ENROLL#{enrollment_hash}", "SK": "N"})
    if enrollment is None:
        raise EnrollmentUsed("This enrollment is not valid.", param=None)
    tenant, env_id = enrollment["tenant"], enrollment["environment_id"]
    env = store.get(env_key(tenant, env_id))
    if env is None:
        raise EnrollmentUsed("This enrollment's Environment no longer exists.", param=None)
    credential = CREDENTIAL_PREFIX + secrets.token_urlsafe(32)
    digest = _hash(credential)
    tx = store.new_transaction()
    tx.update({"PK": f"ENROLL#{enrollment_hash}", "SK": "N"}, "SET used_at = :now",
              "attribute_not_exists(used_at) AND expires_at > :now", values={":now": now()})
    tx.put({"PK": f"RT#{digest}", "SK": "R", "kind": "environment_credential", "tenant": tenant,
            "environment_id": env_id, "runtime_id": new_id("rt"), "created_at": now()}, "attribute_not_exists(PK)")
    tx.update(env_key(tenant, env_id), "SET credential_hash = :h", "attribute_exists(PK)", values={":h": digest})
    if env.get("credential_hash"):
        tx.delete({"PK": f"RT#{env['credential_hash']}", "SK": "R"})
    try:
        store.transact(tx)
    except TransactionConflict:
        raise EnrollmentUsed("This enrollment was used or has expired; create a new one.", param=None) from None
    return credential, env


def delete_for_session(store: DynamoStore, tenant: str, session_id: str) -> None:
    """A Session's own Environment goes with it, and so does the credential that connected it."""
    key = env_key(tenant, environment_id(session_id))
    env = store.get(key)
    if env is None:
        return
    if env.get("credential_hash"):
        store.delete({"PK": f"RT#{env['credential_hash']}", "SK": "R"})
    store.delete(key)


# ---- connection state --------------------------------------------------------------------------------

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


def _emit(draft: engine.Draft, kind: str, env: dict[str, Any], turn_id: Optional[str] = None) -> None:
    draft.emit({"type": f"agent.session.environment.{kind}", "event_id": new_id("evt"),
                "session_id": draft.session_id, "environment": state(env), "turn_id": turn_id})


def mark_connected(store: DynamoStore, tenant: str, env_id: str, connection_id: str) -> Optional[dict[str, Any]]:
    """The Environment's connection said hello: status `connected`, the event on its Session."""
    env = store.get(env_key(tenant, env_id))
    if env is None:
        return None

    def work(draft: engine.Draft) -> dict[str, Any]:
        updated = {**env, "status": "connected", "connection_id": connection_id}
        draft.tx.update(env_key(tenant, env_id), "SET #s = :s, connection_id = :c, connected_at = :now",
                        "attribute_exists(PK)", names={"#s": "status"},
                        values={":s": "connected", ":c": connection_id, ":now": now()})
        _emit(draft, "connected", updated)
        return updated

    return engine.run(store, tenant, env["session_id"], work)


def mark_disconnected(store: DynamoStore, tenant: str, env_id: str, connection_id: str) -> bool:
    """The Environment's current connection closed (a replaced one changes nothing)."""
    env = store.get(env_key(tenant, env_id))
    if env is None or env.get("connection_id") != connection_id:
        return False

    def work(draft: engine.Draft) -> bool:
        current = store.get(env_key(tenant, env_id))
        if current is None or current.get("connection_id") != connection_id:
            return False  # a newer connection took over meanwhile
        draft.tx.update(env_key(tenant, env_id), "SET #s = :s REMOVE connection_id", "attribute_exists(PK)",
                        names={"#s": "status"}, values={":s": "disconnected"})
        _emit(draft, "disconnected", {**current, "status": "disconnected"})
        return True

    try:
        return engine.run(store, tenant, env["session_id"], work)
    except NotFound:
        return False


def session_environment_state(store: DynamoStore, tenant: str, session_id: str) -> Optional[dict[str, Any]]:
    return store.get(env_key(tenant, environment_id(session_id)))


def turn_error(message: str) -> dict[str, str]:
    """A Turn that could not run in its Environment (the SDK's `sandbox_error` category)."""
    return {"code": "sandbox_error", "message": message}

