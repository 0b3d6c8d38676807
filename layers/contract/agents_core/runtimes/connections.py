"""Runtime connections: tokens, `$connect` roles, capability declarations (`runtime.hello`),
which connected Runtimes may serve a Turn, and posting to a connection."""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import Any, Optional

from agents_contract import capabilities
from agents_contract.errors import InvalidRequest
from agents_contract.harnessconfig import HARNESS_NAMES

from ..aws import ConnectionGone, Messenger
from ..ids import new_id, now
from ..store import DynamoStore

PLACEMENTS = ("environment_none", "local_environment")
ENGINE_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,40}( [A-Za-z0-9_.+\-]{1,40})?")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_runtime_token(store: DynamoStore, name: str, token: Optional[str] = None) -> str:
    token = token or "rt-" + secrets.token_urlsafe(32)
    store.put({"PK": f"RT#{hash_token(token)}", "SK": "R", "kind": "runtime_token", "name": name,
               "runtime_id": new_id("rt"), "created_at": now()}, condition="attribute_not_exists(PK)")
    return token


def runtime_for_token(store: DynamoStore, token: str) -> Optional[dict[str, Any]]:
    item = store.get({"PK": f"RT#{hash_token(token)}", "SK": "R"}, consistent=False)
    return item if item and not item.get("revoked") else None


# ---- connections -------------------------------------------------------------------------------

def conn_key(connection_id: str, sk: str = "C") -> dict[str, str]:
    return {"PK": f"CONN#{connection_id}", "SK": sk}


def register_connection(store: DynamoStore, connection_id: str, role: str, **attrs: Any) -> None:
    store.put({**conn_key(connection_id), "kind": "connection", "role": role, "connection_id": connection_id,
               "connected_at": now(), "ttl": now() + 2 * 3600, **attrs})


_ROLES: dict[str, dict[str, Any]] = {}  # warm-container cache: a connection's role never changes


def connection(store: DynamoStore, connection_id: str) -> Optional[dict[str, Any]]:
    cached = _ROLES.get(connection_id)
    if cached is not None:
        return cached
    item = store.get(conn_key(connection_id))
    if item is not None:
        if len(_ROLES) > 10_000:
            _ROLES.clear()
        _ROLES[connection_id] = item
    return item


def forget_connection(store: DynamoStore, connection_id: str) -> None:
    _ROLES.pop(connection_id, None)
    store.delete_partition(f"CONN#{connection_id}")


def hello(store: DynamoStore, connection_id: str, message: dict[str, Any]) -> list[str]:
    """Record one complete declaration per Harness; returns the Harnesses now served."""
    harnesses = message.get("harnesses")
    if not isinstance(harnesses, list) or not harnesses:
        raise InvalidRequest("runtime.hello needs a nonempty 'harnesses' list.", param="harnesses")
    served = []
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
        store.put({**conn_key(connection_id, f"H#{harness}"), "kind": "runtime_harness", "harness": harness,
                   "engine": engine_name, "connection_id": connection_id, "capabilities": sorted(advertised),
                   "GSI1PK": f"RUNTIME#{harness}", "GSI1SK": f"{now():012d}#{connection_id}", "ttl": now() + 2 * 3600})
        served.append(harness)
    return served


def eligible_runtimes(store: DynamoStore, harness: str, required: frozenset[str]) -> list[dict[str, Any]]:
    """The connected Runtimes serving `harness` whose capabilities cover `required` (newest first)."""
    page = store.query(pk=f"RUNTIME#{harness}", index="GSI1", limit=100, ascending=False)
    return [i for i in page.items if capabilities.covers(frozenset(i["capabilities"]), required)]



def post_safely(messenger: Messenger, store: DynamoStore, connection_id: str, message: Any) -> bool:
    """Post to a connection; a GoneException deletes *that* connection's items."""
    try:
        messenger.post(connection_id, message)
        return True
    except ConnectionGone:
        forget_connection(store, connection_id)
        return False
