"""A selected Vault credential reaches only the Runtime that claimed the Turn, in its turn.start, decrypted
at dispatch; an expired OAuth token is refreshed once (guarded) and committed before use; a deleted
credential fails the Turn with a clear error, never an anonymous fallback. No secret at rest or in any read."""

import base64
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from agents_core import keys
from agents_core import settings as settings_module
from agents_core import vaults as core_vaults
from local.inprocess import wait_for
from tests.integration.stack_fixtures import client, runtime, stack  # noqa: F401 - fixtures

TOKEN = "sb-delivery-token-3c9a"
ACCESS = "oa-expired-access-8d21"
REFRESH = "oa-refresh-token-b7e0"
NEW_ACCESS = "oa-fresh-access-0f4c"
NEW_REFRESH = "oa-rotated-refresh-61aa"
SECRETS = (TOKEN, ACCESS, REFRESH, NEW_ACCESS, NEW_REFRESH, "oa-client-secret-55")
URL = "https://mcp.example.com/mcp"


def _tool(label="tickets", url=URL):
    return {"type": "mcp", "server_label": label, "transport": {"type": "http", "server_url": url}}


def _starts(runtime, session_id):  # noqa: F811
    return [m for m in runtime.inbox if m.get("type") == "turn.start" and m.get("session_id") == session_id]


def scan(dynamodb, table="agents-core-inprocess") -> list:
    items, kwargs = [], {"TableName": table, "ConsistentRead": True}
    while True:
        out = dynamodb.scan(**kwargs)
        items += out["Items"]
        if "LastEvaluatedKey" not in out:
            return items
        kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]


def _dump(items) -> str:
    return json.dumps(items, default=lambda o: base64.b64encode(bytes(getattr(o, "value", o))).decode())


def _settled(client, session_id):  # noqa: F811
    return wait_for(lambda: [t for t in client.beta.agents.sessions.turns.list(session_id)
                             if t.status in ("completed", "failed")])


def test_bearer_reaches_only_the_claiming_runtime_and_nowhere_else(stack, client, runtime, capsys):  # noqa: F811
    vault = client.beta.agents.vaults.create(name="v")
    cred = client.beta.agents.vaults.credentials.create(vault.id, name="c", auth={
        "type": "static_bearer", "mcp_server_url": URL, "token": TOKEN})
    session = client.beta.agents.sessions.create(environment={"type": "none"}, vault_ids=[vault.id],
                                                 agent={"model": "gpt-5", "tools": [_tool(), _tool("open", "https://o.example/mcp")]},
                                                 input="say hi")
    assert session.agent.tools[0].credential_id == cred.id and session.agent.tools[1].credential_id is None
    turns = _settled(client, session.id)
    assert turns[0].status == "completed"
    starts = _starts(runtime, session.id)  # once on the normal path (docs/runtime-protocol.md, "Delivery")
    assert [start["turn_id"] for start in starts] == [turns[0].id]
    assert starts[0]["mcp_credentials"] == {"tickets": {"type": "bearer", "token": TOKEN}}  # the anonymous one: none
    # nowhere else: table items (Session, Turn, Items, outbox records), API reads, logs
    reads = [client.beta.agents.sessions.with_raw_response.retrieve(session.id).text,
             client.beta.agents.sessions.items.with_raw_response.list(session.id).text,
             client.beta.agents.sessions.turns.with_raw_response.list(session.id).text]
    text = _dump(scan(stack.dynamodb)) + "".join(reads) + "".join(capsys.readouterr())
    for secret in SECRETS:
        assert secret not in text


def test_a_rotated_token_is_used_by_the_next_session(stack, client, runtime):  # noqa: F811
    vault = client.beta.agents.vaults.create()
    cred = client.beta.agents.vaults.credentials.create(vault.id, name="c", auth={
        "type": "static_bearer", "mcp_server_url": URL, "token": TOKEN})
    client.beta.agents.vaults.credentials.update(cred.id, vault_id=vault.id,
                                                 auth={"type": "static_bearer", "token": "sb-rotated-token"})
    session = client.beta.agents.sessions.create(environment={"type": "none"}, vault_ids=[vault.id],
                                                 agent={"model": "gpt-5", "tools": [_tool()]}, input="say hi")
    _settled(client, session.id)
    assert _starts(runtime, session.id)[0]["mcp_credentials"]["tickets"]["token"] == "sb-rotated-token"


