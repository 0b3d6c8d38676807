"""Issue 37 item 13, on real Claude Code at the driver level against the scripted model provider: "Claude ...
requires static inventories". A declared stdio MCP server (python `mcp`) that announces `tools.listChanged` fails
the start, optional or not, with an error naming it and before any model request. The same relay passes a static
server through: test_claude_code.py's stdio server is called through it (and test_hosted_environments.py's runs
through it inside a hosted sandbox)."""

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
def http_servers():
    """Two loopback streamable-HTTP MCP servers (python `mcp`): /moving/mcp announces `tools.listChanged` (it
    serves `subscriptions/listen`), /still/mcp does not."""
    import contextlib
    import socket
    import threading

    import mcp.types as types
    import uvicorn
    from mcp.server import Server
    from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from local.inprocess import wait_for

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[types.Tool(name="lookup", description="Look a ticket up",
                                                       input_schema={"type": "object", "properties": {}})])

    def app(changing: bool):
        listen = {"on_subscriptions_listen": ListenHandler(InMemorySubscriptionBus())} if changing else {}
        return Server("tickets", version="1.0.0", on_list_tools=list_tools, **listen) \
            .streamable_http_app(stateless_http=True)

    apps = {"moving": app(True), "still": app(False)}

    @contextlib.asynccontextmanager
    async def lifespan(_):
        async with apps["moving"].router.lifespan_context(_), apps["still"].router.lifespan_context(_):
            yield
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    uv = uvicorn.Server(uvicorn.Config(Starlette(routes=[Mount(f"/{k}", app=v) for k, v in apps.items()],
                                                 lifespan=lifespan), log_level="warning", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: uv.started, timeout=15)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    uv.should_exit = True
    thread.join(10)


def test_an_http_server_announcing_list_changed_fails_the_start_naming_it(claude_driver, provider, http_servers,  # noqa: F811
                                                                          tmp_path):
    """Probed the way Claude Code connects (same URL, headers and network); the static one beside it connected and
    passed (an HTTP server's tools called through Claude Code after the probe: test_native_mcp_contract.py)."""
    marker = f"never {uuid.uuid4().hex[:8]}"
    tools = [http("still", http_servers + "/still/mcp", required=True), http("moving", http_servers + "/moving/mcp")]
    start = start_of("claude_code", "claude-sonnet-4-5", tools, str(tmp_path), f"sess_{uuid.uuid4().hex[:12]}")
    start["environment"] = {"type": "none"}
    end = terminal(run_turn(claude_driver, start, "turn_1", f"say {marker}"))
    assert end["action"] == "turn.failed", end
    assert end["error"]["message"] == \
        "MCP server 'moving' announces tools.listChanged; Claude Code requires static inventories."
    assert not [r for r in list(provider.requests) if marker in json.dumps(r["body"].get("messages"))]
