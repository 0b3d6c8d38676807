"""The executor host's binding of a Turn to an exec-server (runtime/executor.py), as data: only a self_hosted
Codex Turn of an Environment whose exec-server is joined here is bound; it gets the loopback endpoint the
Codex driver adds with environment/add and the cwd every turn/start names; a stdio MCP server refuses it."""

import pytest

from runtime.environments.exec_server import ExecServerHub, _Link
from runtime.environments.workspace import WorkspaceError


def start(harness="codex", kind="self_hosted", tools=()):
    return {"type": "turn.start", "session_id": "sess_abc", "turn_id": "turn_1", "harness": harness,
            "environment": {"type": kind, "workspace_directory": "/home/me/project"}, "agent": {"tools": list(tools)}}


@pytest.fixture
def hub():
    h = ExecServerHub("127.0.0.1:0", None, lambda message: None)
    h.port = 4567
    h.links["env_abc"] = _Link("xreg_1")
    return h


def test_a_joined_environments_codex_turn_is_bound_to_the_loopback_endpoint(hub):
    bound = hub.bind(start())
    assert bound["executor"] == {"environment_id": "env_abc", "cwd": "/home/me/project",
                                 "url": "ws://127.0.0.1:4567/app/env_abc", "token": hub.app_secret}
    assert hub.app_secret not in bound["executor"]["url"]  # a bearer, never in a URL an error may print


@pytest.mark.parametrize("message", [start(harness="claude_code"), start(kind="none"), start(kind="openai_hosted"),
                                     {**start(), "session_id": "sess_other"}])
def test_anything_else_is_not_bound(hub, message):
    assert hub.bind(message) is None


def test_a_stdio_mcp_server_refuses_the_turn_naming_it(hub):
    tools = [{"type": "mcp", "server_label": "local-files", "transport": {"type": "stdio", "command": "srv"}}]
    with pytest.raises(WorkspaceError, match="local-files"):
        hub.bind(start(tools=tools))