def test_a_deleted_credential_fails_the_turn_never_anonymous(stack, client, runtime):  # noqa: F811
    vault = client.beta.agents.vaults.create()
    cred = client.beta.agents.vaults.credentials.create(vault.id, name="c", auth={
        "type": "static_bearer", "mcp_server_url": URL, "token": TOKEN})
    session = client.beta.agents.sessions.create(environment={"type": "none"}, vault_ids=[vault.id],
                                                 agent={"model": "gpt-5", "tools": [_tool()]}, input="say first")
    _settled(client, session.id)
    client.beta.agents.vaults.credentials.delete(cred.id, vault_id=vault.id)
    client.beta.agents.sessions.events.create(session.id, events=[
        {"type": "agent.session.input.message", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "say second"}]}]}])
    turn = wait_for(lambda: [t for t in client.beta.agents.sessions.turns.list(session.id, order="desc")
                             if t.status == "failed"])[0]
    assert turn.to_dict()["x_agents_core"]["error"]["message"] == \
        f"MCP server 'tickets': The MCP credential {cred.id} no longer exists."
    assert (turn.error.code, turn.error.message) == \
        ("authentication_error", f"MCP server 'tickets': The MCP credential {cred.id} no longer exists.")
    assert len(_starts(runtime, session.id)) == 1  # the second Turn never reached the Runtime: no anonymous run
    assert wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "failed")


