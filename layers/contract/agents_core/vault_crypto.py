"""The one module that owns Vault secrets: KMS envelope encryption.

Each secret gets its own AES-256 data key from KMS `GenerateDataKey`; the secret is sealed locally with
AES-GCM and only the KMS-wrapped data key is kept beside it. The encryption context names the owner
(tenant, Vault, credential, MCP server URL and which secret it is): KMS refuses to unwrap the key under
any other context, and the same context is the AES-GCM associated data, so a sealed value copied onto
another credential never opens. Sealing needs only `kms:GenerateDataKey` (the API functions); opening
needs `kms:Decrypt` (only the Dispatch function). Nothing here logs a value.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Any, Optional

from botocore.exceptions import ClientError

from .aws import botocore_session
from .settings import get_settings


class SecretUnavailable(Exception):
    """A sealed secret could not be opened (wrong context, key disabled or deleted, tampering)."""


def context(tenant: str, vault_id: str, credential_id: str, url: str, name: str) -> dict[str, str]:
    return {"tenant": tenant, "vault_id": vault_id, "credential_id": credential_id, "mcp_server_url": url,
            "secret": name}


def _aad(ctx: dict[str, str]) -> bytes:
    return json.dumps(ctx, sort_keys=True, separators=(",", ":")).encode()


class Sealer:
    """Seals and opens secrets with one KMS key (client injected for tests)."""

    def __init__(self, client: Any, key_id: Optional[str]):
        self.client = client
        self.key_id = key_id

    def seal(self, plaintext: str, ctx: dict[str, str]) -> dict[str, bytes]:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if not self.key_id:
            raise SecretUnavailable("no Vault key is configured (VAULT_KEY_ID)")
        out = self.client.generate_data_key(KeyId=self.key_id, KeySpec="AES_256", EncryptionContext=ctx)
        nonce = os.urandom(12)
        sealed = AESGCM(out["Plaintext"]).encrypt(nonce, plaintext.encode(), _aad(ctx))
        return {"key": out["CiphertextBlob"], "nonce": nonce, "data": sealed}

    def open(self, sealed: dict[str, Any], ctx: dict[str, str]) -> str:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        try:
            key = self.client.decrypt(CiphertextBlob=_bytes(sealed["key"]), EncryptionContext=ctx)["Plaintext"]
            return AESGCM(key).decrypt(_bytes(sealed["nonce"]), _bytes(sealed["data"]), _aad(ctx)).decode()
        except (ClientError, InvalidTag, KeyError, ValueError) as exc:
            code = exc.response.get("Error", {}).get("Code") if isinstance(exc, ClientError) else type(exc).__name__
            raise SecretUnavailable(str(code)) from None


def _bytes(value: Any) -> bytes:
    return bytes(getattr(value, "value", value))


@lru_cache(maxsize=1)
def default_sealer() -> Sealer:
    settings = get_settings()
    client = botocore_session().create_client("kms", endpoint_url=settings.kms_endpoint_url,
                                              region_name=settings.aws_region)
    return Sealer(client, settings.vault_key_id)
