"""The scripted harness: a deterministic harness for demos and tests.

The user message is a tiny script, one step per line:

    say <text>                 an assistant message (the last one is the final answer)
    answer <text>              the final answer, published unchanged (structured output)
    call <name> <json>         a function call; waits for its result, applies it, sends the receipt
    subagent call <name> <json>  the same call made by a Subagent (its item names the child Turn)
    parallel <n> <name> <json> n calls at once; waits for all their results
    abandon <name> <json>      a function call the harness abandons before any result
    wait [seconds]             wait for steering input (its lines run as more steps) or cancellation
    sleep <seconds>            work silently (heartbeats continue)
    fail                       the Turn fails

Receipts are sent only for results actually applied. Items say they come from the scripted harness.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Optional

Emit = Callable[[dict[str, Any]], None]


class Cancelled(Exception):
    pass


def _new(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def script_lines(items: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for item in items:
        for part in item.get("content", []):
            if part.get("type") == "input_text":
                lines += [line.strip() for line in part["text"].splitlines() if line.strip()]
    return lines


class TurnRunner:
    """Runs one Turn in its own thread; `deliver` feeds it Core's turn.* messages."""

    def __init__(self, start: dict[str, Any], send: Emit, heartbeat_seconds: float = 5.0):
        self.start_message = start
        self.route = {k: start[k] for k in ("tenant", "session_id", "turn_id")}
        self.send_raw = send
        self.seq = 0
        self.inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self.results: dict[str, dict[str, Any]] = {}
        self.cancelled = threading.Event()
        self.done = threading.Event()
        self.heartbeat_seconds = heartbeat_seconds
        self.steps = script_lines(start.get("input", []))
        self.schema = (start.get("execution_controls") or {}).get("output_format", {}).get("schema")
        self._lock = threading.Lock()

    # -- Core -> Runtime ---------------------------------------------------------------------------
    def deliver(self, message: dict[str, Any]) -> None:
        if message.get("type") == "turn.cancel":
            self.cancelled.set()
        self.inbox.put(message)

    # -- Runtime -> Core ---------------------------------------------------------------------------
    def emit(self, action: str, **fields: Any) -> None:
        with self._lock:
            self.seq += 1
            self.send_raw({"action": action, **self.route, "seq": self.seq, **fields})

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name=f"turn-{self.route['turn_id']}", daemon=True)
        thread.start()
        threading.Thread(target=self._heartbeats, daemon=True).start()
        return thread

    def _heartbeats(self) -> None:
        while not self.done.wait(self.heartbeat_seconds):
            self.emit("turn.heartbeat")

    def _run(self) -> None:
        try:
            self._execute()
        except Cancelled:
            self.emit("turn.cancelled")
        except Exception as exc:  # noqa: BLE001 - any harness failure fails the Turn
            self.emit("turn.failed", error={"message": str(exc)[:200]})
        finally:
            self.done.set()

    def _execute(self) -> None:
        says = [i for i, s in enumerate(self.steps) if s.split(" ", 1)[0] == "say"]
        has_answer = any(s.split(" ", 1)[0] == "answer" for s in self.steps)
        last_say = says[-1] if says and not has_answer else None
        index = 0
        while index < len(self.steps):
            self._check_cancel()
            step = self.steps[index]
            verb, _, rest = step.partition(" ")
            if verb == "say":
                self._message(rest, "final_answer" if index == last_say else "commentary")
            elif verb == "answer":
                self._message(rest, "final_answer")
            elif verb == "call":
                self._call(rest)
            elif verb == "subagent":
                self._call(rest.removeprefix("call ").strip(), child=_new("turn"))
            elif verb == "parallel":
                count, _, call = rest.partition(" ")
                self._parallel(int(count), call)
            elif verb == "abandon":
                self._call(rest, abandon=True)
            elif verb == "wait":
                self.steps[index + 1:index + 1] = self._wait(float(rest or 30))
            elif verb == "sleep":
                self._sleep(float(rest or 1))
            elif verb == "fail":
                self.emit("turn.failed", error={"message": "The script asked the Turn to fail."})
                return
            else:
                self._message(f"scripted harness: unknown step {step!r}", "commentary")
            index += 1
        self.emit("turn.completed")

    def _check_cancel(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled()

    def emit_batch(self, observations: list[tuple[str, dict[str, Any]]]) -> None:
        """Several observations of this Turn in one message (Core applies them in one commit)."""
        with self._lock:
            batch = []
            for action, fields in observations:
                self.seq += 1
                batch.append({"action": action, "seq": self.seq, **fields})
            self.send_raw({"action": "turn.batch", **self.route, "observations": batch})

    def _message(self, text: str, phase: str) -> None:
        item_id = _new("msg")
        self.emit_batch([
            ("turn.item.added", {"item": {"id": item_id, "type": "message", "role": "assistant", "phase": phase,
                                          "status": "in_progress", "content": []}}),
            ("turn.output_text.delta", {"item_id": item_id, "content_index": 0, "delta": text}),  # the whole text
            ("turn.item.done", {"item": {"id": item_id, "type": "message", "role": "assistant", "phase": phase,
                                         "status": "completed", "content": [{"type": "output_text", "text": text}]}}),
        ])

    def _call(self, rest: str, child: Optional[str] = None, abandon: bool = False) -> None:
        name, _, raw = rest.partition(" ")
        arguments = json.loads(raw) if raw.strip() else {}
        call_id = _new("call")
        fields: dict[str, Any] = {"call_id": call_id, "name": name, "arguments": arguments, "item_id": call_id}
        if child:
            fields["child_turn_id"] = child
        self.emit("turn.function_call", **fields)
        if abandon:
            time.sleep(0.05)
            self.emit("turn.call.abandoned", call_id=call_id)
            return
        while True:
            message = self._next()
            if message.get("type") == "turn.tool_result" and message.get("call_id") == call_id:
                self.results[call_id] = message["result"]  # applied to the live Turn that made the call
                self.emit("turn.tool_result.applied", call_id=call_id)
                return
            if message.get("type") == "turn.input":
                self.steps += script_lines([message.get("item", {})])

    def _parallel(self, count: int, rest: str) -> None:
        name, _, raw = rest.partition(" ")
        arguments = json.loads(raw) if raw.strip() else {}
        waiting = set()
        for _ in range(count):
            call_id = _new("call")
            waiting.add(call_id)
            self.emit("turn.function_call", call_id=call_id, name=name, arguments=arguments, item_id=call_id)
        while waiting:
            message = self._next()
            if message.get("type") == "turn.tool_result" and message.get("call_id") in waiting:
                waiting.discard(message["call_id"])
                self.results[message["call_id"]] = message["result"]
                self.emit("turn.tool_result.applied", call_id=message["call_id"])

    def _next(self, timeout: Optional[float] = None) -> dict[str, Any]:
        deadline = None if timeout is None else time.time() + timeout
        while True:
            self._check_cancel()
            remaining = 0.2 if deadline is None else max(0.0, min(0.2, deadline - time.time()))
            try:
                message = self.inbox.get(timeout=remaining)
            except queue.Empty:
                if deadline is not None and time.time() >= deadline:
                    return {}
                continue
            if message.get("type") == "turn.cancel":
                raise Cancelled()
            return message

    def _wait(self, seconds: float) -> list[str]:
        message = self._next(timeout=seconds)
        if message.get("type") == "turn.input":
            return script_lines([message.get("item", {})])
        return []

    def _sleep(self, seconds: float) -> None:
        end = time.time() + seconds
        while time.time() < end:
            self._check_cancel()
            time.sleep(min(0.1, end - time.time()) if end > time.time() else 0)


class ScriptedRuntime:
    """Routes Core's messages to Turn runners; transport-agnostic (`send` posts one message)."""

    def __init__(self, send: Emit, heartbeat_seconds: float = 5.0):
        self.send = send
        self.heartbeat_seconds = heartbeat_seconds
        self.turns: dict[str, TurnRunner] = {}
        self.errors: list[dict[str, Any]] = []
        self.welcomed = threading.Event()

    def on_message(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "runtime.welcome":
            self.welcomed.set()
        elif kind == "turn.start":
            if message["turn_id"] in self.turns:
                return  # a redelivered start (the Dispatch task retried): the Turn runs once
            runner = TurnRunner(message, self.send, self.heartbeat_seconds)
            self.turns[message["turn_id"]] = runner
            runner.start()
        elif kind in ("turn.input", "turn.tool_result", "turn.cancel"):
            runner = self.turns.get(message.get("turn_id", ""))
            if runner is not None and not runner.done.is_set():
                runner.deliver(message)
        elif kind == "error":
            self.errors.append(message)
