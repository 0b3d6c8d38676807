"""Vault credentials end to end: the official SDK over HTTP on the local stack, real Codex and Claude Code
Runtimes on the scripted model provider, and a loopback streamable-HTTP MCP server (python `mcp`) that answers
401 without the expected bearer. The token travels Vault -> Dispatch -> the claiming Runtime -> the native
Harness's process environment -> the MCP server, and appears nowhere else: not in any API response, table item
or outbox record, provider log, Runtime log or state file, or process argv."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer

import openai
import pytest

from local.inprocess import wait_for
from tests.e2e.conftest import NativeRuntime, aws_client

pytestmark = pytest.mark.e2e

TOKEN = f"e2e-bearer-{uuid.uuid4().hex}"
ROTATED = f"e2e-rotated-{uuid.uuid4().hex}"
REFRESHED = f"e2e-refreshed-{uuid.uuid4().hex}"
REFRESH = f"e2e-refresh-{uuid.uuid4().hex}"
SECRETS = (TOKEN, ROTATED, REFRESHED, REFRESH)


class BearerGate:
    """ASGI middleware: 401 unless `Authorization: Bearer <accepted>`; remembers what each request carried
    (ok, wrong or missing), never the value."""

    def __init__(self, app):
        self.app = app
        self.accepted = TOKEN
        self.seen: list[str] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            auth = dict(scope["headers"]).get(b"authorization", b"").decode()
            verdict = "ok" if auth == f"Bearer {self.accepted}" else ("wrong" if auth else "missing")
            self.seen.append(verdict)
            if verdict != "ok":
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": b'{"error": "unauthorized"}'})
                return
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def tickets():
    """The MCP server: `lookup_ticket` (no readOnlyHint: Codex must approve it) and `fail_ticket` (isError)."""
    import mcp.types as types
    import uvicorn
    from mcp.server import Server

    calls: list[dict] = []

    async def list_tools(ctx, params):
        schema = {"type": "object", "properties": {"id": {"type": "string"}}}
        return types.ListToolsResult(tools=[types.Tool(name="lookup_ticket", description="Look a ticket up",
                                                       input_schema=schema),
                                            types.Tool(name="fail_ticket", description="Always fails",
                                                       input_schema=schema)])

    async def call_tool(ctx, params):
        calls.append({"name": params.name, "arguments": params.arguments})
        ticket = (params.arguments or {}).get("id")
        if params.name == "fail_ticket":
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"ticket {ticket} is locked")],
                                        is_error=True)
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"ticket {ticket}: open")])

    gate = BearerGate(Server("tickets", version="1.0.0", on_list_tools=list_tools,
                             on_call_tool=call_tool).streamable_http_app(stateless_http=True))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(gate, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=15)
    gate.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    gate.calls = calls
    yield gate
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def codex(local_stack, runtime_process, tmp_path_factory):
    runtime = NativeRuntime(local_stack, tmp_path_factory.mktemp("codex_vaults"), "codex")
    runtime.start()
    yield runtime
    runtime.stop()


@pytest.fixture(scope="module")
def claude(local_stack, runtime_process, tmp_path_factory):
    runtime = NativeRuntime(local_stack, tmp_path_factory.mktemp("claude_vaults"), "claude_code")
    runtime.start()
    yield runtime
    runtime.stop()


def tool(url, **extra):
    return {"type": "mcp", "server_label": "tickets", "transport": {"type": "http", "server_url": url}, **extra}


def run(client, harness, vault_id, url, script, **extra):
    session = client.beta.agents.sessions.create(
        environment={"type": "none"}, vault_ids=[vault_id], agent={"model": "gpt-5", "tools": [tool(url, **extra)]},
        input=script, extra_body={"x_agents_core": {"harness": harness}})
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status in ("idle", "failed"), timeout=180,
             interval=0.2)
    return session, client.beta.agents.sessions.turns.list(session.id).data[0]


def mcp_calls(client, session_id):
    return [i for i in client.beta.agents.sessions.items.list(session_id, order="asc") if i.type == "mcp_call"]


def everything_visible(local_stack, client, runtimes, session_ids) -> str:
    """API responses, every table item (outbox records included), provider logs, Runtime logs and state
    files, and every process's argv."""
    parts = []
    for sid in session_ids:
        parts += [client.beta.agents.sessions.with_raw_response.retrieve(sid).text,
                  client.beta.agents.sessions.items.with_raw_response.list(sid, limit=100).text,
                  client.beta.agents.sessions.turns.with_raw_response.list(sid).text]
    dynamodb = aws_client(local_stack, "dynamodb")
    for page in dynamodb.get_paginator("scan").paginate(TableName=local_stack["table"]):
        parts.append(json.dumps(page["Items"], default=str))
    for runtime in runtimes:
        root = runtime.log.parent
        for path in root.rglob("*"):
            if path.is_file():
                parts.append(path.read_bytes().decode("utf-8", "replace"))
    parts.append(subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout)
    return "\n".join(parts)


