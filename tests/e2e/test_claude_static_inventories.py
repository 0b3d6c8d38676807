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

from tests.e2e.test_native_mcp_contract import claude_driver, provider, run_turn, start_of, terminal  # noqa: F401

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

