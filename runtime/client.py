"""The Runtime's WebSocket transport: connect with a Runtime token, hello, reconnect with backoff."""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import connect

from .capabilities import declarations
from .harnesses import HarnessDriver
from .router import Runtime

log = logging.getLogger("runtime")
FRAME_CHARS = 32_000  # json.dumps writes ASCII: characters are bytes, each frame within 32 KB


class RuntimeClient:
    def __init__(self, url: str, token: str, drivers: dict[str, HarnessDriver], heartbeat_seconds: float = 5.0):
        self.url = url
        self.token = token
        self.drivers = drivers
        self.heartbeat_seconds = heartbeat_seconds
        self._socket: Any = None
        self._send_lock = threading.Lock()
        self._stop = threading.Event()
        self.runtime = Runtime(self.send, drivers, heartbeat_seconds)
        self.connected = threading.Event()
        self.fatal: str | None = None  # why the Runtime cannot run (a refused token): the process exits

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
                with connect(self.url, additional_headers={"Authorization": f"Bearer {self.token}"},
                             open_timeout=10, max_size=2**22) as socket:
                    self._socket = socket
                    backoff = 0.2
                    engines = {h: d.engine for h, d in self.drivers.items()}
                    self.send({"action": "runtime.hello", "harnesses": declarations(list(self.drivers), engines)})
                    self.connected.set()
                    for raw in socket:
                        self.runtime.on_message(json.loads(raw))
            except InvalidStatus as exc:
                status = exc.response.status_code
                if status in (401, 403):
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
