"""Issue 37's native MCP items, on real Codex and real Claude Code at the driver level (no Core dispatch: a
workspace Session runs only inside its Environment) against the scripted model provider and a real loopback
streamable-HTTP MCP server (python `mcp`) that records what reached it.

- "headers ... reach the native Harness unchanged beside any bearer" (item 8) and "[] permits none" (item 18):
  the server sees the declared header and the Vault bearer on its requests, and no `tools/call` of a server
  whose allowed_tools is [], whatever the model tries.
- Claude: "the adapter can hide unselected tools only on HTTP servers" (item 11) and "the adapter's inventory
  check leaves it and ToolSearch to native" (item 12): the model is offered exactly the selected tools.
- Codex "writes command, args, cwd and env_vars ... and verifies them" (item 9): a project configuration that
  changes one fails the start.
- "required: true makes native thread creation and cold resume wait for the server ...; a failure stops execution
  without replacing retained history" (items 10 and 19)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import threading
import uuid

import pytest

from local.inprocess import wait_for

pytestmark = pytest.mark.e2e

TOKEN = f"e2e-mcp-bearer-{uuid.uuid4().hex}"
HEADER = ("X-Ticket-Realm", f"realm-{uuid.uuid4().hex[:8]}")
STDIO_SERVER = str(__import__("pathlib").Path(__file__).with_name("mcp_stdio_server.py"))


class Recorder:
    """ASGI middleware: remembers each request's declared header and bearer verdict and each JSON-RPC method
    (with the tool name of a tools/call), and answers 503 while `down`."""

    def __init__(self, app):
        self.app = app
        self.down = False
        self.slow = 0.0  # seconds an `initialize` waits before it is answered
        self.seen: list[dict] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            rpc = json.loads(body) if body else {}
        except ValueError:
            rpc = {}
        self.seen.append({"path": scope["path"], "header": headers.get(HEADER[0].lower().encode(), b"").decode(),
                          "bearer": headers.get(b"authorization", b"").decode() == f"Bearer {TOKEN}",
                          "method": rpc.get("method") if isinstance(rpc, dict) else None,
                          "tool": ((rpc.get("params") or {}).get("name") if isinstance(rpc, dict) else None)})
        if self.slow and self.seen[-1]["method"] == "initialize":
            await asyncio.sleep(self.slow)
        if self.down:
            await send({"type": "http.response.start", "status": 503, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"down"})
            return
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, replay, send)

    def calls(self, path: str) -> list[str]:
        return [s["tool"] for s in self.seen if s["path"] == path and s["method"] == "tools/call"]


@pytest.fixture(scope="module")
def server():
    """Two servers on one loopback port: /tickets/mcp (`lookup`, `secret`) and /silent/mcp (`lookup`)."""
    import mcp.types as types
    import uvicorn
    from mcp.server import Server
    from starlette.applications import Starlette
    from starlette.routing import Mount

    def tickets_server(name: str, tools: tuple[str, ...]):
        async def list_tools(ctx, params):
            return types.ListToolsResult(tools=[types.Tool(name=t, description=f"The {t} tool",
                                                           input_schema={"type": "object", "properties": {}})
                                                for t in tools])

        async def call_tool(ctx, params):
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"{name} {params.name}: ok")])
        return Server(name, version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)

    apps = {"tickets": tickets_server("tickets", ("lookup", "secret")).streamable_http_app(stateless_http=True),
            "silent": tickets_server("silent", ("lookup",)).streamable_http_app(stateless_http=True)}

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with apps["tickets"].router.lifespan_context(app), apps["silent"].router.lifespan_context(app):
            yield
    recorder = Recorder(Starlette(routes=[Mount(f"/{k}", app=v) for k, v in apps.items()], lifespan=lifespan))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    uv = uvicorn.Server(uvicorn.Config(recorder, log_level="warning", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: uv.started, timeout=15)
    recorder.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    yield recorder
    uv.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def provider():
    from runtime.providers import ScriptedProvider

    scripted = ScriptedProvider().start()
    yield scripted
    scripted.stop()


def http(label: str, url: str, *, allowed=None, required=False, headers=None) -> dict:
    return {"type": "mcp", "server_label": label, "connection_origin": "environment", "allowed_tools": allowed,
            "required": required, "transport": {"type": "http", "server_url": url, "headers": headers}}


def start_of(harness: str, model: str, tools: list, workspace: str, session_id: str, **extra) -> dict:
    return {"type": "turn.start", "tenant": "t", "session_id": session_id, "turn_id": "turn_1", "harness": harness,
            "environment": {"type": "self_hosted", "workspace_directory": workspace},
            "agent": {"model": model, "reasoning": None, "service_tier": None, "tools": tools,
                      "text": {"format": {"type": "text"}, "verbosity": None},
                      "multi_agent": {"enabled": False, "max_concurrent_subagents": None}},
            "execution_controls": {}, **extra}


def run_turn(driver, start: dict, turn_id: str, script: str) -> list[dict]:
    """One Turn of the Session `start` names; returns what the Runtime would have sent Core."""
    from runtime.protocol import TurnChannel

    start = {**start, "turn_id": turn_id,
             "input": [{"role": "user", "content": [{"type": "input_text", "text": script}]}]}
    sent: list[dict] = []
    channel = TurnChannel(start, sent.append, heartbeat_seconds=30)
    driver.start_turn(start, channel)
    assert channel.done.wait(90), f"the Turn did not end: {sent[-3:]}"
    return sent


def terminal(sent: list[dict]) -> dict:
    flat = [o for m in sent for o in (m.get("observations") or [m] if m["action"] == "turn.batch" else [m])]
    return next(m for m in reversed(flat) if m["action"] in ("turn.completed", "turn.failed", "turn.cancelled"))


def with_marker(provider, marker: str, key: str) -> list[dict]:
    return [r["body"] for r in list(provider.requests) if marker in json.dumps(r["body"].get(key))]


@pytest.fixture
def codex_driver(provider, tmp_path):
    from runtime.harnesses.codex.config import Provider
    from runtime.harnesses.codex.driver import CodexDriver

    driver = CodexDriver(Provider("scripted", provider.base_url + "/v1"), str(tmp_path / "state"), max_warm=0)
    yield driver
    driver.close()


@pytest.fixture
def claude_driver(provider, tmp_path):
    from runtime.harnesses.claude_code.driver import ClaudeCodeDriver
    from runtime.harnesses.claude_code.session import Provider

    driver = ClaudeCodeDriver(Provider("scripted", provider.base_url), str(tmp_path / "state"), max_warm=0)
    yield driver
    driver.close()


# ---- Codex: the declared stdio entry is verified in what Codex loaded (item 9) -------------------------------

@pytest.mark.parametrize(("override", "key"), [
    ('args = ["/tmp/elsewhere.py"]', "args"),
    ('cwd = "/"', "cwd"),
    ('env_vars = ["HOME", "PATH"]', "env_vars"),
])
def test_codex_a_project_configuration_that_changes_a_declared_stdio_server_fails_the_start(
        codex_driver, tmp_path, override, key):
    workspace = tmp_path / "ws"
    (workspace / ".codex").mkdir(parents=True)
    (workspace / ".codex" / "config.toml").write_text(f"[mcp_servers.files]\n{override}\n")
    stdio = {"type": "mcp", "server_label": "files", "connection_origin": "environment", "allowed_tools": None,
             "required": False, "transport": {"type": "stdio", "command": sys.executable, "args": [STDIO_SERVER],
                                              "cwd": str(workspace), "env_vars": ["HOME"]}}
    start = start_of("codex", "gpt-5.5", [stdio], str(workspace), f"sess_{uuid.uuid4().hex[:12]}")
    end = terminal(run_turn(codex_driver, start, "turn_1", "answer never"))
    assert end["action"] == "turn.failed"
    assert end["error"]["message"] == f"Declared MCP server 'files' changed '{key}' in the loaded Codex configuration."


# ---- a required server at cold resume (items 10 and 19) ------------------------------------------------------

def test_codex_a_required_server_down_at_cold_resume_fails_that_start_and_history_is_kept(
        codex_driver, provider, server, tmp_path):
    start = start_of("codex", "gpt-5.5", [http("tickets", server.base + "/tickets/mcp", required=True)],
                     str(tmp_path), f"sess_{uuid.uuid4().hex[:12]}")
    first = f"first {uuid.uuid4().hex[:8]}"
    assert terminal(run_turn(codex_driver, start, "turn_1", f"answer {first}"))["action"] == "turn.completed"
    session = codex_driver.sessions[start["session_id"]]
    wait_for(lambda: not session.alive, timeout=15)  # max_warm=0: the idle process stops; the next Turn resumes
    server.down = True
    try:
        end = terminal(run_turn(codex_driver, start, "turn_2", "answer never"))
    finally:
        server.down = False
    assert end["action"] == "turn.failed"
    assert end["error"]["message"].startswith("Required MCP server 'tickets' did not start"), end
    assert not with_marker(provider, "answer never", "input")  # no model request ran without the server
    third = f"third {uuid.uuid4().hex[:8]}"
    assert terminal(run_turn(codex_driver, start, "turn_3", f"answer {third}"))["action"] == "turn.completed"
    resumed = with_marker(provider, third, "input")[0]
    assert first in json.dumps(resumed["input"])  # the retained history still holds the first Turn


def test_codex_a_cold_resume_waits_for_a_slow_server_before_the_first_turn(codex_driver, provider, server, tmp_path):
    """"required: true makes native thread creation and cold resume wait for the server to initialize"; an
    optional server is waited for too (bounded), so the first Turn after a resume has its tools."""
    start = start_of("codex", "gpt-5.5", [http("tickets", server.base + "/tickets/mcp")], str(tmp_path),
                     f"sess_{uuid.uuid4().hex[:12]}")
    start["environment"] = {"type": "none"}  # (on a workspace Codex defers MCP tools behind its tool search)
    assert terminal(run_turn(codex_driver, start, "turn_1", "answer first"))["action"] == "turn.completed"
    session = codex_driver.sessions[start["session_id"]]
    wait_for(lambda: not session.alive, timeout=15)
    marker = f"after resume {uuid.uuid4().hex[:8]}"
    server.slow = 1.5
    try:
        assert terminal(run_turn(codex_driver, start, "turn_2", f"answer {marker}"))["action"] == "turn.completed"
    finally:
        server.slow = 0.0
    assert "mcp__tickets.lookup" in offered(with_marker(provider, marker, "input")[0], "codex")


# ---- headers beside the bearer, allowed_tools, the offered set (items 8, 11, 12, 18; Codex also item 1) ---------

FN = {"type": "function", "name": "get_weather", "description": "Weather for a city", "defer_loading": False,
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
LAZY = {**FN, "name": "get_tides", "description": "Tides for a port", "defer_loading": True}
SCHEMA = {"type": "object", "properties": {"done": {"type": "boolean"}}, "required": ["done"]}


def offered(body: dict, harness: str) -> set[str]:
    """The tools a model request loads (Codex: MCP tools as namespace.name; Claude: deferred ones not loaded)."""
    names: set[str] = set()
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace":
            names.update(f"{tool['name']}.{inner['name']}" for inner in tool.get("tools") or [])
        elif not tool.get("defer_loading"):
            names.add(tool.get("name") or tool.get("type"))
    return names


@pytest.mark.parametrize("harness", ["codex", "claude_code"])
def test_headers_beside_the_bearer_allowed_tools_and_exactly_the_declared_tools(
        request, provider, server, tmp_path, harness):
    driver = request.getfixturevalue(f"{'codex' if harness == 'codex' else 'claude'}_driver")
    marker = f"mcp contract {uuid.uuid4().hex[:8]}"
    tools = [FN, http("tickets", server.base + "/tickets/mcp", allowed=["lookup"], required=True,
                      headers=dict([HEADER])),
             http("silent", server.base + "/silent/mcp", allowed=[], required=True)]
    if harness == "claude_code":
        tools += [LAZY, {"type": "tool_search"}]
    start = start_of(harness, "gpt-5.5" if harness == "codex" else "claude-sonnet-4-5", tools, str(tmp_path),
                     f"sess_{uuid.uuid4().hex[:12]}", mcp_credentials={"tickets": {"type": "bearer", "token": TOKEN}})
    start["environment"] = {"type": "none"}
    start["agent"]["text"]["format"] = {"type": "json_schema", "schema": SCHEMA}
    before = len(server.seen)
    script = f"say {marker}\nmcp tickets lookup {{}}\nmcp silent lookup {{}}\nmcp tickets secret {{}}\n" \
             'answer {"done": true}'
    sent = run_turn(driver, start, "turn_1", script)
    assert terminal(sent)["action"] == "turn.completed", terminal(sent)
    seen = server.seen[before:]
    tickets = [s for s in seen if s["path"] == "/tickets/mcp"]
    assert tickets and all(s["header"] == HEADER[1] and s["bearer"] for s in tickets)  # item 8, on every request
    assert [s["tool"] for s in tickets if s["method"] == "tools/call"] == ["lookup"]  # secret never reached it
    assert [s for s in seen if s["path"] == "/silent/mcp" and s["method"] == "tools/call"] == []  # item 18
    first = with_marker(provider, marker, "input" if harness == "codex" else "messages")[0]
    if harness == "codex":
        names = offered(first, harness)
        assert "mcp__tickets.lookup" in names and not {n for n in names if "secret" in n or "silent" in n}
        assert "web_search" in names  # item 1: an omitted control keeps Codex's native web search on none
    else:  # items 11 and 12: loaded, the eager function, StructuredOutput and ToolSearch, exactly; deferred (named
        # for ToolSearch), the lazy function and the selected tool; the unselected ones nowhere
        assert offered(first, harness) == {"mcp__functions__get_weather", "StructuredOutput", "ToolSearch"}
        text = json.dumps(first)
        assert "mcp__functions__get_tides" in text and "mcp__tickets__lookup" in text
        assert "mcp__tickets__secret" not in text and "mcp__silent__" not in text
        later = with_marker(provider, marker, "messages")  # (their tool uses, refused, are in the later messages)
        assert len(later) > 1 and not any(n in json.dumps(body.get("tools")) for body in later
                                          for n in ("mcp__tickets__secret", "mcp__silent__"))