@pytest.mark.parametrize("harness", ["codex", "claude_code"])
def test_the_bearer_reaches_the_mcp_server_through_the_native_harness_and_nowhere_else(
        client, local_stack, tickets, codex, claude, harness):
    vault = client.beta.agents.vaults.create(name=f"e2e {harness}")
    credential = client.beta.agents.vaults.credentials.create(vault.id, name="tickets", auth={
        "type": "static_bearer", "mcp_server_url": tickets.url, "token": TOKEN})
    assert "token" not in credential.auth.to_dict()
    tickets.seen.clear()
    session, turn = run(client, harness, vault.id, tickets.url,
                        'mcp tickets lookup_ticket {"id": "7"}\nmcp tickets fail_ticket {"id": "8"}\nsay done')
    assert turn.status == "completed", turn.model_extra
    assert session.agent.tools[0].credential_id == credential.id
    found = mcp_calls(client, session.id)
    assert [(i.server_label, i.name, i.status) for i in found] == [
        ("tickets", "lookup_ticket", "completed"), ("tickets", "fail_ticket", "failed")]
    assert "ticket 7: open" in json.dumps(found[0].output) and found[0].arguments in ({"id": "7"}, '{"id": "7"}')
    assert "ticket 8 is locked" in json.dumps(found[1].error)
    assert "ok" in tickets.seen and "missing" not in tickets.seen and "wrong" not in tickets.seen
    text = everything_visible(local_stack, client, [codex, claude], [session.id])
    for secret in SECRETS:
        assert secret not in text


def test_a_rotated_token_is_used_by_the_next_session(client, tickets, codex):
    vault = client.beta.agents.vaults.create()
    credential = client.beta.agents.vaults.credentials.create(vault.id, name="t", auth={
        "type": "static_bearer", "mcp_server_url": tickets.url, "token": TOKEN})
    client.beta.agents.vaults.credentials.update(credential.id, vault_id=vault.id,
                                                 auth={"type": "static_bearer", "token": ROTATED})
    tickets.accepted, tickets.seen[:] = ROTATED, []
    try:
        session, turn = run(client, "codex", vault.id, tickets.url, 'mcp tickets lookup_ticket {"id": "9"}\nsay ok')
        assert turn.status == "completed" and mcp_calls(client, session.id)[0].status == "completed"
        assert "ok" in tickets.seen and "wrong" not in tickets.seen
    finally:
        tickets.accepted = TOKEN


@pytest.mark.parametrize("harness, says", [
    ("codex", "Required MCP server 'tickets' did not start: the server refused the credential (HTTP 401)."),
    ("claude_code", "Required MCP server 'tickets' did not connect: Server rejected the configured Authorization header "
                    "(HTTP 401)")])
def test_a_wrong_token_fails_a_required_server_with_a_clear_error(client, tickets, codex, claude, harness, says):
    vault = client.beta.agents.vaults.create()
    client.beta.agents.vaults.credentials.create(vault.id, name="t", auth={
        "type": "static_bearer", "mcp_server_url": tickets.url, "token": "not-the-token"})
    _, turn = run(client, harness, vault.id, tickets.url, 'mcp tickets lookup_ticket {"id": "1"}', required=True)
    assert turn.status == "failed"
    assert says in turn.to_dict()["x_agents_core"]["error"]["message"]


