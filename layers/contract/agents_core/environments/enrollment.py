"""Enrollment and credentials: how a tenant's machine comes to connect a self_hosted Environment.

A self_hosted Environment is connected by the tenant's own machine with an enrollment: a short-lived,
single-use token (stored hashed) that the reference Runtime exchanges, at its first `runtime.hello`, for a
durable credential bound to that Environment (stored hashed; a newer enrollment replaces it). Such a
connection serves exactly that Environment's Sessions (`placement.may_serve`). Every enrollment also
issues the Environment's exec-server key pair (`exec_server.issue`), the other way to connect it. A
Session's own Environment goes with the Session, and so does everything that connected it.

Stored items (one table):
- Enrollment: `ENROLL#{sha256(token)}` / `N` (tenant, Environment, expiry, used_at); TTL.
- Durable credential: `RT#{sha256(credential)}` / `R` (kind environment_credential, tenant, Environment).
"""

from __future__ import annotations

import hashlib
import secrets
import shlex
from typing import Any, Optional

from agents_contract.errors import InvalidRequest
from agents_contract.validation import json_type_name

from .. import engine, keys
from ..ids import new_id, now
from ..settings import get_settings
from ..store import DynamoStore, TransactionConflict, unpack
from . import exec_server
from .placement import environment_id
from .resource import load, remote_url

ENROLLMENT_PREFIX = "enr-"
CREDENTIAL_PREFIX = "rte-"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


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
            "exec_server": exec_server.issue(store, item, remote_url())}  # or connect with the stock exec-server


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
    exec_server.revoke(store, env)
    store.delete(key)
