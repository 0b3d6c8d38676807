"""Runtime connections: tokens, `$connect` roles, capability declarations (`runtime.hello`),
which connected Runtimes may serve a Turn, and posting to a connection."""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import Any, Optional

from agents_contract import capabilities, protocol
from agents_contract.errors import InvalidRequest
from agents_contract.harnessconfig import HARNESS_NAMES

from .. import environments, keys, metrics
from ..aws import ConnectionGone, Messenger
from ..environments import placement
from ..ids import new_id, now
from ..store import DynamoStore
from . import acks, liveness, redelivery

PLACEMENTS = ("environment_none", "local_environment")
ENGINE_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,40}( [A-Za-z0-9_.+\-]{1,40})?")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_runtime_token(store: DynamoStore, name: str, token: Optional[str] = None) -> str:
    token = token or "rt-" + secrets.token_urlsafe(32)
    store.put({**keys.runtime_credential(hash_token(token)), "kind": "runtime_token", "name": name,
               "runtime_id": new_id("rt"), "created_at": now()}, condition="attribute_not_exists(PK)")
    return token


def runtime_for_token(store: DynamoStore, token: str) -> Optional[dict[str, Any]]:
    item = store.get(keys.runtime_credential(hash_token(token)), consistent=False)
    return item if item and not item.get("revoked") else None


# ---- connections -------------------------------------------------------------------------------

def register_connection(store: DynamoStore, connection_id: str, role: str, **attrs: Any) -> None:
    store.put({**keys.connection(connection_id), "kind": "connection", "role": role, "connection_id": connection_id,
               "connected_at": now(), "ttl": now() + 2 * 3600, **attrs})
    metrics.runtime_connected(attrs.get("runtime_kind") or role)  # shared, enrolling, enrolled or client


_ROLES: dict[str, dict[str, Any]] = {}  # warm-container cache: a connection's role never changes


def connection(store: DynamoStore, connection_id: str) -> Optional[dict[str, Any]]:
    cached = _ROLES.get(connection_id)
    if cached is not None:
        return cached
    item = store.get(keys.connection(connection_id))
    if item is not None and item.get("runtime_kind") != "enrolling":  # enrolling becomes enrolled at hello
        if len(_ROLES) > 10_000:
            _ROLES.clear()
        _ROLES[connection_id] = item
    return item


def forget_connection(store: DynamoStore, connection_id: str) -> None:
    """The connection is gone (`$disconnect`, or a post that met GoneException first): an Environment's
    connection leaves its Environment offline (unless a newer one replaced it), then its items go; a
    hosted host's last connection leaves that host's Environments disconnected."""
    cached = _ROLES.pop(connection_id, None)
    # A shared `rt-` connection becomes hosted at its hello, maybe in another container: read it again.
    conn = cached if cached is not None and cached.get("runtime_kind") != "shared" else \
        store.get(keys.connection(connection_id)) or cached
    if conn is not None and conn.get("runtime_kind") == "enrolled":
        environments.mark_disconnected(store, conn["tenant"], conn["environment_id"], connection_id)
    if conn is not None and conn.get("runtime_kind") in ("shared", "hosted"):
        from ..environments import exec_server_hosts as executors  # its exec-servers' Environments go offline

        executors.forget_host(store, connection_id)
    store.delete_partition(keys.connection_partition(connection_id))
    if conn is not None and conn.get("runtime_kind") == "hosted" and conn.get("host_id"):
        environments.host_disconnected(store, conn["host_id"], connection_id)


def _declarations(message: dict[str, Any]) -> list[tuple[str, frozenset[str], str]]:
    """A `runtime.hello`'s declarations, every one checked before anything is written."""
    harnesses = message.get("harnesses")
    if not isinstance(harnesses, list) or not harnesses:
        raise InvalidRequest("runtime.hello needs a nonempty 'harnesses' list.", param="harnesses")
    out = []
    for i, entry in enumerate(harnesses):
        where = f"harnesses[{i}]"
        if not isinstance(entry, dict) or set(entry) - {"harness", "capabilities", "engine"}:
            raise InvalidRequest(f"Invalid '{where}': expected {{harness, capabilities, engine}}.", param=where)
        harness = entry.get("harness")
        if harness not in HARNESS_NAMES:
            raise InvalidRequest(f"Invalid value for '{where}.harness'.", param=f"{where}.harness")
        advertised = capabilities.parse_declaration(entry.get("capabilities"), where=f"{where}.capabilities")
        engine_name = entry.get("engine", "unknown")
        if not isinstance(engine_name, str) or not ENGINE_NAME.fullmatch(engine_name):
            raise InvalidRequest(f"Invalid value for '{where}.engine': expected a name and version such as "
                                 "'codex 0.163.0'.", param=f"{where}.engine")
        out.append((harness, advertised, engine_name))
    return out


