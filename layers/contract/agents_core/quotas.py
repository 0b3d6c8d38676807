"""Per-tenant quotas (issue 36, item 4): concurrently running Turns, and the usage identifier that keys the
request rate.

**Running Turns.** A tenant runs at most `max_running_turns` Turns at once (template parameter
`TenantMaxRunningTurns`; 0: no limit). A Turn holds a slot from the commit that starts it (queued or claimed)
to the commit that ends it (completed, failed, cancelled, lost), and a deleted Session's queued Turn gives
its slot back with the delete. The count is one item per tenant (`keys.tenant_quota`), changed by the same
TransactWriteItems that starts or ends the Turn, so it can neither leak nor count twice: the start's
increment is conditioned on the count staying within the limit (over it the whole commit is refused, so
nothing is written, and the request gets 429 `rate_limit_exceeded`), and the end's decrement rides the
commit that makes the Turn terminal, which happens once (every settlement path re-reads the Turn and
finds it terminal on a retry). A Turn records that it holds a slot (`slot` on its item), so a Turn
started before quotas existed never decrements a count it did not increment.

**Request rate.** API Gateway's usage plan throttles each tenant (template `TenantRateLimit`,
`TenantBurstLimit`): the authorizer returns `usage_key(tenant)` as its `usageIdentifierKey` (the REST API's
`ApiKeySourceType` is `AUTHORIZER`), so every key of a tenant shares one bucket. API Gateway needs an API key
with that value in the usage plan: `register_tenant` creates it (`python -m agents_core.apikeys`). WebSocket
APIs have no usage plans, so a tenant's WebSocket requests (a client `$connect` with an API key, `subscribe`,
`unsubscribe`) take from a bucket of the same size kept in the table (`take_request`: GCRA, one conditional
UpdateItem of the tenant's `R` quota item per request, two when refused, and a refusal writes nothing).
"""

from __future__ import annotations

import hashlib
import time
from decimal import Decimal
from typing import Any, Optional

from agents_contract.errors import Unavailable

from . import keys
from .settings import get_settings
from .store import Transaction, TransactionConflict, marshal


class RunningTurnsExceeded(Unavailable):
    """429 `rate_limit_exceeded`: the Turn this request would start is over the tenant's running-Turn limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"This tenant already runs {limit} Turn{'s' if limit != 1 else ''} at once, its limit; "
                         "nothing was written. "
                         "Retry once a Turn ends (or cancel one).")


def limit() -> int:
    return get_settings().max_running_turns


def add(tx: Transaction, tenant: str, delta: int) -> None:
    """The count's change in a commit that starts (`delta` > 0) or ends Turns. One write of the item per
    transaction (DynamoDB allows one), so a commit passes its net change once (`Draft.slots`)."""
    if delta == 0:
        return
    ceiling = limit()
    if delta > 0 and ceiling > 0:
        tx.update(keys.tenant_quota(tenant), "ADD running :d", "attribute_not_exists(running) OR running <= :max",
                  values={":d": delta, ":max": ceiling - delta})
    else:
        tx.update(keys.tenant_quota(tenant), "ADD running :d", values={":d": delta})


def refused(tx: Transaction, conflict: TransactionConflict, tenant: str) -> bool:
    """Whether the count's condition alone failed (a lost race on anything else is decided again)."""
    failed = [i for i, code in enumerate(conflict.codes) if code == "ConditionalCheckFailed"]
    quota = marshal(keys.tenant_quota(tenant))
    return bool(failed) and all(i < len(tx.entries) and next(iter(tx.entries[i].values())).get("Key") == quota
                                for i in failed)


def check(tx: Transaction, conflict: TransactionConflict, tenant: str) -> None:
    """Raise the 429 when `conflict` is the running-Turn limit refusing the commit."""
    if refused(tx, conflict, tenant):
        raise RunningTurnsExceeded(limit()) from None


def running(store: Any, tenant: str) -> int:
    """The tenant's running Turns as counted (tests and operators)."""
    item: Optional[dict[str, Any]] = store.get(keys.tenant_quota(tenant))
    return int((item or {}).get("running", 0))


# ---- request rate: API Gateway usage plans ---------------------------------------------------------------

class RequestRateExceeded(Unavailable):
    """429 `rate_limit_exceeded`: the tenant's WebSocket requests are over its request rate."""

    def __init__(self) -> None:
        super().__init__("Too many requests from this tenant; nothing was written. Retry the request.")


def take_request(store: Any, tenant: str, at_ms: Optional[float] = None) -> bool:
    """One request of the tenant's bucket (rate `tenant_rate_limit` per second, burst `tenant_burst_limit`), as
    GCRA: the item keeps the theoretical arrival time `tat` (ms); a request is allowed when `max(tat, now) +
    interval <= now + burst * interval`, and moves `tat` by one interval. Each branch is one conditional
    UpdateItem; a refused request changes nothing."""
    settings = get_settings()
    interval = 1000.0 / settings.tenant_rate_limit
    now_ms = time.time() * 1000 if at_ms is None else at_ms
    key = keys.tenant_quota(tenant, "R")
    for _ in range(3):  # a lost race between the two branches is decided again
        if store.update_returning(key, "SET tat = :next", "attribute_not_exists(tat) OR tat <= :now",
                                  values={":next": _ms(now_ms + interval), ":now": _ms(now_ms)}) is not None:
            return True  # the bucket was full: now + one interval
        if store.update_returning(key, "SET tat = tat + :interval", "tat > :now AND tat <= :latest",
                                  values={":interval": _ms(interval), ":now": _ms(now_ms),
                                          ":latest": _ms(now_ms + (settings.tenant_burst_limit - 1) * interval)}
                                  ) is not None:
            return True
        item = store.get(key)
        if item is not None and float(item.get("tat", 0)) > now_ms:
            return False  # over the burst: refused, nothing written
    return False


def _ms(value: float) -> Decimal:
    return Decimal(str(round(value, 3)))


def usage_key(tenant: str) -> str:
    """The value of the tenant's API Gateway API key: derived from the tenant, so the authorizer needs no read
    and every key of the tenant shares one usage-plan bucket. Not a secret: with `ApiKeySourceType:
    AUTHORIZER` API Gateway ignores any `x-api-key` a caller sends; only the authorizer names it."""
    return "agentscore" + hashlib.sha256(tenant.encode()).hexdigest()  # API key values are alphanumeric, 20-128


def register_tenant(apigateway: Any, usage_plan_id: str, tenant: str) -> str:
    """The tenant's API key in the usage plan (idempotent): without it API Gateway refuses the tenant's
    requests (INVALID_API_KEY, 403). Returns the API key's id."""
    value = usage_key(tenant)
    name = f"tenant-{hashlib.sha256(tenant.encode()).hexdigest()[:32]}"
    found = [k for k in apigateway.get_api_keys(nameQuery=name, includeValues=True, limit=500).get("items", [])
             if k.get("value") == value]
    key_id = found[0]["id"] if found else apigateway.create_api_key(
        name=name, value=value, enabled=True, description="agents-core tenant usage identifier")["id"]
    try:
        apigateway.create_usage_plan_key(usagePlanId=usage_plan_id, keyId=key_id, keyType="API_KEY")
    except apigateway.exceptions.ConflictException:
        pass  # already in the plan
    return key_id
