"""Native tools follow the placement, proven by the tools each native Harness actually sent the model (the
scripted provider's request log), per Harness, placement and model name.

"On none, the model sees only what the Session declares: functions, tool_search, web_search per its
control, MCP tools." Codex decides part of its tool set from the model name (its bundled catalog), so the
none cases run several names: gpt-5.5 (the one catalog model without code mode), catalog models that are
code_mode_only with multi-agent v2 (gpt-6-sol) or v1 (gpt-5.6-luna), and a name the catalog does not know.

Sessions on `none` go through Core with the official SDK. The workspace tool set is driven at the driver
level (no Core dispatch): a workspace Session runs only inside its own Environment, which Core serves
through an enrolled connection, not a shared Runtime."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid

import pytest

from local.inprocess import wait_for
from tests.e2e.conftest import NativeRuntime

pytestmark = pytest.mark.e2e

FN = {"type": "function", "name": "get_weather", "description": "Weather for a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
PTC_OFF = {"type": "programmatic_tool_calling", "enabled": False}
SEARCH_LIVE = {"type": "web_search", "mode": "live"}
# Codex adds these three whenever an MCP server is declared, and inside code mode always (no key removes them).
CODEX_MCP_RESOURCES = {"list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource"}


# ---- what the model was offered --------------------------------------------------------------------

def codex_tools(body: dict) -> set[str]:
    """Every tool a Responses request offers: top-level tools, `additional_tools` input items (catalog
    models send their tools there), namespaced functions as `namespace.name` (`functions` is the default
    namespace), and in code mode the nested tools the `exec` tool declares, as `exec>name`."""
    names: set[str] = set()

    def add(tool: dict, namespace: str = "") -> None:
        if tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                add(inner, tool["name"])
            return
        name = tool.get("name") or tool.get("type")
        names.add(f"{namespace}.{name}" if namespace and namespace != "functions" else name)
        if tool.get("type") == "custom" and name == "exec":
            names.update("exec>" + n for n in re.findall(r"declare const tools: \{ (\w+)\(", tool.get("description", "")))

    for tool in body.get("tools") or []:
        add(tool)
    for item in body.get("input") or []:
        if item.get("type") == "additional_tools":
            for tool in item.get("tools") or []:
                add(tool)
    return names


def claude_tools(body: dict) -> set[str]:
    """The tools a Messages request loads. A `defer_loading` entry is not loaded: for some models Claude Code
    sends a `DeferredToolPlaceholder` ("keeps deferred tool loading active; never call this tool")."""
    return {t.get("name") for t in body.get("tools") or [] if not t.get("defer_loading")}


def marked(requests: list[dict], marker: str, key: str) -> list[dict]:
    return [r["body"] for r in requests if marker in json.dumps(r["body"].get(key))]


# ---- a real MCP server on loopback (streamable HTTP) ----------------------------------------------------

@pytest.fixture(scope="module")
def tickets_url():
    import mcp.types as types
    import uvicorn
    from mcp.server import Server

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[types.Tool(name="lookup", description="Look a ticket up",
                                                       input_schema={"type": "object", "properties": {}})])

    async def call_tool(ctx, params):
        return types.CallToolResult(content=[types.TextContent(type="text", text="ticket 7: open")])

    app = Server("tickets", version="1.0.0", on_list_tools=list_tools,
                 on_call_tool=call_tool).streamable_http_app(stateless_http=True)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=15)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    server.should_exit = True
    thread.join(10)


def tickets(url: str) -> dict:
    return {"type": "mcp", "server_label": "tickets", "transport": {"type": "http", "server_url": url},
            "required": True}


# ---- environment: none, through Core ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def codex(local_stack, runtime_process, tmp_path_factory):
    # One warm idle process at most: an earlier Session's process stops, and its next Turn resumes the thread.
    runtime = NativeRuntime(local_stack, tmp_path_factory.mktemp("codex_tools"), "codex", extra=("--warm-sessions", "1"))
    runtime.start()
    yield runtime
    runtime.stop()


@pytest.fixture(scope="module")
def claude(local_stack, runtime_process, tmp_path_factory):
    runtime = NativeRuntime(local_stack, tmp_path_factory.mktemp("claude_tools"), "claude_code")
    runtime.start()
    yield runtime
    runtime.stop()


def run_on_none(client, harness: str, model: str, tools: list, **agent) -> tuple[str, str]:
    """A `none` Session whose first Turn says a unique marker; returns (session id, marker) once it completed."""
    marker = f"tool set {uuid.uuid4().hex[:8]}"
    session = client.beta.agents.sessions.create(
        environment={"type": "none"}, agent={"model": model, "tools": tools, **agent}, input=f"say {marker}",
        extra_body={"x_agents_core": {"harness": harness}})
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status in ("idle", "failed"), timeout=40)
    turn = client.beta.agents.sessions.turns.list(session.id).data[0]
    assert turn.status == "completed", turn.model_extra
    return session.id, marker


CODEX_NONE = [
    # An omitted web_search keeps Codex's native search (issue 37, item 1); only a declared `disabled` removes it.
    pytest.param("gpt-5.5", [FN], {}, {"get_weather", "web_search"}, id="gpt-5.5"),
    pytest.param("gpt-5.5", [FN, {"type": "web_search", "mode": "disabled"}], {}, {"get_weather"},
                 id="gpt-5.5 web_search disabled"),
    pytest.param("gpt-5.5", [FN, SEARCH_LIVE], {}, {"get_weather", "web_search"}, id="gpt-5.5 web_search live"),
    pytest.param("gpt-5.5", [FN], {"multi_agent": {"enabled": True}},
                 {"get_weather", "web_search", "multi_agent_v1.spawn_agent", "multi_agent_v1.send_input", "multi_agent_v1.wait_agent",
                  "multi_agent_v1.close_agent", "multi_agent_v1.resume_agent"}, id="gpt-5.5 multi_agent on"),
    pytest.param("gpt-6-sol", [FN, PTC_OFF], {}, {"get_weather"}, id="gpt-6-sol programmatic_tool_calling false"),
    # An omitted control keeps native code mode: exec (and wait) over the declared function, plus Codex's
    # MCP resource readers, which code mode always carries.
    pytest.param("gpt-6-sol", [FN], {}, {"exec", "wait", "exec>get_weather", *("exec>" + n for n in CODEX_MCP_RESOURCES)},
                 id="gpt-6-sol programmatic_tool_calling omitted"),
    # Catalog models other than gpt-5.5 use the Responses "lite" wire, on which Codex offers search only as a
    # standalone tool of a provider that supports it (the scripted one does not): live search is absent.
    pytest.param("gpt-5.6-luna", [FN, PTC_OFF, SEARCH_LIVE], {}, {"get_weather"},
                 id="gpt-5.6-luna programmatic_tool_calling false, web_search live"),
    pytest.param("gpt-5", [FN], {}, {"get_weather", "web_search"}, id="a model the catalog does not know"),
]


@pytest.mark.parametrize(("model", "tools", "agent", "expected"), CODEX_NONE)
def test_codex_on_none_the_model_sees_only_what_the_session_declares(client, codex, model, tools, agent, expected):
    _, marker = run_on_none(client, "codex", model, tools, **agent)
    bodies = marked(codex.requests(), marker, "input")
    assert bodies and bodies[0]["model"] == model
    assert codex_tools(bodies[0]) == expected


def test_codex_on_none_a_declared_mcp_server_adds_its_tools(client, codex, tickets_url):
    _, marker = run_on_none(client, "codex", "gpt-6-sol", [FN, PTC_OFF, tickets(tickets_url)])
    assert codex_tools(marked(codex.requests(), marker, "input")[0]) == {
        "get_weather", "mcp__tickets.lookup", *CODEX_MCP_RESOURCES}


def test_codex_a_resumed_thread_keeps_the_none_tool_set(client, codex):
    first, marker = run_on_none(client, "codex", "gpt-6-sol", [FN, PTC_OFF])
    run_on_none(client, "codex", "gpt-5.5", [FN])  # beyond the warm limit: the first Session's process stops
    wait_for(lambda: f"stopping the idle process of {first}" in codex.stderr.read_text(), timeout=15)
    client.beta.agents.sessions.events.create(first, events=[{
        "type": "agent.session.input.message",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": f"say again {marker}"}]}]}])
    wait_for(lambda: len(client.beta.agents.sessions.turns.list(first).data) == 2
             and client.beta.agents.sessions.retrieve(first).status == "idle", timeout=40)
    resumed = marked(codex.requests(), f"again {marker}", "input")
    assert resumed and codex_tools(resumed[-1]) == {"get_weather"}  # environments: [] on the resumed Turn too


CLAUDE_NONE = [
    pytest.param("claude-sonnet-4-5", [FN], {"mcp__functions__get_weather"}, id="claude-sonnet-4-5"),
    pytest.param("claude-opus-4-1", [FN, SEARCH_LIVE], {"mcp__functions__get_weather", "WebSearch"},
                 id="claude-opus-4-1 web_search live"),
    pytest.param("claude-haiku-4-5", [FN, {"type": "web_search", "mode": "disabled"}], {"mcp__functions__get_weather"},
                 id="claude-haiku-4-5 web_search disabled"),
]


@pytest.mark.parametrize(("model", "tools", "expected"), CLAUDE_NONE)
def test_claude_code_on_none_the_model_sees_only_what_the_session_declares(client, claude, model, tools, expected):
    _, marker = run_on_none(client, "claude_code", model, tools)
    bodies = marked(claude.requests(), marker, "messages")
    assert bodies  # (the model Claude Code sends may be a newer name: it maps claude-opus-4-1 to claude-opus-5-5)
    assert claude_tools(bodies[0]) == expected


def test_claude_code_on_none_a_declared_mcp_server_adds_its_tools(client, claude, tickets_url):
    _, marker = run_on_none(client, "claude_code", "claude-sonnet-4-5", [FN, tickets(tickets_url)])
    assert claude_tools(marked(claude.requests(), marker, "messages")[0]) == {
        "mcp__functions__get_weather", "mcp__tickets__lookup"}


# ---- a workspace placement, at the driver level ------------------------------------------------------------

def drive(driver, model: str, tools: list, workspace: str, marker: str) -> None:
    from runtime.protocol import TurnChannel

    start = {"type": "turn.start", "tenant": "t", "session_id": f"sess_{uuid.uuid4().hex[:12]}", "turn_id": "turn_1",
             "harness": driver.harness, "environment": {"type": "self_hosted", "workspace_directory": workspace},
             "agent": {"model": model, "reasoning": None, "service_tier": None,
                       "tools": [{"defer_loading": False, **t} if t["type"] == "function" else t for t in tools],
                       "text": {"format": {"type": "text"}, "verbosity": None},
                       "multi_agent": {"enabled": False, "max_concurrent_subagents": None}},
             "execution_controls": {}, "input": [{"role": "user", "content": [{"type": "input_text",
                                                                                "text": f"say {marker}"}]}]}
    sent: list[dict] = []
    channel = TurnChannel(start, sent.append, heartbeat_seconds=30)
    driver.start_turn(start, channel)
    assert channel.done.wait(60), "the Turn did not end"
    assert "turn.completed" in json.dumps(sent), sent[-3:]


@pytest.fixture(scope="module")
def provider():
    from runtime.providers import ScriptedProvider

    scripted = ScriptedProvider().start()
    yield scripted
    scripted.stop()


def with_marker(provider, marker: str, key: str) -> dict:
    return wait_for(lambda: [r["body"] for r in list(provider.requests) if marker in json.dumps(r["body"].get(key))],
                    timeout=5)[0]


CODEX_WORKSPACE = {"exec_command", "write_stdin", "view_image", "get_weather"}


@pytest.mark.parametrize(("model", "workspace_tools"), [
    ("gpt-5.5", {*CODEX_WORKSPACE, "apply_patch"}), ("gpt-6-sol", {*CODEX_WORKSPACE, "apply_patch"}),
    ("gpt-5", CODEX_WORKSPACE),  # the fallback metadata of an unknown name has no apply_patch
])
def test_codex_on_a_workspace_the_native_workspace_tools_stay(provider, tmp_path, model, workspace_tools):
    from runtime.harnesses.codex.config import Provider
    from runtime.harnesses.codex.driver import CodexDriver

    driver = CodexDriver(Provider("scripted", provider.base_url + "/v1"), str(tmp_path / "state"), max_warm=0)
    try:
        marker = f"workspace {model} {time.time()}"
        drive(driver, model, [FN, PTC_OFF], str(tmp_path), marker)
        offered = codex_tools(with_marker(provider, marker, "input"))
    finally:
        driver.close()
    assert workspace_tools <= offered, offered
    assert "exec" not in offered  # programmatic_tool_calling false holds on every placement


def test_claude_code_on_a_workspace_the_native_preset_runs_without_excluded_tools(provider, tmp_path):
    from runtime.harnesses.claude_code.driver import ClaudeCodeDriver
    from runtime.harnesses.claude_code.session import Provider

    driver = ClaudeCodeDriver(Provider("scripted", provider.base_url), str(tmp_path / "state"), max_warm=0)
    try:
        marker = f"workspace claude {time.time()}"
        drive(driver, "claude-sonnet-4-5", [FN], str(tmp_path), marker)
        offered = claude_tools(with_marker(provider, marker, "messages"))
    finally:
        driver.close()
    assert {"Bash", "Read", "Edit", "Write", "mcp__functions__get_weather"} <= offered, offered
    assert not {"AskUserQuestion", "CronCreate", "ScheduleWakeup"} & offered
