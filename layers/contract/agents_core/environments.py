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

from agents_contract import jsonutil
from agents_contract.errors import Conflict, InvalidRequest, NotFound
from agents_contract.validation import json_type_name

from . import engine, executors, keys
from .ids import new_id, now
from .pagination import ListParams, page
from .placement import environment_id, session_environment_id
from .settings import get_settings
from .store import DynamoStore, TransactionConflict, unpack

TYPES = ("openai_hosted", "self_hosted")
ENROLLMENT_PREFIX = "enr-"
CREDENTIAL_PREFIX = "rte-"
CONNECTION_ACTION = "environment_connection"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def remote_url() -> str:
    """A self_hosted Environment's remote_url: the exec-server registry's base (`codex exec-server --remote`;
    the reference Runtime finds the WebSocket API from it), or the WebSocket API where no registry is set."""
    settings = get_settings()
    return settings.remote_url or settings.websocket_url or ""


def new_item(tenant: str, session_id: str, environment: dict[str, Any], ts: int) -> Optional[dict[str, Any]]:
    """The Environment item a workspace Session creates with itself (None for `environment: none`)."""
    kind = environment.get("type")
    if kind not in TYPES:
        return None
    env_id = environment_id(session_id)
    return {**keys.environment(tenant, env_id), "kind": "environment", "id": env_id, "tenant": tenant, "type": kind,
            "session_id": session_id, "status": "pending", "created_at": ts,
            "workspace_directory": environment.get("workspace_directory"),
            **keys.listed_environment(tenant, kind, env_id)}


def resource(item: dict[str, Any]) -> dict[str, Any]:
    """The SDK's EnvironmentInfo ("Safe metadata": files without their contents)."""
    config = jsonutil.loads(item["config"]) if item.get("config") else {}
    return {"id": item["id"], "object": "agent.environment", "type": item["type"], "status": item["status"],
            "files": list(config.get("files") or []), "plugins": [], "skills": []}