class _TokenEndpoint(BaseHTTPRequestHandler):
    forms: list = []

    def do_POST(self):  # noqa: N802
        form = dict(urllib.parse.parse_qsl(self.rfile.read(int(self.headers["Content-Length"])).decode()))
        type(self).forms.append(form)
        ok = form.get("refresh_token") == REFRESH
        data = json.dumps({"access_token": REFRESHED, "refresh_token": REFRESH, "expires_in": 3600}
                          if ok else {"error": "invalid_grant"}).encode()
        self.send_response(200 if ok else 400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_an_expired_oauth_token_is_refreshed_at_dispatch(client, local_stack, tickets, codex, claude):
    server = HTTPServer(("127.0.0.1", 0), _TokenEndpoint)  # loopback: trusted by `make dev` (the SAM default: none)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tickets.accepted, tickets.seen[:] = REFRESHED, []
    try:
        vault = client.beta.agents.vaults.create()
        client.beta.agents.vaults.credentials.create(vault.id, name="o", auth={
            "type": "mcp_oauth", "mcp_server_url": tickets.url, "access_token": "e2e-stale-access",
            "expires_at": "2020-01-01T00:00:00Z",
            "refresh": {"client_id": "e2e", "refresh_token": REFRESH, "token_endpoint_auth": {"type": "none"},
                        "token_endpoint": f"http://127.0.0.1:{server.server_address[1]}/token"}})
        session, turn = run(client, "codex", vault.id, tickets.url, 'mcp tickets lookup_ticket {"id": "5"}\nsay ok')
        assert turn.status == "completed", turn.model_extra
        assert mcp_calls(client, session.id)[0].status == "completed"
        assert [f["grant_type"] for f in _TokenEndpoint.forms] == ["refresh_token"]
        assert "ok" in tickets.seen and "wrong" not in tickets.seen
        text = everything_visible(local_stack, client, [codex, claude], [session.id])
        for secret in SECRETS:
            assert secret not in text
    finally:
        server.shutdown()
        tickets.accepted = TOKEN


def test_selection_answers_over_http(client, tickets):
    vault = client.beta.agents.vaults.create()
    second = client.beta.agents.vaults.create()
    for v in (vault, second):
        client.beta.agents.vaults.credentials.create(v.id, name="t", auth={
            "type": "static_bearer", "mcp_server_url": tickets.url, "token": TOKEN})
    with pytest.raises(openai.ConflictError, match="multiple attached vault credentials match MCP server_url"):
        client.beta.agents.sessions.create(environment={"type": "none"}, vault_ids=[vault.id, second.id],
                                           agent={"model": "gpt-5", "tools": [tool(tickets.url)]}, input="say hi")
    with pytest.raises(openai.BadRequestError, match="MCP credential_id requires an attached vault"):
        client.beta.agents.sessions.create(environment={"type": "none"}, input="say hi", agent={
            "model": "gpt-5", "tools": [tool(tickets.url, credential_id="cred_x")]})
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.sessions.create(environment={"type": "none"}, vault_ids=["vault_nope"], input="say hi",
                                           agent={"model": "gpt-5", "tools": [tool(tickets.url)]})


def test_sse_events_carry_the_mcp_call_and_no_secret(client, tickets):
    """The scripted harness (no native engine) calls the server as a real MCP client with the Vault bearer;
    the streamed create's events show the mcp_call and never the token."""
    vault = client.beta.agents.vaults.create()
    client.beta.agents.vaults.credentials.create(vault.id, name="t", auth={
        "type": "static_bearer", "mcp_server_url": tickets.url, "token": TOKEN})
    tickets.seen.clear()
    stream = client.beta.agents.sessions.create(
        environment={"type": "none"}, vault_ids=[vault.id], agent={"model": "gpt-5", "tools": [tool(tickets.url)]},
        input='mcp tickets lookup_ticket {"id": "3"}\nsay done', stream=True,
        extra_body={"x_agents_core": {"harness": "scripted"}})
    events = []
    for event in stream:
        events.append(event.to_json())
        if event.type in ("agent.session.idle", "agent.session.failed") and len(events) > 1:
            break
    stream.close()
    text = "\n".join(events)
    assert '"agent.session.idle"' in text and '"mcp_call"' in text and "ticket 3: open" in text
    assert "ok" in tickets.seen and "missing" not in tickets.seen
    for secret in SECRETS:
        assert secret not in text


def test_allowed_tools_hides_the_other_tools_under_codex(client, tickets, codex):
    vault = client.beta.agents.vaults.create()
    client.beta.agents.vaults.credentials.create(vault.id, name="t", auth={
        "type": "static_bearer", "mcp_server_url": tickets.url, "token": TOKEN})
    marker = uuid.uuid4().hex[:8]
    session, turn = run(client, "codex", vault.id, tickets.url,
                        f'mcp tickets fail_ticket {{"id": "{marker}"}}\nsay done', allowed_tools=["lookup_ticket"])
    assert turn.status == "completed", turn.model_extra
    assert mcp_calls(client, session.id) == []  # not offered: Codex answers the model "unsupported call"
    assert not [c for c in tickets.calls if (c["arguments"] or {}).get("id") == marker]
    offered = [r["body"] for r in codex.requests() if marker in json.dumps(r["body"].get("input"))]
    namespaces = [t for t in offered[0].get("tools") or [] if t.get("name") == "mcp__tickets"]
    assert [t["name"] for t in namespaces[0]["tools"]] == ["lookup_ticket"]


def test_a_resumed_codex_thread_has_the_server_tools_on_its_first_turn(client, tickets, codex):
    """A new app-server process resumes the thread (the Runtime restarted): its first turn/start waits for the
    declared servers again, so the bearer-protected tools are there."""
    vault = client.beta.agents.vaults.create()
    client.beta.agents.vaults.credentials.create(vault.id, name="t", auth={
        "type": "static_bearer", "mcp_server_url": tickets.url, "token": TOKEN})
    session, turn = run(client, "codex", vault.id, tickets.url, "say first")
    assert turn.status == "completed"
    codex.stop()
    codex.start()
    client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.message", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": 'mcp tickets lookup_ticket {"id": "42"}\nsay ok'}]}]}])
    wait_for(lambda: len([t for t in client.beta.agents.sessions.turns.list(session.id)
                          if t.status in ("completed", "failed")]) == 2, timeout=180, interval=0.2)
    calls = mcp_calls(client, session.id)
    assert [(c.name, c.status) for c in calls] == [("lookup_ticket", "completed")]
    assert "ticket 42: open" in json.dumps(calls[0].output)


