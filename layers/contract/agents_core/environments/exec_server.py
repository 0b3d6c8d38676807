"""The stock exec-server: a self_hosted Codex Environment connected with `codex exec-server --remote` (issue 26).

"Pass this URL unchanged to `codex exec-server --remote` when connecting this environment." Every
enrollment of a self_hosted Environment also issues an **exec-server key pair**: an access key id and a
secret the exec-server signs its registration with (AWS SigV4, service `execute-api`; no AWS account is
involved on the user's side: the pair is this deployment's own). The secret is shown once, in the
enrollment's `exec_server`; Core keeps it sealed (KMS envelope, `vault_crypto.Sealer`, encryption context
naming tenant, Environment and key id) because verifying an HMAC needs the secret itself. It is bound to
the tenant and that Environment, replaced by the next enrollment and revoked with the Session.

The registry: `POST {remote_url}/cloud/environment/{id}/direct/register`, body
`{"transport": "direct_jsonrpc_v1"}`, is checked here (signature, clock skew at most 5 minutes, a replayed
signature refused, the key's Environment and tenant) and answers where the exec-server's WebSocket
goes: the listener of an exec-server host (`exec_server_hosts`), picked here.

Stored items (one table):
- Exec-server key: `EXECKEY#{access_key_id}` / `X` (tenant, Environment, the sealed secret); the
  Environment item names its current key (`exec_key_id`).
- Seen signature: `EXECSIG#{signature}` / `S` (TTL): the replay guard.
- Registration, host affinity and offered hosts: `keys.exec_server_registration`, `_affinity`, `_hosts`.
Stored values and the KMS context keep the names they were written with (`kind: executor_key`,
`executor_key_id`): data, not code.
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

from agents_contract import protocol
from agents_contract.errors import AgentsError, NotFound

from .. import keys
from ..ids import new_id, now
from ..settings import get_settings
from ..store import DynamoStore
from ..vault_crypto import Sealer, SecretUnavailable, default_sealer

TRANSPORT = "direct_jsonrpc_v1"
SERVICE = "execute-api"
KEY_PREFIX = "AKEX"  # 20 characters in all, like an AWS access key id (what SDK credential chains expect)
MAX_SKEW_SECONDS = 300
SECRET_NAME = "exec_server_secret_access_key"  # noqa: S105 - which secret a context names
_AUTH = re.compile(r"AWS4-HMAC-SHA256 Credential=([A-Z0-9]{20})/(\d{8})/([a-z0-9-]{1,32})/([a-z0-9-]{1,32})/"
                   r"aws4_request, ?SignedHeaders=([a-z0-9;-]{1,512}), ?Signature=([0-9a-f]{64})")


def context(tenant: str, env_id: str, access_key_id: str) -> dict[str, str]:
    """The KMS encryption context (and AES-GCM associated data) of an exec-server secret: its owner."""
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
    """The Environment goes (its Session was deleted): so does its exec-server key."""
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
    """The exec-server key a request was signed with, or `Refused`. `paths` are the forms the client may have
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
    url = (announce or host_url)(store, {**env, "exec_key_id": keys.exec_server_key_id(key)}, registration_id)
    return {"environment_id": env_id, "transport": TRANSPORT, "registration_id": registration_id, "url": url}


class NoExecServerHost(AgentsError):
    """503: no exec-server host is connected (its error code keeps its first name: it is on the wire)."""
    status = 503
    default_code = "no_executor_host"


HARNESS = "codex"  # the only Harness with an exec-server


def host_url(store: DynamoStore, env: dict[str, Any], registration_id: str, messenger: Any = None) -> str:
    """Where the exec-server's WebSocket goes: the newest exec-server host that takes the registration
    (`executor.expect` tells it what to expect; the message type is the Runtime protocol's)."""
    from ..aws import ConnectionGone, default_messenger

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
                "type": protocol.EXECUTOR_EXPECT, "registration_id": registration_id, "environment_id": env["id"],
                "tenant": env["tenant"], "session_id": env.get("session_id"),
                "token_sha256": hashlib.sha256(token.encode()).hexdigest()})
        except ConnectionGone:
            store.delete(keys.exec_server_host(host["connection_id"]))
            continue
        if (last or {}).get("url") != host["url"]:
            store.put({**keys.exec_server_affinity(env["id"]), "kind": "executor_affinity", "url": host["url"],
                       "ttl": now() + 30 * 86400})
        return f"{host['url']}/{registration_id}?token={token}"
    raise NoExecServerHost("No Runtime of this deployment hosts exec-server connections now; try again shortly, or "
                           "connect this Environment with its enrollment's Runtime command.", param=None)
