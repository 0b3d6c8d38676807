"""A hand-driven Runtime connection for protocol tests: it says hello, records every frame Core
sends, heartbeats (unnumbered) so its Turns stay alive, and sends whatever a test wants, including
what a hostile or broken Runtime would send."""

from __future__ import annotations

import json
import threading
from typing import Any

from agents_core.runtimes.connections import create_runtime_token
from local.inprocess import wait_for
from runtime.capabilities import declarations


class RawRuntime:
    def __init__(self, stack: Any, harnesses: tuple[str, ...] = ("scripted",), heartbeat: float = 0.4,
                 token: str | None = None, instance: str | None = None):
        self.stack = stack
        self.frames: list[dict[str, Any]] = []
        self.seq: dict[str, int] = {}
        self._stop = threading.Event()
        token = token or create_runtime_token(stack.store, "raw")  # shared, or an Environment's enrollment
        self.conn = stack.ws.connect(lambda text: self.frames.append(json.loads(text)),
                                     {"Authorization": f"Bearer {token}"})
        assert self.conn is not None
        hello: dict[str, Any] = {"action": "runtime.hello", "harnesses": declarations(list(harnesses))}
        if instance is not None:  # one Runtime process across its connections (a rotation)
            hello["instance"] = instance
        self.send(hello)
        self.routes: dict[str, dict[str, str]] = {}
        threading.Thread(target=self._beat, args=(heartbeat,), daemon=True).start()

    def _beat(self, every: float) -> None:
        while not self._stop.wait(every):
            for route in list(self.routes.values()):
                self.send({"action": "turn.heartbeat", **route})

    def send(self, message: Any) -> None:
        if self.conn is not None:
            self.stack.ws.receive(self.conn, message if isinstance(message, str) else json.dumps(message))

    def start(self, timeout: float = 15) -> dict[str, str]:
        """The next turn.start this connection receives; its routing is remembered."""
        start = wait_for(lambda: [m for m in self.frames if m.get("type") == "turn.start"
                                  and m["turn_id"] not in self.routes], timeout=timeout)[0]
        route = {k: start[k] for k in ("tenant", "session_id", "turn_id")}
        self.routes[start["turn_id"]] = route
        return route

    def next_seq(self, turn_id: str) -> int:
        self.seq[turn_id] = self.seq.get(turn_id, 0) + 1
        return self.seq[turn_id]

    def observe(self, route: dict[str, str], action: str, **fields: Any) -> int:
        seq = self.next_seq(route["turn_id"])
        self.send({"action": action, **route, "seq": seq, **fields})
        return seq

    def batch(self, route: dict[str, str], observations: list[tuple[str, dict[str, Any]]]) -> None:
        batch = [{"action": a, "seq": self.next_seq(route["turn_id"]), **f} for a, f in observations]
        self.send({"action": "turn.batch", **route, "observations": batch})

    def errors(self, turn_id: str | None = None) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("type") == "error" and (turn_id is None or f.get("turn_id") == turn_id)]

    def stop_heartbeats(self) -> None:
        self._stop.set()

    def drop(self) -> None:
        """The socket closes (the Runtime process died)."""
        self._stop.set()
        conn, self.conn = self.conn, None
        if conn:
            self.stack.ws.disconnect(conn, code=1006)
