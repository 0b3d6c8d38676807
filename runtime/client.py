"""The Runtime's WebSocket transport: connect with a Runtime token, hello, reconnect with backoff, and
rotate the connection before API Gateway's maximum duration (2 hours) closes it.

Rotation: `margin` before the bound (at most a quarter of it) the Runtime opens its next connection and
says `runtime.hello` there with the same `instance` (one id for the life of the process). Core moves the
instance's claimed Turns to the new connection before it answers `runtime.welcome`; until that welcome the
Runtime keeps sending on the old connection, then sends on the new one, sends again every observation not
yet acknowledged (Core drops what it already applied, by `seq`), and still reads the old connection for
DRAIN_SECONDS (a message Core posted to it just before the move) before closing it.
"""

from __future__ import annotations

import json
import logging
import os
import random
import secrets
import threading
import time
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import connect

from agents_contract.protocol import (
    DEFERRED_ACKS_FIELD,
    HEARTBEAT_CADENCE_SECONDS,
    HEARTBEAT_SECONDS_FIELD,
    RUNTIME_HELLO,
    RUNTIME_WELCOME,
    TYPE,
    WAITING_CALLS,
)

from .capabilities import declarations
from .environments.workspace import Workspace
from .harnesses import HarnessDriver
from .router import Runtime

log = logging.getLogger("runtime")
FRAME_CHARS = 32_000  # json.dumps writes ASCII: characters are bytes, each frame within 32 KB
MAX_CONNECTION_SECONDS = 7200.0  # API Gateway's maximum connection duration, unless the welcome says otherwise
ROTATION_MARGIN = 300.0  # the next connection opens this long before the bound (at most a quarter of it)
DRAIN_SECONDS = 5.0  # the old connection is still read this long after the switch
WELCOME_SECONDS = 15.0  # a next connection not welcomed within this is closed, and tried again
RETRY_SECONDS = 5.0  # after a next connection that failed


def rotation_after(max_seconds: float, margin: float) -> float:
    """Seconds after a connection opened at which the next one opens: `margin` before the maximum duration,
    never more than a quarter of it (a 20 s bound rotates at 15 s), never under one second."""
    return max(1.0, max_seconds - min(max(0.0, margin), max_seconds / 4))


