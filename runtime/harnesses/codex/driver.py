"""The Codex driver: one `codex app-server` process per Session (session.py), its Turns mapped to the Runtime
protocol here.

- Application functions are `dynamicTools` (`deferLoading` from `defer_loading`). A native
  `item/tool/call` becomes the function call observation (call_id = the native callId); the admitted
  result answers that JSON-RPC request unchanged (a string -> inputText, image parts -> inputImage).
  The receipt is sent only when the matching `dynamicToolCall` item completes after our answer; a call
  that completes without our answer, or in an interrupted turn, is an abandonment, never a receipt.
- The schema goes unchanged as `outputSchema` on every root `turn/start`, resumed threads included;
  the native final agent message is published unchanged. Steering is `turn/steer`, cancel
  `turn/interrupt`.
- Subagents (`multi_agent_v1`): notifications are routed by `threadId`. A child thread is known from the
  root's `collabAgentToolCall` (`spawnAgent`, `receiverThreadIds`) or from `turn/started` with our
  `rootTurnId`; it is reported as a Subagent (the thread id is its Runtime id), its turns as child Turns,
  its messages, MCP calls and function calls with `child_turn_id`. A thread we do not know is never
  published as the root's. Cancel interrupts the open child turns first, then the root turn (interrupting
  the root alone leaves the children running).
- Native tools follow the placement (config.py): on `environment: none` every `turn/start` carries
  `environments: []`, and `model_catalog_json` points at a copy of the binary's bundled model catalog
  (`codex debug models --bundled`, read once per driver) with the Session's overrides, written once per
  variant under the driver's state directory.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import pathlib
import subprocess
import uuid
from dataclasses import dataclass
from typing import Any, Optional

from agents_contract.protocol import (
    TURN_CANCELLED,
    TURN_COMPLETED,
    TURN_FAILED,
    TURN_FUNCTION_CALL,
    TURN_ITEM_ADDED,
    TURN_ITEM_DONE,
    TURN_OUTPUT_TEXT_DELTA,
    TURN_SUBAGENT_CLOSED,
    TURN_SUBAGENT_OPENED,
    TURN_SUBAGENT_TURN_ENDED,
    TURN_SUBAGENT_TURN_STARTED,
)

from ...protocol import TurnChannel, assistant_message
from ..common import AdapterError
from ..native import (
    DEFAULT_MAX_WARM,
    HarnessUnavailable,
    NativeDriver,
    NativeTurn,
    executable,
    mcp_call,
    safe_name,
    version_output,
)
from . import config as adapter
from .config import Provider
from .rpc import JsonRpcPeer, RpcError
from .session import START_TIMEOUT, CodexSession

log = logging.getLogger("runtime.codex")


class CodexUnavailable(HarnessUnavailable):
    """The Codex binary is missing or does not run: a Runtime start error, never a hang."""


def find_codex(explicit: Optional[str] = None) -> str:
    """The pinned binary from PyPI `openai-codex-cli-bin`, or an explicit path / $CODEX_BIN."""
    candidate = explicit or os.environ.get("CODEX_BIN")
    if not candidate:
        try:
            from codex_cli_bin import bundled_codex_path

            candidate = str(bundled_codex_path())
        except (ImportError, FileNotFoundError) as exc:
            raise CodexUnavailable(
                "The Codex binary is not installed: `pip install openai-codex-cli-bin==0.163.0` "
                f"(make test installs it), or set CODEX_BIN. ({exc})") from None
    return executable(candidate, "Codex", CodexUnavailable)


def codex_version(binary: str) -> str:
    return version_output(binary, "Codex", CodexUnavailable).split()[-1]


def bundled_catalog(binary: str, home: pathlib.Path) -> tuple[Optional[dict[str, Any]], str]:
    """The model catalog shipped in the binary, or None and why not (a Session that needs it fails)."""
    try:
        out = subprocess.run([binary, "debug", "models", "--bundled"], capture_output=True, text=True,  # noqa: S603
                             timeout=30, check=True, stdin=subprocess.DEVNULL, env={**os.environ, "CODEX_HOME": str(home)})
        catalog = json.loads(out.stdout)
        if not isinstance(catalog.get("models"), list):
            raise ValueError("no models list")
    except (OSError, subprocess.SubprocessError, ValueError, AttributeError) as exc:
        return None, f"`{binary} debug models --bundled` gave no model catalog ({str(exc)[:200]})"
    return catalog, ""


def result_content(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The caller's result as native content items, unchanged: a string -> inputText, parts in order."""
    output = result.get("output")
    if output is None:
        error = result.get("error")
        return [{"type": "inputText", "text": error if isinstance(error, str) else ""}]
    if isinstance(output, str):
        return [{"type": "inputText", "text": output}]
    items: list[dict[str, Any]] = []
    for part in output:
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            items.append({"type": "inputText", "text": part.get("text", "")})
        elif kind == "input_image":
            items.append({"type": "inputImage", "imageUrl": part.get("image_url", "")})
    return items


