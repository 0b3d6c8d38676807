"""A self_hosted Codex Environment connected with the stock `codex exec-server --remote` (issue 26).

"Pass this URL unchanged to `codex exec-server --remote` when connecting this environment." Every
enrollment of a self_hosted Environment also issues an **executor key pair**: an access key id and a
secret the exec-server signs its registration with (AWS SigV4, service `execute-api`; no AWS account is
involved on the user's side: the pair is this deployment's own). The secret is shown once, in the
enrollment's `exec_server`; Core keeps it sealed (KMS envelope, `vault_crypto.Sealer`, encryption context
naming tenant, Environment and key id) because verifying an HMAC needs the secret itself. It is bound to
the tenant and that Environment, replaced by the next enrollment and revoked with the Session.

The registry: `POST {remote_url}/cloud/environment/{id}/direct/register`, body
`{"transport": "direct_jsonrpc_v1"}`, is checked here (signature, clock skew at most 5 minutes, a replayed
signature refused, the key's Environment and tenant) and answers where the exec-server's executor
WebSocket goes.

Stored items (one table):
- Executor key: `EXECKEY#{access_key_id}` / `X` (tenant, Environment, the sealed secret); the
  Environment item names its current key (`exec_key_id`).
- Seen signature: `EXECSIG#{signature}` / `S` (TTL): the replay guard.
"""

from __future__ import annotations

import base64
import calendar
import hashlib
import hmac
import re
import secrets
import shlex
import time
from collections.abc import Mapping
from typing import Any, Optional
from urllib.parse import quote

from agents_contract.errors import AgentsError, NotFound

from . import keys
from .ids import new_id, now
from .settings import get_settings
from .store import DynamoStore
from .vault_crypto import Sealer, SecretUnavailable, default_sealer

TRANSPORT = "direct_jsonrpc_v1"
SERVICE = "execute-api"
KEY_PREFIX = "AKEX"  # 20 characters in all, like an AWS access key id (what SDK credential chains expect)
MAX_SKEW_SECONDS = 300
SECRET_NAME = "exec_server_secret_access_key"  # noqa: S105 - which secret a context names
_AUTH = re.compile(r"AWS4-HMAC-SHA256 Credential=([A-Z0-9]{20})/(\d{8})/([a-z0-9-]{1,32})/([a-z0-9-]{1,32})/"
                   r"aws4_request, ?SignedHeaders=([a-z0-9;-]{1,512}), ?Signature=([0-9a-f]{64})")


def context(tenant: str, env_id: str, access_key_id: str) -> dict[str, str]:
    """The KMS encryption context (and AES-GCM associated data) of an executor secret: its owner."""
    return {"tenant": tenant, "environment_id": env_id, "executor_key_id": access_key_id, "secret": SECRET_NAME}


# ---- issuing, replacing, revoking --------------------------------------------------------------------

def issue(store: DynamoStore, env: dict[str, Any], remote_url: str, sealer: Optional[Sealer] = None) -> dict[str, Any]:
    """A new key pair for the Environment (the enrollment's `exec_server`), replacing its earlier one in
    the same transaction. The secret is returned here and nowhere else."""
    tenant, env_id = env["tenant"], env["id"]
    access_key_id = KEY_PREFIX + base64.b32encode(secrets.token_bytes(10)).decode()[:16]
    secret = secrets.token_urlsafe(30)
    sealed = (sealer or default_sealer()).seal(secret, context(tenant, env_id, access_key_id))
    tx = store.new_transaction()
    tx.put({**keys.exec_server_key(access_key_id), "kind": "executor_key", "tenant": tenant, "environment_id": env_id,
            "sealed": sealed, "created_at": now()}, "attribute_not_exists(PK)")
    tx.update(keys.environment(tenant, env_id), "SET exec_key_id = :k", "attribute_exists(PK)",
              values={":k": access_key_id})
    if env.get("exec_key_id"):
        tx.delete(keys.exec_server_key(env["exec_key_id"]))
    store.transact(tx)
    region = get_settings().aws_region
    return {"access_key_id": access_key_id, "secret_access_key": secret, "region": region,
            "command": command(access_key_id, secret, region, remote_url, env_id)}


