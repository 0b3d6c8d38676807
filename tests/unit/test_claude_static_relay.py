"""Issue 37 item 13: "Claude ... requires static inventories". Claude Code shows nothing of a server's
capabilities, so each declared stdio server starts behind `static_relay.py` (config.StaticRelay). Spoken to with
the `mcp` client through the relay's exact command line in the handshake era (`initialize`; the discover era, which
Claude Code speaks, is tested under real Claude Code in tests/e2e/test_claude_static_inventories.py): a real
server announcing `tools.listChanged` is refused with an error naming it and leaves the relay's mark; the same
server with a static inventory passes through unchanged. HTTP servers: where the probe runs."""

from __future__ import annotations

import json
import os
import pathlib
import sys

import anyio
import pytest

from runtime.harnesses.claude_code import config as adapter
from runtime.harnesses.claude_code.static_relay import REFUSAL
from runtime.harnesses.common import as_start
from tests.unit.helpers import SELF_HOSTED, resolve, session_body, stdio_mcp

SERVER = str(pathlib.Path(__file__).parents[1] / "e2e" / "mcp_stdio_changing_server.py")


def relayed(tmp_path: pathlib.Path, label: str, *args: str):
    from mcp.client.stdio import StdioServerParameters

    entry = adapter.StaticRelay(sys.executable, str(tmp_path)).entry(label, sys.executable, [SERVER, *args])
    return StdioServerParameters(command=entry["command"], args=entry["args"], cwd=str(tmp_path))


async def tools_through_relay(params, mode: str) -> list[str]:
    from mcp.client.client import Client

    with anyio.fail_after(30):
        async with Client(params, mode=mode) as client:
            return [t.name for t in (await client.list_tools()).tools]


def test_a_server_announcing_list_changed_is_refused_naming_it(tmp_path):
    from mcp.shared.exceptions import MCPError

    with pytest.raises(BaseExceptionGroup) as failed:  # the client's task groups wrap the handshake's error
        anyio.run(tools_through_relay, relayed(tmp_path, "moving"), "legacy")
    assert failed.group_contains(MCPError, match=REFUSAL.format(label="moving").replace(".", r"\."), depth=2)
    assert (tmp_path / "moving").read_text() == REFUSAL.format(label="moving")


def test_a_static_server_passes_through_the_relay(tmp_path):
    """(in the handshake era; real Claude Code speaks the discover era through it in tests/e2e)"""
    assert anyio.run(tools_through_relay, relayed(tmp_path, "still", "--static"), "legacy") == ["lookup"]
    assert not (tmp_path / "still").exists()


def test_claude_starts_each_declared_stdio_server_behind_the_relay_in_its_directory():
    relay = adapter.StaticRelay("/usr/bin/python3", "/state/claude_code/s/config/static-inventory")
    snapshot = as_start(json.loads(resolve(session_body([stdio_mcp()], harness="claude_code",
                                                        env=SELF_HOSTED)).to_json()))
    servers = adapter.options(snapshot, relay=relay)["mcpServers"]
    assert servers["files"] == {"type": "stdio", "command": "/usr/bin/python3", "args": [
        "-I", "-c", adapter.RELAY_SOURCE, "files", "/state/claude_code/s/config/static-inventory/files", "--",
        "mcp-files", "--ro"]}
    assert "import json" in adapter.RELAY_SOURCE and "cwd" not in servers["files"]  # the workspace, as before


# ---- HTTP servers: the probe reaches what Claude Code reaches ---------------------------------------------------

class _Box:  # a hosted sandbox as probe_launch reads it
    def __init__(self, network: str):
        self.network = network


def test_the_http_probe_runs_where_claude_code_would_reach_the_server():
    from runtime.harnesses.claude_code.session import PROBE_SOURCE, probe_launch

    egress = type("Egress", (), {"url": "http://127.0.0.1:4711"})()
    argv, env = probe_launch({}, None, "https://mcp.example/")  # Claude Code shares the Runtime's network: here
    assert argv == [] and env == dict(os.environ)
    argv, env = probe_launch({"egress": egress}, _Box("enabled"), "https://mcp.example/")
    assert argv == [sys.executable, "-I", "-c", PROBE_SOURCE]
    assert env["HTTPS_PROXY"] == env["http_proxy"] == egress.url and env["NO_PROXY"] == env["no_proxy"] == ""
    # a hosted sandbox without network access, or a loopback URL (the sandbox's own loopback): not probed
    assert probe_launch({"egress": egress}, _Box("disabled"), "https://mcp.example/") is None
    assert probe_launch({"egress": egress}, _Box("enabled"), "http://127.0.0.1:8000/mcp") is None
    namespace = type("Namespace", (), {"argv": lambda self, harness, cmd: ["bwrap", harness, *cmd],
                                       "environ": lambda self, env: {**env, "HTTPS_PROXY": "ns"}})()
    argv, env = probe_launch({"namespace": namespace}, None, "https://mcp.example/")
    assert argv[:3] == ["bwrap", "claude_code", sys.executable] and env["HTTPS_PROXY"] == "ns"


def test_a_hosted_sandboxs_probe_goes_through_the_egress_proxy_and_reads_list_changed(tmp_path):
    """The probe of a hosted Environment's HTTP server runs here, through the egress proxy only (a policy that
    allows the loopback test server; the proxy counts the connection), and reads what the server announces."""
    import ipaddress
    import socket
    import threading

    import mcp.types as types
    import uvicorn
    from mcp.server import Server
    from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler

    from local.inprocess import wait_for
    from runtime.environments.egress import EgressPolicy, EgressProxy
    from runtime.harnesses.claude_code.session import probe_launch, run_probe

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[])

    app = Server("moving", version="1.0.0", on_list_tools=list_tools,
                 on_subscriptions_listen=ListenHandler(InMemorySubscriptionBus())).streamable_http_app(
        stateless_http=True)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    proxy = EgressProxy(EgressPolicy((ipaddress.ip_network("127.0.0.0/8"),)), str(tmp_path / "egress")).start()
    try:
        wait_for(lambda: server.started, timeout=15)
        argv, env = probe_launch({"egress": proxy}, _Box("enabled"), "https://mcp.example/")
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        assert anyio.run(run_probe, argv, env, {"url": url, "headers": {"Authorization": ""}}) == \
            {"list_changed": True}
        assert proxy.connections > 0
        # Claude Code on the Runtime's own network: the same verdict read in this process, and a server that is
        # not there is an error named by its type only
        here, env = probe_launch({}, None, url)
        assert here == [] and anyio.run(run_probe, here, env, {"url": url, "headers": {"Authorization": ""}}) == \
            {"list_changed": True}
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{closed.getsockname()[1]}/mcp"
        closed.close()
        verdict = anyio.run(run_probe, here, env, {"url": gone, "headers": {"Authorization": "Bearer s3cret"}})
        assert set(verdict) == {"error"} and "s3cret" not in verdict["error"], verdict
    finally:
        proxy.stop()
        server.should_exit = True
        thread.join(10)
