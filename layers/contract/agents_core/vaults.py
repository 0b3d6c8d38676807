"""Vault and credential logic: create, read, update (rotate), list, delete; the attached credentials a
Session selects from; the bearer a dispatched Turn carries.

Items (one table):
- Vault: `T#{tenant}#VAULT#{vault_id}` / `V` (doc, meta map for filters); GSI1 `T#{tenant}#VAULTS`.
- Credential: the same partition / `CRED#{credential_id}`: doc (the public record), meta, `sealed`
  (secret name -> KMS-wrapped data key, nonce, AES-GCM ciphertext; vault_crypto), `expires_epoch`.
  Deleting a Vault deletes its partition, so its credentials go with it; a credential addressed
  through another Vault is simply absent (404).
"""

from __future__ import annotations

import base64
import http.client
import ipaddress
import json
import socket
import ssl
import urllib.parse
from typing import Any, Optional

from agents_contract import jsonutil, vaults
from agents_contract.errors import NotFound, Unavailable

from . import keys
from .ids import new_id, now
from .observability import logger
from .pagination import ListParams, page
from .settings import get_settings
from .store import Contention, DynamoStore, TransactionConflict
from .vault_crypto import Sealer, SecretUnavailable, context, default_sealer

REFRESH_SKEW_SECONDS = 60
REFRESH_TIMEOUT_SECONDS = 5


def policy() -> vaults.UrlPolicy:
    settings = get_settings()
    origins = tuple(o.strip().rstrip("/").lower() for o in (settings.oauth_trusted_origins or "").split(",") if o.strip())
    normalized = tuple(o if o == "loopback" else vaults.origin(o) for o in origins)
    return vaults.UrlPolicy(allow_loopback_http=settings.vault_allow_loopback_http, trusted_origins=normalized)


def _metadata_filter(query: dict[str, str]) -> tuple[list[str], dict[str, str], dict[str, Any]]:
    from agents_contract.parser import check_metadata

    wanted = {k[len("metadata["):-1]: v for k, v in query.items() if k.startswith("metadata[") and k.endswith("]")}
    check_metadata(wanted or None)
    filters, names, values = [], {}, {}
    for i, (key, value) in enumerate(sorted(wanted.items())):
        filters.append(f"meta.#m{i} = :m{i}")
        names[f"#m{i}"] = key
        values[f":m{i}"] = value
    return filters, names, values


# ---- vaults ------------------------------------------------------------------------------------------

def _vault_item(tenant: str, record: dict[str, Any], version: int) -> dict[str, Any]:
    return {**keys.vault(tenant, record["id"]), **keys.listed_vault(tenant, record["id"]),
            "kind": "vault", "doc": jsonutil.dumps(record), "meta": dict(record["metadata"]), "version": version}


def _load_vault(store: DynamoStore, tenant: str, vault_id: str) -> tuple[dict[str, Any], int]:
    item = store.get(keys.vault(tenant, vault_id))
    if item is None or item.get("kind") != "vault":
        raise NotFound()
    return jsonutil.loads(item["doc"]), int(item["version"])


def create_vault(store: DynamoStore, tenant: str, body: Any) -> dict[str, Any]:
    parsed = vaults.parse_vault_create(body)
    record = {"id": new_id("vault"), "created_at": now(), **parsed}
    store.transact(store.new_transaction().put(_vault_item(tenant, record, 1), "attribute_not_exists(PK)"))
    return vaults.vault_resource(record)


def retrieve_vault(store: DynamoStore, tenant: str, vault_id: str) -> dict[str, Any]:
    return vaults.vault_resource(_load_vault(store, tenant, vault_id)[0])


def update_vault(store: DynamoStore, tenant: str, vault_id: str, body: Any) -> dict[str, Any]:
    changes = vaults.parse_vault_update(body)
    for _ in range(5):
        record, version = _load_vault(store, tenant, vault_id)
        record = {**record, **changes}
        tx = store.new_transaction().put(_vault_item(tenant, record, version + 1), "version = :v",
                                         values={":v": version})
        try:
            store.transact(tx)
        except (TransactionConflict, Contention):
            continue
        return vaults.vault_resource(record)
    raise Unavailable()


def delete_vault(store: DynamoStore, tenant: str, vault_id: str) -> dict[str, Any]:
    """The Vault and every credential in it (its whole partition)."""
    _load_vault(store, tenant, vault_id)
    store.delete_partition(keys.vault_partition(tenant, vault_id))
    return {"id": vault_id, "object": "vault.deleted", "deleted": True}