def command(access_key_id: str, secret: str, region: str, remote_url: str, env_id: str) -> str:
    """The exact shell command (the pair in the environment, as the AWS SDK's credential chain reads it)."""
    words = ["codex", "exec-server", "--remote", remote_url, "--remote-transport", "direct", "--aws-sigv4",
             "--environment-id", env_id]
    return (f"AWS_ACCESS_KEY_ID={shlex.quote(access_key_id)} AWS_SECRET_ACCESS_KEY={shlex.quote(secret)} "
            f"AWS_REGION={shlex.quote(region)} " + " ".join(shlex.quote(w) for w in words))


def revoke(store: DynamoStore, env: Optional[dict[str, Any]]) -> None:
    """The Environment goes (its Session was deleted): so does its executor key."""
    if env is not None and env.get("exec_key_id"):
        store.delete(keys.exec_server_key(env["exec_key_id"]))


# ---- SigV4 verification ------------------------------------------------------------------------------

class Refused(AgentsError):
    """403: the signature, its time or its key is not acceptable (the exec-server stops, saying so)."""
    status = 403
    default_code = "invalid_signature"


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signature(secret: str, *, method: str, path: str, query: str, headers: Mapping[str, str], signed: list[str],
              body: bytes, amz_date: str, scope: str) -> str:
    """The SigV4 signature of a request (canonical request -> string to sign -> derived key)."""
    canonical_query = "&".join(sorted(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, _, v in (p.partition("=") for p in query.split("&")
                                                                           if p)))
    canonical_headers = "".join(f"{h}:{' '.join(headers.get(h, '').split())}\n" for h in signed)
    payload = hashlib.sha256(body).hexdigest()
    canonical = "\n".join([method.upper(), quote(path, safe="/-_.~"), canonical_query, canonical_headers,
                           ";".join(signed), payload])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    date, region, service, _ = scope.split("/")
    key = _hmac(_hmac(_hmac(_hmac(("AWS4" + secret).encode(), date), region), service), "aws4_request")
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def verify(store: DynamoStore, *, method: str, paths: list[str], query: str, headers: Mapping[str, Any],
           body: bytes, clock: Optional[float] = None, sealer: Optional[Sealer] = None) -> dict[str, Any]:
    """The executor key a request was signed with, or `Refused`. `paths` are the forms the client may have
    signed (behind API Gateway: with and without the stage)."""
    lowered = {str(k).lower(): str(v) for k, v in headers.items() if v is not None}
    found = _AUTH.fullmatch(lowered.get("authorization", "").strip())
    if found is None:
        raise Refused("Sign this request with AWS SigV4 (codex exec-server --aws-sigv4).", param=None)
    access_key_id, date, region, service, signed_text, given = found.groups()
    signed = signed_text.split(";")
    amz_date = lowered.get("x-amz-date", "")
    try:
        stamp = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
    except ValueError:
        raise Refused("The request has no valid X-Amz-Date.", param=None) from None
    if abs((clock if clock is not None else time.time()) - stamp) > MAX_SKEW_SECONDS:
        raise Refused("The request's X-Amz-Date is more than 5 minutes from this deployment's clock.", param=None)
    if date != amz_date[:8] or service != SERVICE or region != get_settings().aws_region \
            or not {"host", "x-amz-date"} <= set(signed) or signed != sorted(signed):
        raise Refused(f"Sign with region {get_settings().aws_region} and service {SERVICE} (the defaults of the "
                      "command this deployment's enrollment gives).", param=None)
    item = store.get(keys.exec_server_key(access_key_id))
    if item is None or item.get("kind") != "executor_key":
        raise Refused("This executor key is not valid: it was replaced by a newer enrollment or revoked.", param=None)
    try:
        secret = (sealer or default_sealer()).open(item["sealed"], context(item["tenant"], item["environment_id"],
                                                                           access_key_id))
    except SecretUnavailable:
        raise Refused("This executor key cannot be used now.", param=None) from None
    scope = f"{date}/{region}/{service}/aws4_request"
    if not any(hmac.compare_digest(given, signature(secret, method=method, path=p, query=query, headers=lowered,
                                                    signed=signed, body=body, amz_date=amz_date, scope=scope))
               for p in paths):
        raise Refused("The request signature does not match (check AWS_SECRET_ACCESS_KEY).", param=None)
    try:  # the replay guard: a signature is accepted once (the skew window bounds how long it is kept)
        store.put({**keys.exec_server_signature(given), "kind": "executor_signature",
                   "ttl": int(stamp) + 2 * MAX_SKEW_SECONDS}, condition="attribute_not_exists(PK)")
    except AgentsError:
        raise Refused("This signed request was already used; sign a new one.", param=None) from None
    return item


