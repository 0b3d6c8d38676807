"""A Claude Code Session's process: one `ClaudeSDKClient` (PyPI `claude-agent-sdk`, which bundles the native
Claude Code CLI) with a private `CLAUDE_CONFIG_DIR` under the Runtime's state directory. The SDK options are
the adapter's translation of the frozen snapshot (config.py) with the provider selection (`sdk_options`).

- The Session's functions are served by our own MCP server under the label `functions` (functions.py).
- Declared MCP servers are checked once they connected: the URL or command and headers they were declared
  with, and a static inventory; a required one that did not connect fails the start, and so does any one that
  announces `tools.listChanged` (a stdio server's relay marks it, config.StaticRelay; an HTTP server is probed
  where Claude Code runs, static_probe.py).
- The native session id is kept in the Session's state directory: after a Runtime restart the next Turn
  resumes its history (`resume`). A refreshed or rotated Vault bearer starts a new CLI that resumes it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pathlib
import re
import shutil
import sys
import urllib.parse
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from ...environments.sandbox import INSIDE_OPT
from ..common import AdapterError, bearer_variables, tools_of
from ..native import NativeDriver, NativeSession
from . import config as adapter
from .static_relay import REFUSAL

if TYPE_CHECKING:
    from .functions import FunctionsServer

PROBE_SOURCE = (pathlib.Path(__file__).parent / "static_probe.py").read_text()

log = logging.getLogger("runtime.claude_code")
# Declared callbacks are auto-approved by allowed_tools on purpose; can_use_tool gates the rest.
warnings.filterwarnings("ignore", message="can_use_tool will not be invoked")

START_TIMEOUT = 60.0
MCP_CONNECT_TIMEOUT = 30.0
PROBE_TIMEOUT = 30.0

# Only loopback traffic to the model provider: no telemetry, error reports, update checks or other
# nonessential requests (checked with strace on this machine kind).
QUIET = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
         "DISABLE_ERROR_REPORTING": "1"}


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
                box: Any = None, namespace: Any = None, launchers: Optional[pathlib.Path] = None,
                hidden: Optional[list[str]] = None, relay: Optional[adapter.StaticRelay] = None) -> Any:
    """ClaudeAgentOptions from the adapter's translation, the provider selection and the Session's state;
    `hidden`: the declared servers' unselected tools (config.hidden_tools); `relay`: the stdio servers'
    static-inventory relay (config.StaticRelay)."""
    from claude_agent_sdk import ClaudeAgentOptions
    from claude_agent_sdk.types import McpSdkServerConfig

    names, bearers = bearer_variables(start)
    native = adapter.options(start, names, hidden, relay)
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
        # A shared Runtime: the CLI runs in a network namespace of its own (runtime.environments.sandbox.HarnessNamespace):
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
    if effort is not None:  # admission let through only the SDK's levels (CLAUDE_CODE.reasoning_efforts)
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


def _http_servers(start: dict[str, Any]) -> list[str]:
    return [t["server_label"] for t in tools_of(start, "mcp") if t["transport"]["type"] == "http"]


def probe_launch(start: dict[str, Any], box: Any, url: str) -> Optional[tuple[list[str], dict[str, str]]]:
    """How the probe runs so that it reaches what Claude Code reaches, or None where it cannot:
    - Claude Code shares the Runtime's network (a self-hosted machine, a Runtime without isolation): in this
      process (no argv: `run_probe` awaits static_probe.list_changed here, so no interpreter starts and imports
      `mcp` for each start of Claude Code);
    - a shared Runtime's namespace: in a network namespace of the same identity (the same egress route);
    - a hosted sandbox: the CLI reaches the public internet through the egress proxy only (with network access
      enabled), so the probe runs here through that proxy with the same policy; its loopback is the sandbox's own
      (nothing of the probe's is there), and without network access it reaches nothing else: not probed."""
    argv, env = [sys.executable, "-I", "-c", PROBE_SOURCE], dict(os.environ)
    namespace = start.get("namespace")
    if box is not None:
        egress = start.get("egress")
        host = (urllib.parse.urlsplit(url).hostname or "").lower()
        if egress is None or box.network != "enabled" or host in ("localhost", "::1") or host.startswith("127."):
            return None
        env = {k: v for k, v in env.items() if k.upper() != "ALL_PROXY"}
        env.update({name: egress.url for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")},
                   NO_PROXY="", no_proxy="")
    elif namespace is not None:
        argv, env = namespace.argv("claude_code", argv), namespace.environ(env)
    else:
        return [], env  # the Runtime's own network: in this process
    return argv, env


async def run_probe(argv: list[str], env: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    """static_probe.py's verdict: in this process when `argv` is empty (Claude Code shares its network), else as
    its own interpreter (the spec on stdin)."""
    if not argv:
        from . import static_probe

        try:
            return {"list_changed": await asyncio.wait_for(static_probe.list_changed(spec), PROBE_TIMEOUT)}
        except TimeoutError:
            return {"error": f"no answer within {PROBE_TIMEOUT:.0f} s"}
        except Exception as exc:  # noqa: BLE001 - reported by type only, as the probe process does (a message may
            while isinstance(exc, BaseExceptionGroup) and exc.exceptions:  # quote a header)
                exc = exc.exceptions[0]
            return {"error": type(exc).__name__}
    process = await asyncio.create_subprocess_exec(*argv, env=env, stdin=asyncio.subprocess.PIPE,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    try:
        out, _ = await asyncio.wait_for(process.communicate(json.dumps(spec).encode()), PROBE_TIMEOUT)
    except TimeoutError:
        out = json.dumps({"error": f"no answer within {PROBE_TIMEOUT:.0f} s"}).encode()
    finally:
        if process.returncode is None:
            process.kill()
    try:
        return json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"exit status {process.returncode}"}


def check_static(label: str, probed: dict[str, Any]) -> None:
    """"... requires static inventories": what the probe read of a connected HTTP server's capabilities."""
    if probed.get("list_changed"):
        raise AdapterError(REFUSAL.format(label=label))
    if "error" in probed:  # no announcement read (a blip, a server that answers one client at a time): not one
        log.warning("MCP server '%s': its capabilities could not be read (%s)", label, probed["error"])


class ClaudeSession(NativeSession):
    """One Session's native state: its config directory, its SDK client (one CLI process) and the
    native session id it resumes."""

    state_file, state_key = "session.json", "native_session_id"
    failures = (TimeoutError, AdapterError, OSError)

    def __init__(self, driver: NativeDriver, start: dict[str, Any]):
        super().__init__(driver, start)
        self.config_dir = self.root / "config"
        self.config_dir.mkdir(parents=True, exist_ok=True)
        if self.box is not None:
            self.box._own(self.config_dir)
            self.cwd = self.box.workspace  # where the process starts on this host; /workspace inside
        else:
            self.cwd = self.root / "work"  # environment none: a private empty directory
            self.cwd.mkdir(exist_ok=True)
        self.native_session: Optional[str] = self.saved_id()
        from .functions import FunctionsServer  # mcp: imported by a Claude Code Session, not by every Runtime

        self.functions = FunctionsServer(tools_of(start, "function"), self._tool_call) \
            if tools_of(start, "function") else None
        self.client: Any = None
        # The declared servers' unselected tools, hidden from the model: a server with allowed_tools [] from the
        # start, a list's other tools once the server's inventory is known (kept for later process starts).
        self.hidden: list[str] = adapter.hidden_tools(start)
        # Where the stdio servers' relay marks a refusal; inside a hosted sandbox only /usr's python3 is there.
        self.marks = self.config_dir / "static-inventory"
        self.relay = adapter.StaticRelay("/usr/bin/python3", self.box.inside(self.marks)) if self.box is not None \
            else adapter.StaticRelay(sys.executable, str(self.marks))
        self._owner: Optional[asyncio.Task[None]] = None
        self._stop: Optional[asyncio.Event] = None

    def save(self, native_session: str) -> None:
        if native_session and native_session != self.native_session:
            self.native_session = native_session
            self.keep_id(native_session)

    # -- the client --------------------------------------------------------------------------------
    async def _ensure(self, start: dict[str, Any]) -> Any:
        if await self.reuse(bearer_variables(start)[1]):
            return self.client
        probes = {label: asyncio.ensure_future(self._probe(start, label)) for label in _http_servers(start)}
        try:
            return await self._start(start, probes)
        finally:
            for probe in probes.values():
                probe.cancel()

    async def _start(self, start: dict[str, Any], probes: dict[str, asyncio.Future[dict[str, Any]]]) -> Any:
        for attempt in range(2):
            shutil.rmtree(self.marks, ignore_errors=True)
            self.marks.mkdir()
            if self.box is not None:
                self.box._own(self.marks)
            options = sdk_options(start, self.driver.provider, self.functions, config_dir=self.config_dir,
                                  cwd=self.cwd, binary=self.driver.binary, resume=self.native_session, box=self.box,
                                  namespace=start.get("namespace") if self.box is None else None,
                                  launchers=self.driver.state_dir, hidden=self.hidden, relay=self.relay)
            connected: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._stop = asyncio.Event()
            self._owner = asyncio.ensure_future(self._own(options, connected, self._stop))
            client = await asyncio.wait_for(asyncio.shield(connected), START_TIMEOUT)
            try:
                inventories = await self._check_servers(client, start, probes)
                hidden = adapter.hidden_tools(start, inventories)
                if not set(hidden) <= set(self.hidden):
                    if attempt:
                        raise AdapterError("An MCP server's tool inventory changed between two starts; Claude Code "
                                           "requires static inventories.")
                    # A server offers tools outside its allowed_tools: start again with them hidden, before the
                    # model sees anything (the inventory is static, so once per Session).
                    self.hidden = sorted({*self.hidden, *hidden})
                    await self.stop()
                    continue
                await self._check_offered(client, start, inventories)
            except BaseException:
                await self.stop()
                raise
            return client
        raise AssertionError("unreachable")

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
            if self.current is not None and not stop.is_set():
                self.current.fail("The Claude Code process exited.")

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

    async def _check_servers(self, client: Any, start: dict[str, Any],
                             probes: dict[str, asyncio.Future[dict[str, Any]]]) -> dict[str, list[str]]:
        """"As locally, Claude runs on without the tools of an optional server that did not connect;
        a required one fails the start." Servers connect after the CLI starts: wait (bounded) until
        none of the declared ones is pending. A connected server keeps the URL or command and the
        headers it was declared with, and has a static inventory."""
        declared = {t["server_label"]: t for t in tools_of(start, "mcp")}
        inventories: dict[str, list[str]] = {}
        if not declared:
            return inventories
        native = adapter.options(start, bearer_variables(start)[0], relay=self.relay)["mcpServers"]
        deadline = asyncio.get_running_loop().time() + MCP_CONNECT_TIMEOUT
        while True:
            for label in declared:  # "requires static inventories": optional or required, the start fails
                if (self.marks / label).exists():  # (the relay's mark, present only: its text is not ours)
                    raise AdapterError(REFUSAL.format(label=label))
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
                if label in probes:
                    check_static(label, await probes[label])
                inventories[label] = [str(t.get("name", "")) for t in server.get("tools") or []]
                continue
            if (self.marks / label).exists():  # marked after the last look
                raise AdapterError(REFUSAL.format(label=label))
            reason = server.get("error") or server.get("status")
            if tool.get("required"):
                raise AdapterError(f"Required MCP server '{label}' did not connect: {reason}")
            log.warning("optional MCP server '%s' did not connect (%s): running without it", label, reason)
        return inventories

    async def _check_offered(self, client: Any, start: dict[str, Any], inventories: dict[str, list[str]]) -> None:
        """Before any model request: the MCP tools Claude Code will offer the model (its context's tool
        inventory) are the Session's functions and each declared server's selected tools; the native
        StructuredOutput and ToolSearch are left to native (config.native_inventory_check)."""
        usage = await client.get_context_usage()
        reported = [str(t.get("name", "")) for t in (usage or {}).get("mcpTools") or []]
        extra = adapter.native_inventory_check(adapter.offered_tools(start, inventories), reported)
        if extra:
            raise AdapterError(f"Claude Code offers tools the Session does not declare: {', '.join(extra)}.")

    async def _probe(self, start: dict[str, Any], label: str) -> dict[str, Any]:
        """static_probe.py for one declared HTTP server, where Claude Code reaches it (`probe_launch`). The URL,
        headers and bearer go on stdin."""
        tool = next(t for t in tools_of(start, "mcp") if t["server_label"] == label)
        launch = probe_launch(start, self.box, tool["transport"]["server_url"])
        if launch is None:
            return {"unchecked": True}
        names, bearers = bearer_variables(start)
        headers = dict(tool["transport"].get("headers") or {})
        headers["Authorization"] = f"Bearer {bearers[names[label]]}" if label in names else ""
        return await run_probe(*launch, {"url": tool["transport"]["server_url"], "headers": headers})

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
