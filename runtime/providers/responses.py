"""The OpenAI Responses API dialect (`POST /v1/responses`, streamed as SSE), which Codex speaks.

Events: `response.created`; per output item `response.output_item.added`, `response.output_text.delta`
(text), `response.output_item.done` (a `function_call` item has `call_id`, `name`, `arguments`);
`response.completed` with `usage`. `fail` answers HTTP 400 with an error body.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import TYPE_CHECKING, Any

from . import script

if TYPE_CHECKING:
    from . import _Handler

def _text(item: dict[str, Any]) -> str:
    """What the caller wrote in a user message: its text parts, less any a Harness wrote itself."""
    content = item.get("content")
    parts = [content] if isinstance(content, str) else [
        p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") in ("input_text", "text")]
    return "\n".join(text for text in parts if script.caller_text(text) is not None)


def conversation_state(body: dict[str, Any]) -> tuple[str, int]:
    """(the newest user input's text, how many function outputs came back after it).

    Codex sends each Turn's message as a user item of its own, after any that got no reply (a provider
    failure), and its context fragments (<environment_context>, a finished subagent's
    <subagent_notification>, ...) as user items or parts too: those are never the script."""
    items = body.get("input")
    if isinstance(items, str):
        return items, 0
    latest, outputs = "", 0
    for item in items or []:
        if not isinstance(item, dict):
            continue
        if item.get("type", "message") == "message" and item.get("role") == "user":
            text = _text(item)
            if text.strip():
                latest, outputs = text, 0
        elif item.get("type") in ("function_call_output", "custom_tool_call_output", "mcp_call_output"):
            outputs += 1
    return latest, outputs


SUBAGENTS = "multi_agent_v1"  # Codex's subagent tools (the verified v1 namespace)


def _spawned_agent(body: dict[str, Any], child_script: str) -> str:
    """The agent id Codex answered the spawn of `child_script` with (its spawn_agent output)."""
    calls: dict[str, str] = {}
    for item in body.get("input") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call" and item.get("name") == "spawn_agent":
            try:
                if json.loads(item.get("arguments") or "{}").get("message") == child_script:
                    calls[str(item.get("call_id"))] = ""
            except ValueError:
                continue
        elif item.get("type") == "function_call_output" and str(item.get("call_id")) in calls:
            output = item.get("output")
            text = output if isinstance(output, str) else json.dumps(output)
            found = re.search(r'"agent_id"\s*:\s*"([^"]+)"', text)
            if found:
                return found.group(1)
    return ""


def _call_item(call: script.Step, body: dict[str, Any]) -> dict[str, Any]:
    """A function_call output item: a declared function, an MCP tool, or a subagent tool."""
    if call.verb == "spawn":
        name, namespace = "spawn_agent", SUBAGENTS
        arguments = json.dumps({"message": call.script, "fork_context": True})
    elif call.verb == "wait":
        spawn = next((s for s in script.parse(conversation_state(body)[0]) if s.verb == "spawn"
                      and s.name == call.name), None)
        agent = _spawned_agent(body, spawn.script) if spawn else ""
        name, namespace = "wait_agent", SUBAGENTS
        arguments = json.dumps({"targets": [agent], "timeout_ms": 3600000})
    elif call.command_line:  # a `write`/`read` step: Codex's own shell tool
        name, namespace, arguments = "exec_command", None, json.dumps({"cmd": call.command_line})
    else:
        name, namespace, arguments = call.name, None, call.arguments
    item = {"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:24]}", "status": "completed",
            "call_id": f"call_{uuid.uuid4().hex[:24]}", "name": name, "arguments": arguments}
    if namespace:  # without it Codex answers `unsupported call: spawn_agent`
        item["namespace"] = namespace
    return item


def last_output(body: dict[str, Any]) -> str:
    """The newest function output's text (an exec_command output's own text after Codex's `Output:` header)."""
    found = ""
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            output = item.get("output")
            found = output if isinstance(output, str) else _text({"content": output}) if isinstance(output, list) \
                else json.dumps(output)
    head, marker, rest = found.partition("Output:\n")
    return rest if marker and "Process exited" in head or marker and "Wall time" in head else found


def answer(handler: _Handler, body: dict[str, Any]) -> None:
    text, outputs = conversation_state(body)
    plan = script.next_response(script.parse(text), outputs, last_output(body))
    if plan.sleep:
        time.sleep(plan.sleep)
    if plan.fail is not None:
        handler.error(400, plan.fail)
        return
    response_id = f"resp_{uuid.uuid4().hex[:24]}"
    model = body.get("model", "scripted")
    handler.start_sse()
    handler.event("response.created", {"type": "response.created",
                                       "response": {"id": response_id, "object": "response", "model": model,
                                                    "status": "in_progress", "output": []}})
    output: list[dict[str, Any]] = []
    for index, text in enumerate(plan.texts):
        item_id = f"msg_{uuid.uuid4().hex[:24]}"
        last = index == len(plan.texts) - 1
        phase = "final_answer" if last and not plan.calls else "commentary"
        item = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": [],
                "phase": phase}
        handler.event("response.output_item.added", {"type": "response.output_item.added",
                                                     "output_index": len(output), "item": item})
        handler.event("response.output_text.delta", {"type": "response.output_text.delta", "item_id": item_id,
                                                     "output_index": len(output), "content_index": 0,
                                                     "delta": text})
        done = {**item, "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
        handler.event("response.output_item.done", {"type": "response.output_item.done",
                                                    "output_index": len(output), "item": done})
        output.append(done)
    for call in plan.calls:
        item = _call_item(call, body)
        if call.server:  # Codex offers an MCP server's tools as the namespace `mcp__LABEL`
            item["namespace"] = f"mcp__{call.server}"
        handler.event("response.output_item.added", {"type": "response.output_item.added",
                                                     "output_index": len(output), "item": item})
        handler.event("response.output_item.done", {"type": "response.output_item.done",
                                                    "output_index": len(output), "item": item})
        output.append(item)
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
    handler.event("response.completed", {"type": "response.completed",
                                         "response": {"id": response_id, "object": "response", "model": model,
                                                      "status": "completed", "output": output, "usage": usage}})
