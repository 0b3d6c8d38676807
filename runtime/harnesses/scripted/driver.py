"""The scripted harness: a deterministic harness for demos and tests.

The user message is a tiny script, one step per line:

    say <text>                 an assistant message (the last one is the final answer)
    answer <text>              the final answer, published unchanged (structured output)
    call <name> <json>         a function call; waits for its result, applies it, sends the receipt
    subagent call <name> <json>  the same call made by a Subagent: the harness opens a Subagent, starts its
                               child Turn, makes the call there (its item names the child Turn), answers
                               in the child once the result is applied, ends the child Turn, closes it
    parallel <n> <name> <json> n calls at once; waits for all their results
    abandon <name> <json>      a function call the harness abandons before any result
    mcp <label> <tool> <json>  a call of the declared HTTP MCP server's tool, made as a real MCP client (with
                               the Session's Vault bearer); an mcp_call Item with its output or error
    wait [seconds]             wait for steering input (its lines run as more steps) or cancellation
    sleep <seconds>            work silently (heartbeats continue)
    write <path> <text>        write text (UTF-8, the rest of the line, no newline added) to a workspace file
    read <path>                an assistant message holding that workspace file's content (files.py)
    fail                       the Turn fails

Receipts are sent only for results actually applied. Items say they come from the scripted harness.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from typing import Any, Optional

from agents_contract.protocol import (
    TURN_CALL_ABANDONED,
    TURN_CANCEL,
    TURN_CANCELLED,
    TURN_COMPLETED,
    TURN_FAILED,
    TURN_FUNCTION_CALL,
    TURN_INPUT,
    TURN_ITEM_ADDED,
    TURN_ITEM_DONE,
    TURN_SUBAGENT_CLOSED,
    TURN_SUBAGENT_OPENED,
    TURN_SUBAGENT_TURN_ENDED,
    TURN_SUBAGENT_TURN_STARTED,
    TURN_TOOL_RESULT,
    TURN_TOOL_RESULT_APPLIED,
)

from ...protocol import TurnChannel, assistant_message
from .. import HarnessDriver, TurnHandle


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


class ScriptedDriver(HarnessDriver):
    """Runs every Turn of `harness` on the scripted engine (serving a native name impersonates it)."""

    engine = "scripted"

    def __init__(self, harness: str = "scripted"):
        self.harness = harness

    def start_turn(self, start: dict[str, Any], channel: TurnChannel) -> TurnRunner:
        runner = TurnRunner(start, channel)
        runner.start()
        return runner


class TurnRunner(TurnHandle):
    """Runs one Turn in its own thread; `deliver` feeds it Core's turn.* messages."""

    def __init__(self, start: dict[str, Any], channel: TurnChannel):
        self.start_message = start
        self.channel = channel
        self.inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self.results: dict[str, dict[str, Any]] = {}
        self.cancelled = threading.Event()
        self.steps = script_lines(start.get("input", []))
        self.schema = (start.get("execution_controls") or {}).get("output_format", {}).get("schema")
        self.children: dict[str, str] = {}  # open child turn -> its Subagent (the Runtime's own ids)

    # -- Core -> Runtime ---------------------------------------------------------------------------
    def deliver_result(self, call_id: str, result: dict[str, Any]) -> None:
        self.inbox.put({"type": TURN_TOOL_RESULT, "call_id": call_id, "result": result})

    def steer(self, item: dict[str, Any]) -> None:
        self.inbox.put({"type": TURN_INPUT, "item": item})

    def cancel(self) -> None:
        self.cancelled.set()
        self.inbox.put({"type": TURN_CANCEL})

    # -- Runtime -> Core ---------------------------------------------------------------------------
    def emit(self, action: str, **fields: Any) -> None:
        self.channel.emit(action, **fields)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name=f"turn-{self.channel.turn_id}", daemon=True)
        thread.start()
        self.channel.start_heartbeats()
        return thread

    def _run(self) -> None:
        try:
            self._execute()
        except Cancelled:
            for child, subagent in list(self.children.items()):  # a cancel interrupts the children first
                self.emit(TURN_SUBAGENT_TURN_ENDED, child_turn_id=child, status="cancelled")
                self.emit(TURN_SUBAGENT_CLOSED, subagent_id=subagent)
            self.channel.finish(TURN_CANCELLED)
        except Exception as exc:  # noqa: BLE001 - any harness failure fails the Turn
            self.channel.finish(TURN_FAILED, error={"message": str(exc)[:200]})
        finally:
            self.channel.done.set()

    def _check_required_servers(self) -> None:
        """A required HTTP MCP server the egress policy refuses fails the start, naming the server (an
        optional one is left to its calls, which fail as an unreachable server's do)."""
        from .mcp_client import refusal

        for tool in (self.start_message.get("agent") or {}).get("tools") or []:
            transport = tool.get("transport") or {} if tool.get("type") == "mcp" else {}
            if transport.get("type") == "http" and tool.get("required"):
                why = refusal(self.start_message, str(transport.get("server_url") or ""))
                if why is not None:
                    raise RuntimeError(f"The required MCP server '{tool.get('server_label')}' cannot be reached: "
                                       f"the egress policy refuses it ({why}).")

    def _execute(self) -> None:
        self._check_required_servers()
        says = [i for i, s in enumerate(self.steps) if s.split(" ", 1)[0] in ("say", "read")]
        has_answer = any(s.split(" ", 1)[0] == "answer" for s in self.steps)
        last_say = says[-1] if says and not has_answer else None
        index = 0
        while index < len(self.steps):
            self._check_cancel()
            step = self.steps[index]
            verb, _, rest = step.partition(" ")
            if verb in ("say", "answer") and index == len(self.steps) - 1 and (verb == "answer" or index == last_say):
                with self.channel.together():  # the final answer and the end: one message, as the native drivers
                    self._message(rest, "final_answer")
                    self.channel.finish(TURN_COMPLETED)
                return
            if verb == "say":
                self._message(rest, "final_answer" if index == last_say else "commentary")
            elif verb == "answer":
                self._message(rest, "final_answer")
            elif verb == "call":
                self._call(rest)
            elif verb == "subagent":
                self._subagent(rest.removeprefix("call ").strip())
            elif verb == "parallel":
                count, _, call = rest.partition(" ")
                self._parallel(int(count), call)
            elif verb == "abandon":
                self._call(rest, abandon=True)
            elif verb == "mcp":
                self._mcp(rest)
            elif verb == "wait":
                self.steps[index + 1:index + 1] = self._wait(float(rest or 30))
            elif verb == "sleep":
                self._sleep(float(rest or 1))
            elif verb == "fail":
                self.channel.finish(TURN_FAILED, error={"message": "The script asked the Turn to fail."})
                return
            elif verb in ("write", "read"):
                from . import files

                try:
                    if verb == "write":
                        path, _, text = rest.partition(" ")
                        files.write(self.start_message, path, text)
                    else:
                        self._message(files.read(self.start_message, rest.strip()),
                                      "final_answer" if index == last_say else "commentary")
                except files.FileStepError as exc:
                    self.channel.finish(TURN_FAILED, error={"message": str(exc)})
                    return
            else:
                self._message(f"scripted harness: unknown step {step!r}", "commentary")
            index += 1
        self.channel.finish(TURN_COMPLETED)

    def _check_cancel(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled()

    def _message(self, text: str, phase: str) -> None:
        self.channel.message(_new("msg"), text, phase)

    def _call(self, rest: str, child: Optional[str] = None, abandon: bool = False) -> None:
        name, _, raw = rest.partition(" ")
        arguments = json.loads(raw) if raw.strip() else {}
        call_id = _new("call")
        fields: dict[str, Any] = {"call_id": call_id, "name": name, "arguments": arguments, "item_id": call_id}
        if child:
            fields["child_turn_id"] = child
        self.emit(TURN_FUNCTION_CALL, **fields)
        if abandon:
            time.sleep(0.05)
            self.emit(TURN_CALL_ABANDONED, call_id=call_id)
            return
        while True:
            message = self._next()
            if message.get("type") == TURN_TOOL_RESULT and message.get("call_id") == call_id:
                self.results[call_id] = message["result"]  # applied to the live Turn that made the call
                self.emit(TURN_TOOL_RESULT_APPLIED, call_id=call_id)
                return
            if message.get("type") == TURN_INPUT:
                self.steps += script_lines([message.get("item", {})])

    def _mcp(self, rest: str) -> None:
        from .mcp_client import McpCallError, call

        label, _, rest = rest.strip().partition(" ")
        name, _, raw = rest.strip().partition(" ")
        arguments = json.loads(raw) if raw.strip() else {}
        item = {"id": _new("mcp"), "type": "mcp_call", "server_label": label, "name": name, "arguments": arguments,
                "output": None, "error": None, "status": "in_progress"}
        self.emit(TURN_ITEM_ADDED, item=dict(item))
        try:
            result = call(self.start_message, label, name, arguments)
        except McpCallError as exc:
            item.update(status="failed", error=str(exc))
        else:
            if result.get("isError"):
                text = " ".join(str(p.get("text", "")) for p in result.get("content") or [] if isinstance(p, dict))
                item.update(status="failed", error=text or "The MCP tool call failed.", output=result)
            else:
                item.update(status="completed", output=result)
        self.emit(TURN_ITEM_DONE, item=item)

    def _subagent(self, call: str) -> None:
        """A child agent that makes one call: what a native Harness reports when it spawns a child."""
        subagent, child = _new("agent"), _new("child")
        self.emit(TURN_SUBAGENT_OPENED, subagent_id=subagent, name=f"{call.partition(' ')[0]} worker",
                  instructions=f"call {call}")
        self.emit(TURN_SUBAGENT_TURN_STARTED, subagent_id=subagent, child_turn_id=child)
        self.children[child] = subagent
        self._call(call, child=child)
        item_id = _new("msg")
        self.channel.emit_batch([
            (TURN_ITEM_ADDED, {"child_turn_id": child,
                                 "item": assistant_message(item_id, "final_answer", "in_progress", None)}),
            (TURN_ITEM_DONE, {"child_turn_id": child,
                                "item": assistant_message(item_id, "final_answer", "completed", "child done")}),
            (TURN_SUBAGENT_TURN_ENDED, {"child_turn_id": child, "status": "completed"}),
            (TURN_SUBAGENT_CLOSED, {"subagent_id": subagent}),
        ])
        del self.children[child]

    def _parallel(self, count: int, rest: str) -> None:
        name, _, raw = rest.partition(" ")
        arguments = json.loads(raw) if raw.strip() else {}
        waiting = set()
        for _ in range(count):
            call_id = _new("call")
            waiting.add(call_id)
            self.emit(TURN_FUNCTION_CALL, call_id=call_id, name=name, arguments=arguments, item_id=call_id)
        while waiting:
            message = self._next()
            if message.get("type") == TURN_TOOL_RESULT and message.get("call_id") in waiting:
                waiting.discard(message["call_id"])
                self.results[message["call_id"]] = message["result"]
                self.emit(TURN_TOOL_RESULT_APPLIED, call_id=message["call_id"])

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
            if message.get("type") == TURN_CANCEL:
                raise Cancelled()
            return message

    def _wait(self, seconds: float) -> list[str]:
        message = self._next(timeout=seconds)
        if message.get("type") == TURN_INPUT:
            return script_lines([message.get("item", {})])
        return []

    def _sleep(self, seconds: float) -> None:
        end = time.time() + seconds
        while time.time() < end:
            self._check_cancel()
            time.sleep(min(0.1, end - time.time()) if end > time.time() else 0)
