"""The Codex driver: one `codex app-server` process per Session, with a private `CODEX_HOME` whose
`config.toml` is the adapter's translation of the frozen snapshot (config.py).

- Application functions are `dynamicTools` (`deferLoading` from `defer_loading`). A native
  `item/tool/call` becomes the function call observation (call_id = the native callId); the admitted
  result answers that JSON-RPC request unchanged (a string -> inputText, image parts -> inputImage).
  The receipt is sent only when the matching `dynamicToolCall` item completes after our answer; a call
  that completes without our answer, or in an interrupted turn, is an abandonment, never a receipt.
- The schema goes unchanged as `outputSchema` on every root `turn/start`, resumed threads included;
  the native final agent message is published unchanged. Steering is `turn/steer`, cancel
  `turn/interrupt`.
- Declared MCP servers are verified in the configuration Codex actually loaded (`config/read`) before
  the thread starts, so before any native connection; a failure fails the start with its reason.
- The native thread id is kept in the Session's state directory: after a Runtime restart the next
  Turn resumes the thread's history (`thread/resume`). Core still fails claimed work without replay.
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
import dataclasses
import hashlib
import json
import logging
import os
import pathlib
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from typing import Any, Optional

from ...protocol import TurnChannel, assistant_message
from ...sandbox import INSIDE_OPT, INSIDE_WORKSPACE, PROXY_VARIABLES
from .. import DEFAULT_MAX_WARM, NativeDriver, NativeTurn
from ..common import AdapterError, bearer_variables, placement, tools_of
from . import config as adapter
from .rpc import JsonRpcPeer, ProcessExited, RpcError

log = logging.getLogger("runtime.codex")

CLIENT_INFO = {"name": "agents-core-runtime", "title": "agents-core Runtime", "version": "0.1.0"}
START_TIMEOUT = 60.0
MCP_STARTUP_TIMEOUT = 30.0  # how long the first turn/start waits for declared MCP servers to start


class CodexUnavailable(Exception):
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
    if not os.access(candidate, os.X_OK):
        raise CodexUnavailable(f"The Codex binary '{candidate}' is not an executable file.")
    return candidate


def codex_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=True)  # noqa: S603
    except (OSError, subprocess.SubprocessError) as exc:
        raise CodexUnavailable(f"The Codex binary '{binary}' does not run: {exc}") from None
    return out.stdout.strip().split()[-1]


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


@dataclass
class Provider:
    """Which model provider Codex talks to.

    `scripted`: the embedded loopback provider (no key; network-off features, only loopback traffic).
    `openai`: the real OpenAI Responses API with OPENAI_API_KEY (optional base URL); native behaviour
    for undeclared servers, apps and plugins is kept.
    """

    kind: str  # "scripted" | "openai"
    base_url: str
    env_key: Optional[str] = None

    def native(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.kind, "base_url": self.base_url, "wire_api": "responses"}
        if self.env_key:
            entry["env_key"] = self.env_key
        if self.kind == "scripted":
            entry.update(request_max_retries=0, stream_max_retries=0)
        out: dict[str, Any] = {"model_provider": "agents_core", "model_providers": {"agents_core": entry}}
        if self.kind == "scripted":
            out["features"] = {"plugins": False, "apps": False, "remote_plugin": False}
        return out


def native_config(start: dict[str, Any], provider: Provider, catalog: Optional[str] = None,
                  credentials: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """config.toml: the adapter's translation of the snapshot plus the provider selection; `catalog`
    is the path of this Session's model catalog, when it needs one; `credentials`: server label -> the
    variable holding its bearer (the name only)."""
    native = adapter.session_config(start, credentials)
    merged: dict[str, Any] = {"model": start["agent"]["model"], "approval_policy": "never", **native}
    if catalog:
        merged["model_catalog_json"] = catalog
    for key, value in provider.native().items():
        if key == "features":
            merged["features"] = {**value, **(merged.get("features") or {})}
        else:
            merged[key] = value
    verbosity = (start.get("execution_controls") or {}).get("verbosity")
    if verbosity:
        merged["model_verbosity"] = verbosity
    return merged


def dynamic_tools(start: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "function", "name": t["name"], "description": t.get("description") or "",
             "inputSchema": t["parameters"], "deferLoading": bool(t.get("defer_loading"))}
            for t in tools_of(start, "function")]


def user_input(item: dict[str, Any]) -> list[dict[str, Any]]:
    """A user message Item's content as native UserInput parts."""
    parts: list[dict[str, Any]] = []
    for part in item.get("content") or []:
        if part.get("type") == "input_text":
            parts.append({"type": "text", "text": part["text"], "text_elements": []})
        elif part.get("type") == "input_image" and part.get("image_url"):
            parts.append({"type": "image", "url": part["image_url"]})
    return parts


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


