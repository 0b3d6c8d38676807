"""The Runtime protocol side of one Turn: routing fields, the per-Turn `seq`, batches and heartbeats.

Every harness driver reports what its Harness observably did through a `TurnChannel`; nothing here
knows which Harness runs. See docs/runtime-protocol.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from agents_contract.protocol import (
    ACK,
    ACTION,
    CALL_ID,
    CHUNK,
    OBSERVATIONS_FIELD,
    ROUTE,
    SEQ,
    TURN_BATCH,
    TURN_CALL_ABANDONED,
    TURN_COMPLETED,
    TURN_FAILED,
    TURN_FUNCTION_CALL,
    TURN_HEARTBEAT,
    TURN_ITEM_ADDED,
    TURN_ITEM_DONE,
    TURN_OUTPUT_TEXT_DELTA,
    TURN_TOOL_RESULT_APPLIED,
    TYPE,
)

Emit = Callable[[dict[str, Any]], None]

log = logging.getLogger("runtime")

# API Gateway's WebSocket message quota is 128 KB; a larger message closes the connection (1009) and with
# it every Turn of the Runtime. Observations are packed into messages below it (docs/runtime-protocol.md).
MAX_MESSAGE_BYTES = 127 * 1024
MAX_BATCH = 100  # observations in one turn.batch (Core's limit)
DELTA_BYTES = 32_000  # a text delta longer than this as JSON goes as several deltas
WINDOW = 16  # observations of one Turn sent and not yet acknowledged before emit waits for Core
RESEND_SECONDS = 5.0  # unacknowledged observations older than this are sent again (Core drops duplicates)
LINGER_SECONDS = 60.0  # how long an unacknowledged observation is resent (also after the Turn's end)


class ObservationTooLarge(Exception):
    """One observation that no message can carry (e.g. function call arguments over 128 KB): the Turn
    fails with this message instead of a message API Gateway would answer by closing the connection."""


def _size(message: dict[str, Any]) -> int:
    return len(json.dumps(message).encode())


class TurnChannel:
    """Observations of one Turn, numbered 1, 2, 3... in the order they are sent.

    Delivery is at least once and order tolerant: Core acknowledges cumulatively (`turn.ack` with the
    last seq applied); at most WINDOW observations are in flight, and what stays unacknowledged is sent
    again. Heartbeats are unnumbered, so no observation traffic ever holds them back. Against a Core whose welcome
    names a cadence, the Turn's heartbeat rides in its Runtime's `runtime.heartbeat` (`alive`), one message for
    every Turn of the connection; otherwise the channel sends its own `turn.heartbeat`."""

    def __init__(self, start: dict[str, Any], send: Emit, heartbeat_seconds: float = 5.0):
        self.route = {k: start[k] for k in ROUTE}
        self.turn_id: str = start["turn_id"]
        self.send_raw = send
        self.seq = 0
        self.acked = 0
        self.heartbeat_seconds = heartbeat_seconds
        self.per_turn_heartbeats = True  # False once Core said it takes runtime.heartbeat (router.Runtime sets it)
        # Core's welcome granted deferred_acks (router.Runtime sets it): messages go `ack: false` unless the window is
        # half full, and the connection's runtime.heartbeat asks for the rest (`ack_request`, `acks_answered`)
        self.deferred_acks = False
        self.linger = LINGER_SECONDS  # longer with deferred acks: at least three cadences (router.Runtime sets it)
        self._asked_at: float | None = None  # when a runtime.heartbeat last asked Core about this Turn
        # calls whose function_call was sent and whose turn.tool_result has not arrived: runtime.heartbeat names them
        # (`waiting_calls`) when Core's welcome granted it, and Core posts again a result that was lost on its way
        self.waiting_calls: dict[str, None] = {}
        self.done = threading.Event()
        self._lock = threading.Lock()  # numbering and sending, in order
        self._acks = threading.Condition()
        # last seq of a message -> (message, last sent at, first sent at)
        self._unacked: dict[int, tuple[dict[str, Any], float, float]] = {}
        self._done_at: float | None = None
        self._gathered: list[tuple[str, dict[str, Any]]] | None = None  # inside `together()`
        self._finished = False  # finish() ran inside `together()`: `done` once the gathered message is sent

    # -- sending -------------------------------------------------------------------------------------
    def emit(self, action: str, **fields: Any) -> None:
        self.emit_batch([(action, fields)])

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """What is emitted inside goes out on leaving, as few messages as fit: a Turn's held last answer and its
        end share one message, so Core makes one commit of them, not two (issue 36: one message, one commit and
        one acknowledgement fewer per Turn; the answer was held until the end anyway)."""
        self._gathered = []
        try:
            yield
        finally:
            gathered, self._gathered = self._gathered, None
            if gathered:
                self.emit_batch(gathered)
            if self._finished:
                self.done.set()

    def emit_batch(self, observations: list[tuple[str, dict[str, Any]]]) -> None:
        """Several observations, in as few messages as fit (a message within 128 KB, a batch within 100
        observations); Core applies each message in one commit."""
        if self._gathered is not None:  # inside together(): sent on leaving it
            self._gathered.extend(observations)
            return
        for action, fields in observations:
            if action == TURN_FUNCTION_CALL and isinstance(fields.get(CALL_ID), str):
                self.waiting_calls[fields[CALL_ID]] = None
            elif action in (TURN_CALL_ABANDONED, TURN_TOOL_RESULT_APPLIED):
                self.waiting_calls.pop(str(fields.get(CALL_ID)), None)
        observations = [piece for action, fields in observations for piece in _split_delta(action, fields)]
        with self._lock:
            groups: list[list[tuple[str, dict[str, Any]]]] = [[]]
            for action, fields in observations:
                trial = groups[-1] + [(action, fields)]
                if groups[-1] and (len(trial) > MAX_BATCH or _size(self._message(trial, 0)) > MAX_MESSAGE_BYTES):
                    groups.append([(action, fields)])
                else:
                    groups[-1] = trial
            for group in groups:
                if len(group) == 1 and _size(self._message(group, 0)) > MAX_MESSAGE_BYTES:
                    action = group[0][0]
                    size = _size(self._message(group, 0))
                    reason = (f"The Harness produced a {action} of {size} bytes; a Runtime message holds at most "
                              f"{MAX_MESSAGE_BYTES} bytes, so the Turn cannot continue.")
                    self._send_numbered([(TURN_FAILED, {"error": {"message": reason}})])
                    self.done.set()
                    raise ObservationTooLarge(reason)
                self._send_numbered(group)

    def _message(self, group: list[tuple[str, dict[str, Any]]], first: int) -> dict[str, Any]:
        if len(group) == 1:
            action, fields = group[0]
            return {ACTION: action, **self.route, SEQ: first, **fields}
        return {ACTION: TURN_BATCH, **self.route,
                OBSERVATIONS_FIELD: [{ACTION: a, SEQ: first + i, **f} for i, (a, f) in enumerate(group)]}

    def _send_numbered(self, group: list[tuple[str, dict[str, Any]]]) -> None:
        self._wait_window(len(group))
        message = self._message(group, self.seq + 1)
        if self.deferred_acks and self.seq + len(group) - self.acked < WINDOW // 2:
            message[ACK] = False  # no turn.ack for it: the next runtime.heartbeat asks (at half a window: now)
        self.seq += len(group)
        with self._acks:
            self._unacked[self.seq] = (message, time.monotonic(), time.monotonic())
        self.send_raw(message)

    def _wait_window(self, count: int) -> None:
        with self._acks:
            progress, acked = time.monotonic(), self.acked
            while self.seq + count - self.acked > WINDOW and self._unacked and not self.done.is_set():
                if self.acked != acked:
                    progress, acked = time.monotonic(), self.acked
                elif time.monotonic() - progress > self.linger:
                    log.warning("turn %s: Core acknowledged nothing for %ss; sending on", self.turn_id,
                                self.linger)
                    return
                if not self._acks.wait(RESEND_SECONDS):
                    self._resend(stale_only=False)

    # -- Core's answers ------------------------------------------------------------------------------
    def ack(self, seq: int) -> None:
        """Core applied every observation up to `seq` (cumulative; acks may arrive out of order)."""
        with self._acks:
            if seq <= self.acked:
                return
            self.acked = seq
            for last in [s for s in self._unacked if s <= seq]:
                del self._unacked[last]
            self._acks.notify_all()

    def resend_from(self, seq: Any) -> None:
        """Core could not take a message (a transient server error): send it again now."""
        with self._acks:
            found = [m for _, (m, _, _) in sorted(self._unacked.items()) if _covers(m, seq)]
        for message in found:
            self.send_raw(message)

    def _resend(self, stale_only: bool = True, before: float | None = None) -> None:
        """Unacknowledged messages again: all of them, or (stale_only) those sent RESEND_SECONDS ago whose ack Core
        owes (not one marked `ack: false`: Core answers that only when a heartbeat asks), or (before) those sent
        before that instant."""
        now = time.monotonic()
        with self._acks:
            for last in [s for s, (_, _, first) in self._unacked.items() if now - first > self.linger]:
                del self._unacked[last]  # Core would have acknowledged it by now if it could (a lost Turn)
            due = [(last, m) for last, (m, at, _) in sorted(self._unacked.items())
                   if (at <= before if before is not None else
                       not stale_only or (now - at >= RESEND_SECONDS and m.get(ACK) is not False))]
            for last, message in due:
                self._unacked[last] = (message, now, self._unacked[last][2])
        for _, message in due:
            try:
                self.send_raw(message)
            except ConnectionError:
                return

    def resend_now(self) -> None:
        """Every unacknowledged observation, again, now (after the connection rotated)."""
        self._resend(stale_only=False)

    def ack_request(self) -> dict[str, Any] | None:
        """With deferred acks: this Turn's entry in the next runtime.heartbeat's `acks` (its route and the highest seq
        sent), when it holds an observation sent RESEND_SECONDS ago or more and still unacknowledged (one sent just
        now may not be applied yet: asking about it would buy an answer that says nothing); None otherwise."""
        with self._acks:
            due = time.monotonic() - RESEND_SECONDS
            if not self.deferred_acks or not any(at <= due for _, at, _ in self._unacked.values()):
                return None
            self._asked_at = time.monotonic()
            return {**self.route, SEQ: max(self._unacked)}

    def acks_answered(self, seq: int) -> None:
        """Core's `turn.acks` named this Turn: every observation up to `seq` is applied. One still unacknowledged that
        was sent RESEND_SECONDS before the heartbeat asked was lost (Core's read is eventually consistent, and a
        message sent just before may be in flight): it is sent again."""
        self.ack(seq)
        asked_at = self._asked_at
        if asked_at is not None:
            self._resend(before=asked_at - RESEND_SECONDS)

    @property
    def unacknowledged(self) -> int:
        with self._acks:
            return len(self._unacked)

    def finish(self, action: str, **fields: Any) -> None:
        """The Turn's terminal observation (turn.completed / failed / cancelled), sent once. A completed hosted
        Turn publishes its outputs first (`on_complete`: runtime/environments/artifacts.py) and lists them."""
        if self.done.is_set() or self._finished:
            return
        on_complete = getattr(self, "on_complete", None)
        if action == TURN_COMPLETED and on_complete is not None:
            self.on_complete = None
            try:
                fields = {**fields, **on_complete()}
            except Exception:  # noqa: BLE001 - publication never keeps a Turn from completing
                log.exception("turn %s: publishing its outputs failed", self.turn_id)
        self.emit(action, **fields)
        if self._gathered is not None:  # sent when together() ends; `done` only then, so it is resent if lost
            self._finished = True
            return
        self.done.set()

    @property
    def alive(self) -> bool:
        """The Turn runs here (its heartbeats started, its end not reached): `runtime.heartbeat` names it."""
        return getattr(self, "_beating", False) and not self.done.is_set()

    def start_heartbeats(self) -> None:
        if getattr(self, "_beating", False):
            return  # once per Turn (a hosted Turn's beats start before its Environment is prepared)
        self._beating = True

        def beat() -> None:
            last = time.monotonic()
            while True:
                if self.done.is_set():
                    # Ended: what Core has not acknowledged is still resent, for a while.
                    self._done_at = self._done_at or time.monotonic()
                    if not self.unacknowledged or time.monotonic() - self._done_at > self.linger:
                        return
                    time.sleep(min(1.0, self.heartbeat_seconds))
                elif not self.done.wait(min(self.heartbeat_seconds, RESEND_SECONDS)):
                    if self.per_turn_heartbeats and time.monotonic() - last >= self.heartbeat_seconds * 0.99:
                        last = time.monotonic()
                        try:
                            self.send_raw({ACTION: TURN_HEARTBEAT, **self.route})
                        except ConnectionError:
                            log.warning("heartbeat for %s not sent: not connected", self.turn_id)
                self._resend()
        threading.Thread(target=beat, name=f"heartbeat-{self.turn_id}", daemon=True).start()

    def message(self, item_id: str, text: str, phase: str | None) -> None:
        """A whole assistant message: item.added, one output_text.delta with the whole text, item.done."""
        self.emit_batch([
            (TURN_ITEM_ADDED, {"item": assistant_message(item_id, phase, "in_progress", None)}),
            (TURN_OUTPUT_TEXT_DELTA, {"item_id": item_id, "content_index": 0, "delta": text}),
            (TURN_ITEM_DONE, {"item": assistant_message(item_id, phase, "completed", text)}),
        ])


def _covers(message: dict[str, Any], seq: Any) -> bool:
    if message.get(ACTION) == TURN_BATCH:
        return any(o.get(SEQ) == seq for o in message.get(OBSERVATIONS_FIELD, []))
    return message.get(SEQ) == seq


def _split_delta(action: str, fields: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    delta = fields.get("delta")
    if action != TURN_OUTPUT_TEXT_DELTA or not isinstance(delta, str) or len(json.dumps(delta)) <= DELTA_BYTES:
        return [(action, fields)]
    pieces, start = [], 0
    while start < len(delta):
        size = DELTA_BYTES
        while size > 64 and len(json.dumps(delta[start:start + size])) > DELTA_BYTES:  # escaping grows text
            size //= 2
        pieces.append((action, {**fields, "delta": delta[start:start + size]}))
        start += size
    return pieces


class Reassembler:
    """Joins Core's `chunk` messages (a message over 128 KB, split by Core) back into the message."""

    def __init__(self) -> None:
        self._parts: dict[str, dict[int, str]] = {}
        self._lock = threading.Lock()

    def feed(self, message: dict[str, Any]) -> dict[str, Any] | None:
        if message.get(TYPE) != CHUNK:
            return message
        key, parts = str(message.get("id")), int(message.get("parts") or 0)
        with self._lock:
            held = self._parts.setdefault(key, {})
            held[int(message.get("part") or 0)] = str(message.get("data") or "")
            if len(held) < parts:
                return None
            del self._parts[key]
        return json.loads("".join(held[i] for i in range(parts)))


def assistant_message(item_id: str, phase: str | None, status: str, text: str | None) -> dict[str, Any]:
    content = [] if text is None else [{"type": "output_text", "text": text}]
    return {"id": item_id, "type": "message", "role": "assistant", "phase": phase, "status": status,
            "content": content}
