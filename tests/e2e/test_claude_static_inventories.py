"""Issue 37 item 13, on real Claude Code at the driver level against the scripted model provider: "Claude ...
requires static inventories". A declared MCP server (python `mcp`) that announces `tools.listChanged` fails the
start, optional or not, thread creation or cold resume, with an error naming it and before any model request: a
stdio server (through the relay; test_claude_code.py's static stdio server is called through it, and
test_hosted_environments.py's runs through it inside a hosted sandbox) and an HTTP server (the probe)."""

from __future__ import annotations

import json
import pathlib
import sys
import uuid

import pytest

from tests.e2e.test_native_mcp_contract import claude_driver, http, provider, run_turn, start_of, terminal  # noqa: F401

pytestmark = pytest.mark.e2e

SERVER = str(pathlib.Path(__file__).with_name("mcp_stdio_changing_server.py"))


def stdio(label: str, workspace: pathlib.Path, *args: str, required: bool = False) -> dict:
    return {"type": "mcp", "server_label": label, "connection_origin": "environment", "allowed_tools": None,
            "required": required, "transport": {"type": "stdio", "command": sys.executable, "args": [SERVER, *args],
                                                "cwd": str(workspace), "env_vars": []}}


def test_a_server_announcing_list_changed_fails_the_start_naming_it(claude_driver, provider, tmp_path):  # noqa: F811
    marker = f"never {uuid.uuid4().hex[:8]}"
    tools = [stdio("static", tmp_path, "--static", required=True), stdio("moving", tmp_path)]  # optional
    start = start_of("claude_code", "claude-sonnet-4-5", tools, str(tmp_path), f"sess_{uuid.uuid4().hex[:12]}")
    end = terminal(run_turn(claude_driver, start, "turn_1", f"say {marker}"))
    assert end["action"] == "turn.failed", end
    assert end["error"]["message"] == \
        "MCP server 'moving' announces tools.listChanged; Claude Code requires static inventories."
    assert not [r for r in list(provider.requests) if marker in json.dumps(r["body"].get("messages"))]



@pytest.fixture(scope="module")
def toggled():
    """A loopback streamable-HTTP MCP server (python `mcp`) with a static inventory until the test makes it serve
    `subscriptions/listen`, from when its `server/discover` answer announces `tools.listChanged`."""
    import socket
    import threading

    import mcp.types as types
    import uvicorn
    from mcp.server import Server
    from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler

    from local.inprocess import wait_for

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[types.Tool(name="lookup", description="Look a ticket up",
                                                       input_schema={"type": "object", "properties": {}})])

    async def call_tool(ctx, params):
        return types.CallToolResult(content=[types.TextContent(type="text", text="ticket 7: open")])

    server = Server("tickets", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    uv = uvicorn.Server(uvicorn.Config(server.streamable_http_app(stateless_http=True), log_level="warning",
                                       timeout_graceful_shutdown=1))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: uv.started, timeout=15)

    def start_changing() -> None:
        server.add_request_handler("subscriptions/listen", types.SubscriptionsListenRequestParams,
                                   ListenHandler(InMemorySubscriptionBus()))
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", start_changing
    uv.should_exit = True
    thread.join(10)


def test_an_http_server_that_announces_list_changed_at_cold_resume_fails_that_start(claude_driver, provider,  # noqa: F811
                                                                                    toggled, tmp_path):
    """Probed the way Claude Code connects (the same URL, headers and network) at every start: a static server's
    tool is called; once it announces `tools.listChanged`, the cold resume fails naming it, before any model
    request."""
    from local.inprocess import wait_for

    url, start_changing = toggled
    start = start_of("claude_code", "claude-sonnet-4-5", [http("tickets", url, required=True)], str(tmp_path),
                     f"sess_{uuid.uuid4().hex[:12]}")
    start["environment"] = {"type": "none"}
    sent = run_turn(claude_driver, start, "turn_1", "mcp tickets lookup {}\nsay static ok")
    assert terminal(sent)["action"] == "turn.completed", terminal(sent)
    assert "ticket 7: open" in json.dumps(sent)
    session = claude_driver.sessions[start["session_id"]]
    wait_for(lambda: not session.alive, timeout=15)  # max_warm=0: the idle process stops; the next Turn resumes
    start_changing()
    marker = f"never {uuid.uuid4().hex[:8]}"
    end = terminal(run_turn(claude_driver, start, "turn_2", f"say {marker}"))
    assert end["action"] == "turn.failed", end
    assert end["error"]["message"] == \
        "MCP server 'tickets' announces tools.listChanged; Claude Code requires static inventories."
    assert not [r for r in list(provider.requests) if marker in json.dumps(r["body"].get("messages"))]
