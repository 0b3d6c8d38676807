"""The Claude Code driver: one `ClaudeSDKClient` (PyPI `claude-agent-sdk`, which bundles the native Claude
Code CLI) per Session (session.py), its Turns mapped to the Runtime protocol here.

- The Session's functions are served by our own `mcp.server.Server` under the label `functions`
  (`functions.py`): eager definitions `anthropic/alwaysLoad: true`, deferred ones `false`; with tool
  search declared, `ENABLE_TOOL_SEARCH=true` and ToolSearch allowed. A native call reaches the server with
  `_meta["claudecode/toolUseId"]`: the function call observation's call_id is that native tool-use id, and
  the admitted result resolves the awaiting handler unchanged.
- The receipt is sent only when the matching native tool result appears in the live Turn after the
  handler returned our answer. An interrupt cancels the handler and Claude Code synthesizes an error
  result: an abandonment, never a receipt.
- Structured output goes through `output_format`; the CLI adds its native StructuredOutput terminal tool.
  "The adapter publishes the native result.result string unchanged as a completed final_answer message
  with the native tool-use ID; parent assistant prose keeps its own ID ... a missing structured call
  fails the result." `structured_output` is never serialized back to JSON.
- Steering is a mid-turn query, cancel is `interrupt()`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pathlib
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from agents_contract.protocol import (
    TURN_CANCELLED,
    TURN_COMPLETED,
    TURN_FAILED,
    TURN_FUNCTION_CALL,
    TURN_ITEM_ADDED,
    TURN_ITEM_DONE,
    TURN_SUBAGENT_CLOSED,
    TURN_SUBAGENT_OPENED,
    TURN_SUBAGENT_TURN_ENDED,
    TURN_SUBAGENT_TURN_STARTED,
)

from ...protocol import TurnChannel, assistant_message
from ..common import output_schema, tools_of
from ..native import (
    DEFAULT_MAX_WARM,
    HarnessUnavailable,
    NativeDriver,
    NativeTurn,
    executable,
    mcp_call,
    version_output,
)
from . import config as adapter
from .session import ClaudeSession, Provider

log = logging.getLogger("runtime.claude_code")

STRUCTURED_OUTPUT = "StructuredOutput"
FUNCTION_PREFIX = f"mcp__{adapter.FUNCTIONS_SERVER}__"


class ClaudeCodeUnavailable(HarnessUnavailable):
    """The Claude Agent SDK or its bundled CLI is missing or does not run: a Runtime start error."""


def find_claude(explicit: Optional[str] = None) -> str:
    """The CLI bundled in PyPI `claude-agent-sdk`, or an explicit path / $CLAUDE_CODE_BIN."""
    candidate = explicit or os.environ.get("CLAUDE_CODE_BIN")
    if not candidate:
        try:
            import claude_agent_sdk
        except ImportError as exc:
            raise ClaudeCodeUnavailable(
                "The Claude Agent SDK is not installed: `pip install claude-agent-sdk==0.2.189` "
                f"(make test installs it), or set CLAUDE_CODE_BIN. ({exc})") from None
        candidate = str(pathlib.Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude")
    return executable(candidate, "Claude Code", ClaudeCodeUnavailable)


def claude_version(binary: str) -> str:
    return version_output(binary, "Claude Code", ClaudeCodeUnavailable).split()[0]  # "2.1.332 (Claude Code)"


def query_message(items: list[dict[str, Any]]) -> Any:
    """The Turn's user message Items as one native user message: a string when only text."""
    blocks: list[dict[str, Any]] = []
    for item in items:
        for part in item.get("content") or []:
            if part.get("type") == "input_text":
                blocks.append({"type": "text", "text": part["text"]})
            elif part.get("type") == "input_image":
                image = _image_block(part.get("image_url") or "")
                if image is not None:
                    blocks.append(image)
    if all(b["type"] == "text" for b in blocks):
        return "\n".join(b["text"] for b in blocks)
    return blocks


def _image_block(url: str) -> Optional[dict[str, Any]]:
    if url.startswith("data:") and ";base64," in url:
        mime, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}
    if url.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    return None


class ClaudeCodeDriver(NativeDriver):
    harness, title = "claude_code", "Claude Code"
    stop_seconds = 20.0

    def __init__(self, provider: Provider, state_dir: str, binary: Optional[str] = None,
                 idle_seconds: float = 600.0, client_factory: Any = None, max_warm: int = DEFAULT_MAX_WARM):
        found = find_claude(binary)
        self._setup(found, claude_version(found), provider, state_dir, idle_seconds, max_warm)
        self.session_class, self.turn_class = ClaudeSession, ClaudeTurn
        self.client_factory = client_factory  # injectable: tests pass a recorded exchange

    async def stop_sessions(self) -> None:
        for session in self.sessions.values():
            if session.current is not None:
                session.current.finished.set()  # Core fails claimed Turns when the Runtime goes
        await super().stop_sessions()
        await asyncio.sleep(0)


