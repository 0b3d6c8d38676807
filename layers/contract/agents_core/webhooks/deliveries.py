"""Webhook deliveries: from the outbox stream, through a queue, to the endpoint, signed.

The outbox consumer hands each committed `agent.session.*` event it carries (created, in_progress,
requires_action -> action_required, idle, failed) to `enqueue`, which puts one message per subscribed
endpoint on the delivery queue (SQS). The event id is derived from the commit and the event's place in it,
so a redelivered outbox record enqueues the same `webhook-id` and receivers deduplicate on it.

The delivery function POSTs the event with the Standard Webhooks headers, signed at each attempt with the
endpoint's current secret(s) (a rotation takes effect at the next attempt). A non-2xx answer, a timeout or
a refused target is retried: the message is hidden for the next delay of WEBHOOK_RETRY_SECONDS (5 s, 30 s,
5 min, 30 min, 2 h, 5 h, 10 h, 10 h by default: about 28 hours) and the queue hands it back; after the last
attempt it goes to the dead-letter queue, and its delivery record says `failed`. Each endpoint keeps a record
per event (`DLV#{event id}`: status, attempts, last status code; 30 days) for the operator and the dashboard.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any, Optional

from agents_contract import webhooks as contract

from .. import keys
from ..ids import now
from ..observability import logger
from ..settings import get_settings
from ..store import DynamoStore

RECORD_TTL_SECONDS = 30 * 86400


class DeliveryFailed(Exception):
    """The endpoint did not take the delivery (non-2xx, timeout, refused target): retry it later."""


def retry_delays() -> list[int]:
    return [int(s) for s in get_settings().webhook_retry_seconds.split(",") if s.strip()]


def max_attempts() -> int:
    return len(retry_delays()) + 1


def event(webhook_type: str, session: dict[str, Any], event_id: str, created_at: int) -> dict[str, Any]:
    return {"id": event_id, "object": "event", "created_at": created_at, "type": webhook_type,
            "data": contract.event_data(webhook_type, session)}


def event_id(tenant: str, session_id: str, seq: int, index: int) -> str:
    return "evt_" + hashlib.sha256(f"{tenant}/{session_id}/{seq}/{index}".encode()).hexdigest()[:32]


@lru_cache(maxsize=1)
def _queue() -> Any:
    from ..aws import botocore_session

    return botocore_session().create_client("sqs", region_name=get_settings().aws_region)


def enqueue(store: DynamoStore, tenant: str, session_id: str, seq: int, events: list[dict[str, Any]],
            queue: Any = None) -> int:
    """Queue the commit's webhook events for every endpoint of the tenant that subscribed to them."""
    wanted = [(i, contract.SESSION_EVENTS[e.get("type")], e) for i, e in enumerate(events)
              if e.get("type") in contract.SESSION_EVENTS and isinstance(e.get("session"), dict)]
    if not wanted:
        return 0
    endpoints = store.query(**keys.webhook_endpoints_of_tenant(tenant), limit=100).items
    entries = []
    for index, webhook_type, committed in wanted:
        for endpoint in endpoints:
            if webhook_type not in endpoint.get("event_types", []):
                continue
            # the committed event's own id: a redelivered outbox record queues the same webhook-id
            payload = event(webhook_type, committed["session"],
                            committed.get("event_id") or event_id(tenant, session_id, seq, index),
                            int(committed["session"].get("last_active_at") or now()))
            entries.append({"Id": str(len(entries)), "MessageBody": json.dumps(
                {"tenant": tenant, "endpoint_id": endpoint["id"], "event": payload}, separators=(",", ":"))})
    queue = queue or _queue()
    for start in range(0, len(entries), 10):  # SendMessageBatch takes ten
        out = queue.send_message_batch(QueueUrl=get_settings().webhook_queue_url, Entries=entries[start:start + 10])
        if out.get("Failed"):
            raise RuntimeError(f"{len(out['Failed'])} webhook messages were not queued")  # the outbox record retries
    return len(entries)


def post(endpoint: dict[str, Any], signing: list[str], body: str, message_id: str) -> tuple[int, Optional[str]]:
    """One signed POST, no redirect followed; (status code or 0, the reason it failed or None)."""
    from urllib.parse import urlsplit

    from agents_contract.vaults import is_loopback_host

    from ..vaults import CredentialUnavailable, _guard, _post

    url = endpoint["url"]
    parts = urlsplit(url)
    headers = contract.headers(signing, message_id, now(), body)
    try:
        if parts.scheme == "http" and get_settings().webhook_allow_loopback_http and \
                is_loopback_host(parts.hostname or ""):
            address = None  # a loopback receiver where the deployment allows it (make dev)
        else:
            address = _guard(url, "The webhook endpoint")  # as the OAuth refresh: no private target, no redirect
        status, _ = _post(url, body.encode(), headers, address)
    except CredentialUnavailable as refused:
        return 0, str(refused)
    except OSError as exc:  # connection refused, timeout, TLS
        return 0, f"The webhook endpoint could not be reached ({type(exc).__name__})."
    return status, None if 200 <= status < 300 else f"The webhook endpoint answered {status}."


def _record(store: DynamoStore, tenant: str, endpoint_id: str, message: dict[str, Any], status: str,
            attempt: int, code: int, error: Optional[str]) -> None:
    store.put({**keys.webhook_delivery(tenant, endpoint_id, message["event"]["id"]), "kind": "webhook_delivery",
               "event_id": message["event"]["id"], "event_type": message["event"]["type"],
               "session_id": message["event"]["data"].get("id"), "status": status, "attempts": attempt,
               "status_code": code, "error": error, "updated_at": now(), "ttl": now() + RECORD_TTL_SECONDS})


def deliver(store: DynamoStore, message: dict[str, Any], attempt: int) -> str:
    """One attempt of a queued delivery: `delivered`, `dropped` (the endpoint is gone), or DeliveryFailed."""
    from . import secrets

    tenant, endpoint_id = message["tenant"], message["endpoint_id"]
    endpoint = store.get(keys.webhook_endpoint(tenant, endpoint_id))
    if endpoint is None:
        return "dropped"
    body = json.dumps(message["event"], separators=(",", ":"))
    code, error = post(endpoint, secrets.active(tenant, endpoint), body, message["event"]["id"])
    if error is None:
        _record(store, tenant, endpoint_id, message, "delivered", attempt, code, None)
        return "delivered"
    last = attempt >= max_attempts()
    _record(store, tenant, endpoint_id, message, "failed" if last else "retrying", attempt, code, error)
    logger.info("webhook delivery failed", extra={"webhook_endpoint_id": endpoint_id, "attempt": attempt,
                                                  "status_code": code, "dead_letter": last})
    raise DeliveryFailed(error)


def deliveries_of(store: DynamoStore, tenant: str, endpoint_id: str, limit: int = 20) -> list[dict[str, Any]]:
    """An endpoint's delivery records (the dashboard's last deliveries)."""
    items = store.query(**keys.webhook_deliveries_of_endpoint(tenant, endpoint_id), limit=limit, consistent=True).items
    return [{k: i.get(k) for k in ("event_id", "event_type", "session_id", "status", "attempts", "status_code",
                                   "error", "updated_at")} for i in items]
