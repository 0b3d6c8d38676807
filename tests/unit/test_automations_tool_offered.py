"""The `automations` Agent tool reaches every Harness as a function (issue 39, item 4): turn.start carries the
tool's function definition in place of `{"type": "automations"}` (Core serves its calls), so each native driver
offers it to its model as any declared function: Codex as a dynamic tool, Claude Code and MiniMax Code in their
`functions` MCP server. Every Harness declaration admits the tool."""

from __future__ import annotations

import pytest

from agents_contract import automations, harnessconfig, validation
from agents_contract.errors import InvalidRequest
from agents_core.runtimes.dispatch import _offered
from runtime.harnesses.claude_code import config as claude_config
from runtime.harnesses.codex import config as codex_config
from runtime.harnesses.minimax_code import config as minimax_config

FN = {"type": "function", "name": "get_weather", "description": "Weather", "defer_loading": False,
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def start(tools):
    return {"agent": _offered({"model": "gpt-5", "tools": tools}), "environment": {"type": "none"}}


def test_turn_start_carries_the_tool_as_a_function_and_leaves_other_agents_alone():
    plain = {"model": "gpt-5", "tools": [FN]}
    assert _offered(plain) is plain
    tools = start([FN, {"type": "automations"}])["agent"]["tools"]
    assert [t["type"] for t in tools] == ["function", "function"] and tools[0] == FN
    offered = tools[1]
    assert offered["name"] == "automations" and offered["defer_loading"] is False
    schema = offered["parameters"]
    assert schema["type"] == "object" and schema["required"] == ["action"]
    assert schema["properties"]["action"]["enum"] == ["create", "list", "update", "delete"]
    assert schema["properties"]["run_at"]["type"] == "integer" and "anyOf" not in schema["properties"]["name"]
    # the schema admits exactly what Core parses: a call the model makes from it is a valid AgentToolCall
    call = validation.parse(automations.AgentToolCall, {"action": "create", "expression": "* * * * *",
                                                        "timezone": "Europe/Paris", "instructions": "check"})
    assert call.timezone == "Europe/Paris"
    with pytest.raises(InvalidRequest):
        validation.parse(automations.AgentToolCall, {"action": "snooze"})


def test_each_native_driver_offers_it_as_a_declared_function():
    message = start([{"type": "automations"}])
    [dynamic] = codex_config.dynamic_tools(message)
    assert (dynamic["name"], dynamic["deferLoading"]) == ("automations", False)
    assert dynamic["inputSchema"] == automations.tool_function()["parameters"]
    claude = claude_config._functions_server(message)  # noqa: SLF001
    assert [t["name"] for t in claude["tools"]] == ["automations"]
    minimax = minimax_config.config(message)["mcpServers"]["functions"]
    assert [t["name"] for t in minimax["tools"]] == ["automations"]


def test_every_harness_declaration_admits_the_tool():
    assert all(d.automations_tool for d in harnessconfig.DECLARATIONS.values())
