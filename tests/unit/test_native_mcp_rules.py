"""Issue 37's native MCP rules as data (the real harnesses prove them in tests/e2e/test_native_mcp_contract.py).

Codex "writes command, args, cwd and env_vars to its [mcp_servers] table and verifies them with the rest of the
declared configuration before any native connection" (item 9)."""

from __future__ import annotations

import pytest

from runtime.harnesses.codex import config as codex
from runtime.harnesses.common import AdapterError

STDIO = {"command": "/usr/bin/python3", "args": ["server.py"], "cwd": "/work", "env_vars": ["HOME", "TICKETS_KEY"],
         "default_tools_approval_mode": "approve", "required": False}
HTTP = {"url": "https://mcp.example.com/mcp", "http_headers": {"X-Realm": "blue"},
        "bearer_token_env_var": "AGENTS_MCP_BEARER_0"}


@pytest.mark.parametrize(("label", "entry", "key", "value"), [
    ("files", STDIO, "command", "/bin/sh"),
    ("files", STDIO, "args", ["other.py"]),
    ("files", STDIO, "args", []),
    ("files", STDIO, "cwd", "/"),
    ("files", STDIO, "env_vars", ["HOME"]),
    ("files", STDIO, "env_vars", ["HOME", "TICKETS_KEY", "AWS_SECRET_ACCESS_KEY"]),
    ("tickets", HTTP, "url", "https://evil.example/mcp"),
    ("tickets", HTTP, "http_headers", {"X-Realm": "red"}),
    ("tickets", HTTP, "bearer_token_env_var", "OTHER"),
])
def test_codex_a_declared_server_changed_in_the_loaded_configuration_fails_the_start(label, entry, key, value):
    declared = {"mcp_servers": {label: entry}}
    loaded = {"mcp_servers": {label: {**entry, key: value, "enabled": True, "environment_id": "local"}}}
    with pytest.raises(AdapterError, match=f"changed '{key}'"):
        codex.verify_servers(declared, loaded)
    codex.verify_servers(declared, {"mcp_servers": {label: {**entry, "enabled": True, "tool_timeout_sec": None}}})


def test_codex_an_empty_list_codex_omits_is_the_same_declaration():
    declared = {"mcp_servers": {"files": {**STDIO, "args": [], "env_vars": []}}}
    loaded = {"mcp_servers": {"files": {k: v for k, v in STDIO.items() if k not in ("args", "env_vars")}}}
    codex.verify_servers(declared, loaded)


def test_codex_a_required_server_not_ready_after_start_or_resume_fails_it_an_optional_one_runs_without():
    """"required: true makes native thread creation and cold resume wait for the server to initialize" (item 10):
    after thread/start and thread/resume alike the session waits for each declared server's startup status."""
    import asyncio
    import types

    from runtime.harnesses.codex.session import CodexSession

    def start(required: bool) -> dict:
        return {"agent": {"tools": [{"type": "mcp", "server_label": "tickets", "required": required}]}}

    async def scenario(required: bool) -> None:
        session = types.SimpleNamespace(mcp_status={}, mcp_changed=asyncio.Event(), current=None)
        session.mcp_status["tickets"] = {"name": "tickets", "status": "failed",
                                         "error": "handshaking with MCP server failed: HTTP 503"}
        await CodexSession._await_mcp_startup(session, start(required))

    asyncio.run(scenario(False))  # optional: runs without its tools
    with pytest.raises(AdapterError, match="Required MCP server 'tickets' did not start"):
        asyncio.run(scenario(True))
