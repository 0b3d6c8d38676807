"""The local WebSocket gateway's core: API Gateway WebSocket event shapes, route selection on
`$request.body.action`, and the `@connections` management API (GoneException 410 for closed
connections). Transport-agnostic: the server in `local.server` and in-process tests both use it.

API Gateway's limits hold here as in AWS: a message over 128 KB (or, on a real socket, a frame over
32 KB) closes the connection with 1009 and never reaches a handler; a `@connections` post over 128 KB
fails (PayloadTooLargeException, 413). Every connection (Runtimes and subscribers) is closed with 1001
("Going away") at its maximum duration (`AGENTS_CORE_WS_MAX_CONNECTION_SECONDS`, 7200 as in AWS) and
after `AGENTS_CORE_WS_IDLE_SECONDS` (600) with no message either way; `$disconnect` is delivered unless
`AGENTS_CORE_WS_DISCONNECT=never` (AWS delivers it on a best-effort basis: code must not depend on it).

Delivery of one connection's messages (`AGENTS_CORE_WS_DELIVERY`):
- `direct` (the default): on the receiving thread, one at a time in arrival order (in-process, the
  sender waits for the handler; on `make dev` the socket buffers while the server handles each in turn);
- `ordered`: one at a time in arrival order on a gateway thread, the sender never waiting (a socket);
- `concurrent`: as API Gateway does with concurrent Lambda invocations, several messages of one
  connection at once, in no guaranteed order (a seeded jitter makes late arrivals common).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Optional

from . import apigw, template

Sender = Callable[[str], None]
log = logging.getLogger("local.websocket")

MAX_MESSAGE_BYTES = 128 * 1024  # API Gateway WebSocket quota: message payload size
MAX_FRAME_BYTES = 32 * 1024  # API Gateway WebSocket quota: frame size
TOO_BIG = 1009  # the close code API Gateway uses for a message or frame over its quota
GOING_AWAY = 1001  # the close code API Gateway uses at the maximum duration and the idle timeout
MAX_CONNECTION_SECONDS = 7200  # API Gateway WebSocket quota: connection duration (2 hours, fixed)
IDLE_SECONDS = 600  # API Gateway WebSocket quota: idle connection timeout (10 minutes, fixed)
DELIVERY_MODES = ("direct", "ordered", "concurrent")


def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {raw!r}")
    return value


def max_connection_seconds() -> float:
    return _seconds("AGENTS_CORE_WS_MAX_CONNECTION_SECONDS", MAX_CONNECTION_SECONDS)


def idle_seconds() -> float:
    return _seconds("AGENTS_CORE_WS_IDLE_SECONDS", IDLE_SECONDS)


def delivers_disconnect() -> bool:
    mode = os.environ.get("AGENTS_CORE_WS_DISCONNECT", "always").strip().lower() or "always"
    if mode not in ("always", "never"):
        raise ValueError("AGENTS_CORE_WS_DISCONNECT must be always or never")
    return mode == "always"


class PayloadTooLarge(Exception):
    """A @connections post over 128 KB (API Gateway answers 413 PayloadTooLargeException)."""


def delivery_mode() -> str:
    mode = os.environ.get("AGENTS_CORE_WS_DELIVERY", "direct")
    if mode not in DELIVERY_MODES:
        raise ValueError(f"AGENTS_CORE_WS_DELIVERY must be one of {', '.join(DELIVERY_MODES)}")
    return mode


@dataclass
class Connection:
    id: str
    send: Sender
    connected_at: int
    headers: dict[str, str]
    open: bool = True
    close: Optional[Callable[[int], None]] = None  # closes the transport (a real socket) with a code
    inbox: Optional[queue.Queue[Optional[str]]] = None  # `ordered` delivery
    received: int = 0  # messages received (numbered in arrival order)
    started: int = 0  # the highest arrival number a handler has started on
    opened: float = field(default_factory=time.monotonic)  # for the maximum duration
    active: float = field(default_factory=time.monotonic)  # the last message either way (the idle timeout)


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
    except (ValueError, RecursionError):  # unparsable here: API Gateway routes it to $default
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
    delivery: str = field(default_factory=delivery_mode)
    seed: int = field(default_factory=lambda: int(os.environ.get("AGENTS_CORE_WS_SEED", "13")))
    reordered: int = 0  # messages a handler started after a later one of the same connection
    too_big: int = 0  # connections closed with 1009
    max_connection_seconds: float = field(default_factory=max_connection_seconds)
    idle_seconds: float = field(default_factory=idle_seconds)
    deliver_disconnect: bool = field(default_factory=delivers_disconnect)
    going_away: int = 0  # connections closed with 1001 (maximum duration or idle timeout)
    _reaper: Optional[threading.Thread] = None
    _stopped: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pool: Optional[ThreadPoolExecutor] = None
    _rng: Optional[random.Random] = None

    def connect(self, send: Sender, headers: dict[str, str], query: Optional[dict[str, str]] = None,
                close: Optional[Callable[[int], None]] = None) -> Optional[str]:
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
            self.connections[connection_id] = Connection(connection_id, send, int(time.time()), lowered,
                                                         close=close)
            if self._reaper is None:
                self._reaper = threading.Thread(target=self._reap, daemon=True, name="ws-reaper")
                self._reaper.start()
        return connection_id

    def _reap(self) -> None:
        """API Gateway's clock: a connection ends at its maximum duration, or idle for the idle timeout."""
        tick = max(0.05, min(1.0, self.max_connection_seconds / 40, self.idle_seconds / 40))
        while not self._stopped.wait(tick):
            now = time.monotonic()
            with self._lock:
                due = [c for c in self.connections.values()
                       if now - c.opened >= self.max_connection_seconds or now - c.active >= self.idle_seconds]
            for conn in due:
                log.info("closing %s with 1001 (%s)", conn.id,
                         "maximum duration" if now - conn.opened >= self.max_connection_seconds else "idle")
                self.going_away += 1
                self.end(conn.id, GOING_AWAY)

    def receive(self, connection_id: str, body: str) -> None:
        """A message as the socket received it: checked against API Gateway's quota, then handed to its
        route's handler as the delivery mode says."""
        conn = self.connections.get(connection_id)
        if conn is None or not conn.open:
            return  # a closed connection's messages reach nothing
        conn.active = time.monotonic()
        if len(body.encode()) > MAX_MESSAGE_BYTES:
            self.reject_too_big(connection_id)
            return
        with self._lock:
            conn.received += 1
            number = conn.received
        if self.delivery == "direct":
            self.message(connection_id, body)
        elif self.delivery == "ordered":
            with self._lock:
                if conn.inbox is None:
                    conn.inbox = queue.Queue()
                    threading.Thread(target=self._drain, args=(conn,), daemon=True,
                                     name=f"ws-{connection_id}").start()
            conn.inbox.put(body)
        else:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="ws-concurrent")
                    self._rng = random.Random(self.seed)  # noqa: S311 - test jitter, not security
                delay = self._rng.uniform(0, 0.004)  # type: ignore[union-attr]
            self._pool.submit(self._later, conn, number, body, delay)

    def shutdown(self) -> None:
        """The gateway stops: no connection delivers or receives anything more (no $disconnect)."""
        self._stopped.set()
        with self._lock:
            closing, self.connections = list(self.connections.values()), {}
        for conn in closing:
            conn.open = False
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def receive_frames(self, connection_id: str, frames: list[str]) -> None:
        """A message sent in several frames (a client fragments what is over 32 KB)."""
        if any(len(frame.encode()) > MAX_FRAME_BYTES for frame in frames):
            self.reject_too_big(connection_id)
            return
        self.receive(connection_id, "".join(frames))

    def reject_too_big(self, connection_id: str) -> None:
        """API Gateway closes the connection with 1009; the message reaches no handler."""
        self.too_big += 1
        self.end(connection_id, TOO_BIG)

    def end(self, connection_id: str, code: int) -> None:
        """The gateway closes a connection itself: `$disconnect` (as the mode says), then the socket."""
        conn = self.connections.get(connection_id)
        self.disconnect(connection_id, code=code)
        if conn is not None and conn.close is not None:
            try:
                conn.close(code)
            except Exception:  # noqa: BLE001, S110 - the socket may already be gone
                pass

    def _drain(self, conn: Connection) -> None:
        number = 0
        while conn.open:
            try:
                body = conn.inbox.get(timeout=1)  # type: ignore[union-attr]
            except queue.Empty:
                continue
            number += 1
            self._handle(conn, number, body)

    def _later(self, conn: Connection, number: int, body: str, delay: float) -> None:
        time.sleep(delay)
        self._handle(conn, number, body)

    def _handle(self, conn: Connection, number: int, body: str) -> None:
        if not conn.open:
            return
        with self._lock:
            if number < conn.started:
                self.reordered += 1
            conn.started = max(conn.started, number)
        try:
            self.message(conn.id, body)
        except Exception:  # noqa: BLE001 - a failed invocation drops that message, never the connection
            log.exception("handler failed for a message of %s", conn.id)

    def message(self, connection_id: str, body: str) -> None:
        """Invoke the route's handler for one message (on the caller's thread)."""
        if connection_id not in self.connections:
            return  # API Gateway routes nothing for a closed connection
        if len(body.encode()) > MAX_MESSAGE_BYTES:
            self.reject_too_big(connection_id)
            return
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
        if not self.deliver_disconnect:
            log.info("%s closed (%s); $disconnect not delivered (AGENTS_CORE_WS_DISCONNECT=never)", connection_id, code)
            return
        event = {"headers": conn.headers,
                 "requestContext": {**_context(connection_id, "$disconnect", "DISCONNECT", self.api_id, self.stage),
                                    "disconnectStatusCode": code,
                                    "disconnectReason": "Going away" if code == GOING_AWAY else ""},
                 "isBase64Encoded": False}
        self._invoke("$disconnect", event)

    def _invoke(self, route: str, event: dict[str, Any]) -> Any:
        function = self.routes.get(route)
        if function is None:
            return {"statusCode": 200}
        return self.handlers[function](event, apigw.LambdaContext(function))

    # -- the @connections management API -----------------------------------------------------------
    def post(self, connection_id: str, data: bytes | str) -> bool:
        """False when the connection is closed (the API answers 410 GoneException); PayloadTooLarge
        over 128 KB (413), as API Gateway answers."""
        conn = self.connections.get(connection_id)
        if conn is None or not conn.open:
            return False
        if len(data if isinstance(data, bytes) else data.encode()) > MAX_MESSAGE_BYTES:
            raise PayloadTooLarge(connection_id)
        conn.active = time.monotonic()
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
                "LastActiveAt": int(time.time() - (time.monotonic() - conn.active))}

    def close(self, connection_id: str) -> bool:
        conn = self.connections.get(connection_id)
        if conn is None:
            return False
        self.disconnect(connection_id)
        return True