def list_vaults(store: DynamoStore, tenant: str, params: ListParams, query: dict[str, str],
                statuses: list[str]) -> dict[str, Any]:
    wanted = vaults.status_filter(statuses)
    filters, names, values = _metadata_filter(query)
    if params.after is not None and store.get(keys.vault(tenant, params.after)) is None:
        raise NotFound()  # a cursor that names no Vault of this tenant
    if "active" not in wanted:  # every Vault here is active: archiving is not offered
        return page([], False)
    result = store.query(**keys.vaults_of_tenant(tenant), after=params.after, limit=params.limit,
                         ascending=params.ascending, filter_expression=" AND ".join(filters) or None,
                         names=names or None, values=values or None)
    return page([vaults.vault_resource(jsonutil.loads(i["doc"])) for i in result.items], result.has_more)


# ---- credentials -------------------------------------------------------------------------------------

def _credential_item(tenant: str, record: dict[str, Any], sealed: dict[str, Any], expires: Optional[int],
                     version: int) -> dict[str, Any]:
    return {**keys.credential(tenant, record["vault_id"], record["id"]), "kind": "vault_credential",
            "doc": jsonutil.dumps(record), "meta": dict(record["metadata"]), "sealed": sealed,
            "expires_epoch": expires, "version": version}


def _load_credential(store: DynamoStore, tenant: str, vault_id: str, credential_id: str) -> dict[str, Any]:
    item = store.get(keys.credential(tenant, vault_id, credential_id))
    if item is None or item.get("kind") != "vault_credential":
        raise NotFound()
    return item


def _seal_all(sealer: Sealer, tenant: str, record: dict[str, Any], secrets: dict[str, Optional[str]],
              sealed: dict[str, Any]) -> dict[str, Any]:
    out = dict(sealed)
    url = record["auth"]["mcp_server_url"]
    for name, value in secrets.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = sealer.seal(value, context(tenant, record["vault_id"], record["id"], url, name))
    return out


def create_credential(store: DynamoStore, tenant: str, vault_id: str, body: Any,
                      sealer: Optional[Sealer] = None) -> dict[str, Any]:
    parsed = vaults.parse_credential_create(body, policy())
    _load_vault(store, tenant, vault_id)
    ts = now()
    record = {"id": new_id("cred"), "vault_id": vault_id, "name": parsed.name, "metadata": parsed.metadata,
              "created_at": ts, "updated_at": ts, "auth": parsed.auth}
    sealed = _seal_all(sealer or default_sealer(), tenant, record, parsed.secrets, {})
    tx = store.new_transaction().check(keys.vault(tenant, vault_id), "attribute_exists(PK)")
    tx.put(_credential_item(tenant, record, sealed, parsed.expires_at, 1), "attribute_not_exists(PK)")
    try:
        store.transact(tx)
    except TransactionConflict:
        raise NotFound() from None  # the Vault was deleted meanwhile
    return vaults.credential_resource(record)


def retrieve_credential(store: DynamoStore, tenant: str, vault_id: str, credential_id: str) -> dict[str, Any]:
    return vaults.credential_resource(jsonutil.loads(_load_credential(store, tenant, vault_id, credential_id)["doc"]))


def update_credential(store: DynamoStore, tenant: str, vault_id: str, credential_id: str, body: Any,
                      sealer: Optional[Sealer] = None) -> dict[str, Any]:
    for _ in range(5):
        item = _load_credential(store, tenant, vault_id, credential_id)
        record = jsonutil.loads(item["doc"])
        parsed = vaults.parse_credential_update(body, record["auth"])
        if parsed.metadata is not None:
            record["metadata"] = parsed.metadata
        expires = item.get("expires_epoch")
        if parsed.auth is not None:
            record["auth"] = parsed.auth
            expires = parsed.expires_at if record["auth"].get("expires_at") else None
        record["updated_at"] = now()
        sealed = _seal_all(sealer or default_sealer(), tenant, record, parsed.secrets, item.get("sealed") or {})
        version = int(item["version"])
        tx = store.new_transaction().put(_credential_item(tenant, record, sealed, expires, version + 1),
                                         "version = :v", values={":v": version})
        try:
            store.transact(tx)
        except TransactionConflict as conflict:
            if conflict.reasons and conflict.reasons[0] is None:
                raise NotFound() from None
            continue
        except Contention:
            continue
        return vaults.credential_resource(record)
    raise Unavailable()


def delete_credential(store: DynamoStore, tenant: str, vault_id: str, credential_id: str) -> dict[str, Any]:
    if not _delete(store, keys.credential(tenant, vault_id, credential_id)):
        raise NotFound()
    return {"id": credential_id, "object": "vault.credential.deleted", "deleted": True}


