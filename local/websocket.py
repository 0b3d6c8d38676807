"""The local WebSocket gateway's core: API Gateway WebSocket event shapes, route selection on
`$request.body.action`, and the `@connections` management API (GoneException 410 for closed
connections). Transport-agnostic: the server in `local.server` and in-process tests both use it."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from . import apigw, template

Sender = Callable[[str], None]


@dataclass
class Connection:
    id: str
    send: Sender
    connected_at: int
    headers: dict[str, str]
    open: bool = True


def _context(connection_id: str, route: str, event_type: str, api_id: str, stage: str) -> dict[str, Any]:
    now = time.time()
    return {"routeKey": route, "eventType": event_type, "messageDirection": "IN", "stage": stage,
            "connectionId": connection_id, "apiId": api_id, "domainName": "localhost",
            "requestId": uuid.uuid4().hex, "extendedRequestId": uuid.uuid4().hex,
            "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "requestTimeEpoch": int(now * 1000), "identity": {"sourceIp": "127.0.0.1"},
            "connectedAt": int(now * 1000)}


def _select(body: str) -> Optional[str]:
    """$request.body.action"""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    action = message.get("action") if isinstance(message, dict) else None
    return action if isinstance(action, str) else None


@dataclass
class WebSocketGateway:
    handlers: dict[str, apigw.Handler]
    routes: dict[str, str] = field(default_factory=template.websocket_routes)
    api_id: str = "localws"
    stage: str = "local"
    connections: dict[str, Connection] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def connect(self, send: Sender, headers: dict[str, str], query: Optional[dict[str, str]] = None) -> Optional[str]:
        """$connect: returns the connection id, or None when the handler rejects it."""
        connection_id = base64.b64encode(uuid.uuid4().bytes[:9]).decode().replace("/", "_").replace("+", "-")
        lowered = {k.lower(): v for k, v in headers.items()}
        event = {"headers": lowered, "multiValueHeaders": {k: [v] for k, v in lowered.items()},
                 "requestContext": _context(connection_id, "$connect", "CONNECT", self.api_id, self.stage),
                 "isBase64Encoded": False}
        if query:
            event["queryStringParameters"] = dict(query)
        result = self._invoke("$connect", event)
        status = int((result or {}).get("statusCode", 200)) if isinstance(result, dict) else 200
        if status >= 300:
            return None
        with self._lock:
            self.connections[connection_id] = Connection(connection_id, send, int(time.time()), lowered)
        return connection_id

    def message(self, connection_id: str, body: str) -> None:
        route = _select(body)
        if route not in self.routes:
            route = "$default"
        event = {"requestContext": {**_context(connection_id, route, "MESSAGE", self.api_id, self.stage),
                                    "messageId": uuid.uuid4().hex},
                 "body": body, "isBase64Encoded": False}
        self._invoke(route, event)

    def disconnect(self, connection_id: str, code: int = 1000) -> None:
        with self._lock:
            conn = self.connections.pop(connection_id, None)
        if conn is None:
            return
        conn.open = False
        event = {"headers": conn.headers,
                 "requestContext": {**_context(connection_id, "$disconnect", "DISCONNECT", self.api_id, self.stage),
                                    "disconnectStatusCode": code, "disconnectReason": ""},
                 "isBase64Encoded": False}
        self._invoke("$disconnect", event)

    def _invoke(self, route: str, event: dict[str, Any]) -> Any:
        function = self.routes.get(route)
        if function is None:
            return {"statusCode": 200}
        return self.handlers[function](event, apigw.LambdaContext(function))

    # -- the @connections management API -----------------------------------------------------------
    def post(self, connection_id: str, data: bytes | str) -> bool:
        """False when the connection is closed (the API answers 410 GoneException)."""
        conn = self.connections.get(connection_id)
        if conn is None or not conn.open:
            return False
        try:
            conn.send(data.decode() if isinstance(data, bytes) else data)
        except Exception:  # noqa: BLE001 - a socket that fails is gone
            return False
        return True

    def info(self, connection_id: str) -> Optional[dict[str, Any]]:
        conn = self.connections.get(connection_id)
        if conn is None:
            return None
        return {"ConnectedAt": conn.connected_at, "Identity": {"SourceIp": "127.0.0.1"},
                "LastActiveAt": int(time.time())}

    def close(self, connection_id: str) -> bool:
        conn = self.connections.get(connection_id)
        if conn is None:
            return False
        self.disconnect(connection_id)
        return True


def install_moto_management_api(gateway: WebSocketGateway) -> None:
    """In-process tests: route moto's apigatewaymanagementapi to the gateway (with GoneException)."""
    from moto.apigatewaymanagementapi.models import ApiGatewayManagementApiBackend
    from moto.core.exceptions import JsonRESTError

    class Gone(JsonRESTError):
        code = 410

        def __init__(self) -> None:
            super().__init__("GoneException", "The connection is gone.")

    def post_to_connection(self: Any, data: Any, connection_id: str) -> None:
        if not gateway.post(connection_id, data):
            raise Gone()

    def delete_connection(self: Any, connection_id: str) -> None:
        if not gateway.close(connection_id):
            raise Gone()

    ApiGatewayManagementApiBackend.post_to_connection = post_to_connection  # type: ignore[method-assign]
    ApiGatewayManagementApiBackend.delete_connection = delete_connection  # type: ignore[method-assign]
