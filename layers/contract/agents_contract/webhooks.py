"""Webhook endpoints as the SDK sends them (`client.webhooks`, `/v1/webhook_endpoints`), the Standard Webhooks
signature the SDK's `client.webhooks.unwrap` / `verify_signature` check, and the payloads of the
`agent.session.*` webhook events. Pure.

Signing (Standard Webhooks, as `openai/lib/_webhooks.py` verifies it): headers `webhook-id`,
`webhook-timestamp` (Unix seconds) and `webhook-signature` (space-separated `v1,<base64>`), the signature an
HMAC-SHA256 over `"{id}.{timestamp}.{body}"` keyed with the base64-decoded secret after `whsec_`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from typing import Annotated, Any, Literal, Optional

from pydantic import Field

from . import validation
from .errors import InvalidRequest
from .wire import Wire

EVENT_TYPES = (
    "batch.completed", "batch.failed", "batch.expired", "batch.cancelled", "response.completed", "response.failed",
    "response.cancelled", "response.incomplete", "eval.run.succeeded", "eval.run.failed", "eval.run.canceled",
    "fine_tuning.job.succeeded", "fine_tuning.job.failed", "fine_tuning.job.cancelled", "realtime.call.incoming",
    "video.completed", "video.failed", "agent.environment.ready", "agent.environment.failed",
    "agent.environment.suspended", "agent.environment.expired", "agent.session.created",
    "agent.session.action_required", "agent.session.in_progress", "agent.session.idle", "agent.session.failed",
    "safety.alert.created",
)
EventType = Literal[EVENT_TYPES]  # type: ignore[valid-type]
# What this deployment emits: the agent.session.* events (the others belong to services it does not run).
SESSION_EVENTS = {  # outbox event -> webhook event
    "agent.session.created": "agent.session.created",
    "agent.session.in_progress": "agent.session.in_progress",
    "agent.session.requires_action": "agent.session.action_required",
    "agent.session.idle": "agent.session.idle",
    "agent.session.failed": "agent.session.failed",
}
Name = Annotated[str, Field(min_length=1, max_length=256)]
Url = Annotated[str, Field(min_length=1, max_length=2048)]


class EndpointCreate(Wire):
    event_types: Annotated[list[EventType], Field(min_length=1)]
    name: Name
    url: Url


class EndpointUpdate(Wire):
    event_types: Optional[Annotated[list[EventType], Field(min_length=1)]] = None
    name: Optional[Name] = None
    url: Optional[Url] = None


class RotateSecret(Wire):
    keep_old_secret_active_for_24_hours: bool = False


class TestDelivery(Wire):
    event_type: EventType


def parse_create(body: Any) -> EndpointCreate:
    return validation.parse(EndpointCreate, body)


def parse_update(body: Any) -> EndpointUpdate:
    request = validation.parse(EndpointUpdate, body)
    for member in ("event_types", "name", "url"):
        if request.given(member) and getattr(request, member) is None:
            raise InvalidRequest(f"Invalid type for '{member}': expected a value, but got null instead.",
                                 param=member)
    return request


def parse_rotate(body: Any) -> RotateSecret:
    return validation.parse(RotateSecret, body if body is not None else {})


def parse_test(body: Any) -> TestDelivery:
    return validation.parse(TestDelivery, body)


# ---- secrets and signatures ------------------------------------------------------------------------

def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def secret_hint(secret: str) -> str:
    return f"whsec_...{secret[-4:]}"


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix("whsec_")) if secret.startswith("whsec_") else secret.encode()


def signature(secret: str, message_id: str, timestamp: int, body: str) -> str:
    digest = hmac.new(_key(secret), f"{message_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(secrets: list[str], message_id: str, timestamp: int, body: str) -> dict[str, str]:
    """The Standard Webhooks headers, signed with every active secret (a rotation that keeps the old one)."""
    return {"webhook-id": message_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": " ".join(signature(s, message_id, timestamp, body) for s in secrets),
            "content-type": "application/json", "user-agent": "agents-core-webhooks/1"}


# ---- payloads ---------------------------------------------------------------------------------------

def event_data(webhook_type: str, session: dict[str, Any]) -> dict[str, Any]:
    """`data` of an agent.session.* webhook event: the Session's id, its environment, and for
    action_required the first required action's type (the receiver reads the Session for the rest)."""
    environment = session.get("environment") or {}
    data: dict[str, Any] = {"id": session["id"], "environment_type": environment.get("type", "none")}
    if environment.get("id"):
        data["environment_id"] = environment["id"]
    if webhook_type == "agent.session.created" and environment.get("type") == "self_hosted":
        data["connect"] = {"remote_url": environment.get("remote_url") or ""}
    if webhook_type == "agent.session.action_required":
        actions = session.get("required_actions") or [{}]
        data["required_action"] = {"type": actions[0].get("type", "function_call")}
    return data


def sample_session(event_type: str) -> dict[str, Any]:
    """What `webhooks.test` sends: a sample of the event type (no real Session)."""
    return {"id": "sess_test", "environment": {"type": "none"}, "required_actions": [{"type": "function_call"}]}
