"""Settings: environment variables read once, at cold start (names case-insensitive, a blank optional
value is None). A plain dataclass: pydantic-settings cost about a fifth of every cold start."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from functools import lru_cache
from typing import Optional, get_type_hints

_TRUE = {"1", "true", "yes", "on", "t", "y"}
_FALSE = {"0", "false", "no", "off", "f", "n"}


@dataclasses.dataclass(frozen=True)
class Settings:
    table_name: str = "agents-core"
    default_harness: Optional[str] = None
    # Explicit endpoints (the local stack and tests); None in AWS.
    dynamodb_endpoint_url: Optional[str] = None
    aws_region: str = "us-east-1"
    max_body_bytes: int = 1_048_576
    outbox_ttl_seconds: int = 86_400
    idempotency_ttl_seconds: int = 86_400
    state_machine_arn: Optional[str] = None
    stepfunctions_endpoint_url: Optional[str] = None
    # The WebSocket API's management endpoint (https://{api}.execute-api.{region}.amazonaws.com/{stage}).
    websocket_endpoint: Optional[str] = None
    # The public WebSocket URL (wss://...) handed out with stream tickets.
    websocket_url: Optional[str] = None
    # A self_hosted Environment's remote_url: the exec-server registry's base (the WebSocket URL if unset).
    remote_url: Optional[str] = None
    powertools_metrics_disabled: bool = False
    # Environments: an enrollment token lives this long; input on an Environment that no connection
    # serves waits this long, then its Turn fails (the ConnectionWait workflow).
    enrollment_ttl_seconds: int = 600
    environment_wait_seconds: int = 300
    connection_wait_state_machine_arn: Optional[str] = None
    heartbeat_seconds: int = 75  # HeartbeatSeconds: agents_contract.protocol.HEARTBEAT_BOUND_SECONDS (3 cadences)
    # API Gateway closes every WebSocket connection at 2 hours (a fixed quota); the welcome tells Runtimes so they
    # rotate their connection before it (the local stack can shorten it: AGENTS_CORE_WS_MAX_CONNECTION_SECONDS).
    websocket_max_connection_seconds: int = 7200
    turn_timeout_seconds: int = 3600
    # Per-tenant quota (agents_core/quotas.py): Turns one tenant runs at once (template TenantMaxRunningTurns;
    # 0: no limit). Over it, input that would start a Turn is a 429 rate_limit_exceeded that writes nothing.
    max_running_turns: int = 100
    # A tenant's WebSocket requests per second and burst (TenantRateLimit, TenantBurstLimit: the REST API's
    # usage plan has the same, kept by API Gateway).
    tenant_rate_limit: float = 100.0
    tenant_burst_limit: int = 200
    # SSE (functions/session_stream): a stream ends cleanly after stream_max_seconds (API Gateway ends a
    # REST API stream at 15 minutes), sends a comment ping after stream_ping_seconds without an event
    # (regional endpoints close a stream idle for 5 minutes), and reads the outbox at most
    # stream_poll_max_ms apart (stream_poll_min_ms right after an event).
    stream_max_seconds: int = 840
    stream_ping_seconds: int = 15
    stream_poll_min_ms: int = 100
    stream_poll_max_ms: int = 500
    # Vaults: the KMS key that wraps each credential secret's data key; loopback `http` MCP server URLs
    # (on in `make dev`); OAuth token endpoint origins trusted despite the private-address guard
    # (comma list of origins; `loopback` trusts every loopback origin).
    vault_key_id: Optional[str] = None
    kms_endpoint_url: Optional[str] = None
    vault_allow_loopback_http: bool = False
    oauth_trusted_origins: Optional[str] = None
    # Automations (agents_core/automations): the EventBridge Scheduler group that holds one schedule per
    # automation, the role the scheduler assumes, and the function its schedules invoke.
    automations_schedule_group: Optional[str] = None
    automations_scheduler_role_arn: Optional[str] = None
    automations_function_arn: Optional[str] = None
    # Webhooks (agents_core/webhooks): the delivery queue; loopback http endpoint URLs (on in `make dev`); the
    # delays before each retry of a failed delivery, in seconds (then the dead-letter queue).
    webhook_queue_url: Optional[str] = None
    webhook_allow_loopback_http: bool = False
    webhook_retry_seconds: str = "5,30,300,1800,7200,18000,36000,36000"
    # Files, Uploads and artifacts (agents_core/files): the bucket of their bytes; an explicit S3 endpoint locally.
    files_bucket: Optional[str] = None
    s3_endpoint_url: Optional[str] = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        lowered = {key.lower(): value for key, value in environ.items()}
        hints = get_type_hints(cls)
        values: dict[str, object] = {}
        for field in dataclasses.fields(cls):
            raw = lowered.get(field.name)
            if raw is None:
                continue
            kind = hints[field.name]
            if kind == Optional[str]:
                values[field.name] = raw or None
            elif kind is int:
                try:
                    values[field.name] = int(raw.strip())
                except ValueError:
                    raise ValueError(f"{field.name.upper()} must be an integer, got {raw!r}") from None
            elif kind is float:
                try:
                    values[field.name] = float(raw.strip())
                except ValueError:
                    raise ValueError(f"{field.name.upper()} must be a number, got {raw!r}") from None
            elif kind is bool:
                text = raw.strip().lower()
                if text not in _TRUE | _FALSE:
                    raise ValueError(f"{field.name.upper()} must be true or false, got {raw!r}")
                values[field.name] = text in _TRUE
            else:
                values[field.name] = raw
        return cls(**values)  # type: ignore[arg-type]


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_environment()