HOST_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _isolation(message: dict[str, Any], conn: dict[str, Any]) -> Optional[str]:
    """A hello's `isolation` (`{"type": "bubblewrap", "host_id"}`): the host id of a Runtime that runs
    each openai_hosted Environment in its own sandbox, or None. Only an operator's `rt-` connection may
    declare it (it becomes `hosted`); an Environment's connection never does."""
    kind = conn.get("runtime_kind") or "shared"
    if "isolation" not in message:
        if kind == "hosted":
            raise InvalidRequest("A hosted connection's runtime.hello declares its 'isolation'.", param="isolation")
        return None
    if kind not in ("shared", "hosted"):
        raise InvalidRequest("An Environment's connection runs that Environment on its own machine: it declares no "
                             "'isolation'.", param="isolation")
    isolation = message["isolation"]
    if not isinstance(isolation, dict) or set(isolation) != {"type", "host_id"}:
        raise InvalidRequest("Invalid 'isolation': expected {\"type\": \"bubblewrap\", \"host_id\"}.", param="isolation")
    if isolation["type"] != "bubblewrap":
        raise InvalidRequest("Invalid 'isolation.type': this deployment runs hosted Environments only in bubblewrap "
                             "sandboxes ('bubblewrap').", param="isolation.type")
    host_id = isolation["host_id"]
    if not isinstance(host_id, str) or not HOST_ID.fullmatch(host_id):
        raise InvalidRequest("Invalid 'isolation.host_id': expected 1 to 64 characters of A-Z, a-z, 0-9, '_' and "
                             "'-'.", param="isolation.host_id")
    if kind == "hosted" and conn.get("host_id") != host_id:
        raise InvalidRequest("Invalid 'isolation.host_id': this connection already said hello as another host.",
                             param="isolation.host_id")
    return host_id


def hello(store: DynamoStore, connection_id: str, message: dict[str, Any],
          conn: Optional[dict[str, Any]] = None) -> list[str]:
    """Record one complete declaration per Harness, in the pool of the connection's kind; returns the
    Harnesses now served."""
    declared = _declarations(message)
    conn = conn or connection(store, connection_id) or {}
    kind = conn.get("runtime_kind") or "shared"
    env_id = conn.get("environment_id")
    served = []
    for harness, advertised, engine_name in declared:
        store.put({**keys.declaration(connection_id, harness), "kind": "runtime_harness", "harness": harness,
                   "engine": engine_name, "connection_id": connection_id, "capabilities": sorted(advertised),
                   "runtime_kind": kind, "environment_id": env_id, "host_id": conn.get("host_id"),
                   **keys.listed_in_pool(keys.runtime_pool(kind, harness, env_id), now(), connection_id),
                   **liveness.declared(message), **redelivery.declared(message), "ttl": now() + 2 * 3600})
        served.append(harness)
    return served


