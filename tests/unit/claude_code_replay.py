"""A recorded Claude Code exchange, replayed at the Claude Agent SDK boundary.

`claude_code_exchange.json` holds what the real CLI (claude-agent-sdk 0.2.189, Claude Code 2.1.332) sent
the driver on this machine against the scripted provider: the stream-json messages (parsed here with the
SDK's own `parse_message`) and the MCP JSON-RPC messages for the `functions` server, which this replay
sends through the SDK's own in-process bridge (`SdkMcpBridge`) to the driver's real `mcp.server.Server`.
The replay waits where the CLI waited: for our tools/call answer, or for an interrupt.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
from typing import Any

from claude_agent_sdk._internal.message_parser import parse_message
from claude_agent_sdk._internal.sdk_mcp_bridge import SdkMcpBridge

RECORDED = json.loads(pathlib.Path(__file__).with_name("claude_code_exchange.json").read_text())


class ReplayClient:
    """Stands in for `ClaudeSDKClient(options)`; one instance per native process."""

    instances: list[ReplayClient] = []

    def __init__(self, scenario: str, options: Any, mcp_status: dict[str, Any] | None = None,
                 connect_seconds: float = 0.0):
        self.scenario = RECORDED[scenario]
        self.options = options
        self.mcp_status = mcp_status or {"mcpServers": []}
        self.queries: list[Any] = []
        self.replies: list[dict[str, Any]] = []  # what our MCP server answered, in order
        self.interrupted = asyncio.Event()
        self.out: asyncio.Queue[Any] = asyncio.Queue()
        self.bridge: SdkMcpBridge | None = None
        self.disconnected = False
        self.connect_seconds = connect_seconds  # how long the native process takes to start
        ReplayClient.instances.append(self)

    @classmethod
    def factory(cls, scenario: str, **kwargs: Any) -> Any:
        return lambda options: cls(scenario, options, **kwargs)

    async def connect(self) -> None:
        await asyncio.sleep(self.connect_seconds)
        server = (self.options.mcp_servers.get("functions") or {}).get("instance")
        if server is not None:
            self.bridge = SdkMcpBridge("functions", server)
            for message in self.scenario["handshake"]:
                reply = await self.bridge.handle(message)
                if reply is not None:
                    self.replies.append(reply)

    async def query(self, prompt: Any) -> None:
        if not isinstance(prompt, str):
            messages = [m async for m in prompt]
            assert all(m.get("uuid") for m in messages)  # each names itself, so results can say what they took in
            prompt = messages[0]["message"]["content"] if len(messages) == 1 else messages
        self.queries.append(prompt)
        if len(self.queries) == 1:
            asyncio.ensure_future(self._play())

    async def _play(self) -> None:
        call: asyncio.Future[Any] | None = None
        for kind, raw in self.scenario["play"]:
            if kind == "cli":
                if call is not None:  # the CLI reports the tool result once the call has an answer
                    self.replies.append(await call)
                    call = None
                await self.out.put(parse_message(raw))
            elif kind == "mcp" and raw.get("method") == "tools/call":
                assert self.bridge is not None
                call = asyncio.ensure_future(self.bridge.handle(raw))
            elif kind == "mcp" and raw.get("method") == "notifications/cancelled":
                await self.interrupted.wait()  # the recorded run was interrupted here
                assert self.bridge is not None
                await self.bridge.handle(raw)

    async def receive_messages(self) -> Any:
        while True:
            yield await self.out.get()

    async def interrupt(self) -> None:
        self.interrupted.set()

    async def get_mcp_status(self) -> dict[str, Any]:
        return self.mcp_status

    async def get_context_usage(self) -> dict[str, Any]:
        """The MCP tools the CLI would offer, as verified with the real one: the functions server's and each
        connected server's, less what `disallowed_tools` names (a tool, or a whole server as `mcp__LABEL`)."""
        hidden = set(self.options.disallowed_tools or [])
        names = [t for t in self.options.allowed_tools or [] if t.startswith("mcp__functions__")]
        for server in self.mcp_status.get("mcpServers") or []:
            if server.get("status") == "connected" and f"mcp__{server['name']}" not in hidden:
                names += [n for n in (f"mcp__{server['name']}__{t['name']}" for t in server.get("tools") or [])
                          if n not in hidden]
        return {"mcpTools": [{"name": n, "serverName": n.split("__")[1], "isLoaded": True} for n in names]}

    async def disconnect(self) -> None:
        self.disconnected = True
        if self.bridge is not None:
            await self.bridge.aclose()


def recorded(scenario: str, kind: str, index: int = 0) -> dict[str, Any]:
    return [raw for k, raw in RECORDED[scenario]["play"] if k == kind][index]
