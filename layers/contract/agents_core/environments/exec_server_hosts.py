"""Exec-server hosts: the operator's Runtimes that run the model loop for exec-server Environments.

A Codex Runtime of the operator's (`shared` or `hosted`) that listens for exec-server WebSockets says so
after its hello: `{"action": "executor.host", "url": "wss://host:port/executor"}`. A registration picks
the newest such host, tells it what to expect (`executor.expect`: the registration, its Environment and
the SHA-256 of a one-time token; never the token) and answers the exec-server `url` = that listener with
the registration and the token. The exec-server's frames then go straight to that host, never through
API Gateway's WebSocket API (128 KB messages, 32 KB frames). When the exec-server is joined, the host
reports `executor.connected` and Core lets that connection serve exactly this Environment's Codex Turns
(a declaration in the Environment's own pool, as an enrolled Runtime's); `executor.disconnected` (or the
host's own disconnect) takes it away and the Environment is `disconnected`.

The Runtime-protocol messages keep their names (`executor.host`, `.expect`, `.connected`, `.disconnected`):
they are the wire between Core and deployed Runtimes.
"""

from __future__ import annotations

import re
from typing import Any

from agents_contract import protocol
from agents_contract.errors import AgentsError

from .. import keys
from ..ids import now
from ..store import DynamoStore
from . import placement
from .connection import mark_connected, mark_disconnected
from .exec_server import HARNESS


def announce_host(store: DynamoStore, connection_id: str, conn: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    """`executor.host`: an operator's Runtime that serves Codex offers its exec-server listener."""
    if conn.get("runtime_kind") not in ("shared", "hosted"):
        raise AgentsError("Only an operator's Runtime hosts exec-server connections.", param="action")
    url = message.get("url")
    if not isinstance(url, str) or len(url) > 512 or not re.fullmatch(r"wss://[^\s?#]+|ws://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(/[^\s?#]*)?", url):
        raise AgentsError("Invalid 'url': expected the listener's wss:// URL (ws:// only on loopback).", param="url")
    declared = store.get(keys.declaration(connection_id, HARNESS))
    if declared is None:
        raise AgentsError("Declare the codex Harness in runtime.hello before hosting exec-server connections.",
                          param="action")
    store.put({**keys.exec_server_host(connection_id), "kind": "executor_host", "connection_id": connection_id,
               "url": url.rstrip("/"), **keys.listed_exec_server_host(HARNESS, now(), connection_id),
               "ttl": now() + 2 * 3600})
    return {"type": protocol.EXECUTOR_HOST, "url": url.rstrip("/")}


def _registration(store: DynamoStore, connection_id: str, message: dict[str, Any]) -> dict[str, Any]:
    registration_id = message.get("registration_id")
    item = store.get(keys.exec_server_registration(registration_id)) if isinstance(registration_id, str) \
        and registration_id.startswith("xreg_") and len(registration_id) <= 64 else None
    if item is None or item.get("connection_id") != connection_id:
        raise AgentsError("Invalid 'registration_id': no exec-server registration of this connection.",
                          param="registration_id")
    return item


def connected(store: DynamoStore, connection_id: str, message: dict[str, Any]) -> tuple[str, str]:
    """`executor.connected {registration_id}`: the host joined the exec-server; this connection now serves
    the Environment's Codex Turns (its pool, as an enrolled Runtime's), and the Environment is connected.
    Returns (tenant, the queue whose waiting Turns it may now claim)."""
    reg = _registration(store, connection_id, message)
    tenant, env_id = reg["tenant"], reg["environment_id"]
    env = store.get(keys.environment(tenant, env_id))
    declared = store.get(keys.declaration(connection_id, HARNESS))
    if env is None or declared is None or env.get("exec_key_id") != reg.get("exec_key_id"):
        raise AgentsError("This registration's Environment is gone or its executor key was replaced.",
                          param="registration_id")
    # Serves exactly this self_hosted Environment: the declaration is an Environment connection's
    # (`runtime_kind` enrolled, in the Environment's own pool), reached through the exec-server.
    store.put({**declared, **keys.environment_declaration(connection_id, env_id, HARNESS), "runtime_kind": "enrolled",
               "environment_id": env_id, "tenant": tenant, "via": "exec_server",
               "registration_id": keys.exec_server_registration_id(reg),
               **keys.listed_in_pool(keys.runtime_pool("enrolled", HARNESS, env_id), now(), connection_id),
               "ttl": now() + 2 * 3600})
    if env.get("connection_id") != connection_id or env.get("status") != "connected":  # a re-registration: no event
        mark_connected(store, tenant, env_id, connection_id)
    return tenant, placement.queue("self_hosted", HARNESS, env_id)


def disconnected(store: DynamoStore, connection_id: str, message: dict[str, Any]) -> None:
    """`executor.disconnected {registration_id}`: the exec-server is gone (past its reconnect grace)."""
    reg = _registration(store, connection_id, message)
    _leave(store, connection_id, reg["tenant"], reg["environment_id"])


def _leave(store: DynamoStore, connection_id: str, tenant: str, env_id: str, delete: bool = True) -> None:
    if delete:
        store.delete(keys.environment_declaration(connection_id, env_id, HARNESS))
    mark_disconnected(store, tenant, env_id, connection_id)


def forget_host(store: DynamoStore, connection_id: str) -> None:
    """The host's connection closed: each Environment it served through an exec-server is disconnected."""
    rows = store.query(**keys.environment_declarations_of_connection(connection_id), limit=100, consistent=True).items
    for row in rows:
        if row.get("via") == "exec_server":
            _leave(store, connection_id, row["tenant"], row["environment_id"], delete=False)  # the partition goes next
