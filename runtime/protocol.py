"""The Runtime protocol side of one Turn: routing fields, the per-Turn `seq`, batches and heartbeats.

Every harness driver reports what its Harness observably did through a `TurnChannel`; nothing here
knows which Harness runs. See docs/runtime-protocol.md.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

Emit = Callable[[dict[str, Any]], None]

log = logging.getLogger("runtime")


class TurnChannel:
    """Observations of one Turn, numbered 1, 2, 3... in the order they are sent."""

    def __init__(self, start: dict[str, Any], send: Emit, heartbeat_seconds: float = 5.0):
        self.route = {k: start[k] for k in ("tenant", "session_id", "turn_id")}
        self.turn_id: str = start["turn_id"]
        self.send_raw = send
        self.seq = 0
        self.heartbeat_seconds = heartbeat_seconds
        self.done = threading.Event()
        self._lock = threading.Lock()

    def emit(self, action: str, **fields: Any) -> None:
        with self._lock:
            self.seq += 1
            self.send_raw({"action": action, **self.route, "seq": self.seq, **fields})

    def emit_batch(self, observations: list[tuple[str, dict[str, Any]]]) -> None:
        """Several observations in one message (Core applies them in one commit)."""
        with self._lock:
            batch = []
            for action, fields in observations:
                self.seq += 1
                batch.append({"action": action, "seq": self.seq, **fields})
            self.send_raw({"action": "turn.batch", **self.route, "observations": batch})

    def finish(self, action: str, **fields: Any) -> None:
        """The Turn's terminal observation (turn.completed / failed / cancelled), sent once."""
        if self.done.is_set():
            return
        self.emit(action, **fields)
        self.done.set()

    def start_heartbeats(self) -> None:
        def beat() -> None:
            while not self.done.wait(self.heartbeat_seconds):
                try:
                    self.emit("turn.heartbeat")
                except ConnectionError:
                    log.warning("heartbeat for %s not sent: not connected", self.turn_id)
        threading.Thread(target=beat, name=f"heartbeat-{self.turn_id}", daemon=True).start()

    def message(self, item_id: str, text: str, phase: str | None) -> None:
        """A whole assistant message: item.added, one output_text.delta with the whole text, item.done."""
        self.emit_batch([
            ("turn.item.added", {"item": assistant_message(item_id, phase, "in_progress", None)}),
            ("turn.output_text.delta", {"item_id": item_id, "content_index": 0, "delta": text}),
            ("turn.item.done", {"item": assistant_message(item_id, phase, "completed", text)}),
        ])


def assistant_message(item_id: str, phase: str | None, status: str, text: str | None) -> dict[str, Any]:
    content = [] if text is None else [{"type": "output_text", "text": text}]
    return {"id": item_id, "type": "message", "role": "assistant", "phase": phase, "status": status,
            "content": content}
