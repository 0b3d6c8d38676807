"""MCP calls played and observed: the scripted provider's `mcp LABEL TOOL {json}` step (a call of the declared
server's tool under its native name: Codex's namespace `mcp__LABEL`, Claude Code's `mcp__LABEL__TOOL`), and the
public mcp_call Item built from the native result (status from the native item; an isError result is failed
with the tool's text as the error)."""

from __future__ import annotations

import json
import urllib.request

from runtime.harnesses.codex.driver import _mcp_item
from runtime.providers import ScriptedProvider, script
from runtime.providers.anthropic import plan_blocks


def test_the_mcp_step_names_the_server_and_its_tool():
    steps = script.parse('mcp tickets lookup_ticket {"id": "7"}\nsay done')
    assert (steps[0].verb, steps[0].server, steps[0].name, steps[0].arguments) == \
        ("call", "tickets", "lookup_ticket", '{"id": "7"}')
    assert script.next_response(steps, 1).texts == ["done"]


def test_claude_code_gets_a_tool_use_of_the_native_server_tool_name():
    body = {"model": "claude", "tools": [{"name": "mcp__my__srv__lookup", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": 'mcp my__srv lookup {"id": 1}'}]}]}
    _, blocks, stop = plan_blocks(body)
    assert stop == "tool_use" and blocks[0]["name"] == "mcp__my__srv__lookup" and blocks[0]["input"] == {"id": 1}


def test_codex_gets_a_function_call_in_the_server_namespace():
    provider = ScriptedProvider().start()
    try:
        request = urllib.request.Request(provider.base_url + "/v1/responses", method="POST", data=json.dumps(
            {"model": "gpt-5", "input": [{"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": 'mcp tickets lookup_ticket {"id": "7"}'}]}]}).encode(),
            headers={"content-type": "application/json"})
        text = urllib.request.urlopen(request, timeout=5).read().decode()  # noqa: S310 - loopback
    finally:
        provider.stop()
    done = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")
            and '"response.output_item.done"' in line]
    item = done[0]["item"]
    assert (item["type"], item["namespace"], item["name"], item["arguments"]) == \
        ("function_call", "mcp__tickets", "lookup_ticket", '{"id": "7"}')


def native(status, result=None, error=None):
    return {"type": "mcpToolCall", "id": "call_1", "server": "tickets", "tool": "lookup_ticket", "status": status,
            "arguments": {"id": "7"}, "result": result, "error": error}


def test_mcp_call_items_take_their_status_from_the_native_item():
    ok = native("completed", {"content": [{"type": "text", "text": "ticket 7: open"}]})
    assert _mcp_item(ok, "completed")["status"] == "completed"
    assert _mcp_item(ok, "in_progress") == {"id": "call_1", "type": "mcp_call", "server_label": "tickets",
                                           "name": "lookup_ticket", "arguments": {"id": "7"}, "output": None,
                                           "error": None, "status": "in_progress"}
    is_error = _mcp_item(native("failed", {"content": [{"type": "text", "text": "no such ticket"}], "isError": True}),
                         "completed")
    assert is_error["status"] == "failed" and is_error["error"] == "no such ticket"
    down = _mcp_item(native("failed", None, {"message": "HTTP 401"}), "completed")
    assert down["status"] == "failed" and down["error"] == {"message": "HTTP 401"}


def test_codex_waits_for_declared_servers_to_start_before_the_first_turn():
    """"An optional server is not waited for: a Turn started at once runs without its tools": the session
    waits until each declared server reported ready or failed (mcpServer/startupStatus/updated)."""
    import asyncio
    import time
    import types

    from runtime.harnesses.codex.session import CodexSession

    start = {"agent": {"tools": [{"type": "mcp", "server_label": "a"}, {"type": "mcp", "server_label": "b"}]}}

    async def scenario():
        session = types.SimpleNamespace(mcp_status={}, mcp_changed=asyncio.Event())
        session._notification = lambda m, p: CodexSession._notification(session, m, p)
        session.current = None

        async def report():
            await asyncio.sleep(0.05)
            session._notification("mcpServer/startupStatus/updated", {"name": "a", "status": "starting"})
            await asyncio.sleep(0.05)
            session._notification("mcpServer/startupStatus/updated", {"name": "a", "status": "ready"})
            session._notification("mcpServer/startupStatus/updated", {"name": "b", "status": "failed",
                                                                      "error": "HTTP 401"})
        began = time.monotonic()
        reporter = asyncio.ensure_future(report())
        await CodexSession._await_mcp_startup(session, start)
        await reporter
        return time.monotonic() - began, session.mcp_status

    waited, status = asyncio.run(scenario())
    assert 0.09 < waited < 5 and status["a"]["status"] == "ready" and status["b"]["status"] == "failed"


def test_a_required_server_that_did_not_start_is_named_with_its_reason():
    from runtime.harnesses.codex.session import readable_error

    native = ("4: error creating thread: Fatal error: Failed to initialize session: required MCP servers failed to "
              "initialize: tickets: handshaking with MCP server failed: Send message error Transport [codex_rmcp_client"
              "::event_notification_transport::EventNotificationTransport<rmcp::transport::worker::WorkerTransport<...>>]"
              " error: Client error: HTTP 401 Unauthorized")
    assert readable_error(native) == \
        "Required MCP server 'tickets' did not start: the server refused the credential (HTTP 401)."
    assert readable_error("required MCP servers failed to initialize: docs: MCP_TOKEN is not set") == \
        "Required MCP server 'docs' did not start: its bearer variable is not set."
    assert readable_error("something else") == "something else"
    real = ("4: error creating thread: required MCP servers failed to initialize: tickets: handshaking with MCP server "
            "failed: Send message error Transport [codex_rmcp_client::X<rmcp::Y>] error: Auth required, when send "
            "initialize request")  # Codex 0.163.0 on a 401 with WWW-Authenticate
    assert readable_error(real).endswith("the server refused the credential (HTTP 401).")
    odd = "required MCP servers failed to initialize: t: handshake failed: Transport [a::B<c::D>] error: EOF"
    assert readable_error(odd) == "Required MCP server 't' did not start: handshake failed: Transport error: EOF."