def greet(store: DynamoStore, connection_id: str, message: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`runtime.hello` -> `runtime.welcome`. A machine that connected with an enrollment spends it now
    (once; a malformed hello spends nothing) and receives its Environment's durable credential in the
    welcome, the only place it is ever shown; its connection is `enrolled` from then on."""
    conn = connection(store, connection_id)
    if conn is None or conn.get("role") != "runtime":
        raise InvalidRequest("This connection is not a Runtime connection.", param="action")
    _declarations(message)
    liveness.asked(message)
    acks.asked(message)
    redelivery.asked(message)
    host_id = _isolation(message, conn)
    welcome: dict[str, Any] = {"type": protocol.RUNTIME_WELCOME}
    if host_id is not None and conn.get("runtime_kind") != "hosted":
        # An operator's Runtime that isolates each openai_hosted Environment: `hosted` from now on.
        conn = {**conn, "runtime_kind": "hosted", "host_id": host_id}
        store.put(conn)
        _ROLES[connection_id] = conn
    if conn.get("runtime_kind") == "enrolling":
        credential, env = environments.exchange(store, conn["enrollment_hash"])
        conn = {k: v for k, v in conn.items() if k != "enrollment_hash"}
        conn.update(runtime_kind="enrolled", tenant=env["tenant"], environment_id=env["id"])
        store.put(conn)
        _ROLES[connection_id] = conn
        welcome["credential"] = credential
    welcome["harnesses"] = hello(store, connection_id, message, conn)
    welcome["kind"] = conn.get("runtime_kind") or "shared"
    welcome.update(liveness.welcome(message))  # the cadence of its runtime.heartbeat, and the bound
    welcome.update(acks.welcome(message))  # deferred_acks: its heartbeat asks for what its messages did not
    welcome.update(redelivery.welcome(message))  # waiting_calls: a result is posted once, its heartbeat the backstop
    if conn.get("runtime_kind") == "enrolled":
        welcome["environment_id"] = conn["environment_id"]
        environments.mark_connected(store, conn["tenant"], conn["environment_id"], connection_id)
    if conn.get("runtime_kind") == "hosted":
        welcome["host_id"] = conn["host_id"]
        environments.host_connected(store, conn["host_id"], connection_id)
    return welcome, conn


def environment_idle(store: DynamoStore, connection_id: str, message: dict[str, Any]) -> None:
    """`{"action": "environment.idle", "environment_id"}`: a hosted Runtime stopped that Environment's
    idle sandbox (its workspace kept); only the host that holds the Environment may say so."""
    cached = _ROLES.get(connection_id)
    conn = cached if cached is not None and cached.get("runtime_kind") == "hosted" else store.get(keys.connection(connection_id))
    if conn is None or conn.get("runtime_kind") != "hosted":
        raise InvalidRequest("Only a hosted Runtime reports environment.idle.", param="action")
    environments.idle(store, conn["host_id"], message)


def queued_pools(conn: dict[str, Any], harnesses: list[str]) -> list[str]:
    """The queues a connection's hello looks at: the Turns it may serve that wait for a Runtime."""
    kind = conn.get("runtime_kind") or "shared"
    return [keys.turn_queue(keys.runtime_pool(kind, h, conn.get("environment_id")))
            for h in harnesses]


def eligible_runtimes(store: DynamoStore, harness: str, required: frozenset[str], where: str = "none",
                      env_id: Optional[str] = None, host_id: Optional[str] = None) -> list[dict[str, Any]]:
    """The connected Runtimes that may serve a Turn of `where` (placement) and `harness`, whose
    capabilities cover `required` (newest first); for an openai_hosted Environment bound to a host
    (`host_id`), only that host's connections. A connection whose heartbeats stopped (its pool row's `seen_at`
    older than the bound: `liveness.fresh`) is never chosen, though its `$disconnect` never came."""
    page = store.query(**keys.runtimes_in_pool(placement.pool_for(where, harness, env_id)), limit=100, ascending=False)
    at, bound = now(), liveness.bound()
    return [i for i in page.items
            if liveness.fresh(i, at, bound)
            and placement.may_serve(i.get("runtime_kind"), where, runtime_env=i.get("environment_id"), env_id=env_id)
            and (host_id is None or i.get("host_id") == host_id)
            and capabilities.covers(frozenset(i["capabilities"]), required)]



def post_safely(messenger: Messenger, store: DynamoStore, connection_id: str, message: Any) -> bool:
    """Post to a connection; a GoneException deletes *that* connection's items (a Runtime instance's claims
    stay for it to take back: `forget_keeping_claims`)."""
    try:
        messenger.post(connection_id, message)
        return True
    except ConnectionGone:
        forget_keeping_claims(store, connection_id)
        return False


def forget_keeping_claims(store: DynamoStore, connection_id: str, instance_pk: Optional[str] = None,
                          claims: Optional[list[dict[str, Any]]] = None) -> None:
    """A gone connection's items go (`forget_connection`), but the claims of a Runtime instance's connection stay,
    marked with the instance, for the instance to take back at its next hello within the heartbeat bound
    (runtimes/instances.py): whether its `$disconnect` or a post's GoneException came first, and however often."""
    if instance_pk is None:
        instance_pk = (store.get(keys.connection(connection_id)) or {}).get("instance")
    if claims is None:
        claims = store.query(**keys.claims_of_connection(connection_id), limit=1000, consistent=True).items
    kept = [c for c in claims if instance_pk or c.get("instance")]
    forget_connection(store, connection_id)
    for claim in kept:
        store.put({**claim, **keys.claim(connection_id, claim["turn_id"]), "instance": claim.get("instance") or instance_pk})
