"""The Runtime's WebSocket transport: connect with a Runtime token, hello, reconnect with backoff."""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import connect

from agents_contract.protocol import RUNTIME_HELLO

from .capabilities import declarations
from .environments.workspace import Workspace
from .harnesses import HarnessDriver
from .router import Runtime

log = logging.getLogger("runtime")
FRAME_CHARS = 32_000  # json.dumps writes ASCII: characters are bytes, each frame within 32 KB


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
    def __init__(self, url: str, token: str, drivers: dict[str, HarnessDriver], heartbeat_seconds: float = 5.0,
                 workspace: Workspace | None = None, credential_file: str | None = None, hosted: Any = None,
                 egress: Any = None, namespace: Any = None):
        self.url = url
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

    def run_forever(self) -> None:
        backoff = 0.2
        while not self._stop.is_set():
            try:
                with connect(websocket_url(self.url), additional_headers={"Authorization": f"Bearer {self.token}"},
                             open_timeout=10, max_size=2**22) as socket:
                    self._socket = socket
                    backoff = 0.2
                    engines = {h: d.engine for h, d in self.drivers.items()}
                    hello: dict[str, Any] = {"action": RUNTIME_HELLO,
                                             "harnesses": declarations(list(self.drivers), engines)}
                    if self.hosted is not None:
                        hello["isolation"] = self.hosted.declaration()
                    self.send(hello)
                    self.connected.set()
                    for raw in socket:
                        self.runtime.on_message(json.loads(raw))
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
                log.warning("runtime connection lost (%s); reconnecting in %.1fs", type(exc).__name__, backoff)
            finally:
                self._socket = None
                self.connected.clear()
            if self._stop.wait(backoff):
                break
            backoff = min(10.0, backoff * 2) * (0.5 + random.random())  # noqa: S311 - jitter

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