class _TokenEndpoint(BaseHTTPRequestHandler):
    requests: list = []
    answer: tuple = (200, {})

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        type(self).requests.append({"form": dict(urllib.parse.parse_qsl(body)),
                                    "authorization": self.headers.get("Authorization")})
        status, payload = type(self).answer
        data = json.dumps(payload).encode()
        self.send_response(status)
        if status == 302:
            self.send_header("Location", "https://elsewhere.example/token")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def token_endpoint(monkeypatch):
    monkeypatch.setenv("OAUTH_TRUSTED_ORIGINS", "loopback")
    settings_module.get_settings.cache_clear()
    _TokenEndpoint.requests = []
    _TokenEndpoint.answer = (200, {"access_token": NEW_ACCESS, "refresh_token": NEW_REFRESH, "expires_in": 3600,
                                   "token_type": "Bearer"})
    server = HTTPServer(("127.0.0.1", 0), _TokenEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/token"
    server.shutdown()
    settings_module.get_settings.cache_clear()


def _expired_oauth(client, endpoint, kind="client_secret_basic"):  # noqa: F811
    vault = client.beta.agents.vaults.create()
    auth_kind = {"type": kind} if kind == "none" else {"type": kind, "client_secret": "oa-client-secret-55"}
    cred = client.beta.agents.vaults.credentials.create(vault.id, name="o", auth={
        "type": "mcp_oauth", "mcp_server_url": URL, "access_token": ACCESS, "expires_at": "2020-01-01T00:00:00Z",
        "refresh": {"client_id": "client-1", "refresh_token": REFRESH, "token_endpoint": endpoint,
                    "token_endpoint_auth": auth_kind, "scope": "read", "resource": URL}})
    return vault, cred


def test_an_expired_oauth_token_is_refreshed_once_and_committed_before_use(stack, client, runtime,  # noqa: F811
                                                                           token_endpoint):
    vault, cred = _expired_oauth(client, token_endpoint)
    first = client.beta.agents.sessions.create(environment={"type": "none"}, vault_ids=[vault.id],
                                               agent={"model": "gpt-5", "tools": [_tool()]}, input="say hi")
    _settled(client, first.id)
    assert _starts(runtime, first.id)[0]["mcp_credentials"]["tickets"]["token"] == NEW_ACCESS
    [request] = _TokenEndpoint.requests
    assert request["form"] == {"grant_type": "refresh_token", "refresh_token": REFRESH, "scope": "read",
                               "resource": URL}
    assert request["authorization"] == "Basic " + base64.b64encode(b"client-1:oa-client-secret-55").decode()
    after = client.beta.agents.vaults.credentials.retrieve(cred.id, vault_id=vault.id)
    assert after.auth.expires_at is not None and after.auth.expires_at > "2026"
    # the rotated refresh token was committed; the next Session uses the fresh token without a refresh
    second = client.beta.agents.sessions.create(environment={"type": "none"}, vault_ids=[vault.id],
                                                agent={"model": "gpt-5", "tools": [_tool()]}, input="say hi")
    _settled(client, second.id)
    assert _starts(runtime, second.id)[0]["mcp_credentials"]["tickets"]["token"] == NEW_ACCESS
    assert len(_TokenEndpoint.requests) == 1
    text = _dump(scan(stack.dynamodb))
    for secret in SECRETS:
        assert secret not in text


def test_a_refused_refresh_fails_the_turn_with_the_endpoint_status(stack, client, runtime, token_endpoint):  # noqa: F811
    vault, cred = _expired_oauth(client, token_endpoint, kind="client_secret_post")
    _TokenEndpoint.answer = (302, {})  # no redirects are followed
    session = client.beta.agents.sessions.create(environment={"type": "none"}, vault_ids=[vault.id],
                                                 agent={"model": "gpt-5", "tools": [_tool()]}, input="say hi")
    [turn] = _settled(client, session.id)
    assert turn.status == "failed"
    assert turn.to_dict()["x_agents_core"]["error"]["message"] == (
        "MCP server 'tickets': The OAuth token endpoint refused the refresh (HTTP 302).")
    assert _TokenEndpoint.requests[0]["form"]["client_secret"] == "oa-client-secret-55"
    assert _starts(runtime, session.id) == []


def test_the_refresh_guard_refuses_untrusted_private_targets(monkeypatch):
    monkeypatch.delenv("OAUTH_TRUSTED_ORIGINS", raising=False)
    settings_module.get_settings.cache_clear()
    refresh = {"client_id": "c", "token_endpoint": "https://127.0.0.1:9/token", "token_endpoint_auth": {"type": "none"}}
    try:
        for endpoint, message in [("https://127.0.0.1:9/token", "loopback, private or link-local"),
                                  ("https://169.254.169.254/token", "loopback, private or link-local"),
                                  ("https://10.1.2.3/token", "loopback, private or link-local"),
                                  ("http://127.0.0.1:9/token", "must use https")]:
            with pytest.raises(core_vaults.CredentialUnavailable, match=message):
                core_vaults.refresh_token({**refresh, "token_endpoint": endpoint}, "rt", None)
        # a public target is connected at the address that was checked (no second DNS answer)
        assert core_vaults._guard("https://93.184.216.34/token") == "93.184.216.34"
    finally:
        settings_module.get_settings.cache_clear()


# ---- the scripted harness as a real MCP client -------------------------------------------------------------

class _Gate:
    def __init__(self, app, token):
        self.app, self.token, self.seen = app, token, []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            auth = dict(scope["headers"]).get(b"authorization", b"").decode()
            self.seen.append("ok" if auth == f"Bearer {self.token}" else "refused")
            if auth != f"Bearer {self.token}":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
        await self.app(scope, receive, send)


@pytest.fixture
def bearer_mcp(monkeypatch):
    import socket

    import mcp.types as types
    import uvicorn
    from mcp.server import Server

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[types.Tool(name="lookup", description="x", input_schema={"type": "object"}),
                                            types.Tool(name="locked", description="x", input_schema={"type": "object"})])

    async def call_tool(ctx, params):
        if params.name == "locked":
            return types.CallToolResult(content=[types.TextContent(type="text", text="ticket is locked")], is_error=True)
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"ticket {params.arguments['id']}: open")])

    gate = _Gate(Server("tickets", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)
                 .streamable_http_app(stateless_http=True), TOKEN)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(gate, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started)
    monkeypatch.setenv("VAULT_ALLOW_LOOPBACK_HTTP", "true")
    settings_module.get_settings.cache_clear()
    gate.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    yield gate
    server.should_exit = True
    thread.join(10)
    settings_module.get_settings.cache_clear()


