"""Vaults and credentials: request checks, public resources and credential selection (pure).

"Bearer authentication uses an attached static or OAuth Vault credential. Vault credentials owns
selection, and MCP credential authority owns the frozen Runtime binding."

Secrets (a static token, an OAuth access or refresh token, a client secret) are write-only: the
parsers hand them to the caller apart from the public record (`secrets`), and no resource built
here can hold one.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional
from urllib.parse import urlsplit

from . import validation, wire
from .errors import Conflict, InvalidRequest
from .parser import check_metadata

NAME_MAX_BYTES = 256
VAULT_IDS_MAX = 10
SECRET_MAX = 16_384  # characters of a token, refresh token, client secret or client id
STATUSES = ("active", "archived")
ENVIRONMENT_VARIABLE = ("Credential type 'environment_variable' is not supported by this deployment yet: it needs "
                        "the hosted egress proxy. Use 'static_bearer' or 'mcp_oauth'.")


@dataclass(frozen=True)
class UrlPolicy:
    """Deployment settings: loopback `http` MCP servers (on in `make dev`, off by default in the SAM
    template), and the OAuth token endpoint origins trusted despite the private-address guard."""

    allow_loopback_http: bool = False
    trusted_origins: tuple[str, ...] = ()

    def trusts(self, url: str) -> bool:
        parts = urlsplit(url)
        if "loopback" in self.trusted_origins and is_loopback_host(parts.hostname or ""):
            return True
        return origin(url) in self.trusted_origins


def origin(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


def is_loopback_host(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _url_parts(url: str) -> Any:
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.username is not None or parts.password is not None or "#" in url:
        return None
    if any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in url):
        return None
    return parts


def check_server_url(url: str, policy: UrlPolicy, param: str = "auth.mcp_server_url") -> None:
    """Absolute https, no userinfo or fragment; loopback http only where the deployment allows it."""
    parts = _url_parts(url)
    ok = parts is not None and (parts.scheme == "https" or (
        parts.scheme == "http" and policy.allow_loopback_http and is_loopback_host(parts.hostname)))
    if not ok:
        loopback = " (or http on a loopback host)" if policy.allow_loopback_http else ""
        raise InvalidRequest(f"Invalid '{param}': expected an absolute https URL{loopback} without credentials or "
                             "fragment.", param=param)


def check_token_endpoint(url: str, policy: UrlPolicy, param: str = "auth.refresh.token_endpoint") -> None:
    parts = _url_parts(url)
    ok = parts is not None and (parts.scheme == "https" or (parts.scheme == "http" and policy.trusts(url)))
    if not ok:
        raise InvalidRequest(f"Invalid '{param}': expected an absolute https URL without credentials or fragment.",
                             param=param)


def _name(value: str, param: str = "name") -> str:
    trimmed = value.strip()
    size = len(trimmed.encode())
    if not 1 <= size <= NAME_MAX_BYTES:
        raise InvalidRequest(f"Invalid '{param}': expected 1 to {NAME_MAX_BYTES} UTF-8 bytes after trimming, but got "
                             f"{size}.", param=param)
    return trimmed


_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})")


def expiry_seconds(value: str, param: str = "auth.expires_at") -> int:
    """An RFC 3339 timestamp with its offset (section 5.6: `T` and `Z` in either case) -> Unix seconds.
    Other ISO 8601 forms (a basic `20300101T000000Z`, no seconds, week dates) are refused."""
    parsed = None
    if isinstance(value, str) and _RFC3339.fullmatch(value):
        try:
            parsed = datetime.fromisoformat(value.upper())
        except ValueError:  # a day or an hour out of range
            parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise InvalidRequest(f"Invalid '{param}': expected an RFC 3339 timestamp with a time zone, such as "
                             "'2026-01-01T00:00:00Z'.", param=param)
    return int(parsed.timestamp())


def _nonempty(value: Optional[str], param: str) -> None:
    if value is not None and not value:
        raise InvalidRequest(f"Invalid '{param}': string too short. Expected a string with minimum length 1, but got "
                             "a string with length 0 instead.", param=param)
    if value is not None and len(value) > SECRET_MAX:  # the message gives the length, never the value
        raise InvalidRequest(f"Invalid '{param}': string too long. Expected a string with maximum length {SECRET_MAX}, "
                             f"but got a string with length {len(value)} instead.", param=param)


def _reject_environment_variable(body: Any, param: str = "auth.type") -> None:
    auth = body.get("auth") if isinstance(body, dict) else None
    if isinstance(auth, dict) and auth.get("type") == "environment_variable":
        raise InvalidRequest(ENVIRONMENT_VARIABLE, param=param)


# ---- vaults ----------------------------------------------------------------------------------------

def parse_vault_create(body: Any) -> dict[str, Any]:
    """-> {name, metadata} as stored."""
    request = validation.parse(wire.VaultCreate, body)
    check_metadata(request.metadata)
    return {"name": _name(request.name) if request.given("name") else None, "metadata": dict(request.metadata or {})}


def parse_vault_update(body: Any) -> dict[str, Any]:
    """-> the members to replace (omitted members are absent)."""
    request = validation.parse(wire.VaultUpdate, body)
    changes: dict[str, Any] = {}
    if request.given("name"):
        changes["name"] = _name(request.name) if request.name is not None else None
    if request.given("metadata"):
        if request.metadata is None:
            raise InvalidRequest("Invalid type for 'metadata': expected an object, but got null instead.",
                                 param="metadata")
        check_metadata(request.metadata)
        changes["metadata"] = dict(request.metadata)
    return changes


def vault_resource(record: dict[str, Any]) -> dict[str, Any]:
    return {"id": record["id"], "object": "vault", "name": record.get("name"), "metadata": record.get("metadata") or {},
            "created_at": record["created_at"]}


def status_filter(values: list[str]) -> frozenset[str]:
    """`status=active` or `status[]=active&status[]=archived` -> the statuses asked for (both when omitted)."""
    for value in values:
        if value not in STATUSES:
            raise InvalidRequest(f"Invalid value: '{value}'. Supported values are: 'active' and 'archived'.",
                                 param="status")
    return frozenset(values) if values else frozenset(STATUSES)


# ---- credentials -----------------------------------------------------------------------------------

@dataclass
class ParsedCredential:
    """The public record (`auth` without secrets) and the secrets, kept apart."""

    name: Optional[str] = None
    metadata: Optional[dict[str, str]] = None
    auth: Optional[dict[str, Any]] = None
    expires_at: Optional[int] = None  # Unix seconds of `auth.expires_at` (mcp_oauth)
    secrets: dict[str, Optional[str]] = field(default_factory=dict)  # name -> value (None: remove)


def parse_credential_create(body: Any, policy: UrlPolicy) -> ParsedCredential:
    _reject_environment_variable(body)
    request = validation.parse(wire.CredentialCreate, body)
    check_metadata(request.metadata)
    auth = request.auth
    check_server_url(auth.mcp_server_url, policy)
    out = ParsedCredential(name=_name(request.name), metadata=dict(request.metadata or {}))
    if isinstance(auth, wire.StaticBearerCreate):
        _nonempty(auth.token, "auth.token")
        out.auth = {"type": "static_bearer", "mcp_server_url": auth.mcp_server_url}
        out.secrets = {"token": auth.token}
        return out
    _nonempty(auth.access_token, "auth.access_token")
    if auth.expires_at is not None:
        out.expires_at = expiry_seconds(auth.expires_at)
    out.secrets = {"access_token": auth.access_token}
    refresh = None
    if auth.refresh is not None:
        r = auth.refresh
        _nonempty(r.client_id, "auth.refresh.client_id")
        _nonempty(r.refresh_token, "auth.refresh.refresh_token")
        check_token_endpoint(r.token_endpoint, policy)
        refresh = {"client_id": r.client_id, "token_endpoint": r.token_endpoint,
                   "token_endpoint_auth": {"type": r.token_endpoint_auth.type}, "resource": r.resource,
                   "scope": r.scope}
        out.secrets["refresh_token"] = r.refresh_token
        if not isinstance(r.token_endpoint_auth, wire.TokenEndpointAuthNone):
            _nonempty(r.token_endpoint_auth.client_secret, "auth.refresh.token_endpoint_auth.client_secret")
            out.secrets["client_secret"] = r.token_endpoint_auth.client_secret
    out.auth = {"type": "mcp_oauth", "mcp_server_url": auth.mcp_server_url, "expires_at": auth.expires_at,
                "refresh": refresh}
    return out


def parse_credential_update(body: Any, current_auth: dict[str, Any]) -> ParsedCredential:
    """Metadata and a rotation of the credential's own auth type (`CredentialAuthRotateParam`): a new
    secret replaces the stored one; an omitted or null secret keeps it."""
    _reject_environment_variable(body)
    request = validation.parse(wire.CredentialUpdate, body)
    out = ParsedCredential()
    if request.given("metadata"):
        if request.metadata is None:
            raise InvalidRequest("Invalid type for 'metadata': expected an object, but got null instead.",
                                 param="metadata")
        check_metadata(request.metadata)
        out.metadata = dict(request.metadata)
    if not request.given("auth"):
        return out
    auth = request.auth
    if auth is None:
        raise InvalidRequest("Invalid type for 'auth': expected an object, but got null instead.", param="auth")
    if auth.type != current_auth["type"]:
        raise InvalidRequest(f"Invalid 'auth.type': the credential's auth type is '{current_auth['type']}'; a "
                             "rotation keeps it.", param="auth.type")
    if isinstance(auth, wire.StaticBearerRotate):
        _nonempty(auth.token, "auth.token")
        out.secrets = {"token": auth.token}
        out.auth = dict(current_auth)
        return out
    new_auth = dict(current_auth)
    if auth.access_token is not None:
        _nonempty(auth.access_token, "auth.access_token")
        out.secrets["access_token"] = auth.access_token
        if not auth.given("expires_at"):
            new_auth["expires_at"] = None  # a new access token without an expiry clears the old one
    if auth.given("expires_at"):
        new_auth["expires_at"] = auth.expires_at
        if auth.expires_at is not None:
            out.expires_at = expiry_seconds(auth.expires_at)
    elif new_auth.get("expires_at"):
        out.expires_at = expiry_seconds(new_auth["expires_at"])
    if auth.refresh is not None:
        refresh = dict(current_auth.get("refresh") or {})
        if not refresh:
            raise InvalidRequest("Invalid 'auth.refresh': the credential has no refresh configuration to rotate.",
                                 param="auth.refresh")
        r = auth.refresh
        if r.refresh_token is not None:
            _nonempty(r.refresh_token, "auth.refresh.refresh_token")
            out.secrets["refresh_token"] = r.refresh_token
        if r.given("scope"):
            refresh["scope"] = r.scope
        if r.token_endpoint_auth is not None:
            kind = refresh["token_endpoint_auth"]["type"]
            if r.token_endpoint_auth.type != kind:
                raise InvalidRequest(f"Invalid 'auth.refresh.token_endpoint_auth.type': the credential's token "
                                     f"endpoint auth is '{kind}'; a rotation keeps it.",
                                     param="auth.refresh.token_endpoint_auth.type")
            if r.token_endpoint_auth.client_secret is not None:
                _nonempty(r.token_endpoint_auth.client_secret, "auth.refresh.token_endpoint_auth.client_secret")
                out.secrets["client_secret"] = r.token_endpoint_auth.client_secret
        new_auth["refresh"] = refresh
    out.auth = new_auth
    return out


def credential_resource(record: dict[str, Any]) -> dict[str, Any]:
    """The public credential: `auth` carries only non-secret configuration (built field by field, so
    nothing stored beside it can leak through)."""
    auth = record["auth"]
    if auth["type"] == "static_bearer":
        public: dict[str, Any] = {"type": "static_bearer", "mcp_server_url": auth["mcp_server_url"]}
    else:
        refresh = auth.get("refresh")
        public = {"type": "mcp_oauth", "mcp_server_url": auth["mcp_server_url"], "expires_at": auth.get("expires_at"),
                  "refresh": None if refresh is None else {
                      "client_id": refresh["client_id"], "token_endpoint": refresh["token_endpoint"],
                      "token_endpoint_auth": {"type": refresh["token_endpoint_auth"]["type"]},
                      "resource": refresh.get("resource"), "scope": refresh.get("scope")}}
    return {"id": record["id"], "object": "vault.credential", "vault_id": record["vault_id"], "name": record["name"],
            "metadata": record.get("metadata") or {}, "created_at": record["created_at"],
            "updated_at": record["updated_at"], "auth": public}


# ---- selection at Session creation -------------------------------------------------------------------

@dataclass(frozen=True)
class AttachedCredential:
    """What selection needs of a credential in an attached Vault (never a secret)."""

    id: str
    vault_id: str
    mcp_server_url: str


def check_vault_ids(vault_ids: Optional[list[str]]) -> list[str]:
    """`vault_ids`: at most 10; repeats are attached once, in first-seen order."""
    ids = list(vault_ids or [])
    if len(ids) > VAULT_IDS_MAX:
        raise InvalidRequest(f"Invalid 'vault_ids': array too long. Expected an array with maximum length "
                             f"{VAULT_IDS_MAX}, but got an array with {len(ids)} elements instead.", param="vault_ids")
    return list(dict.fromkeys(ids))


def select_credentials(tools: list[dict[str, Any]], attached: Optional[list[AttachedCredential]]) -> dict[str, str]:
    """Per HTTP MCP tool: the explicit `credential_id`, or the one attached credential whose URL equals
    `server_url`, else anonymous. Sets each tool's `credential_id` (None when anonymous) and returns
    credential id -> Vault id for the frozen Runtime binding. `attached` None: no Vault attached."""
    by_id = {c.id: c for c in attached or []}
    binding: dict[str, str] = {}
    for tool in tools:
        if tool["type"] != "mcp" or tool["transport"]["type"] != "http":
            continue
        url = tool["transport"]["server_url"]
        chosen = tool.get("credential_id")
        if chosen is not None:
            if attached is None:
                raise InvalidRequest("MCP credential_id requires an attached vault", param=None)
            credential = by_id.get(chosen)
            if credential is None:
                raise InvalidRequest(f"MCP credential_id {chosen} was not found in an attached vault", param=None)
            if credential.mcp_server_url != url:
                raise InvalidRequest(f"MCP credential_id {chosen} does not match server_url {url}", param=None)
        else:
            matches = [c for c in attached or [] if c.mcp_server_url == url]
            if len(matches) > 1:
                raise Conflict(f"multiple attached vault credentials match MCP server_url {url}; specify credential_id",
                               param=None)
            credential = matches[0] if matches else None
        tool["credential_id"] = credential.id if credential else None
        if credential is not None:
            binding[credential.id] = credential.vault_id
    return binding
