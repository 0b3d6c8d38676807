"""A Codex Session's process: one `codex app-server` with a private `CODEX_HOME` whose `config.toml` is the
adapter's translation of the frozen snapshot (config.py), spoken to over JSON-RPC (rpc.py).

- Declared MCP servers are verified in the configuration Codex actually loaded (`config/read`) before
  the thread starts, so before any native connection; a failure fails the start with its reason.
- The native thread id is kept in the Session's state directory: after a Runtime restart the next
  Turn resumes the thread's history (`thread/resume`). Core still fails claimed work without replay.
- Vault bearers reach the app-server through its environment only; a refreshed or rotated one starts a
  new app-server that resumes the thread.
- No native permission prompt or user-input request ever reaches Core: it is declined.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import pathlib
import re
import shutil
from typing import Any, Optional

from ...environments.sandbox import INSIDE_OPT, INSIDE_WORKSPACE, PROXY_VARIABLES
from ..common import AdapterError, bearer_variables, placement, tools_of
from ..native import NativeDriver, NativeSession
from . import config as adapter
from .rpc import JsonRpcPeer, ProcessExited, RpcError

log = logging.getLogger("runtime.codex")

CLIENT_INFO = {"name": "agents-core-runtime", "title": "agents-core Runtime", "version": "0.1.0"}
START_TIMEOUT = 60.0
MCP_STARTUP_TIMEOUT = 30.0  # how long the first turn/start waits for declared MCP servers to start


class CodexSession(NativeSession):
    """One Session's native state: its CODEX_HOME, its app-server process and its thread."""

    state_file, state_key = "thread.json", "thread_id"
    failures = (AdapterError, RpcError, ProcessExited, OSError, TimeoutError)

    def __init__(self, driver: NativeDriver, start: dict[str, Any]):
        super().__init__(driver, start)
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
        self.mcp_status: dict[str, dict[str, Any]] = {}  # mcpServer/startupStatus/updated, by server name
        self.mcp_changed = asyncio.Event()
        self.thread_id: Optional[str] = self.saved_id()

    def _save_thread(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.keep_id(thread_id)

    def failure_message(self, exc: BaseException) -> str:
        return readable_error(str(exc))

    # -- process -----------------------------------------------------------------------------------
    async def _ensure(self, start: dict[str, Any]) -> JsonRpcPeer:
        names, bearers = bearer_variables(start)
        if await self.reuse(bearers):
            return self.peer
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
        native = adapter.native_config(start, provider, catalog, names)
        if self.box is not None and self.box.network == "enabled":
            # the model's commands and stdio MCP servers reach the network as the Environment does: through the
            # sandbox's egress proxy (Codex starts a stdio server with the variables it names only)
            native = adapter.merge(native, {"sandbox_workspace_write": {"network_access": True}})
            for entry in (native.get("mcp_servers") or {}).values():
                if "command" in entry:
                    entry["env_vars"] = [*entry["env_vars"], *(n for n in PROXY_VARIABLES if n not in entry["env_vars"])]
        if placement(start) != "none":
            # Codex trusts the workspace natively (thread/start records it); recorded first, config/read
            # shows the project configuration the thread will load, which the servers are verified in.
            native = adapter.merge(native, {"projects": {str(self.cwd): {"trust_level": "trusted"}}})
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
            # Before any native connection: the configuration Codex actually loaded keeps every declared
            # server as written (URL or command, args, cwd, env_vars, bearer reference, headers), and no
            # stored credential; on a start and on a cold resume alike.
            loaded = await peer.request("config/read", {"cwd": str(self.cwd)}, timeout=START_TIMEOUT)
            adapter.verify_servers(native, (loaded or {}).get("config") or {})
            requirements = await peer.request("configRequirements/read", None, timeout=START_TIMEOUT)
            adapter.check_managed_requirements(native, (requirements or {}).get("requirements") or {})
            params = {"cwd": str(self.cwd), "approvalPolicy": "never", "sandbox": self.sandbox}
            if self.thread_id:
                await peer.request("thread/resume", {"threadId": self.thread_id, **params}, timeout=START_TIMEOUT)
            else:
                started = await peer.request("thread/start", {**params, "ephemeral": False,
                                                              "dynamicTools": adapter.dynamic_tools(start)},
                                             timeout=START_TIMEOUT)
                self._save_thread(started["thread"]["id"])
            # "required: true makes native thread creation and cold resume wait for the server to initialize"
            await self._await_mcp_startup(start)
        except BaseException:
            peer.on_exit = None  # the start failed for its own reason: report that one
            await peer.close()
            raise
        self.peer = peer
        return peer

    def _exited(self, code: Optional[int]) -> None:
        if self.current is not None:
            tail = " ".join(self.peer.stderr_tail[-3:]) if self.peer else ""
            self.current.fail(f"The Codex process exited ({code}). {tail}")

    @property
    def alive(self) -> bool:
        return self.peer is not None and self.peer.alive

    async def stop(self) -> None:
        if self.peer is not None:
            await self.peer.close()

    def _notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "mcpServer/startupStatus/updated":
            self.mcp_status[str(params.get("name"))] = params
            self.mcp_changed.set()
        if self.current is not None:
            self.current.on_notification(method, params)

    async def _await_mcp_startup(self, start: dict[str, Any]) -> None:
        """Codex starts its servers after thread/start or thread/resume returns and does not wait for an
        optional one: a Turn started at once would run without its tools. Wait (bounded) until every declared
        server reported ready or failed; an optional one that failed runs without its tools, a required one
        fails the start (thread/start fails natively for it; a cold resume does not)."""
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
        for tool in tools_of(start, "mcp"):
            label = tool["server_label"]
            status = self.mcp_status.get(label) or {}
            if status.get("status") == "ready":
                continue
            if tool.get("required"):  # Codex fails thread/start for it natively; checked after a resume too
                raise AdapterError(required_failure(label, str(status.get("error") or status.get("status")
                                                               or "it did not report its startup in time")))
            log.warning("MCP server '%s' is %s: running without its tools", label, status.get("status", "not started"))

    def _request(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        if method == "item/tool/call" and self.current is not None:
            self.current.on_tool_call(request_id, params)
            return
        # No native permission prompt or user-input request ever reaches Core: decline it.
        asyncio.ensure_future(self.decline(request_id, method))

    async def decline(self, request_id: Any, method: str) -> None:
        if self.peer is not None and self.peer.alive:
            await self.peer.respond_error(request_id, -32601, f"{method} is not available in this Runtime.")


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
    return required_failure(found.group(1).strip(), found.group(2))


def required_failure(label: str, detail: str) -> str:
    """A required server that did not start, named with the reason, not Codex's transport type names."""
    plain = " ".join(re.sub(r"\[[^\]]*\]", "", detail).split())  # without the transport's type names
    reason = next((why for key, why in _MCP_REASONS if key in detail), plain[:200] or "it could not be started")
    return f"Required MCP server '{label}' did not start: {reason}."