def state(item: dict[str, Any], error: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The SDK's AgentSessionEnvironmentState, carried by `agent.session.environment.*` events."""
    return {"id": item["id"], "type": item["type"], "status": item["status"], "error": error}


def load(store: DynamoStore, tenant: str, env_id: str) -> dict[str, Any]:
    item = store.get(keys.environment(tenant, env_id)) if env_id.startswith("env_") and len(env_id) <= 128 else None
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
        cursor = store.get(keys.environment(tenant, params.after)) if params.after.startswith("env_") else None
        if cursor is None or cursor["type"] != kind:
            raise NotFound()  # a cursor that names no Environment of this list
    result = store.query(**keys.environments_of_tenant(tenant, kind), after=params.after, limit=params.limit,
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
    store.put({**keys.enrollment(_hash(token)), "kind": "enrollment", "tenant": tenant,
               "environment_id": env_id, "session_id": item["session_id"], "expires_at": expires_at,
               "created_at": now(), "ttl": expires_at + 3600}, condition="attribute_not_exists(PK)")
    return {"object": "agent.environment.enrollment", "environment_id": env_id, "token": token,
            "expires_at": expires_at, "command": connect_command(token, item, store),
            "exec_server": executors.issue(store, item, remote_url())}  # or connect with the stock exec-server


def connect_command(token: str, item: dict[str, Any], store: DynamoStore) -> str:
    """The shell command that connects this machine as the Environment's Runtime."""
    words = ["python", "-m", "runtime", "--url", remote_url(), "--workspace", item.get("workspace_directory")
             or "/workspace"]
    session = store.get(keys.session(item["tenant"], item["session_id"]), consistent=False)
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
    item = store.get(keys.enrollment(_hash(token)))
    if item is None or item.get("used_at") or int(item["expires_at"]) <= now():
        return None
    return item


def credential_for_token(store: DynamoStore, token: str) -> Optional[dict[str, Any]]:
    """The durable credential of an enrolled machine (`RT#` item of kind environment_credential)."""
    if not token.startswith(CREDENTIAL_PREFIX) or len(token) > 256:
        return None
    item = store.get(keys.runtime_credential(_hash(token)))
    if item is None or item.get("kind") != "environment_credential":
        return None
    env = store.get(keys.environment(item["tenant"], item["environment_id"]))
    if env is None or env.get("credential_hash") != _hash(token):
        return None  # replaced by a newer enrollment, or the Environment is gone
    return item


class EnrollmentUsed(InvalidRequest):
    pass


def exchange(store: DynamoStore, enrollment_hash: str) -> tuple[str, dict[str, Any]]:
    """Spend the enrollment once and mint the Environment's durable credential, replacing any earlier
    one, in one transaction. Returns the credential (shown only to the connecting Runtime)."""
    enrollment = store.get(keys.enrollment(enrollment_hash))
    if enrollment is None:
        raise EnrollmentUsed("This enrollment is not valid.", param=None)
    tenant, env_id = enrollment["tenant"], enrollment["environment_id"]
    env = store.get(keys.environment(tenant, env_id))
    if env is None:
        raise EnrollmentUsed("This enrollment's Environment no longer exists.", param=None)
    credential = CREDENTIAL_PREFIX + secrets.token_urlsafe(32)
    digest = _hash(credential)
    tx = store.new_transaction()
    tx.update(keys.enrollment(enrollment_hash), "SET used_at = :now",
              "attribute_not_exists(used_at) AND expires_at > :now", values={":now": now()})
    tx.put({**keys.runtime_credential(digest), "kind": "environment_credential", "tenant": tenant,
            "environment_id": env_id, "runtime_id": new_id("rt"), "created_at": now()}, "attribute_not_exists(PK)")
    tx.update(keys.environment(tenant, env_id), "SET credential_hash = :h", "attribute_exists(PK)",
              values={":h": digest})
    if env.get("credential_hash"):
        tx.delete(keys.runtime_credential(env["credential_hash"]))
    try:
        store.transact(tx)
    except TransactionConflict:
        raise EnrollmentUsed("This enrollment was used or has expired; create a new one.", param=None) from None
    return credential, env


def delete_for_session(store: DynamoStore, tenant: str, session_id: str) -> None:
    """A Session's own Environment goes with it, and so does the credential that connected it (an
    Environment it only named, `openai_hosted.environment_id`, stays: other Sessions may use it)."""
    key = keys.environment(tenant, environment_id(session_id))
    env = store.get(key)
    if env is None:
        return
    if env.get("credential_hash"):
        store.delete(keys.runtime_credential(env["credential_hash"]))
    if env.get("host_id"):
        store.delete(keys.host_environment(env["host_id"], env["id"]))
    executors.revoke(store, env)
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


def _emit(draft: engine.Draft, kind: str, env: dict[str, Any], turn_id: Optional[str] = None,
          error: Optional[dict[str, Any]] = None) -> None:
    draft.emit({"type": f"agent.session.environment.{kind}", "event_id": new_id("evt"),
                "session_id": draft.session_id, "environment": state(env, error), "turn_id": turn_id})


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
        _emit(draft, "connected", updated)
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
        _emit(draft, "disconnected", {**current, "status": "disconnected"})
        return True

    try:
        return engine.run(store, tenant, env["session_id"], work)
    except NotFound:
        return False


def session_environment_state(store: DynamoStore, tenant: str, session_id: str) -> Optional[dict[str, Any]]:
    return store.get(keys.environment(tenant, environment_id(session_id)))


def turn_error(message: str) -> dict[str, str]:
    """A Turn that could not run in its Environment (the SDK's `sandbox_error` category)."""
    return {"code": "sandbox_error", "message": message}



# ---- hosted Environments: affinity to a host, lifecycle ------------------------------------------------
#
# An openai_hosted Environment is prepared once, on the disk of the host whose Runtime first claims one
# of its Turns: that claim binds it (`host_id` on the Environment, in the claim's transaction), and from
# then on only that host's connections may serve it. Membership rows let a host's connections find its
# Environments: `HOST#{host_id}` / `CONN#{connection_id}` (one per connected hosted Runtime of the host)
# and `HOST#{host_id}` / `ENV#{env_id}` (tenant, Environment). Moving a workspace to another host
# (checkpoints: `suspended`, resumed elsewhere) is not built: a gone host's Environment expires.

LIVE = ("pending", "ready", "connected", "disconnected")  # `failed` and `expired` are final
HOSTED_ERROR_TYPES = ("sandbox_error",)


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
                _emit(draft, to, {**current, "status": to})
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
        _emit(draft, "failed", {**env, "status": "failed"}, turn.id, error=error)
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
        _emit(draft, "ready", {**env, "status": "ready"}, turn.id)
    _emit(draft, "connected", {**env, "status": "connected"}, turn.id)


def expire(draft: engine.Draft, env: dict[str, Any], turn_id: Optional[str] = None) -> None:
    """The host that holds the Environment's workspace is gone past the bound: `expired` (final)."""
    draft.tx.update(keys.environment(draft.tenant, env["id"]), "SET #s = :x", "#s = :old", names={"#s": "status"},
                    values={":x": "expired", ":old": env["status"]})
    _emit(draft, "expired", {**env, "status": "expired"}, turn_id)


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


def final_message(env: dict[str, Any]) -> str:
    if env["status"] == "expired":
        return (f"The Environment {env['id']} is expired: the host that held its workspace is gone, and this "
                "deployment does not move a workspace to another host. Create a Session with a new Environment.")
    return (f"The Environment {env['id']} is failed ({(env.get('error') or {}).get('message', 'preparation failed')}"
            "). Create a Session with a new Environment.")


EMPTY_PREPARATION = {"files": [], "packages": {"python": [], "npm": []}, "setup_commands": [], "env": {},
                     "network": {"access": "disabled"}}


def preparation(store: DynamoStore, tenant: str, env_id: str) -> dict[str, Any]:
    """What a hosted Runtime prepares the Environment from (confidential: setup command bodies, env
    values and file data travel only in `turn.start` to the Runtime that claimed the Turn)."""
    env = store.get(keys.environment(tenant, env_id))
    if env is None or not (env.get("preparation_sealed") or env.get("preparation")):
        return dict(EMPTY_PREPARATION)
    if env.get("preparation_sealed"):
        from .vault_crypto import default_sealer

        return jsonutil.loads(default_sealer().open(env["preparation_sealed"], preparation_context(tenant, env_id)))
    return jsonutil.loads(unpack(env["preparation"]))  # stored before preparations were sealed


# ---- hosted Environments: creation, and Sessions that name one ---------------------------------------

def preparation_context(tenant: str, env_id: str) -> dict[str, str]:
    """The KMS encryption context of an Environment's preparation: it opens for that Environment only."""
    return {"tenant": tenant, "environment_id": env_id, "secret": "hosted_preparation"}


def _hosted_fields(environment: dict[str, Any], requested: Any, tenant: str, env_id: str) -> dict[str, Any]:
    """What an openai_hosted Environment item keeps: its public configuration (reads, and the snapshot of
    each Session that names it) and, sealed apart (KMS envelope, `vault_crypto`: setup command bodies, env
    values and file data are confidential), its preparation, opened only by Dispatch into a claimed
    Turn's `turn.start`."""
    from agents_contract import hosted

    from .vault_crypto import default_sealer

    public = {k: v for k, v in environment.items() if k != "id"}
    sealed = default_sealer().seal(jsonutil.dumps(hosted.preparation(requested)), preparation_context(tenant, env_id))
    return {"config": jsonutil.dumps(public), "preparation_sealed": sealed}


def create(store: DynamoStore, tenant: str, body: Any) -> dict[str, Any]:
    """`environments.create(environment={"type": "openai_hosted", ...}, vault_ids=...)`: a standalone
    Environment (`pending` until a hosted Runtime prepares it for its first Turn), the same checks as a
    Session's inline configuration; Sessions then name it with `openai_hosted.environment_id`."""
    from agents_contract import hosted, parser, validation, wire

    request = validation.parse(wire.EnvironmentCreate, body)
    hosted.check(request.environment)
    vault_ids: list[str] = []
    if request.vault_ids:
        # "The IDs of up to 10 vaults made available": each must be the tenant's (unknown or foreign: 404).
        # They are recorded with the Environment; a Session's MCP credentials come from its own vault_ids.
        from agents_contract.vaults import check_vault_ids

        from .vaults import attached_credentials

        vault_ids = check_vault_ids(request.vault_ids)
        attached_credentials(store, tenant, vault_ids)
    environment = parser.resolve_environment(request.environment)  # type: ignore[arg-type]
    env_id = new_id("env")
    item = {**keys.environment(tenant, env_id), "kind": "environment", "id": env_id, "tenant": tenant,
            "type": "openai_hosted", "session_id": None, "status": "pending", "created_at": now(),
            "workspace_directory": environment["workspace_directory"],
            **keys.listed_environment(tenant, "openai_hosted", env_id), "vault_ids": vault_ids,
            **_hosted_fields(environment, request.environment, tenant, env_id)}
    store.put(item, condition="attribute_not_exists(PK)")
    return resource(item)


def for_session(store: DynamoStore, tenant: str, requested: Any, snapshot: Any) -> tuple[Any, Optional[dict[str, Any]]]:
    """A Session that names an existing Environment (`openai_hosted.environment_id`) runs in it, with its
    configuration: the snapshot takes that Environment's (and its id). A foreign or missing id is the
    official 404; a final one (`expired`, `failed`) a 409 naming it."""
    if getattr(requested, "type", None) != "openai_hosted" or not requested.environment_id:
        return snapshot, None
    env = load(store, tenant, requested.environment_id)
    if env["type"] != "openai_hosted":
        raise InvalidRequest(f"Invalid 'environment.environment_id': '{env['id']}' is a self_hosted Environment; "
                             "an openai_hosted Session names an openai_hosted one.", param="environment.environment_id")
    if env.get("status") not in LIVE:
        raise Conflict(final_message(env))
    config = jsonutil.loads(env["config"]) if env.get("config") else snapshot.environment
    return snapshot.model_copy(update={"environment": {**config, "id": env["id"]}}), env


def announce(draft: engine.Draft, environment: dict[str, Any], reused: Optional[dict[str, Any]]) -> None:
    """In the Session create commit: an openai_hosted Environment that is still `pending` says so; a Turn
    claimed in this commit binds the Environment through this commit's own write of it (`bind_host`)."""
    if environment.get("type") != "openai_hosted":
        return
    draft.environment_in_commit = True
    env_id = session_environment_id(draft.session_id, environment)
    status = reused["status"] if reused is not None else "pending"
    if status == "pending":
        _emit(draft, "pending", {"id": env_id, "type": "openai_hosted", "status": "pending"})


def write_for_session(tx: Any, draft: engine.Draft, environment: dict[str, Any], ts: int, requested: Any,
                      reused: Optional[dict[str, Any]]) -> None:
    """The Environment write of a Session create: its own new Environment, or the named one, which now
    reports to this Session (its most recent); either carries the host a Turn claimed in this commit."""
    host = draft.bound_host
    if reused is not None:
        sets, cond = "SET session_id = :s", "attribute_exists(PK) AND NOT #st IN (:e, :f)"
        values: dict[str, Any] = {":s": draft.session_id, ":e": "expired", ":f": "failed"}
        if host:
            sets += ", host_id = :h"
            cond += " AND (attribute_not_exists(host_id) OR host_id = :h)"
            values[":h"] = host
        tx.update(keys.environment(draft.tenant, reused["id"]), sets, cond, names={"#st": "status"}, values=values)
        return
    item = new_item(draft.tenant, draft.session_id, environment, ts)
    if item is None:
        return
    if item["type"] == "openai_hosted":
        item.update(_hosted_fields(environment, requested, draft.tenant, item["id"]))
        if host:
            item["host_id"] = host
    tx.put(item, "attribute_not_exists(PK)")