def _delete(store: DynamoStore, key: dict[str, str]) -> bool:
    tx = store.new_transaction().delete(key, "kind = :k", values={":k": "vault_credential"})
    try:
        store.transact(tx)
    except TransactionConflict:
        return False
    return True


def list_credentials(store: DynamoStore, tenant: str, vault_id: str, params: ListParams, query: dict[str, str],
                     statuses: list[str]) -> dict[str, Any]:
    wanted = vaults.status_filter(statuses)
    filters, names, values = _metadata_filter(query)
    _load_vault(store, tenant, vault_id)
    after = keys.credential_sk(params.after) if params.after else None
    if after is not None and store.get(keys.credential(tenant, vault_id, params.after)) is None:
        raise NotFound()  # a cursor that names no credential of this Vault
    if "active" not in wanted:
        return page([], False)
    result = store.query(**keys.credentials_of_vault(tenant, vault_id), after=after, limit=params.limit,
                         ascending=params.ascending, consistent=True,
                         filter_expression=" AND ".join(filters) or None, names=names or None, values=values or None)
    return page([vaults.credential_resource(jsonutil.loads(i["doc"])) for i in result.items], result.has_more)


# ---- selection at Session creation ---------------------------------------------------------------------

def attached_credentials(store: DynamoStore, tenant: str, vault_ids: list[str]) -> list[vaults.AttachedCredential]:
    """The credentials of the attached Vaults (an unknown or foreign Vault is the official 404)."""
    out: list[vaults.AttachedCredential] = []
    for vault_id in vault_ids:
        _load_vault(store, tenant, vault_id)
        rows = store.query(**keys.credentials_of_vault(tenant, vault_id), limit=1000, consistent=True).items
        for row in rows:
            record = jsonutil.loads(row["doc"])
            out.append(vaults.AttachedCredential(record["id"], vault_id, record["auth"]["mcp_server_url"]))
    return out


# ---- the bearer a dispatched Turn carries ------------------------------------------------------------------

class CredentialUnavailable(Exception):
    """The frozen credential cannot serve this Turn (deleted, undecryptable, expired without refresh,
    refresh refused). The message is safe to show: it names the credential, never a secret."""


def bearer(store: DynamoStore, tenant: str, vault_id: str, credential_id: str, sealer: Optional[Sealer] = None,
           refresher: Any = None) -> str:
    """The credential's current bearer token, decrypted now, for one `turn.start`. An expired
    `mcp_oauth` access token is refreshed once first, and the new tokens are committed before use."""
    sealer = sealer or default_sealer()
    item = store.get(keys.credential(tenant, vault_id, credential_id))
    if item is None or item.get("kind") != "vault_credential":
        raise CredentialUnavailable(f"The MCP credential {credential_id} no longer exists.")
    record = jsonutil.loads(item["doc"])
    url = record["auth"]["mcp_server_url"]
    sealed = item.get("sealed") or {}

    def open_(name: str) -> str:
        if name not in sealed:
            raise CredentialUnavailable(f"The MCP credential {credential_id} has no {name}.")
        try:
            return sealer.open(sealed[name], context(tenant, vault_id, credential_id, url, name))
        except SecretUnavailable:
            logger.warning("credential secret could not be decrypted", extra={"credential_id": credential_id})
            raise CredentialUnavailable(f"The MCP credential {credential_id} could not be decrypted.") from None

    if record["auth"]["type"] == "static_bearer":
        return open_("token")
    expires = item.get("expires_epoch")
    if expires is None or int(expires) > now() + REFRESH_SKEW_SECONDS:
        return open_("access_token")
    refresh = record["auth"].get("refresh")
    if not refresh:
        raise CredentialUnavailable(f"The MCP credential {credential_id} has expired and has no refresh configuration.")
    secret = open_("client_secret") if refresh["token_endpoint_auth"]["type"] != "none" else None
    answer = (refresher or refresh_token)(refresh, open_("refresh_token"), secret)
    access = answer.get("access_token")
    if not isinstance(access, str) or not access:
        raise CredentialUnavailable(f"The MCP credential {credential_id} could not be refreshed: the token endpoint "
                                    "returned no access_token.")
    lifetime = answer.get("expires_in")
    new_expires = now() + int(lifetime) if isinstance(lifetime, (int, float)) and lifetime > 0 else None
    secrets: dict[str, Optional[str]] = {"access_token": access}
    if isinstance(answer.get("refresh_token"), str) and answer["refresh_token"]:
        secrets["refresh_token"] = answer["refresh_token"]  # a rotated refresh token replaces the old one
    record["auth"] = {**record["auth"], "expires_at": _rfc3339(new_expires) if new_expires else None}
    record["updated_at"] = now()
    version = int(item["version"])
    new_sealed = _seal_all(sealer, tenant, record, secrets, sealed)
    tx = store.new_transaction().put(_credential_item(tenant, record, new_sealed, new_expires, version + 1),
                                     "version = :v", values={":v": version})
    try:
        store.transact(tx)  # committed before use: a rotated refresh token is never lost
    except (TransactionConflict, Contention):
        # Another dispatch refreshed (or the caller rotated) it meanwhile: use what is stored now when it is
        # fresh; never refresh twice in one dispatch.
        again = store.get(keys.credential(tenant, vault_id, credential_id))
        fresh = again is not None and again.get("expires_epoch") is not None and \
            int(again["expires_epoch"]) > now() + REFRESH_SKEW_SECONDS and "access_token" in (again.get("sealed") or {})
        if not fresh:
            raise CredentialUnavailable(f"The MCP credential {credential_id} changed while it was refreshed.") from None
        try:
            return sealer.open(again["sealed"]["access_token"], context(tenant, vault_id, credential_id, url,
                                                                        "access_token"))
        except SecretUnavailable:
            raise CredentialUnavailable(f"The MCP credential {credential_id} could not be decrypted.") from None
    return access