class CodexDriver(NativeDriver):
    harness, title = "codex", "Codex"

    def __init__(self, provider: Provider, state_dir: str, binary: Optional[str] = None,
                 idle_seconds: float = 600.0, max_warm: int = DEFAULT_MAX_WARM):
        found = find_codex(binary)
        self._setup(found, codex_version(found), provider, state_dir, idle_seconds, max_warm)
        self.session_class, self.turn_class = CodexSession, CodexTurn
        home = self.state_dir / "model_catalogs" / "home"  # Codex writes helper links into any CODEX_HOME
        home.mkdir(parents=True, exist_ok=True)
        self.catalog, self.catalog_error = bundled_catalog(found, home)
        self._catalogs: dict[str, pathlib.Path] = {}  # overrides -> the file written for them

    def catalog_path(self, start: dict[str, Any]) -> Optional[str]:
        """This Session's model catalog file (written once per variant), or None when the bundled one
        serves it unchanged. A Session that needs one fails its start if the binary gave none."""
        overrides = adapter.catalog_overrides(start)
        if not overrides:
            return None
        if self.catalog is None:
            raise AdapterError(f"The Session's tool set needs Codex's model catalog: {self.catalog_error}.")
        key = json.dumps(overrides, sort_keys=True)
        path = self._catalogs.get(key)
        if path is None or not path.exists():
            text = json.dumps(adapter.model_catalog(self.catalog, overrides), sort_keys=True)
            digest = hashlib.sha256(text.encode()).hexdigest()[:16]
            path = self.state_dir / "model_catalogs" / f"{safe_name(self.version)}-{digest}.json"
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                partial = path.with_suffix(f".{os.getpid()}.tmp")
                partial.write_text(text)
                partial.replace(path)
            self._catalogs[key] = path
        return str(path)


@dataclass
class _Call:
    request_id: Any
    answer: Optional[dict[str, Any]] = None


