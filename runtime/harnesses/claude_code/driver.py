"""The Claude Code driver: one `ClaudeSDKClient` (PyPI `claude-agent-sdk`, which bundles the native Claude
Code CLI) per Session, with a private `CLAUDE_CONFIG_DIR` under the Runtime's state directory. The SDK
options are the adapter's translation of the frozen snapshot (config.py).

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
- Steering is a mid-turn query, cancel is `interrupt()`. The native session id is kept in the Session's
  state directory: after a Runtime restart the next Turn resumes its history (`resume`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pathlib
import re
import subprocess
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any, Optional

from ...protocol import TurnChannel, assistant_message
from ...sandbox import INSIDE_OPT
from .. import DEFAULT_MAX_WARM, NativeDriver, NativeTurn
from ..common import AdapterError, bearer_variables, output_schema, tools_of
from . import config as adapter
from .functions import FunctionsServer

log = logging.getLogger("runtime.claude_code")
# Declared callbacks are auto-approved by allowed_tools on purpose; can_use_tool gates the rest.
warnings.filterwarnings("ignore", message="can_use_tool will not be invoked")

START_TIMEOUT = 60.0
MCP_CONNECT_TIMEOUT = 30.0
NATIVE_EFFORTS = ("low", "medium", "high", "xhigh", "max")  # the SDK's EffortLevel
STRUCTURED_OUTPUT = "StructuredOutput"
FUNCTION_PREFIX = f"mcp__{adapter.FUNCTIONS_SERVER}__"
# Only loopback traffic to the model provider: no telemetry, error reports, update checks or other
# nonessential requests (checked with strace on this machine kind).
QUIET = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
         "DISABLE_ERROR_REPORTING": "1"}


class ClaudeCodeUnavailable(Exception):
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
    if not os.access(candidate, os.X_OK):
        raise ClaudeCodeUnavailable(f"The Claude Code binary '{candidate}' is not an executable file.")
    return candidate


def claude_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=True)  # noqa: S603
    except (OSError, subprocess.SubprocessError) as exc:
        raise ClaudeCodeUnavailable(f"The Claude Code binary '{binary}' does not run: {exc}") from None
    return out.stdout.strip().split()[0]  # "2.1.332 (Claude Code)"


@dataclass
class Provider:
    """Which model provider Claude Code talks to.

    `scripted`: the embedded loopback provider (any key; nonessential traffic off, only loopback).
    `anthropic`: the real Anthropic API with ANTHROPIC_API_KEY from the Runtime's environment and an
    optional base URL.
    """

    kind: str  # "scripted" | "anthropic"
    base_url: Optional[str] = None

    def env(self) -> dict[str, str]:
        out = {"DISABLE_AUTOUPDATER": "1"}  # the pinned CLI stays the one that runs
        if self.base_url:
            out["ANTHROPIC_BASE_URL"] = self.base_url
        if self.kind == "scripted":
            out.update(QUIET, ANTHROPIC_API_KEY="scripted")
        return out


# Variables the SDK itself sets on the CLI's environment, kept by a hosted sandbox's launcher.
SDK_VARIABLES = ("CLAUDE_CODE_ENTRYPOINT", "CLAUDE_AGENT_SDK_VERSION", "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING",
                 "CLAUDE_CODE_STREAM_CLOSE_TIMEOUT", "MCP_TOOL_TIMEOUT")


def sdk_options(start: dict[str, Any], provider: Provider, functions: Optional[FunctionsServer], *,
                config_dir: pathlib.Path, cwd: pathlib.Path, binary: str, resume: Optional[str] = None,
                box: Any = None, namespace: Any = None, launchers: Optional[pathlib.Path] = None) -> Any:
    """ClaudeAgentOptions from the adapter's translation, the provider selection and the Session's state."""
    from claude_agent_sdk import ClaudeAgentOptions
    from claude_agent_sdk.types import McpSdkServerConfig

    names, bearers = bearer_variables(start)
    native = adapter.options(start, names)
    servers: dict[str, Any] = {}
    for label, entry in native["mcpServers"].items():
        if label == adapter.FUNCTIONS_SERVER:
            if functions is not None:
                servers[label] = McpSdkServerConfig(type="sdk", name=label, instance=functions.server)
        else:
            servers[label] = dict(entry)
    # Bearers reach the CLI through its environment only: argv holds `Bearer ${VAR}`, never the token.
    env = {**provider.env(), **(native.get("env") or {}), **bearers, "CLAUDE_CONFIG_DIR": str(config_dir)}
    if box is not None:
        # A hosted Environment: the CLI runs in its sandbox through a launcher that keeps only these
        # variables (the SDK merges the Runtime's whole environment into its child's); the model through
        # the bridge, with a placeholder where the key was.
        env = box.environ({**env, "CLAUDE_CONFIG_DIR": box.inside(config_dir),
                           "ANTHROPIC_BASE_URL": box.provider_url("claude_code"),
                           "ANTHROPIC_API_KEY": box.bridge_token})
        binary = box.launcher("claude_code", f"{INSIDE_OPT}/claude_code/{pathlib.Path(binary).name}",
                              [*env, *SDK_VARIABLES])
        native["cwd"] = str(cwd)  # the process starts in the workspace's host directory, /workspace inside
    elif namespace is not None:
        # A shared Runtime: the CLI runs in a network namespace of its own (runtime.sandbox.HarnessNamespace):
        # the model through the bridge with the namespace's token, the tenant's MCP servers through the egress
        # proxy only.
        env = namespace.environ({**env, "ANTHROPIC_BASE_URL": namespace.provider_url("claude_code"),
                                 "ANTHROPIC_API_KEY": namespace.token("claude_code")})
        binary = namespace.launcher("claude_code", binary, pathlib.Path(launchers or config_dir.parent))
    kwargs: dict[str, Any] = {
        "tools": native["tools"], "allowed_tools": list(native.get("allowedTools") or []),
        "disallowed_tools": list(native.get("disallowedTools") or []), "mcp_servers": servers,
        "setting_sources": [], "env": env, "cwd": str(native.get("cwd") or cwd), "cli_path": binary,
        "model": start["agent"].get("model") or None, "resume": resume,
        "can_use_tool": permission_callback(adapter._allowed_tools(start), set(servers)),
        "stderr": lambda line: log.debug("claude: %s", line),
        "forward_subagent_text": True}  # a Subagent's text, reported as its child Turn's Items
    if "outputFormat" in native:
        kwargs["output_format"] = native["outputFormat"]
    effort = (start["agent"].get("reasoning") or {}).get("effort")
    if effort in NATIVE_EFFORTS:  # other levels keep the native default: the Harness owns model policy
        kwargs["effort"] = effort
    return ClaudeAgentOptions(**kwargs)


def permission_callback(allowed: list[str], servers: set[str]) -> Any:
    """No native permission prompt ever reaches Core. A declared server's tools outside its
    `allowed_tools` are refused (the adapter can hide unselected tools only on HTTP servers); the
    native tools the placement keeps run without asking."""
    from claude_agent_sdk.types import PermissionResultAllow, PermissionResultDeny

    async def decide(name: str, arguments: dict[str, Any], context: Any) -> Any:
        if name.startswith("mcp__"):
            label = name.split("__")[1] if name.count("__") >= 2 else ""
            if label in servers and name not in allowed and f"mcp__{label}" not in allowed:
                return PermissionResultDeny(message=f"{name} is not among the Session's allowed tools.")
        return PermissionResultAllow()
    return decide


def check_declared(label: str, declared: dict[str, Any], loaded: Optional[dict[str, Any]]) -> None:
    """The server Claude Code connected is the declared one: URL or command and args, headers unchanged."""
    if loaded is None:
        return  # an older CLI that does not echo the configuration
    for key in ("url", "headers", "command", "args"):
        want, got = declared.get(key), loaded.get(key)
        if key == "headers" and isinstance(want, dict) and isinstance(got, dict):
            # The CLI echoes Authorization expanded (the bearer itself): compared without it, never logged.
            want = {k: v for k, v in want.items() if k.lower() != "authorization"}
            got = {k: v for k, v in got.items() if k.lower() != "authorization"}
        if key in declared and key in loaded and got != want:
            raise AdapterError(f"Declared MCP server '{label}' changed '{key}' in the configuration Claude Code "
                               "loaded.")


def check_inventory(label: str, tools: Optional[list[dict[str, Any]]]) -> None:
    """"Claude accepts ... any tool name (the native client normalizes it, and the adapter rejects
    normalized collisions), and requires static inventories": the tools a server listed when it connected
    are its inventory, and no two of them may reach the model under one normalized name."""
    if tools is None:
        raise AdapterError(f"MCP server '{label}' reported no static tool inventory.")
    seen: dict[str, str] = {}
    for tool in tools:
        name = str(tool.get("name", ""))
        normalized = re.sub(r"[^a-zA-Z0-9_-]", "_", name)
        if normalized in seen and seen[normalized] != name:
            raise AdapterError(f"MCP server '{label}' tools '{seen[normalized]}' and '{name}' collide as "
                               f"'{normalized}' in Claude Code.")
        seen[normalized] = name


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
    harness = "claude_code"
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


class ClaudeSession:
    """One Session's native state: its config directory, its SDK client (one CLI process) and the
    native session id it resumes."""

    def __init__(self, driver: ClaudeCodeDriver, start: dict[str, Any]):
        self.driver = driver
        self.session_id = start["session_id"]
        self.box = start.get("sandbox")  # a hosted Environment's sandbox (runtime.sandbox), or None
        self.root = driver.state_dir / _safe(self.session_id) if self.box is None else \
            self.box.session_dir("claude_code", self.session_id)
        self.config_dir = self.root / "config"
        self.config_dir.mkdir(parents=True, exist_ok=True)
        if self.box is not None:
            self.box._own(self.config_dir)
            self.cwd = self.box.workspace  # where the process starts on this host; /workspace inside
        else:
            self.cwd = self.root / "work"  # environment none: a private empty directory
            self.cwd.mkdir(exist_ok=True)
        self.native_session: Optional[str] = self._saved()
        self.functions = FunctionsServer(tools_of(start, "function"), self._tool_call) \
            if tools_of(start, "function") else None
        self.client: Any = None
        self.current: Optional[ClaudeTurn] = None
        self.lock = asyncio.Lock()
        self._owner: Optional[asyncio.Task[None]] = None
        self._stop: Optional[asyncio.Event] = None
        self._bearers: dict[str, str] = {}  # the Vault bearers the running CLI was started with
        self._idle: Optional[asyncio.TimerHandle] = None

    # -- state -------------------------------------------------------------------------------------
    def _saved(self) -> Optional[str]:
        try:
            return json.loads((self.root / "session.json").read_text())["native_session_id"]
        except (OSError, ValueError, KeyError):
            return None

    def save(self, native_session: str) -> None:
        if native_session and native_session != self.native_session:
            self.native_session = native_session
            (self.root / "session.json").write_text(json.dumps({"native_session_id": native_session}))

    # -- the client --------------------------------------------------------------------------------
    async def _ensure(self, start: dict[str, Any]) -> Any:
        bearers = bearer_variables(start)[1]
        if self.client is not None and self._owner is not None and not self._owner.done() and bearers != self._bearers:
            await self.stop()  # a refreshed or rotated bearer: a new CLI resumes the native session
        if self.client is not None and self._owner is not None and not self._owner.done():
            return self.client
        self._bearers = bearers
        options = sdk_options(start, self.driver.provider, self.functions, config_dir=self.config_dir,
                              cwd=self.cwd, binary=self.driver.binary, resume=self.native_session, box=self.box,
                              namespace=start.get("namespace") if self.box is None else None,
                              launchers=self.driver.state_dir)
        connected: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._owner = asyncio.ensure_future(self._own(options, connected, self._stop))
        client = await asyncio.wait_for(asyncio.shield(connected), START_TIMEOUT)
        try:
            await self._check_servers(client, start)
        except BaseException:
            await self.stop()
            raise
        return client

    async def _own(self, options: Any, connected: asyncio.Future[Any], stop: asyncio.Event) -> None:
        """Connect, read and disconnect in one task: the SDK's task group must not change tasks."""
        factory = self.driver.client_factory
        if factory is None:
            from claude_agent_sdk import ClaudeSDKClient as factory  # noqa: N813
        client = factory(options)
        try:
            await client.connect()
        except Exception as exc:  # noqa: BLE001 - reported to the waiting start
            if not connected.done():
                connected.set_exception(AdapterError(f"Claude Code did not start: {exc}"[:400]))
            return
        self.client = client
        connected.set_result(client)
        reader = asyncio.ensure_future(self._read(client))
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait([reader, stopping], return_when=asyncio.FIRST_COMPLETED)
        finally:
            reader.cancel()
            stopping.cancel()
            self.client = None
            try:
                await client.disconnect()
            except Exception:  # noqa: BLE001 - the process is gone either way
                log.debug("claude disconnect failed", exc_info=True)
            turn = self.current
            if turn is not None and not turn.done and not stop.is_set():
                turn.channel.finish("turn.failed", error={"message": "The Claude Code process exited."})
                turn.finished.set()

    async def _read(self, client: Any) -> None:
        try:
            async for message in client.receive_messages():
                turn = self.current
                if turn is not None:
                    turn.on_message(message)
                else:
                    log.debug("claude message outside a Turn: %s", type(message).__name__)
        except Exception as exc:  # noqa: BLE001 - the process failed: the owner reports it
            log.warning("claude stream ended: %s", exc)

    async def _check_servers(self, client: Any, start: dict[str, Any]) -> None:
        """"As locally, Claude runs on without the tools of an optional server that did not connect;
        a required one fails the start." Servers connect after the CLI starts: wait (bounded) until
        none of the declared ones is pending. A connected server keeps the URL or command and the
        headers it was declared with, and has a static inventory."""
        declared = {t["server_label"]: t for t in tools_of(start, "mcp")}
        if not declared:
            return
        native = adapter.options(start, bearer_variables(start)[0])["mcpServers"]
        deadline = asyncio.get_running_loop().time() + MCP_CONNECT_TIMEOUT
        while True:
            status = {s.get("name"): s for s in ((await client.get_mcp_status()) or {}).get("mcpServers") or []}
            waiting = [label for label in declared if (status.get(label) or {}).get("status") == "pending"]
            if not waiting or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.1)
        for label, tool in declared.items():
            server = status.get(label) or {"status": "missing"}
            if server.get("status") == "connected":
                check_declared(label, native[label], server.get("config"))
                check_inventory(label, server.get("tools"))
                continue
            reason = server.get("error") or server.get("status")
            if tool.get("required"):
                raise AdapterError(f"Required MCP server '{label}' did not connect: {reason}")
            log.warning("optional MCP server '%s' did not connect (%s): running without it", label, reason)

    @property
    def alive(self) -> bool:
        return self.client is not None and self._owner is not None and not self._owner.done()

    async def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
        if self._owner is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._owner), 15)
            except (TimeoutError, Exception):  # noqa: BLE001
                self._owner.cancel()

    async def _tool_call(self, tool_use_id: Optional[str], name: str, arguments: dict[str, Any]) -> Any:
        turn = self.current
        if turn is None or turn.done:
            raise RuntimeError("No Turn is running in this Session.")
        return await turn.on_tool_call(tool_use_id, name, arguments)

    # -- a Turn --------------------------------------------------------------------------------------
    async def run(self, turn: ClaudeTurn) -> None:
        async with self.lock:
            if self._idle is not None:
                self._idle.cancel()
            self.current = turn
            try:
                await turn.run()
            except (TimeoutError, AdapterError, OSError) as exc:
                turn.channel.finish("turn.failed", error={"message": str(exc)[:400] or type(exc).__name__})
            except Exception as exc:  # noqa: BLE001 - a driver bug fails this Turn only
                log.exception("claude turn %s failed", turn.channel.turn_id)
                turn.channel.finish("turn.failed", error={"message": f"The Claude Code driver failed: {exc}"[:400]})
            finally:
                self.current = None
                self._idle = self.driver.idle_later(self)


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
    def __init__(self, session: ClaudeSession, start: dict[str, Any], channel: TurnChannel):
        self.session = session
        self.start = start
        self.channel = channel
        self.schema = output_schema(start)
        self.calls: dict[str, _Call] = {}
        self.tool_uses: dict[str, str] = {}  # native tool-use id -> tool name, for ids the handler lacks
        self.mcp_uses: dict[str, dict[str, Any]] = {}  # a declared MCP server's tool use -> its mcp_call Item
        self.held: Optional[_Text] = None  # assistant prose whose phase is known once something follows
        self.structured = _Structured()
        self.texts_in: dict[str, int] = {}
        self.sent: list[str] = []  # uuids of the native user messages this Turn sent
        self.taken: set[str] = set()  # ... and those the native results took in
        self.cancel_requested = False
        self.querying = False
        self.last_error: Optional[str] = None
        self.finished = asyncio.Event()
        self._early: list[dict[str, Any]] = []  # steering that arrived before the first query went out
        # Subagents (the Agent tool): the spawning tool-use id -> {"task": task id, "turn": minted child turn id};
        # Claude Code has no child turn id, so one is minted per child task.
        self.tasks: dict[str, dict[str, str]] = {}
        self.child_uses: dict[str, str] = {}  # a child's tool-use id -> the spawning tool-use id
        # A background child (the Agent tool's default) outlives the native turn that spawned it; Claude Code
        # then starts a native turn of its own when the child finishes. The Turn stays open through it.
        self.background = False

    # -- the Turn --------------------------------------------------------------------------------------
    async def run(self) -> None:
        client = await self.session._ensure(self.start)
        if self.cancel_requested:
            self.channel.finish("turn.cancelled")
            return
        await self._query(client, query_message(self.start.get("input") or []))
        self.querying = True
        for item in self._early:  # steering that arrived while the process started
            await self._query(client, query_message([item]))
        self._early.clear()
        if self.cancel_requested:  # cancelled while the query was being sent
            await self._cancel()
        await self.finished.wait()

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

    async def _steer(self, item: dict[str, Any]) -> None:
        if not self.querying:
            self._early.append(item)
            return
        client = self.session.client
        if self.done or client is None:
            return
        await self._query(client, query_message([item]))

    async def _cancel(self) -> None:
        self.cancel_requested = True
        client = self.session.client
        if self.querying and client is not None and not self.done:
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
        self.channel.emit("turn.function_call", call_id=call_id, name=name, arguments=arguments, item_id=call_id,
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
            self.channel.emit_batch([("turn.subagent.opened", opened),
                                     ("turn.subagent.turn.started", {"subagent_id": message.task_id,
                                                                     "child_turn_id": child_turn})])
            return
        status = message.status if isinstance(message, (TaskNotificationMessage, TaskUpdatedMessage)) else None
        if status not in ("completed", "failed", "stopped", "killed"):
            return
        for spawn, task in list(self.tasks.items()):
            if task["task"] == message.task_id:
                del self.tasks[spawn]
                ended = {"completed": "completed", "failed": "failed"}.get(status, "cancelled")
                self.channel.emit_batch([("turn.subagent.turn.ended", {"child_turn_id": task["turn"], "status": ended}),
                                         ("turn.subagent.closed", {"subagent_id": task["task"]})])

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
                self.channel.emit_batch([
                    ("turn.item.added", {"child_turn_id": task["turn"],
                                         "item": assistant_message(item_id, "commentary", "in_progress", None)}),
                    ("turn.item.done", {"child_turn_id": task["turn"],
                                        "item": assistant_message(item_id, "commentary", "completed", block.text)})])

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
            if answered:
                self.channel.emit("turn.tool_result.applied", call_id=block.tool_use_id)
            else:
                self.channel.emit("turn.call.abandoned", call_id=block.tool_use_id)

    def _mcp_started(self, block: Any, child_turn: Optional[str] = None) -> None:
        """A call of a declared MCP server's tool (`mcp__LABEL__TOOL`, split on the declared label, not on
        `__`) is a public mcp_call Item with the original server and tool names."""
        labels = [t["server_label"] for t in tools_of(self.start, "mcp")]
        label = max((x for x in labels if block.name.startswith(f"mcp__{x}__")), key=len, default=None)
        if label is None:
            return
        item = {"id": block.id, "type": "mcp_call", "server_label": label, "name": block.name[len(f"mcp__{label}__"):],
                "arguments": block.input, "output": None, "error": None, "status": "in_progress"}
        self.mcp_uses[block.id] = item
        if child_turn:  # a Subagent's MCP call is an mcp_call Item in the child's history
            self.channel.emit("turn.item.added", item=dict(item), child_turn_id=child_turn)
            return
        self.channel.emit("turn.item.added", item=dict(item))

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
        self.channel.emit("turn.item.done", item=item)

    def _release(self, phase: str) -> None:
        if self.held is not None:
            held, self.held = self.held, None
            self.channel.message(held.item_id, held.text, phase)

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
                self.channel.emit("turn.call.abandoned", call_id=call_id)
        if self.cancel_requested:
            self._release("commentary")
            self.channel.finish("turn.cancelled")
        elif message.is_error or message.subtype != "success":
            self._release("commentary")
            reason = message.result or "; ".join(message.errors or []) or self.last_error or \
                f"Claude Code ended the Turn: {message.subtype}."
            self.channel.finish("turn.failed", error={"message": str(reason)[:400]})
        elif self.schema is not None:
            self._release("commentary")  # parent assistant prose keeps its own id
            answer_id = self.structured.validated
            if answer_id is None or message.result is None:
                self.channel.finish("turn.failed", error={
                    "message": "Claude Code ended the Turn without the structured output the schema requires."})
            else:
                self.channel.message(answer_id, message.result, "final_answer")  # result.result, unchanged
                self.channel.finish("turn.completed")
        else:
            self._release("final_answer")
            self.channel.finish("turn.completed")
        self.finished.set()


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:120]