def _rfc3339(epoch: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _guard(url: str, what: str = "The OAuth token endpoint") -> Optional[str]:
    """https only, and no loopback, private, link-local or otherwise special target unless the
    deployment trusts the origin (OAUTH_TRUSTED_ORIGINS). Returns the checked address the request must
    connect to (None for a trusted origin), so a second DNS answer cannot move it elsewhere."""
    rules = policy()
    parts = urllib.parse.urlsplit(url)
    if rules.trusts(url):
        return None
    if parts.scheme != "https":
        raise CredentialUnavailable(f"{what} must use https.")
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 443, proto=socket.IPPROTO_TCP)
    except OSError:
        raise CredentialUnavailable(f"{what}'s host could not be resolved.") from None
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if (address.is_loopback or address.is_private or address.is_link_local or address.is_reserved
                or address.is_multicast or address.is_unspecified):
            raise CredentialUnavailable(f"{what} resolves to a loopback, private or link-local "
                                        "address, which this deployment does not trust.")
    return str(infos[0][4][0])


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """TLS to the checked address, verified against the endpoint's host name."""

    def __init__(self, host: str, address: str, **kwargs: Any):
        super().__init__(host, **kwargs)
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def _post(url: str, body: bytes, headers: dict[str, str], address: Optional[str]) -> tuple[int, bytes]:
    """One POST, no redirect followed (http.client follows none)."""
    parts = urllib.parse.urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    connection: http.client.HTTPConnection
    if parts.scheme == "https" and address is not None:
        connection = _PinnedHTTPSConnection(parts.hostname or "", address, port=parts.port,
                                            timeout=REFRESH_TIMEOUT_SECONDS, context=ssl.create_default_context())
    elif parts.scheme == "https":
        connection = http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=REFRESH_TIMEOUT_SECONDS,
                                                 context=ssl.create_default_context())
    else:  # a trusted http origin (make dev's loopback)
        connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=REFRESH_TIMEOUT_SECONDS)
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read(65536)
    finally:
        connection.close()


def refresh_token(refresh: dict[str, Any], token: str, client_secret: Optional[str]) -> dict[str, Any]:
    """One OAuth refresh_token grant (RFC 6749 6): https only, the target guarded, no redirects, short
    timeout. Errors name the endpoint's status, never a token."""
    endpoint = refresh["token_endpoint"]
    address = _guard(endpoint)
    form = {"grant_type": "refresh_token", "refresh_token": token}
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
    kind = refresh["token_endpoint_auth"]["type"]
    if kind == "client_secret_basic":
        pair = f"{urllib.parse.quote(refresh['client_id'], safe='')}:{urllib.parse.quote(client_secret or '', safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    else:
        form["client_id"] = refresh["client_id"]
        if kind == "client_secret_post":
            form["client_secret"] = client_secret or ""
    for name in ("resource", "scope"):
        if refresh.get(name):
            form[name] = refresh[name]
    try:
        status, body = _post(endpoint, urllib.parse.urlencode(form).encode(), headers, address)
    except (OSError, http.client.HTTPException):
        raise CredentialUnavailable("The OAuth token endpoint could not be reached.") from None
    if status != 200:
        raise CredentialUnavailable(f"The OAuth token endpoint refused the refresh (HTTP {status}).")
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise CredentialUnavailable("The OAuth token endpoint answered something other than a JSON object.")
    return answer
