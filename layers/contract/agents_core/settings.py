"""Settings: environment variables read once, at cold start, through one pydantic model."""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

from pydantic import field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", case_sensitive=False)

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
    powertools_metrics_disabled: bool = False
    heartbeat_seconds: int = 30
    turn_timeout_seconds: int = 3600

    @field_validator("default_harness", "dynamodb_endpoint_url", "state_machine_arn", "stepfunctions_endpoint_url",
                     "websocket_endpoint", "websocket_url", mode="before")
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        return None if value == "" else value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