# ---- the registry ------------------------------------------------------------------------------------

def register(store: DynamoStore, env_id: str, *, method: str, paths: list[str], query: str,
             headers: Mapping[str, Any], body: bytes, clock: Optional[float] = None,
             sealer: Optional[Sealer] = None, announce: Any = None) -> dict[str, Any]:
    """`POST {remote_url}/cloud/environment/{id}/direct/register`: a verified key of exactly this
    Environment (the current one) gets a registration; any other Environment id is a 404 (which ends
    the exec-server), whoever owns it."""
    import json

    key = verify(store, method=method, paths=paths, query=query, headers=headers, body=body, clock=clock,
                 sealer=sealer)
    env = store.get(keys.environment(key["tenant"], env_id)) if env_id.startswith("env_") else None
    if key["environment_id"] != env_id or env is None or env.get("exec_key_id") != keys.exec_server_key_id(key) \
            or env.get("type") != "self_hosted":
        raise NotFound()
    try:
        requested = json.loads(body or b"{}")
    except ValueError:
        requested = None
    if not isinstance(requested, dict) or requested.get("transport", TRANSPORT) != TRANSPORT:
        raise AgentsError(f"This deployment serves the '{TRANSPORT}' transport (--remote-transport direct).",
                          param="transport")
    registration_id = new_id("xreg")
    url = (announce or executor_url)(store, {**env, "exec_key_id": keys.exec_server_key_id(key)}, registration_id)
    return {"environment_id": env_id, "transport": TRANSPORT, "registration_id": registration_id, "url": url}


class NoExecutorHost(AgentsError):
    status = 503
    default_code = "no_executor_host"


# ---- executor hosts: operator Runtimes that run the model loop for exec-server Environments ---------
#
# A Codex Runtime of the operator's (`shared` or `hosted`) that listens for exec-server WebSockets says so
# after its hello: `{"action": "executor.host", "url": "wss://host:port/executor"}`. A registration picks
# the newest such host, tells it what to expect (`executor.expect`: the registration, its Environment and
# the SHA-256 of a one-time token; never the token) and answers the exec-server `url` = that listener with
# the registration and the token. The exec-server's frames then go straight to that host, never through
# API Gateway's WebSocket API (128 KB messages, 32 KB frames). When the exec-server is joined, the host
# reports `executor.connected` and Core lets that connection serve exactly this Environment's Codex Turns
# (a declaration in the Environment's own pool, as an enrolled Runtime's); `executor.disconnected` (or the
# host's own disconnect) takes it away and the Environment is `disconnected`.

HARNESS = "codex"  # the only Harness with an exec-server