@dataclass
class _Call:
    name: str
    future: asyncio.Future[dict[str, Any]]
    answer: Optional[dict[str, Any]] = None  # the admitted result the handler returned
    settled: bool = False


@dataclass
class _Text:
    item_id: str
    text: str


@dataclass
class _Structured:
    """StructuredOutput calls of this Turn: only a validated one (successful native result) counts."""

    candidates: list[str] = field(default_factory=list)
    validated: Optional[str] = None


class ClaudeTurn(NativeTurn):
    session: ClaudeSession

    def __init__(self, session: ClaudeSession, start: dict[str, Any], channel: TurnChannel):
        super().__init__(session, start, channel)
        self.schema = output_schema(start)
        self.calls: dict[str, _Call] = {}
        self.tool_uses: dict[str, str] = {}  # native tool-use id -> tool name, for ids the handler lacks
        self.mcp_uses: dict[str, dict[str, Any]] = {}  # a declared MCP server's tool use -> its mcp_call Item
        self.held: Optional[_Text] = None  # assistant prose whose phase is known once something follows
        self.structured = _Structured()
        self.texts_in: dict[str, int] = {}
        self.sent: list[str] = []  # uuids of the native user messages this Turn sent
        self.taken: set[str] = set()  # ... and those the native results took in
        self.querying = False  # the first query went out
        # Subagents (the Agent tool): the spawning tool-use id -> {"task": task id, "turn": minted child turn id};
        # Claude Code has no child turn id, so one is minted per child task.
        self.tasks: dict[str, dict[str, str]] = {}
        self.child_uses: dict[str, str] = {}  # a child's tool-use id -> the spawning tool-use id
        # A background child (the Agent tool's default) outlives the native turn that spawned it; Claude Code
        # then starts a native turn of its own when the child finishes. The Turn stays open through it.
        self.background = False

    # -- the Turn --------------------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self.querying

    async def _begin(self, client: Any) -> None:
        await self._query(client, query_message(self.start.get("input") or []))
        self.querying = True

    async def _send_early(self, client: Any, item: dict[str, Any]) -> None:
        await self._query(client, query_message([item]))

    async def _query(self, client: Any, content: Any) -> None:
        """One native user message with its own uuid: results name the uuids they took in, so the Turn
        ends with the result that took in all of its input (a steered message Claude Code could not fold
        into the running native turn starts another, still this Turn)."""
        message_uuid = str(uuid.uuid4())
        self.sent.append(message_uuid)

        async def one() -> Any:
            yield {"type": "user", "message": {"role": "user", "content": content}, "parent_tool_use_id": None,
                   "uuid": message_uuid}
        await client.query(one())

    async def _answer(self, call_id: str, result: dict[str, Any]) -> None:
        call = self.calls.get(call_id)
        if call is None or call.future.done():
            return  # unknown here, or a redelivered result: a no-op
        call.future.set_result(result)

    async def _steer_now(self, item: dict[str, Any]) -> None:
        client = self.session.client
        if self.done or client is None:
            return
        await self._query(client, query_message([item]))

    async def _interrupt(self) -> None:
        client = self.session.client
        if client is not None and not self.done:
            try:
                await client.interrupt()
            except Exception as exc:  # noqa: BLE001
                log.warning("interrupt failed: %s", exc)

    # -- the functions server (on the driver's loop) -----------------------------------------------------
    async def on_tool_call(self, tool_use_id: Optional[str], name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        call_id = tool_use_id or self._unserved(name)
        child = self._child_of(call_id)
        fields = {"child_turn_id": child} if child else {}
        if not child:
            self._release("commentary")
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        call = self.calls[call_id] = _Call(name, future)
        self.channel.emit(TURN_FUNCTION_CALL, call_id=call_id, name=name, arguments=arguments, item_id=call_id,
                          **fields)
        result = await future  # cancelled by an interrupt: Claude Code synthesizes an error result
        call.answer = result
        return result

    def _child_of(self, tool_use_id: str) -> Optional[str]:
        """The child turn a call belongs to: its tool use appeared in a child's message (parent_tool_use_id
        = the Agent call); one the root never made, while exactly one child runs, is that child's."""
        spawn = self.child_uses.get(tool_use_id)
        if spawn is None and tool_use_id not in self.tool_uses and len(self.tasks) == 1:
            spawn = next(iter(self.tasks))
        task = self.tasks.get(spawn) if spawn else None
        return task["turn"] if task else None

    # -- Subagents ---------------------------------------------------------------------------------------
    def _task(self, message: Any) -> None:
        from claude_agent_sdk import TaskNotificationMessage, TaskStartedMessage, TaskUpdatedMessage

        if isinstance(message, TaskStartedMessage):
            spawn = message.tool_use_id
            if not spawn or spawn in self.tasks:
                return
            child_turn = f"{message.task_id}-turn-1"
            self.tasks[spawn] = {"task": message.task_id, "turn": child_turn}
            prompt = (message.data or {}).get("prompt")
            opened = {"subagent_id": message.task_id, "name": message.description or None}
            if isinstance(prompt, str):
                opened["instructions"] = prompt
            self.channel.emit_batch([(TURN_SUBAGENT_OPENED, opened),
                                     (TURN_SUBAGENT_TURN_STARTED, {"subagent_id": message.task_id,
                                                                     "child_turn_id": child_turn})])
            return
        status = message.status if isinstance(message, (TaskNotificationMessage, TaskUpdatedMessage)) else None
        if status not in ("completed", "failed", "stopped", "killed"):
            return
        for spawn, task in list(self.tasks.items()):
            if task["task"] == message.task_id:
                del self.tasks[spawn]
                ended = {"completed": "completed", "failed": "failed"}.get(status, "cancelled")
                self.channel.emit_batch([(TURN_SUBAGENT_TURN_ENDED, {"child_turn_id": task["turn"], "status": ended}),
                                         (TURN_SUBAGENT_CLOSED, {"subagent_id": task["task"]})])

    def _child_assistant(self, message: Any) -> None:
        """A child's message (parent_tool_use_id = the Agent call): its text is the child's, its tool uses
        name the child turn their calls belong to."""
        from claude_agent_sdk import TextBlock, ToolUseBlock

        task = self.tasks.get(message.parent_tool_use_id)
        if task is None:
            return
        native_id = message.message_id or f"msg_{uuid.uuid4().hex[:24]}"
        for index, block in enumerate(message.content):
            if isinstance(block, ToolUseBlock):
                self.child_uses[block.id] = message.parent_tool_use_id
                self._mcp_started(block, task["turn"])
            elif isinstance(block, TextBlock) and block.text:
                item_id = native_id if index == 0 else f"{native_id}_{index}"
                self.child_message(task["turn"], item_id, "commentary", block.text)

    def _unserved(self, name: str) -> str:
        for tool_use_id, native in reversed(list(self.tool_uses.items())):
            if native == FUNCTION_PREFIX + name and tool_use_id not in self.calls:
                return tool_use_id
        return f"toolu_{uuid.uuid4().hex[:24]}"

    # -- Harness -> Core (on the driver's loop) ----------------------------------------------------------
    def on_message(self, message: Any) -> None:
        from claude_agent_sdk import AssistantMessage, ResultMessage, SystemMessage, UserMessage

        if isinstance(message, SystemMessage):
            if message.subtype == "init":
                self.session.save(str(message.data.get("session_id") or ""))
            elif message.subtype in ("task_started", "task_notification", "task_updated"):
                self._task(message)
        elif isinstance(message, AssistantMessage):
            if message.parent_tool_use_id is None:
                self._assistant(message)
            else:
                self._child_assistant(message)
        elif isinstance(message, UserMessage):
            if isinstance(message.content, list):  # a Subagent's result of a caller function counts too
                self._tool_results(message.content)
        elif isinstance(message, ResultMessage):
            self.session.save(message.session_id)
            self._result(message)

    def _assistant(self, message: Any) -> None:
        from claude_agent_sdk import TextBlock, ToolUseBlock

        if message.error:  # a synthetic message carrying the provider's error: the result reports it
            self.last_error = " ".join(b.text for b in message.content if isinstance(b, TextBlock)) or message.error
            return
        native_id = message.message_id or f"msg_{uuid.uuid4().hex[:24]}"
        for block in message.content:
            if isinstance(block, TextBlock):
                if not block.text:
                    continue
                self._release("commentary")
                count = self.texts_in.get(native_id, 0)
                self.texts_in[native_id] = count + 1
                self.held = _Text(native_id if count == 0 else f"{native_id}_{count}", block.text)
            elif isinstance(block, ToolUseBlock):
                self._release("commentary")
                self.tool_uses[block.id] = block.name
                self._mcp_started(block)
                if block.name == STRUCTURED_OUTPUT:
                    self.structured.candidates.append(block.id)

    def _tool_results(self, blocks: list[Any]) -> None:
        from claude_agent_sdk import ToolResultBlock

        for block in blocks:
            if not isinstance(block, ToolResultBlock):
                continue
            if block.tool_use_id in self.mcp_uses:
                self._mcp_done(block)
                continue
            if block.tool_use_id in self.structured.candidates:
                if not block.is_error:  # validated by the CLI against the schema
                    self.structured.validated = block.tool_use_id
                continue
            call = self.calls.get(block.tool_use_id)
            if call is None or call.settled:
                continue
            call.settled = True
            # The receipt: the native result appeared after the handler returned the admitted result,
            # and is not the error Claude Code synthesizes for an interrupted call.
            answered = call.answer is not None and bool(block.is_error) == (not call.answer.get("success", True))
            self.receipt(block.tool_use_id, answered)

    def _mcp_started(self, block: Any, child_turn: Optional[str] = None) -> None:
        """A call of a declared MCP server's tool (`mcp__LABEL__TOOL`, split on the declared label, not on
        `__`) is a public mcp_call Item with the original server and tool names."""
        labels = [t["server_label"] for t in tools_of(self.start, "mcp")]
        label = max((x for x in labels if block.name.startswith(f"mcp__{x}__")), key=len, default=None)
        if label is None:
            return
        item = mcp_call(block.id, label, block.name[len(f"mcp__{label}__"):], block.input)
        self.mcp_uses[block.id] = item
        if child_turn:  # a Subagent's MCP call is an mcp_call Item in the child's history
            self.channel.emit(TURN_ITEM_ADDED, item=dict(item), child_turn_id=child_turn)
            return
        self.channel.emit(TURN_ITEM_ADDED, item=dict(item))

    def _mcp_done(self, block: Any) -> None:
        """The observed native result: an error result (isError, a server that failed) is `failed` with
        the tool's text as the error."""
        item = self.mcp_uses.pop(block.tool_use_id)
        if block.is_error:
            content = block.content
            text = content if isinstance(content, str) else " ".join(
                str(part.get("text", "")) for part in content or [] if isinstance(part, dict))
            item.update(status="failed", error=text or "The MCP tool call failed.")
        else:
            item.update(status="completed", output=block.content)
        self.channel.emit(TURN_ITEM_DONE, item=item)

    def _release(self, phase: str) -> None:
        if self.held is not None:
            held, self.held = self.held, None
            self._message(held.item_id, held.text, phase)

    def _message(self, item_id: str, text: str, phase: str) -> None:
        """A whole assistant message as item.added and item.done, no delta of ours: Core publishes the official
        sequence with "the whole text in one output_text.delta" whatever its size (a delta observation would be
        split past 32,000 bytes)."""
        self.channel.emit_batch([
            (TURN_ITEM_ADDED, {"item": assistant_message(item_id, phase, "in_progress", None)}),
            (TURN_ITEM_DONE, {"item": assistant_message(item_id, phase, "completed", text)})])

    def _result(self, message: Any) -> None:
        taken = set(message.user_message_uuids or ([message.user_message_uuid] if message.user_message_uuid else []))
        if taken and self.sent and not taken & set(self.sent) and not self.background:
            log.info("a native result of an earlier Turn arrived late: ignored")
            return
        self.taken |= taken
        if self.tasks and not self.cancel_requested and not message.is_error:
            # Children still run in the background: the native turn Claude Code starts when they finish
            # (taking in their notification) is still this Turn's.
            self.background = True
            self._release("commentary")
            return
        if taken and not self.cancel_requested and not message.is_error and not set(self.sent) <= self.taken:
            self._release("commentary")  # steered input still to answer: the Turn goes on
            return
        for call_id, call in self.calls.items():  # calls the native Turn ended without a result
            if not call.settled:
                call.settled = True
                self.abandon(call_id)
        if self.cancel_requested:
            self._release("commentary")
            self.channel.finish(TURN_CANCELLED)
        elif message.is_error or message.subtype != "success":
            self._release("commentary")
            reason = message.result or "; ".join(message.errors or []) or self.last_error or \
                f"Claude Code ended the Turn: {message.subtype}."
            self.channel.finish(TURN_FAILED, error={"message": str(reason)[:400]})
        elif self.schema is not None:
            self._release("commentary")  # parent assistant prose keeps its own id
            answer_id = self.structured.validated
            if answer_id is None or message.result is None:
                self.channel.finish(TURN_FAILED, error={
                    "message": "Claude Code ended the Turn without the structured output the schema requires."})
            else:
                with self.channel.together():  # the answer and the end: one message, one commit in Core
                    self._message(answer_id, message.result, "final_answer")  # result.result, unchanged
                    self.channel.finish(TURN_COMPLETED)
        else:
            with self.channel.together():  # the held answer and the end: one message, one commit in Core
                self._release("final_answer")
                self.channel.finish(TURN_COMPLETED)
        self.finished.set()

