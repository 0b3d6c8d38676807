"""Webhook endpoints (`client.webhooks`: create, retrieve, update, list, delete, rotate_secret, test).

The signing secret `whsec_...` is answered only by create and rotate_secret; it is stored KMS-sealed
(agents_core.vault_crypto, context: tenant and endpoint) and never logged, listed or retrieved (a hint of
its last four characters is). A rotation that keeps the old secret for 24 hours signs with both meanwhile.
An endpoint URL is https (http only on a loopback host, where WEBHOOK_ALLOW_LOOPBACK_HTTP allows it: on in
`make dev`), without credentials or fragment; every delivery is guarded as the OAuth refresh is (no private,
loopback or link-local target, no redirect followed).
"""

from __future__ import annotations

import json
from typing import Any, Optional

from agents_contract import webhooks as contract
from agents_contract.errors import NotFound
from agents_contract.vaults import UrlPolicy, check_server_url

from .. import keys
from ..ids import new_id, now
from ..pagination import ListParams, page
from ..settings import get_settings
from ..store import DynamoStore, TransactionConflict
from . import secrets

KEEP_OLD_SECONDS = 24 * 3600


def check_url(url: str, param: str = "url") -> None:
    check_server_url(url, UrlPolicy(allow_loopback_http=get_settings().webhook_allow_loopback_http), param=param)


def resource(item: dict[str, Any], secret: Optional[str] = None) -> dict[str, Any]:
    out = {"id": item["id"], "object": "webhook_endpoint", "name": item["name"], "url": item["url"],
           "event_types": list(item["event_types"]), "created_at": int(item["created_at"]),
           "updated_at": int(item["updated_at"]) if item.get("updated_at") else None,
           "signing_secret_hint": item.get("hint")}
    if secret is not None:
        out["signing_secret"] = secret
    return out


def create(store: DynamoStore, tenant: str, body: Any) -> dict[str, Any]:
    request = contract.parse_create(body)
    check_url(request.url)
    endpoint_id, secret, ts = new_id("whep"), contract.new_secret(), now()
    item = {**keys.webhook_endpoint(tenant, endpoint_id), **keys.listed_webhook_endpoint(tenant, endpoint_id),
            "kind": "webhook_endpoint", "id": endpoint_id, "tenant": tenant, "name": request.name, "url": request.url,
            "event_types": list(dict.fromkeys(request.event_types)), "created_at": ts, "updated_at": ts,
            "hint": contract.secret_hint(secret), "secret": secrets.seal(tenant, endpoint_id, secret)}
    store.put(item, "attribute_not_exists(PK)")
    return resource(item, secret)


def load(store: DynamoStore, tenant: str, endpoint_id: str) -> dict[str, Any]:
    item = store.get(keys.webhook_endpoint(tenant, endpoint_id))
    if item is None:
        raise NotFound()
    return item


def retrieve(store: DynamoStore, tenant: str, endpoint_id: str) -> dict[str, Any]:
    return resource(load(store, tenant, endpoint_id))


def list_page(store: DynamoStore, tenant: str, params: ListParams) -> dict[str, Any]:
    """Newest first, as the SDK documents it."""
    if params.after is not None and store.get(keys.webhook_endpoint(tenant, params.after)) is None:
        raise NotFound()
    result = store.query(**keys.webhook_endpoints_of_tenant(tenant), after=params.after, limit=params.limit,
                         ascending=False)
    return page([resource(i) for i in result.items], result.has_more)


def _replace(store: DynamoStore, item: dict[str, Any], updated_at: int) -> None:
    try:
        store.transact(store.new_transaction().put(item, "attribute_exists(PK) AND updated_at = :u",
                                                   values={":u": updated_at}))
    except TransactionConflict:
        from agents_contract.errors import Conflict

        raise Conflict("The webhook endpoint changed meanwhile; retry the request.") from None


def update(store: DynamoStore, tenant: str, endpoint_id: str, body: Any) -> dict[str, Any]:
    request = contract.parse_update(body)
    if request.url is not None:
        check_url(request.url)
    item = load(store, tenant, endpoint_id)
    before = int(item["updated_at"])
    if request.name is not None:
        item["name"] = request.name
    if request.url is not None:
        item["url"] = request.url
    if request.event_types is not None:
        item["event_types"] = list(dict.fromkeys(request.event_types))
    item["updated_at"] = max(now(), before + 1) if request.model_fields_set else before
    if request.model_fields_set:
        _replace(store, item, before)
    return resource(item)


def rotate_secret(store: DynamoStore, tenant: str, endpoint_id: str, body: Any) -> dict[str, Any]:
    request = contract.parse_rotate(body)
    item = load(store, tenant, endpoint_id)
    before, secret = int(item["updated_at"]), contract.new_secret()
    if request.keep_old_secret_active_for_24_hours:
        item |= {"previous_secret": item["secret"], "previous_until": now() + KEEP_OLD_SECONDS}
    else:
        item.pop("previous_secret", None)
        item.pop("previous_until", None)
    item |= {"secret": secrets.seal(tenant, endpoint_id, secret), "hint": contract.secret_hint(secret),
             "updated_at": max(now(), before + 1)}
    _replace(store, item, before)
    return resource(item, secret)


def delete(store: DynamoStore, tenant: str, endpoint_id: str) -> dict[str, Any]:
    load(store, tenant, endpoint_id)
    store.delete_partition(keys.webhook_endpoint_partition(tenant, endpoint_id))
    return {"id": endpoint_id, "object": "webhook_endpoint.deleted", "deleted": True}


def test(store: DynamoStore, tenant: str, endpoint_id: str, body: Any) -> dict[str, Any]:
    """Sends one sample event now (signed like any delivery) and answers the endpoint's status code
    (0 when it could not be reached)."""
    from . import deliveries

    request = contract.parse_test(body)
    item = load(store, tenant, endpoint_id)
    event = deliveries.event(request.event_type, contract.sample_session(request.event_type),
                             new_id("evt"), now())
    body_text = json.dumps(event, separators=(",", ":"))
    status, _ = deliveries.post(item, secrets.active(tenant, item), body_text, event["id"])
    return {"object": "webhook_endpoint.test", "webhook_endpoint_id": endpoint_id, "event_type": request.event_type,
            "status_code": status, "success": True}


def event_types() -> dict[str, Any]:
    return {"object": "list", "data": list(contract.EVENT_TYPES)}