class CodexTurn(NativeTurn):
    session: CodexSession

    def __init__(self, session: CodexSession, start: dict[str, Any], channel: TurnChannel):
        super().__init__(session, start, channel)
        self.native_turn: Optional[str] = None
        self.calls: dict[str, _Call] = {}
        self.messages: set[str] = set()  # agentMessage items announced (item.added sent)
        self.held: Optional[dict[str, Any]] = None  # a completed message whose phase is still unknown
        self.children: dict[str, Optional[str]] = {}  # child thread -> its open native turn (None between turns)
        self.closed_children: set[str] = set()
        self.call_child: dict[str, str] = {}  # a child's pending call -> its native child turn
        # The root turn completed while children still ran (no wait_agent): the Turn ends when they do.
        self.root_done: Optional[dict[str, Any]] = None

    # -- the Turn --------------------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self.native_turn is not None

    async def _begin(self, peer: JsonRpcPeer) -> None:
        response = await peer.request("turn/start", adapter.turn_start_params(self.start, self.session.thread_id or ""),
                                      timeout=START_TIMEOUT)
        self.native_turn = response["turn"]["id"]

    async def _answer(self, call_id: str, result: dict[str, Any]) -> None:
        call = self.calls.get(call_id)
        peer = self.session.peer
        if call is None or call.answer is not None or peer is None or not peer.alive:
            return  # unknown here, or a redelivered result: a no-op
        call.answer = {"success": bool(result.get("success", True)), "contentItems": result_content(result)}
        await peer.respond(call.request_id, call.answer)

    async def _steer_now(self, item: dict[str, Any]) -> None:
        peer = self.session.peer
        if peer is None or self.done:
            return
        try:
            await peer.request("turn/steer", {"threadId": self.session.thread_id, "expectedTurnId": self.native_turn,
                                              "input": adapter.user_input(item)})
        except RpcError as exc:
            log.warning("steering input not accepted by Codex: %s", exc)

    async def _interrupt(self) -> None:
        peer = self.session.peer
        # Interrupting the root turn alone leaves its children running (and their calls pending): the
        # open child turns are interrupted first.
        for thread, child_turn in list(self.children.items()):
            if child_turn is not None and peer is not None and peer.alive and not self.done:
                try:
                    await peer.request("turn/interrupt", {"threadId": thread, "turnId": child_turn})
                except RpcError as exc:
                    log.warning("turn/interrupt of a child failed: %s", exc)
        if peer is not None and peer.alive and not self.done:
            try:
                await peer.request("turn/interrupt", {"threadId": self.session.thread_id, "turnId": self.native_turn})
            except RpcError as exc:
                log.warning("turn/interrupt failed: %s", exc)

    # -- Harness -> Core (on the driver's loop) ----------------------------------------------------------
    def on_tool_call(self, request_id: Any, params: dict[str, Any]) -> None:
        call_id = str(params.get("callId"))
        child = self._child_turn_of(params)
        if child is False:
            asyncio.ensure_future(self.session.decline(request_id, "item/tool/call"))  # not this Turn's thread
            return
        self.calls[call_id] = _Call(request_id)
        fields: dict[str, Any] = {}
        if child:
            self.call_child[call_id] = child
            fields["child_turn_id"] = child
        else:
            self._release_held("commentary")
        self.channel.emit(TURN_FUNCTION_CALL, call_id=call_id, name=params.get("tool"),
                          arguments=params.get("arguments"), item_id=call_id, **fields)

    def _is_child(self, thread: Any) -> bool:
        return thread is not None and self.session.thread_id is not None and thread != self.session.thread_id

    def _child_turn_of(self, params: dict[str, Any]) -> Any:
        """None for the root thread, the child's open native turn for a known child thread, False for a
        thread this Turn does not run."""
        thread = params.get("threadId")
        if not self._is_child(thread):
            return None
        if thread not in self.children:
            return False
        turn_id = self.children[thread] or params.get("turnId")
        if turn_id and self.children[thread] is None:
            self._child_turn_started(thread, str(turn_id))
        return turn_id or False

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        if self._is_child(params.get("threadId")):
            self._child_notification(str(params["threadId"]), method, params)
            return
        if method == "item/started":
            self._item_started(params.get("item") or {})
        elif method == "item/agentMessage/delta":
            if params.get("itemId") in self.messages:
                self.channel.emit(TURN_OUTPUT_TEXT_DELTA, item_id=params["itemId"], content_index=0,
                                  delta=params.get("delta", ""))
        elif method == "item/completed":
            self._item_completed(params.get("item") or {})
        elif method == "error":
            error = params.get("error") or {}
            if not params.get("willRetry"):
                self.last_error = error.get("message")
        elif method == "turn/completed":
            turn = params.get("turn") or {}
            if self.native_turn is not None and turn.get("id") != self.native_turn:
                return
            self._completed(turn)

    # -- Subagents ------------------------------------------------------------------------------------------
    def _open_child(self, thread: str, parent: Optional[str] = None, instructions: Optional[str] = None) -> None:
        if thread in self.children and thread not in self.closed_children:
            return
        self.children.setdefault(thread, None)
        self.closed_children.discard(thread)
        fields: dict[str, Any] = {"subagent_id": thread}
        if parent and parent in self.children:
            fields["parent_subagent_id"] = parent
        if isinstance(instructions, str):
            fields["instructions"] = instructions
        self.channel.emit(TURN_SUBAGENT_OPENED, **fields)

    def _collab(self, item: dict[str, Any], sender: Optional[str]) -> None:
        """A collabAgentToolCall (on the root, or on a child for a nested one): spawn and resume open a
        Subagent, close closes it."""
        tool = item.get("tool")
        receivers = [str(t) for t in item.get("receiverThreadIds") or []]
        if tool in ("spawnAgent", "resumeAgent"):
            for thread in receivers:
                self._open_child(thread, sender, item.get("prompt"))
        elif tool == "closeAgent" and item.get("status") == "completed":
            for thread in receivers:
                if thread in self.children and thread not in self.closed_children:
                    self._end_child_turn(thread, "cancelled")
                    self.closed_children.add(thread)
                    self.channel.emit(TURN_SUBAGENT_CLOSED, subagent_id=thread)

    def _child_turn_started(self, thread: str, turn_id: str) -> None:
        if self.children.get(thread) == turn_id:
            return
        self._end_child_turn(thread, "completed")
        self.children[thread] = turn_id
        self.channel.emit(TURN_SUBAGENT_TURN_STARTED, subagent_id=thread, child_turn_id=turn_id)

    def _end_child_turn(self, thread: str, status: str) -> None:
        turn_id = self.children.get(thread)
        if turn_id is None:
            return
        for call_id, child in list(self.call_child.items()):  # calls the child turn ended without completing
            if child == turn_id:
                self.call_child.pop(call_id)
                if self.calls.pop(call_id, None) is not None:
                    self.abandon(call_id)
        self.children[thread] = None
        self.channel.emit(TURN_SUBAGENT_TURN_ENDED, child_turn_id=turn_id, status=status)
        if self.root_done is not None and all(t is None for t in self.children.values()):
            root, self.root_done = self.root_done, None
            self._completed({**root, "status": "interrupted"} if self.cancel_requested else root)

    def _child_notification(self, thread: str, method: str, params: dict[str, Any]) -> None:
        """A child thread's notification: published as the child's, never as the root's."""
        if method == "turn/started":
            turn = params.get("turn") or {}
            if thread not in self.children:
                if self.native_turn is None or turn.get("rootTurnId") != self.native_turn:
                    return  # a thread this Turn does not run
                self._open_child(thread)
            if turn.get("id"):
                self._child_turn_started(thread, str(turn["id"]))
            return
        if thread not in self.children:
            return
        child_turn = self.children.get(thread)
        if method == "turn/completed":
            status = (params.get("turn") or {}).get("status")
            self._end_child_turn(thread, {"completed": "completed", "interrupted": "cancelled"}.get(status, "failed"))
        elif method == "item/completed" and child_turn is not None:
            item = params.get("item") or {}
            kind = item.get("type")
            if kind == "agentMessage" and item.get("id"):
                self.child_message(child_turn, item["id"], item.get("phase") or "commentary", item.get("text", ""))
            elif kind == "dynamicToolCall":
                self.call_child.pop(str(item.get("id")), None)
                self._call_completed(item)
            elif kind == "mcpToolCall":
                self.channel.emit_batch([
                    (TURN_ITEM_ADDED, {"child_turn_id": child_turn, "item": _mcp_item(item, "in_progress")}),
                    (TURN_ITEM_DONE, {"child_turn_id": child_turn, "item": _mcp_item(item, "completed")})])
            elif kind == "collabAgentToolCall":
                self._collab(item, thread)
        elif method == "item/started" and (params.get("item") or {}).get("type") == "collabAgentToolCall":
            self._collab(params["item"], thread)

    def _item_started(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "collabAgentToolCall":
            self._collab(item, None)
            return
        if kind == "userMessage" or not item.get("id"):
            return
        self._release_held("commentary")
        if kind == "agentMessage":
            self.messages.add(item["id"])
            self.channel.emit(TURN_ITEM_ADDED, item=assistant_message(item["id"], item.get("phase"),
                                                                        "in_progress", None))

    def _item_completed(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "agentMessage" and item.get("id") in self.messages:
            phase = item.get("phase")
            done = assistant_message(item["id"], phase, "completed", item.get("text", ""))
            if phase in ("commentary", "final_answer"):
                self.channel.emit(TURN_ITEM_DONE, item=done)
            else:
                self.held = done  # the phase is known once something follows it, or the turn ends
        elif kind == "dynamicToolCall":
            self._call_completed(item)
        elif kind == "collabAgentToolCall":
            self._collab(item, None)
        elif kind == "mcpToolCall":
            self.channel.emit_batch([(TURN_ITEM_ADDED, {"item": _mcp_item(item, "in_progress")}),
                                     (TURN_ITEM_DONE, {"item": _mcp_item(item, "completed")})])

    def _call_completed(self, item: dict[str, Any]) -> None:
        call = self.calls.pop(str(item.get("id")), None)
        if call is None:
            return
        # The receipt: the native tool result that appeared in the live Turn is the one we answered.
        answered = call.answer is not None and item.get("contentItems") == call.answer["contentItems"]
        self.receipt(str(item["id"]), answered)

    def _release_held(self, phase: str) -> None:
        if self.held is not None:
            held, self.held = self.held, None
            self.channel.emit(TURN_ITEM_DONE, item={**held, "phase": phase})

    def _completed(self, turn: dict[str, Any]) -> None:
        status = turn.get("status")
        if status == "completed" and any(t is not None for t in self.children.values()):
            self._release_held("final_answer")
            self.root_done = turn  # a child still runs (its later calls still arrive): wait for it
            return
        for call_id in list(self.calls):  # calls the turn ended without completing
            self.calls.pop(call_id)
            self.abandon(call_id)
        if status == "completed":
            with self.channel.together():  # the held answer and the end: one message, one commit in Core
                self._release_held("final_answer")
                self.channel.finish(TURN_COMPLETED)
        elif status == "interrupted":
            self._release_held("commentary")
            if self.cancel_requested:
                self.channel.finish(TURN_CANCELLED)
            else:
                self.channel.finish(TURN_FAILED, error={"message": "Codex interrupted the Turn."})
        else:
            self._release_held("commentary")
            message = ((turn.get("error") or {}).get("message") or self.last_error
                       or "Codex failed the Turn.")
            self.channel.finish(TURN_FAILED, error={"message": str(message)[:400]})
        self.finished.set()


def _mcp_item(item: dict[str, Any], status: str) -> dict[str, Any]:
    """A native mcpToolCall as a public mcp_call Item: original server and tool names, the observed
    native result kept as it was."""
    done = status == "completed"
    error = item.get("error") if done else None
    # The status is the native item's: an isError result comes as `failed` with `error: null`, and the
    # tool's own text is then the error.
    failed = done and (item.get("status") == "failed" or bool(error))
    if failed and not error:
        content = (item.get("result") or {}).get("content") or []
        error = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict)) or "The MCP tool call failed."
    return mcp_call(item.get("id") or f"mcp_{uuid.uuid4().hex[:12]}", item.get("server", ""), item.get("tool", ""),
                    item.get("arguments"), output=item.get("result") if done else None, error=error,
                    status=("failed" if failed else "completed") if done else "in_progress")