class ChunkJoiner:
    """Joins Core's `chunk` messages (one message over 128 KB, split by Core's Messenger) back into the
    message's JSON text, for the local SSE bridge (an SSE stream has no 128 KB quota)."""

    def __init__(self) -> None:
        self._parts: dict[str, dict[int, str]] = {}

    def feed(self, text: str) -> Optional[str]:
        if not text.startswith('{"type":"chunk"'):
            return text
        message = json.loads(text)
        held = self._parts.setdefault(str(message["id"]), {})
        held[int(message["part"])] = message["data"]
        if len(held) < int(message["parts"]):
            return None
        del self._parts[str(message["id"])]
        return "".join(held[i] for i in range(len(held)))


def uvicorn_protocol() -> Any:
    """The local server's WebSocket protocol with API Gateway's frame quota: a frame over 32 KB closes
    the connection with 1009 before the message reaches the app (the 128 KB message quota is uvicorn's
    `ws_max_size`, which closes with 1009 too)."""
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

    class FrameLimitedProtocol(WebSocketsSansIOProtocol):
        def _within_quota(self, event: Any) -> bool:
            if len(event.data) <= MAX_FRAME_BYTES:
                return True
            self.conn.fail(TOO_BIG, "Frame too big")
            self.handle_parser_exception()
            return False

        def handle_text(self, event: Any) -> None:
            if self._within_quota(event):
                super().handle_text(event)

        def handle_bytes(self, event: Any) -> None:
            if self._within_quota(event):
                super().handle_bytes(event)

        def handle_cont(self, event: Any) -> None:
            if self._within_quota(event):
                super().handle_cont(event)

    return FrameLimitedProtocol


def install_moto_management_api(gateway: WebSocketGateway) -> None:
    """In-process tests: route moto's apigatewaymanagementapi to the gateway (with GoneException)."""
    from moto.apigatewaymanagementapi.models import ApiGatewayManagementApiBackend
    from moto.core.exceptions import JsonRESTError

    class Gone(JsonRESTError):
        code = 410

        def __init__(self) -> None:
            super().__init__("GoneException", "The connection is gone.")

    class TooLarge(JsonRESTError):
        code = 413

        def __init__(self) -> None:
            super().__init__("PayloadTooLargeException", "Message too large; at most 128 KB.")

    def post_to_connection(self: Any, data: Any, connection_id: str) -> None:
        try:
            posted = gateway.post(connection_id, data)
        except PayloadTooLarge:
            raise TooLarge() from None
        if not posted:
            raise Gone()

    def delete_connection(self: Any, connection_id: str) -> None:
        if not gateway.close(connection_id):
            raise Gone()

    ApiGatewayManagementApiBackend.post_to_connection = post_to_connection  # type: ignore[method-assign]
    ApiGatewayManagementApiBackend.delete_connection = delete_connection  # type: ignore[method-assign]