def turn_start_params(start: dict[str, Any], thread_id: str) -> dict[str, Any]:
    params: dict[str, Any] = {"threadId": thread_id,
                              "input": [p for item in start.get("input", []) for p in user_input(item)]}
    params.update(adapter.turn_params(start))  # outputSchema, unchanged, on every root Turn
    params.update(adapter.turn_environment(start))  # environments: [] on none, every Turn (resume drops it)
    agent = start["agent"]
    reasoning = agent.get("reasoning") or {}
    if reasoning.get("effort"):
        params["effort"] = reasoning["effort"]
    if reasoning.get("summary"):
        params["summary"] = reasoning["summary"]
    if agent.get("service_tier"):
        params["serviceTier"] = agent["service_tier"]
    return params


class CodexDriver(NativeDriver):
    harness = "codex"

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
            path = self.state_dir / "model_catalogs" / f"{_safe(self.version)}-{digest}.json"
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                partial = path.with_suffix(f".{os.getpid()}.tmp")
                partial.write_text(text)
                partial.replace(path)
            self._catalogs[key] = path
        return str(path)


class CodexSession:
    """One Session's native state: its CODEX_HOME, its app-server process and its thread."""

    def __init__(self, driver: CodexDriver, start: dict[str, Any]):
        self.driver = driver
        self.session_id = start["session_id"]
        self.box = start.get("sandbox")  # a hosted Environment's sandbox (runtime.sandbox), or None
        self.root = driver.state_dir / _safe(self.session_id) if self.box is None else \
            self.box.session_dir("codex", self.session_id)
        self.home = self.root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        if self.box is not None:
            self.box._own(self.home)
            self.cwd = pathlib.Path(INSIDE_WORKSPACE)  # the path inside the sandbox; Codex's own sandbox nests
            self.sandbox = "workspace-write"
        elif placement(start) == "none":
            self.cwd = self.root / "work"  # environment none: a private empty directory, read-only
            self.cwd.mkdir(exist_ok=True)
            self.sandbox = "read-only"
        else:
            self.cwd = pathlib.Path(start["environment"].get("workspace_directory") or self.root / "work")
            self.sandbox = "workspace-write"
        self.peer: Optional[JsonRpcPeer] = None
        self._bearers: dict[str, str] = {}  # the Vault bearers the running app-server was started with
        self.mcp_status: dict[str, dict[str, Any]] = {}  # mcpServer/startupStatus/updated, by server name
        self.mcp_changed = asyncio.Event()
        self.thread_id: Optional[str] = self._saved_thread()
        self.current: Optional[CodexTurn] = None
        self.lock = asyncio.Lock()
        self._idle: Optional[asyncio.TimerHandle] = None

    # -- state -------------------------------------------------------------------------------------
    def _saved_thread(self) -> Optional[str]:
        try:
            return json.loads((self.root / "thread.json").read_text())["thread_id"]
        except (OSError, ValueError, KeyError):
            return None

    def _save_thread(self, thread_id: str) -> None:
        self.thread_id = thread_id
        (self.root / "thread.json").write_text(json.dumps({"thread_id": thread_id}))

    # -- process -----------------------------------------------------------------------------------
    async def _ensure(self, start: dict[str, Any]) -> JsonRpcPeer:
        names, bearers = bearer_variables(start)
        if self.peer is not None and self.peer.alive and bearers != self._bearers:
            await self.peer.close()  # a refreshed or rotated bearer: a new app-server resumes the thread
        if self.peer is not None and self.peer.alive:
            return self.peer
        self._bearers = bearers
        provider, catalog = self.driver.provider, self.driver.catalog_path(start)
        if self.box is not None:  # the model through the bridge (no key inside), the catalog beside the state
            provider = dataclasses.replace(provider, base_url=self.box.provider_url("codex"),
                                           env_key=provider.env_key or "OPENAI_API_KEY")
            if catalog:
                copy = self.root / "model_catalog.json"
                shutil.copyfile(catalog, copy)
                catalog = self.box.inside(copy)
        namespace = start.get("namespace") if self.box is None else None  # a shared Runtime's (environment none)
        if namespace is not None:  # the model through the bridge, the tenant's MCP servers through the egress proxy
            provider = dataclasses.replace(provider, base_url=namespace.provider_url("codex"),
                                           env_key=provider.env_key or "OPENAI_API_KEY")
        native = native_config(start, provider, catalog, names)
        if self.box is not None and self.box.network == "enabled":
            # the model's commands and stdio MCP servers reach the network as the Environment does: through the
            # sandbox's egress proxy (Codex starts a stdio server with the variables it names only)
            native = adapter.merge(native, {"sandbox_workspace_write": {"network_access": True}})
            for entry in (native.get("mcp_servers") or {}).values():
                if "command" in entry:
                    entry["env_vars"] = [*entry["env_vars"], *(n for n in PROXY_VARIABLES if n not in entry["env_vars"])]
        declared = adapter.config(start, names)
        (self.home / "config.toml").write_text(adapter.render_toml(native))
        if self.box is not None:
            extra = {"CODEX_HOME": self.box.inside(self.home), **bearers}
            extra[provider.env_key] = self.box.bridge_token  # the bridge puts the operator's key on the request
            env = self.box.environ(extra)
            argv = self.box.argv([f"{INSIDE_OPT}/codex/{pathlib.Path(self.driver.binary).name}", "app-server"],
                                 binaries=("codex",))
            spawn_cwd = str(self.box.workspace)
        else:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "AGENTS_CORE_"))}
            env["CODEX_HOME"] = str(self.home)
            env.update(bearers)  # only this app-server's environment holds them (never argv or config.toml)
            argv, spawn_cwd = [self.driver.binary, "app-server"], str(self.cwd)
            if namespace is not None:
                env[provider.env_key] = namespace.token("codex")
                env = namespace.environ(env)
                argv = namespace.argv("codex", argv)
        peer = JsonRpcPeer(self._notification, self._request, self._exited)
        self.mcp_status.clear()  # a new process starts its servers again
        await peer.spawn(argv, env, spawn_cwd)
        try:
            await peer.request("initialize", {"clientInfo": CLIENT_INFO, "capabilities": {"experimentalApi": True}},
                               timeout=START_TIMEOUT)
            await peer.notify("initialized")
            # Before any native connection: the configuration Codex actually loaded keeps every
            # declared server (URL or command, bearer reference, headers), and no stored credential.
            loaded = await peer.request("config/read", {"cwd": str(self.cwd)}, timeout=START_TIMEOUT)
            adapter.verify_servers(declared, (loaded or {}).get("config") or {})
            requirements = await peer.request("configRequirements/read", None, timeout=START_TIMEOUT)
            adapter.check_managed_requirements(declared, (requirements or {}).get("requirements") or {})
            params = {"cwd": str(self.cwd), "approvalPolicy": "never", "sandbox": self.sandbox}
            if self.thread_id:
                await peer.request("thread/resume", {"threadId": self.thread_id, **params}, timeout=START_TIMEOUT)
            else:
                started = await peer.request("thread/start", {**params, "ephemeral": False,
                                                              "dynamicTools": dynamic_tools(start)},
                                             timeout=START_TIMEOUT)
                self._save_thread(started["thread"]["id"])
                await self._await_mcp_startup(start)
        except BaseException:
            peer.on_exit = None  # the start failed for its own reason: report that one
            await peer.close()
            raise
        self.peer = peer
        return peer

    def _exited(self, code: Optional[int]) -> None:
        turn = self.current
        if turn is not None and not turn.done:
            tail = " ".join(self.peer.stderr_tail[-3:]) if self.peer else ""
            turn.channel.finish("turn.failed", error={"message": f"The Codex process exited ({code}). {tail}"[:400]})
            turn.finished.set()

    @property
    def alive(self) -> bool:
        return self.peer is not None and self.peer.alive

    async def stop(self) -> None:
        if self.peer is not None:
            await self.peer.close()

    # -- a Turn --------------------------------------------------------------------------------------
    async def run(self, turn: CodexTurn) -> None:
        async with self.lock:
            if self._idle is not None:
                self._idle.cancel()
            self.current = turn
            try:
                await turn.run()
            except (AdapterError, RpcError, ProcessExited, OSError, TimeoutError) as exc:
                turn.channel.finish("turn.failed", error={"message": readable_error(str(exc))})
            except Exception as exc:  # noqa: BLE001 - a driver bug fails this Turn only
                log.exception("codex turn %s failed", turn.channel.turn_id)
                turn.channel.finish("turn.failed", error={"message": f"The Codex driver failed: {exc}"[:400]})
            finally:
                self.current = None
                self._idle = self.driver.idle_later(self)

    def _notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "mcpServer/startupStatus/updated":
            self.mcp_status[str(params.get("name"))] = params
            self.mcp_changed.set()
        if self.current is not None:
            self.current.on_notification(method, params)

    async def _await_mcp_startup(self, start: dict[str, Any]) -> None:
        """Codex starts an optional server after thread/start returns and does not wait for it: a Turn
        started at once would run without its tools. Wait (bounded) until every declared server reported
        ready or failed; one that failed runs without its tools (a required one failed thread/start)."""
        declared = [t["server_label"] for t in tools_of(start, "mcp")]
        deadline = asyncio.get_running_loop().time() + MCP_STARTUP_TIMEOUT
        while True:
            pending = [x for x in declared if (self.mcp_status.get(x) or {}).get("status") not in ("ready", "failed")]
            remaining = deadline - asyncio.get_running_loop().time()
            if not pending or remaining <= 0:
                break
            self.mcp_changed.clear()
            try:
                await asyncio.wait_for(self.mcp_changed.wait(), remaining)
            except TimeoutError:
                break
        for label in declared:
            status = self.mcp_status.get(label) or {}
            if status.get("status") != "ready":
                log.warning("MCP server '%s' is %s: running without its tools", label, status.get("status", "not started"))

    def _request(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        if method == "item/tool/call" and self.current is not None:
            self.current.on_tool_call(request_id, params)
            return
        # No native permission prompt or user-input request ever reaches Core: decline it.
        asyncio.ensure_future(self._decline(request_id, method))

    async def _decline(self, request_id: Any, method: str) -> None:
        if self.peer is not None and self.peer.alive:
            await self.peer.respond_error(request_id, -32601, f"{method} is not available in this Runtime.")


@dataclass
class _Call:
    request_id: Any
    answer: Optional[dict[str, Any]] = None


class CodexTurn(NativeTurn):
    def __init__(self, session: CodexSession, start: dict[str, Any], channel: TurnChannel):
        self.session = session
        self.start = start
        self.channel = channel
        self.native_turn: Optional[str] = None
        self.calls: dict[str, _Call] = {}
        self.messages: set[str] = set()  # agentMessage items announced (item.added sent)
        self.held: Optional[dict[str, Any]] = None  # a completed message whose phase is still unknown
        self.cancel_requested = False
        self.last_error: Optional[str] = None
        self.finished = asyncio.Event()
        self._early: list[dict[str, Any]] = []  # steering that arrived before turn/start answered
        self.children: dict[str, Optional[str]] = {}  # child thread -> its open native turn (None between turns)
        self.closed_children: set[str] = set()
        self.call_child: dict[str, str] = {}  # a child's pending call -> its native child turn
        # The root turn completed while children still ran (no wait_agent): the Turn ends when they do.
        self.root_done: Optional[dict[str, Any]] = None

    # -- the Turn --------------------------------------------------------------------------------------
    async def run(self) -> None:
        peer = await self.session._ensure(self.start)
        if self.cancel_requested:
            self.channel.finish("turn.cancelled")
            return
        response = await peer.request("turn/start", turn_start_params(self.start, self.session.thread_id or ""),
                                      timeout=START_TIMEOUT)
        self.native_turn = response["turn"]["id"]
        for item in self._early:
            await self._steer(item)
        self._early.clear()
        if self.cancel_requested:
            await self._interrupt()
        await self.finished.wait()

    async def _answer(self, call_id: str, result: dict[str, Any]) -> None:
        call = self.calls.get(call_id)
        peer = self.session.peer
        if call is None or call.answer is not None or peer is None or not peer.alive:
            return  # unknown here, or a redelivered result: a no-op
        call.answer = {"success": bool(result.get("success", True)), "contentItems": result_content(result)}
        await peer.respond(call.request_id, call.answer)

    async def _steer(self, item: dict[str, Any]) -> None:
        if self.native_turn is None:
            self._early.append(item)
            return
        peer = self.session.peer
        if peer is None or self.done:
            return
        try:
            await peer.request("turn/steer", {"threadId": self.session.thread_id, "expectedTurnId": self.native_turn,
                                              "input": user_input(item)})
        except RpcError as exc:
            log.warning("steering input not accepted by Codex: %s", exc)

    async def _cancel(self) -> None:
        self.cancel_requested = True
        if self.native_turn is not None:
            await self._interrupt()

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
            asyncio.ensure_future(self.session._decline(request_id, "item/tool/call"))  # not this Turn's thread
            return
        self.calls[call_id] = _Call(request_id)
        fields: dict[str, Any] = {}
        if child:
            self.call_child[call_id] = child
            fields["child_turn_id"] = child
        else:
            self._release_held("commentary")
        self.channel.emit("turn.function_call", call_id=call_id, name=params.get("tool"),
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
                self.channel.emit("turn.output_text.delta", item_id=params["itemId"], content_index=0,
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
        self.channel.emit("turn.subagent.opened", **fields)

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
                    self.channel.emit("turn.subagent.closed", subagent_id=thread)

    def _child_turn_started(self, thread: str, turn_id: str) -> None:
        if self.children.get(thread) == turn_id:
            return
        self._end_child_turn(thread, "completed")
        self.children[thread] = turn_id
        self.channel.emit("turn.subagent.turn.started", subagent_id=thread, child_turn_id=turn_id)

    def _end_child_turn(self, thread: str, status: str) -> None:
        turn_id = self.children.get(thread)
        if turn_id is None:
            return
        for call_id, child in list(self.call_child.items()):  # calls the child turn ended without completing
            if child == turn_id:
                self.call_child.pop(call_id)
                if self.calls.pop(call_id, None) is not None:
                    self.channel.emit("turn.call.abandoned", call_id=call_id)
        self.children[thread] = None
        self.channel.emit("turn.subagent.turn.ended", child_turn_id=turn_id, status=status)
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
                phase = item.get("phase") or "commentary"
                self.channel.emit_batch([
                    ("turn.item.added", {"child_turn_id": child_turn,
                                         "item": assistant_message(item["id"], phase, "in_progress", None)}),
                    ("turn.item.done", {"child_turn_id": child_turn, "item": assistant_message(
                        item["id"], phase, "completed", item.get("text", ""))})])
            elif kind == "dynamicToolCall":
                self.call_child.pop(str(item.get("id")), None)
                self._call_completed(item)
            elif kind == "mcpToolCall":
                self.channel.emit_batch([
                    ("turn.item.added", {"child_turn_id": child_turn, "item": _mcp_item(item, "in_progress")}),
                    ("turn.item.done", {"child_turn_id": child_turn, "item": _mcp_item(item, "completed")})])
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
            self.channel.emit("turn.item.added", item=assistant_message(item["id"], item.get("phase"),
                                                                        "in_progress", None))

    def _item_completed(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "agentMessage" and item.get("id") in self.messages:
            phase = item.get("phase")
            done = assistant_message(item["id"], phase, "completed", item.get("text", ""))
            if phase in ("commentary", "final_answer"):
                self.channel.emit("turn.item.done", item=done)
            else:
                self.held = done  # the phase is known once something follows it, or the turn ends
        elif kind == "dynamicToolCall":
            self._call_completed(item)
        elif kind == "collabAgentToolCall":
            self._collab(item, None)
        elif kind == "mcpToolCall":
            self.channel.emit_batch([("turn.item.added", {"item": _mcp_item(item, "in_progress")}),
                                     ("turn.item.done", {"item": _mcp_item(item, "completed")})])

    def _call_completed(self, item: dict[str, Any]) -> None:
        call = self.calls.pop(str(item.get("id")), None)
        if call is None:
            return
        # The receipt: the native tool result that appeared in the live Turn is the one we answered.
        if call.answer is not None and item.get("contentItems") == call.answer["contentItems"]:
            self.channel.emit("turn.tool_result.applied", call_id=str(item["id"]))
        else:
            self.channel.emit("turn.call.abandoned", call_id=str(item["id"]))

    def _release_held(self, phase: str) -> None:
        if self.held is not None:
            held, self.held = self.held, None
            self.channel.emit("turn.item.done", item={**held, "phase": phase})

    def _completed(self, turn: dict[str, Any]) -> None:
        status = turn.get("status")
        if status == "completed" and any(t is not None for t in self.children.values()):
            self._release_held("final_answer")
            self.root_done = turn  # a child still runs (its later calls still arrive): wait for it
            return
        for call_id in list(self.calls):  # calls the turn ended without completing
            self.calls.pop(call_id)
            self.channel.emit("turn.call.abandoned", call_id=call_id)
        if status == "completed":
            self._release_held("final_answer")
            self.channel.finish("turn.completed")
        elif status == "interrupted":
            self._release_held("commentary")
            if self.cancel_requested:
                self.channel.finish("turn.cancelled")
            else:
                self.channel.finish("turn.failed", error={"message": "Codex interrupted the Turn."})
        else:
            self._release_held("commentary")
            message = ((turn.get("error") or {}).get("message") or self.last_error
                       or "Codex failed the Turn.")
            self.channel.finish("turn.failed", error={"message": str(message)[:400]})
        self.finished.set()


_REQUIRED_FAILED = re.compile(r"required MCP servers failed to initialize: ([^:]+):(.*)", re.S)
# What Codex's errors say about a server that did not start, by substring (they also hold long Rust type names).
_MCP_REASONS = (("Auth required", "the server refused the credential (HTTP 401)"),
                ("HTTP 401", "the server refused the credential (HTTP 401)"),
                ("401 Unauthorized", "the server refused the credential (HTTP 401)"),
                ("HTTP 403", "the server refused the credential (HTTP 403)"),
                ("is not set", "its bearer variable is not set"),
                ("Connection refused", "the connection was refused"),
                ("timed out", "it did not answer in time"),
                ("HTTP 404", "the URL was not found (HTTP 404)"))


def readable_error(text: str) -> str:
    """A start failure as the Turn's error: a required MCP server that did not start is named with the
    reason, not Codex's transport type names."""
    found = _REQUIRED_FAILED.search(text)
    if found is None:
        return text[:400]
    label, detail = found.group(1).strip(), found.group(2)
    plain = " ".join(re.sub(r"\[[^\]]*\]", "", detail).split())  # without the transport's type names
    reason = next((why for key, why in _MCP_REASONS if key in detail), plain[:200] or "it could not be started")
    return f"Required MCP server '{label}' did not start: {reason}."


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
    return {"id": item.get("id") or f"mcp_{uuid.uuid4().hex[:12]}", "type": "mcp_call",
            "server_label": item.get("server", ""), "name": item.get("tool", ""),
            "arguments": item.get("arguments"), "output": item.get("result") if done else None,
            "error": error, "status": ("failed" if failed else "completed") if done else "in_progress"}


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:120]