def test_the_scripted_harness_calls_the_mcp_server_with_the_vault_bearer(stack, client, runtime, bearer_mcp):  # noqa: F811
    vault = client.beta.agents.vaults.create()
    client.beta.agents.vaults.credentials.create(vault.id, name="c", auth={
        "type": "static_bearer", "mcp_server_url": bearer_mcp.url, "token": TOKEN})
    script = 'mcp tickets lookup {"id": "7"}\nmcp tickets locked {}\nmcp tickets hidden {}\nsay done'
    tools = [{**_tool(url=bearer_mcp.url), "allowed_tools": ["lookup", "locked"]}]
    session = client.beta.agents.sessions.create(environment={"type": "none"}, vault_ids=[vault.id],
                                                 agent={"model": "gpt-5", "tools": tools}, input=script)
    assert _settled(client, session.id)[0].status == "completed"
    calls = [i for i in client.beta.agents.sessions.items.list(session.id, order="asc") if i.type == "mcp_call"]
    assert [(i.server_label, i.name, i.status) for i in calls] == [
        ("tickets", "lookup", "completed"), ("tickets", "locked", "failed"), ("tickets", "hidden", "failed")]
    assert calls[0].output["content"][0]["text"] == "ticket 7: open" and calls[0].arguments == {"id": "7"}
    assert calls[1].error == "ticket is locked"
    assert calls[2].error == "The tool 'hidden' of MCP server 'tickets' is not in its allowed_tools."
    assert "ok" in bearer_mcp.seen and "refused" not in bearer_mcp.seen
    # anonymous: the server refuses, and the Item says so (no secret anywhere)
    anonymous = client.beta.agents.sessions.create(environment={"type": "none"}, input='mcp tickets lookup {"id": "1"}',
                                                   agent={"model": "gpt-5", "tools": [_tool(url=bearer_mcp.url)]})
    _settled(client, anonymous.id)
    [failed] = [i for i in client.beta.agents.sessions.items.list(anonymous.id) if i.type == "mcp_call"]
    assert failed.status == "failed" and "MCP server 'tickets' failed" in failed.error
    assert TOKEN not in _dump(scan(stack.dynamodb))


def test_an_undecryptable_credential_fails_the_turn(stack, client, runtime):  # noqa: F811
    """A sealed secret moved onto another credential (or tampered with) never opens: the encryption
    context and the AES-GCM tag both name its owner. The Turn fails saying so; it never runs anonymous."""
    vault = client.beta.agents.vaults.create()
    one = client.beta.agents.vaults.credentials.create(vault.id, name="a", auth={
        "type": "static_bearer", "mcp_server_url": URL, "token": TOKEN})
    two = client.beta.agents.vaults.credentials.create(vault.id, name="b", auth={
        "type": "static_bearer", "mcp_server_url": "https://two.example/mcp", "token": "sb-other-token"})
    store = stack.store
    first = store.get(keys.credential("tenant-a", vault.id, one.id))
    second = store.get(keys.credential("tenant-a", vault.id, two.id))
    store.put({**first, "sealed": second["sealed"]})  # another credential's sealed token
    session = client.beta.agents.sessions.create(environment={"type": "none"}, vault_ids=[vault.id],
                                                 agent={"model": "gpt-5", "tools": [_tool()]}, input="say hi")
    [turn] = _settled(client, session.id)
    assert turn.status == "failed"
    assert turn.to_dict()["x_agents_core"]["error"]["message"] == \
        f"MCP server 'tickets': The MCP credential {one.id} could not be decrypted."
    assert _starts(runtime, session.id) == []
