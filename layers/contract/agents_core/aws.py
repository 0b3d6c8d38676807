"""Side-effect clients other than DynamoDB: Step Functions and the API Gateway management API.

Created from configuration (never guessed), injectable for tests. AWS errors become domain
outcomes here: a closed connection is `ConnectionGone`, a closed task token is ignored.
"""

from __future__ import annotations

import json
import uuid
from functools import lru_cache
from typing import Any

import botocore.session
from botocore.exceptions import ClientError

from agents_contract import protocol

from .observability import logger
from .settings import get_settings


class ConnectionGone(Exception):
    """The WebSocket connection is closed (GoneException)."""


# API Gateway's WebSocket message quota (128 KB, also for @connections posts; docs/runtime-protocol.md,
# "Message size"). A larger message travels as `chunk` messages the receiver joins.
MAX_MESSAGE_BYTES = 128 * 1024
CHUNK_DATA_CHARS = 120_000  # of the message's JSON text per chunk, before escaping


def chunks(text: str) -> list[str]:
    """A message's JSON text as `{"type": "chunk", "id", "part", "parts", "data"}` messages of at most
    MAX_MESSAGE_BYTES each; joining the parts' `data` in `part` order gives the text back."""
    pieces, start = [], 0
    while start < len(text):
        size = CHUNK_DATA_CHARS
        while True:
            piece = text[start:start + size]
            encoded = len(json.dumps(piece).encode())  # escaping may grow a piece up to 6x
            if encoded <= CHUNK_DATA_CHARS or size <= 1024:
                break
            size = max(1024, size * CHUNK_DATA_CHARS // encoded)
        pieces.append(piece)
        start += len(piece)
    message_id = uuid.uuid4().hex[:16]
    return [json.dumps({"type": protocol.CHUNK, "id": message_id, "part": i, "parts": len(pieces), "data": piece},
                       separators=(",", ":")) for i, piece in enumerate(pieces)]


class Messenger:
    """Posts JSON messages to WebSocket connections through the management API; one over 128 KB goes
    in chunks."""

    def __init__(self, client: Any):
        self.client = client

    def post(self, connection_id: str, message: Any) -> None:
        data = message if isinstance(message, (bytes, str)) else json.dumps(message, separators=(",", ":"))
        size = len(data) if isinstance(data, bytes) else len(data.encode())
        if size > MAX_MESSAGE_BYTES:
            text = data.decode() if isinstance(data, bytes) else data
            for part in chunks(text):  # in order, on one connection: they arrive in order
                self._post(connection_id, part)
            return
        self._post(connection_id, data)

    def _post(self, connection_id: str, data: Any) -> None:
        try:
            self.client.post_to_connection(ConnectionId=connection_id, Data=data)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code == "GoneException" or status == 410:
                raise ConnectionGone(connection_id) from exc
            raise

    def disconnect(self, connection_id: str) -> None:
        try:
            self.client.delete_connection(ConnectionId=connection_id)
        except ClientError:
            pass


class Workflow:
    """The Turn workflow (Step Functions Standard; one execution per claimed Turn, name = Turn id)."""

    def __init__(self, client: Any, state_machine_arn: str):
        self.client = client
        self.arn = state_machine_arn

    def start(self, tenant: str, session_id: str, turn_id: str) -> None:
        settings = get_settings()
        payload = {"tenant": tenant, "session_id": session_id, "turn_id": turn_id,
                   "heartbeat_seconds": settings.heartbeat_seconds, "timeout_seconds": settings.turn_timeout_seconds}
        try:
            self.client.start_execution(stateMachineArn=self.arn, name=turn_id, input=json.dumps(payload))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                raise
            # Starting is idempotent: the execution for this Turn exists already.

    def await_environment(self, tenant: str, session_id: str, turn_id: str) -> None:
        """The ConnectionWait workflow: a workspace Turn no connection claimed fails after
        `environment_wait_seconds` unless a connection claims it first (idempotent: one per Turn)."""
        settings = get_settings()
        if not settings.connection_wait_state_machine_arn:
            return
        payload = {"tenant": tenant, "session_id": session_id, "turn_id": turn_id,
                   "wait_seconds": settings.environment_wait_seconds}
        try:
            self.client.start_execution(stateMachineArn=settings.connection_wait_state_machine_arn,
                                        name=f"wait-{turn_id}", input=json.dumps(payload))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                raise

    def end_wait(self, turn_id: str) -> None:
        """A waiting Turn was claimed: stop its ConnectionWait execution, so it pays no Expire transition and no
        invocation (issue 36, item 5). Best effort: the Expire task changes nothing for a claimed Turn."""
        settings = get_settings()
        if not settings.connection_wait_state_machine_arn:
            return
        execution = settings.connection_wait_state_machine_arn.replace(":stateMachine:", ":execution:", 1)
        try:
            self.client.stop_execution(executionArn=f"{execution}:wait-{turn_id}", cause="claimed")
        except ClientError as exc:  # none was started (a Turn claimed after a requeue), or it ended already
            if exc.response.get("Error", {}).get("Code") != "ExecutionDoesNotExist":
                logger.warning("ConnectionWait not stopped; its Expire changes nothing",
                               extra={"turn_id": turn_id, "code": exc.response.get("Error", {}).get("Code")})

    def _token_call(self, method: str, **kwargs: Any) -> bool:
        try:
            getattr(self.client, method)(**kwargs)
            return True
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in ("TaskTimedOut", "InvalidToken", "TaskDoesNotExist"):
                logger.info("task token already closed", extra={"code": code})
                return False
            raise

    def heartbeat(self, token: str) -> bool:
        return self._token_call("send_task_heartbeat", taskToken=token)

    def succeed(self, token: str, outcome: dict[str, Any]) -> bool:
        return self._token_call("send_task_success", taskToken=token, output=json.dumps(outcome))

    def fail(self, token: str, error: str, cause: str) -> bool:
        return self._token_call("send_task_failure", taskToken=token, error=error, cause=cause)


@lru_cache(maxsize=1)
def botocore_session() -> botocore.session.Session:
    """One botocore session per execution environment, shared by every client (as boto3's default
    session was): clients come from botocore directly, so no cold start imports boto3 or s3transfer."""
    return botocore.session.get_session()


@lru_cache(maxsize=1)
def default_messenger() -> Messenger:
    settings = get_settings()
    return Messenger(botocore_session().create_client("apigatewaymanagementapi",
                                                      endpoint_url=settings.websocket_endpoint,
                                                      region_name=settings.aws_region))


@lru_cache(maxsize=1)
def default_workflow() -> Workflow:
    settings = get_settings()
    return Workflow(botocore_session().create_client("stepfunctions",
                                                     endpoint_url=settings.stepfunctions_endpoint_url,
                                                     region_name=settings.aws_region), settings.state_machine_arn or "")