def save_credential(path: str, credential: str) -> None:
    """Written 0600 from the start (never world-readable, not even briefly)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(credential)
    os.chmod(path + ".tmp", 0o600)
    os.replace(path + ".tmp", path)


def load_credential(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def websocket_url(url: str) -> str:
    """`--url` may be a self_hosted Environment's remote_url (the exec-server registry's http(s) base): its
    `GET /cloud/runtime` names the WebSocket URL."""
    if not url.startswith(("http://", "https://")):
        return url
    import urllib.request

    with urllib.request.urlopen(url.rstrip("/") + "/cloud/runtime", timeout=10) as answer:  # noqa: S310 - http(s)
        return json.loads(answer.read())["websocket_url"]


class RuntimeClient:
    def __init__(self, url: str, token: str, drivers: dict[str, HarnessDriver],
                 heartbeat_seconds: float = HEARTBEAT_CADENCE_SECONDS,
                 workspace: Workspace | None = None, credential_file: str | None = None, hosted: Any = None,
                 egress: Any = None, namespace: Any = None, rotation_margin: float = ROTATION_MARGIN,
                 max_connection_seconds: float | None = None):
        self.url = url
        # One identity across this process's connections: a rotation's hello names it, so Core moves the
        # Turns claimed on the old connection to the new one.
        self.instance = "rti_" + secrets.token_urlsafe(24)
        self.rotation_margin = rotation_margin
        self.max_connection_seconds = max_connection_seconds  # None: as the welcome says (else 7200)
        self.learned_max_seconds: float | None = None
        self.rotations = 0
        self.token = token
        # An Environment's Runtime: an enrollment token is spent at the first hello, whose welcome carries
        # the durable credential; it is kept in `credential_file` (mode 0600) and used on every reconnect.
        self.credential_file = credential_file
        self.drivers = drivers
        self.heartbeat_seconds = heartbeat_seconds
        self._socket: Any = None
        self._send_lock = threading.Lock()
        self._stop = threading.Event()
        self.hosted = hosted  # a host of hosted Environments: its hello declares the isolation
        self.runtime = Runtime(self.send, drivers, heartbeat_seconds, workspace=workspace,
                               on_welcome=self._welcomed, hosted=hosted, egress=egress, namespace=namespace)
        self.environment_id: str | None = None
        self.connected = threading.Event()
        self.fatal: str | None = None  # why the Runtime cannot run (a refused token): the process exits

    def _welcomed(self, welcome: dict[str, Any]) -> None:
        bound = welcome.get("max_connection_seconds")
        if isinstance(bound, (int, float)) and not isinstance(bound, bool) and bound > 0:
            self.learned_max_seconds = float(bound)
        self.environment_id = welcome.get("environment_id") or self.environment_id
        hub = getattr(self.runtime, "exec_server_hub", None)
        if hub is not None:  # an exec-server host: registrations of an earlier connection are void
            hub.connected_to_core()
            self.send(hub.announcement())
        credential = welcome.get("credential")
        if isinstance(credential, str) and credential:
            self.token = credential  # the enrollment is spent: reconnect with the credential
            if self.credential_file:
                save_credential(self.credential_file, credential)
            log.info("enrolled as Environment %s", self.environment_id)

    def send(self, message: dict[str, Any]) -> None:
        text = json.dumps(message)
        # API Gateway closes a connection on a frame over 32 KB: a longer message goes in several frames.
        data: Any = text if len(text) <= FRAME_CHARS else [text[i:i + FRAME_CHARS]
                                                           for i in range(0, len(text), FRAME_CHARS)]
        with self._send_lock:
            if self._socket is None:
                raise ConnectionError("not connected")
            self._socket.send(data)

    def rotation_after(self) -> float:
        bound = self.max_connection_seconds or self.learned_max_seconds or MAX_CONNECTION_SECONDS
        return rotation_after(bound, self.rotation_margin)

    def _open(self) -> Any:
        """A connection, with this process's hello sent on it."""
        socket = connect(websocket_url(self.url), additional_headers={"Authorization": f"Bearer {self.token}"},
                         open_timeout=10, max_size=2**22)
        engines = {h: d.engine for h, d in self.drivers.items()}
        # heartbeat_seconds: this connection sends runtime.heartbeat (at the cadence the welcome names), so Core
        # holds it to the bound instead of trusting it until $disconnect (docs/runtime-protocol.md, "Liveness").
        hello: dict[str, Any] = {"action": RUNTIME_HELLO, "harnesses": declarations(list(self.drivers), engines),
                                 "instance": self.instance, HEARTBEAT_SECONDS_FIELD: self.heartbeat_seconds,
                                 # the welcome says it back: messages unacknowledged until a heartbeat asks
                                 DEFERRED_ACKS_FIELD: True,
                                 # a result is posted once; the heartbeat names the calls awaited (the backstop)
                                 WAITING_CALLS: True}
        if self.hosted is not None:
            hello["isolation"] = self.hosted.declaration()
        try:
            socket.send(json.dumps(hello))
        except Exception:
            socket.close()
            raise
        return socket

    def run_forever(self) -> None:
        backoff = 0.2
        while not self._stop.is_set():
            try:
                opened = time.monotonic()
                socket = self._open()
            except InvalidStatus as exc:
                status = exc.response.status_code
                if status in (401, 403) and self.token.startswith("enr-") and self.credential_file \
                        and load_credential(self.credential_file):
                    self.token = load_credential(self.credential_file) or ""  # enrollment spent before
                    log.warning("the enrollment was refused; reconnecting with the saved credential")
                    continue
                if status in (401, 403):
                    if self.token.startswith(("enr-", "rte-")):
                        self.fatal = f"Core refused this Environment's enrollment or credential (HTTP {status}): " \
                                     "it was used, expired or replaced; create a new enrollment (POST " \
                                     "/v1/agents/environments/{id}/enrollments or the dashboard's Connect)."
                    else:
                        self.fatal = f"Core refused the Runtime token (HTTP {status}); create one with " \
                                     "`python -m agents_core.apikeys --runtime NAME`."
                    log.error(self.fatal)
                    self._stop.set()
                    break
                log.warning("runtime connection refused (HTTP %s); reconnecting in %.1fs", status, backoff)
            except (OSError, ConnectionClosed, TimeoutError, InvalidHandshake) as exc:
                log.warning("runtime connection failed (%s); reconnecting in %.1fs", type(exc).__name__, backoff)
            else:
                backoff = 0.2
                try:
                    self._serve(socket, opened)
                except (OSError, TimeoutError) as exc:
                    log.warning("runtime connection failed (%s)", type(exc).__name__)
                log.warning("runtime connection lost; reconnecting in %.1fs", backoff)
            if self._stop.wait(backoff):
                break
            backoff = min(10.0, backoff * 2) * (0.5 + random.random())  # noqa: S311 - jitter

    def _serve(self, socket: Any, opened: float) -> None:
        """Read the current connection (and, around a rotation, the next and the previous ones) until the
        current one is lost. Returns then; the caller reconnects (with the same instance: Core still holds
        this process's Turns until the heartbeat bound)."""
        current = socket
        with self._send_lock:
            self._socket = current
        self.connected.set()
        pending: tuple[Any, float] | None = None  # the next connection, until its welcome
        draining: list[tuple[Any, float]] = []  # earlier connections, read until their deadline
        retry_at = 0.0
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if pending is None and now >= opened + self.rotation_after() and now >= retry_at:
                    try:
                        pending = (self._open(), now)
                        log.info("rotating the runtime connection (open %.0fs)", now - opened)
                    except (OSError, ConnectionClosed, TimeoutError, InvalidHandshake) as exc:
                        log.warning("could not open the next connection (%s); trying again in %.0fs",
                                    type(exc).__name__, RETRY_SECONDS)
                        retry_at = now + RETRY_SECONDS
                elif pending is not None and now - pending[1] > WELCOME_SECONDS:
                    log.warning("the next connection was not welcomed; trying again in %.0fs", RETRY_SECONDS)
                    pending[0].close()
                    pending, retry_at = None, now + RETRY_SECONDS
                for old, until in list(draining):
                    if now >= until:
                        old.close()
                        draining.remove((old, until))
                sockets = [current, *(s for s, _ in draining), *([pending[0]] if pending else [])]
                if len(sockets) == 1:  # the usual case: block on the one connection until rotation is due
                    timeout = min(1.0, max(0.05, opened + self.rotation_after() - now))
                else:
                    timeout = 0.02
                for sock in sockets:
                    try:
                        raw = sock.recv(timeout=timeout)
                    except TimeoutError:
                        continue
                    except ConnectionClosed:
                        if sock is current and pending is None:
                            return  # lost, not rotated
                        if sock is current:  # closed while the next one waits for its welcome: it is next
                            draining.append((current, now))
                            current, opened, pending = pending[0], pending[1], None  # type: ignore[index]
                            with self._send_lock:
                                self._socket = current
                        elif pending is not None and sock is pending[0]:
                            pending, retry_at = None, now + RETRY_SECONDS
                        else:
                            draining = [(s, u) for s, u in draining if s is not sock]
                        break
                    message = json.loads(raw)
                    if pending is not None and sock is pending[0] and message.get(TYPE) == RUNTIME_WELCOME:
                        # Core moved this instance's Turns to the new connection: send there from now on.
                        draining.append((current, now + DRAIN_SECONDS))
                        current, opened, pending = sock, pending[1], None
                        with self._send_lock:
                            self._socket = current
                        self.rotations += 1
                        self.runtime.on_message(message)
                        self.runtime.resend_unacknowledged()
                        log.info("runtime connection rotated (%d Turns went on)", len(message.get("resumed_turns") or []))
                        break
                    self.runtime.on_message(message)
        finally:
            with self._send_lock:
                if self._socket is current:
                    self._socket = None
            self.connected.clear()
            for sock in [current, *(s for s, _ in draining), *([pending[0]] if pending else [])]:
                sock.close()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run_forever, name="runtime", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()
        socket = self._socket
        if socket is not None:
            socket.close()
        self.runtime.close()

    @staticmethod
    def wait_until(predicate: Any, timeout: float = 10.0) -> bool:
        end = time.time() + timeout
        while time.time() < end:
            if predicate():
                return True
            time.sleep(0.02)
        return False
