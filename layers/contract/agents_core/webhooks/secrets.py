"""An endpoint's signing secrets, KMS-sealed (agents_core.vault_crypto; context: tenant and endpoint): only
create and rotate_secret see one in the clear (to answer it), and a delivery opens them to sign."""

from __future__ import annotations

from typing import Any, Optional

from ..ids import now


def _context(tenant: str, endpoint_id: str) -> dict[str, str]:
    return {"tenant": tenant, "webhook_endpoint_id": endpoint_id}


def seal(tenant: str, endpoint_id: str, secret: str) -> dict[str, Any]:
    from ..vault_crypto import default_sealer

    return default_sealer().seal(secret, _context(tenant, endpoint_id))


def active(tenant: str, item: dict[str, Any], at: Optional[int] = None) -> list[str]:
    """The secrets a delivery is signed with now: the current one, and the previous one while it is kept."""
    from ..vault_crypto import default_sealer

    sealer, context = default_sealer(), _context(tenant, item["id"])
    out = [sealer.open(item["secret"], context)]
    if item.get("previous_secret") and int(item.get("previous_until") or 0) > (at or now()):
        out.append(sealer.open(item["previous_secret"], context))
    return out