def test_websocket_events_carry_the_mcp_call_and_no_secret(client, local_stack, tickets):
    """A live WebSocket subscriber of the Session sees the mcp_call made with the Vault bearer, and never
    the token (the same events as SSE, delivered by the WebSocket fan-out)."""
    from websockets.sync.client import connect

    vault = client.beta.agents.vaults.create()
    client.beta.agents.vaults.credentials.create(vault.id, name="t", auth={
        "type": "static_bearer", "mcp_server_url": tickets.url, "token": TOKEN})
    session = client.beta.agents.sessions.create(
        environment={"type": "none"}, vault_ids=[vault.id], agent={"model": "gpt-5", "tools": [tool(tickets.url)]},
        extra_body={"x_agents_core": {"harness": "scripted"}}, input="say ready")
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle", timeout=30)
    frames = []
    with connect(local_stack["websocket_url"], additional_headers={"Authorization": f"Bearer {client.api_key}"}) as ws:
        ws.send(json.dumps({"action": "subscribe", "session_id": session.id}))
        assert json.loads(ws.recv(timeout=5))["type"] == "subscribed"
        client.beta.agents.sessions.events.create(session.id, events=[{
            "type": "agent.session.input.message", "input": [{"role": "user", "content": [
                {"type": "input_text", "text": 'mcp tickets lookup_ticket {"id": "4"}\nsay done'}]}]}])
        while True:
            frames.append(ws.recv(timeout=30))
            if json.loads(frames[-1])["type"] in ("agent.session.idle", "agent.session.failed"):
                break
    text = "\n".join(frames)
    assert '"agent.session.idle"' in text and '"mcp_call"' in text and "ticket 4: open" in text
    for secret in SECRETS:
        assert secret not in text