def announce_host(store: DynamoStore, connection_id: str, conn: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    """`executor.host`: an operator's Runtime that serves Codex offers its executor listener."""
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
    return {"type": "executor.host", "url": url.rstrip("/")}


def executor_url(store: DynamoStore, env: dict[str, Any], registration_id: str, messenger: Any = None) -> str:
    """Where the executor WebSocket goes: the newest executor host that takes the registration."""
    from .aws import ConnectionGone, default_messenger

    hosts = store.query(**keys.exec_server_hosts(HARNESS), limit=20, ascending=False).items
    # Affinity: the host that served this Environment before keeps it (its Codex thread lives on its disk).
    last = store.get(keys.exec_server_affinity(env["id"]))
    hosts.sort(key=lambda h: h["url"] != (last or {}).get("url"))
    for host in hosts:
        token = secrets.token_urlsafe(32)
        store.put({**keys.exec_server_registration(registration_id), "kind": "executor_registration",
                   "tenant": env["tenant"],
                   "environment_id": env["id"], "session_id": env.get("session_id"),
                   "exec_key_id": env.get("exec_key_id"), "connection_id": host["connection_id"],
                   "created_at": now(), "ttl": now() + 7 * 86400})
        try:
            (messenger or default_messenger()).post(host["connection_id"], {
                "type": "executor.expect", "registration_id": registration_id, "environment_id": env["id"],
                "tenant": env["tenant"], "session_id": env.get("session_id"),
                "token_sha256": hashlib.sha256(token.encode()).hexdigest()})
        except ConnectionGone:
            store.delete(keys.exec_server_host(host["connection_id"]))
            continue
        if (last or {}).get("url") != host["url"]:
            store.put({**keys.exec_server_affinity(env["id"]), "kind": "executor_affinity", "url": host["url"],
                       "ttl": now() + 30 * 86400})
        return f"{host['url']}/{registration_id}?token={token}"
    raise NoExecutorHost("No Runtime of this deployment hosts exec-server connections now; try again shortly, or "
                         "connect this Environment with its enrollment's Runtime command.", param=None)


def _registration(store: DynamoStore, connection_id: str, message: dict[str, Any]) -> dict[str, Any]:
    registration_id = message.get("registration_id")
    item = store.get(keys.exec_server_registration(registration_id)) if isinstance(registration_id, str) \
        and registration_id.startswith("xreg_") and len(registration_id) <= 64 else None
    if item is None or item.get("connection_id") != connection_id:
        raise AgentsError("Invalid 'registration_id': no exec-server registration of this connection.",
                          param="registration_id")
    return item


def executor_connected(store: DynamoStore, connection_id: str, message: dict[str, Any]) -> tuple[str, str]:
    """`executor.connected {registration_id}`: the host joined the exec-server; this connection now serves
    the Environment's Codex Turns (its pool, as an enrolled Runtime's), and the Environment is connected.
    Returns (tenant, the queue whose waiting Turns it may now claim)."""
    from . import environments, placement

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
        environments.mark_connected(store, tenant, env_id, connection_id)
    return tenant, placement.queue("self_hosted", HARNESS, env_id)


def executor_disconnected(store: DynamoStore, connection_id: str, message: dict[str, Any]) -> None:
    """`executor.disconnected {registration_id}`: the exec-server is gone (past its reconnect grace)."""
    reg = _registration(store, connection_id, message)
    _leave(store, connection_id, reg["tenant"], reg["environment_id"])


def _leave(store: DynamoStore, connection_id: str, tenant: str, env_id: str, delete: bool = True) -> None:
    from . import environments

    if delete:
        store.delete(keys.environment_declaration(connection_id, env_id, HARNESS))
    environments.mark_disconnected(store, tenant, env_id, connection_id)


def forget_host(store: DynamoStore, connection_id: str) -> None:
    """The host's connection closed: each Environment it served through an exec-server is disconnected."""
    rows = store.query(**keys.environment_declarations_of_connection(connection_id), limit=100, consistent=True).items
    for row in rows:
        if row.get("via") == "exec_server":
            _leave(store, connection_id, row["tenant"], row["environment_id"], delete=False)  # the partition goes next
