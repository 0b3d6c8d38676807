"""The Anthropic Messages dialect (`POST /v1/messages?beta=true`, streamed as SSE), which Claude Code speaks.

Events: `message_start`; per content block `content_block_start` (`text` or `tool_use`), `content_block_delta`
(`text_delta` or `input_json_delta`), `content_block_stop`; `message_delta` with `stop_reason` (`tool_use` /
`end_turn`) and `usage`; `message_stop`. `fail` answers HTTP 400 with an error body.

The script maps onto Claude Code's tools:
- `call NAME {json}` is a `tool_use` of the declared function (Claude Code names it `mcp__functions__NAME`);
  when only a deferred placeholder was offered, the model first calls `ToolSearch` with `select:<tool>`, as a
  real model does, and calls the function once its definition has loaded.
- `answer TEXT` calls the native `StructuredOutput` tool with TEXT's JSON document when that tool is offered,
  and is plain text otherwise.
Claude Code appends "\\n" to a text tool result and adds system-reminder blocks and notes of its own; a
steered message arrives inside a tool result ("The user sent a new message while you were working: ...").
A user message that got no assistant reply (the provider failed) is kept, and Claude Code appends the next
message to it as more content blocks. So the script is the last text block the caller sent (a steered
message included), never a reminder or note, and never an earlier block of the same message.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from . import script

if TYPE_CHECKING:
    from . import _Handler

VERBS = ("say", "answer", "call", "mcp", "parallel", "sleep", "fail", "spawn", "wait", "write", "read")
TOOL_SEARCH = "ToolSearch"
STRUCTURED_OUTPUT = "StructuredOutput"
AGENT = "Agent"  # Claude Code's subagent tool
STEERED = re.compile(r"The user sent (?:a )?new message[^:\n]*:\n(.*?)"
                     r"(?:\n\nThis is how Claude Code surfaces.*|\s*</system-reminder>\s*)?$", re.S)


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]


def _script_text(text: str) -> Optional[str]:
    """The script in a user text, or None for text Claude Code adds itself (system reminders, commands)."""
    steered = STEERED.search(text.strip())
    if steered:
        return steered.group(1).strip()
    return script.caller_text(text)


@dataclass
class State:
    """Where the conversation stands for the latest script."""

    script: str = ""
    outputs: int = 0  # caller function results that came back after it
    searches: int = 0  # ToolSearch results since the last function result
    structured: bool = False  # a successful StructuredOutput result came back after it
    last_output: str = ""  # the newest caller function result's text (a `read` step answers it)


def conversation_state(body: dict[str, Any]) -> State:
    names: dict[str, str] = {}
    state = State()
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        blocks = _blocks(message)
        if message.get("role") == "assistant":
            for block in blocks:
                if block.get("type") == "tool_use":
                    names[str(block.get("id"))] = str(block.get("name"))
            continue
        if message.get("role") != "user":
            continue  # Claude Code also sends its environment as a system-role message
        results = any(block.get("type") == "tool_result" for block in blocks)
        for block in blocks:
            if block.get("type") == "tool_result":
                name = names.get(str(block.get("tool_use_id")), "")
                if name == TOOL_SEARCH:
                    state.searches += 1
                elif name == STRUCTURED_OUTPUT:
                    state.structured = state.structured or not block.get("is_error")
                else:
                    state.outputs, state.searches = state.outputs + 1, 0
                    state.last_output = "\n".join(_texts(block.get("content")))
                for text in _texts(block.get("content")):
                    found = STEERED.search(text)
                    if found:  # steering joined the running Turn inside this result
                        state = State(found.group(1).strip())
            elif block.get("type") == "text":
                found_script = _script_text(block.get("text", ""))
                own_note = results and not STEERED.search(block.get("text", ""))
                if found_script is not None and own_note and found_script.split(" ", 1)[0] not in VERBS:
                    continue  # beside a tool result, a note of Claude Code's own that no prefix names
                if found_script is not None:
                    state = State(found_script)  # a later block of the same message is newer input
    return state


def _offered(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(t.get("name")): t for t in body.get("tools") or [] if isinstance(t, dict)}


def _loaded(tool: Optional[dict[str, Any]]) -> bool:
    """A full definition the model may call (a deferred one is listed once ToolSearch loaded it)."""
    return tool is not None and "input_schema" in tool


def _resolve(name: str, tools: dict[str, dict[str, Any]]) -> tuple[str, bool]:
    """(the native tool name for a scripted function name, whether its definition is loaded)."""
    for native in (name, f"mcp__functions__{name}"):
        if native in tools:
            return native, _loaded(tools[native])
    for native in tools:
        if native.endswith(f"__{name}"):
            return native, _loaded(tools[native])
    return f"mcp__functions__{name}", False  # deferred: known only by name, in a system reminder


def plan_blocks(body: dict[str, Any]) -> tuple[script.Response, list[dict[str, Any]], str]:
    """(the script's response, the content blocks to answer with, the stop reason)."""
    state = conversation_state(body)
    # `wait NAME` is nothing here: the Agent call of `spawn` already waited for the child
    plan = script.next_response([s for s in script.parse(state.script) if s.verb != "wait"], state.outputs,
                                state.last_output)
    tools = _offered(body)
    blocks: list[dict[str, Any]] = []
    texts = list(plan.texts)
    if plan.answered and STRUCTURED_OUTPUT in tools and not plan.calls:
        if state.structured:
            return plan, [], "end_turn"  # the terminal tool ran: the Turn ends with no more text
        document = texts.pop()  # the `answer` step is the last text of a response without calls
        blocks += [{"type": "text", "text": t} for t in texts]
        blocks.append(_tool_use(STRUCTURED_OUTPUT, json.loads(document)))
        return plan, blocks, "tool_use"
    if state.searches:
        texts = []  # said before the ToolSearch call that loaded the function
    blocks += [{"type": "text", "text": t} for t in texts]
    if not plan.calls:
        return plan, blocks, "end_turn"
    # an `mcp` step: Claude Code names a server's tool mcp__LABEL__TOOL
    natives = [(f"mcp__{call.server}__{call.name}", True) if call.server else ("Bash", True) if call.command_line
               else _resolve(call.name, tools) for call in plan.calls]
    natives = [(AGENT, True) if call.verb == "spawn" else native for call, native in zip(plan.calls, natives,
                                                                                        strict=True)]
    unloaded = sorted({native for native, loaded in natives if not loaded})
    if unloaded and TOOL_SEARCH in tools and state.searches == 0:
        blocks.append(_tool_use(TOOL_SEARCH, {"query": "select:" + ",".join(unloaded), "max_results": 5}))
        return plan, blocks, "tool_use"
    for call, (native, _) in zip(plan.calls, natives, strict=True):
        arguments = call.arguments
        if call.verb == "spawn":
            arguments = _agent_input(call)
        elif call.command_line:  # a `write`/`read` step: Claude Code's own Bash tool
            arguments = json.dumps({"command": call.command_line})
        blocks.append(_tool_use(native, json.loads(arguments), arguments))
    return plan, blocks, "tool_use"


def _agent_input(call: script.Step) -> str:
    """Claude Code's Agent tool for `spawn NAME`: a synchronous general-purpose child whose prompt is its script
    (a real model's default, run_in_background, would return before the child finished)."""
    return json.dumps({"description": call.name, "prompt": call.script, "subagent_type": "general-purpose",
                       "run_in_background": False})


def _tool_use(name: str, arguments: Any, raw: Optional[str] = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": name, "input": arguments,
            "raw": raw if raw is not None else json.dumps(arguments)}


def answer(handler: _Handler, body: dict[str, Any]) -> None:
    plan, blocks, stop_reason = plan_blocks(body)
    if plan.sleep:
        time.sleep(plan.sleep)
    if plan.fail is not None:
        handler.error(400, plan.fail)
        return
    model = body.get("model", "scripted")
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    handler.start_sse()
    handler.event("message_start", {"type": "message_start", "message": {
        "id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}})
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            handler.event("content_block_start", {"type": "content_block_start", "index": index,
                                                  "content_block": {"type": "text", "text": ""}})
            handler.event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                  "delta": {"type": "text_delta", "text": block["text"]}})
        else:
            handler.event("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})
            handler.event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                  "delta": {"type": "input_json_delta", "partial_json": block["raw"]}})
        handler.event("content_block_stop", {"type": "content_block_stop", "index": index})
    handler.event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop_reason,
                                                                       "stop_sequence": None},
                                    "usage": {"output_tokens": 5}})
    handler.event("message_stop", {"type": "message_stop"})
