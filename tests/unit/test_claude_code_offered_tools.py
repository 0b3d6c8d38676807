"""Issue 37, items 11 and 12, against recorded Claude Code exchanges (tests/unit/claude_code_replay.py):

- "Core rejects non-null allowed_tools for a stdio server, because the adapter can hide unselected tools only
  on HTTP servers": Claude Code's allowed_tools only gates permission (an unlisted tool is still offered), so
  the adapter disallows the unselected ones, which hides them; with a list it learns them from the connected
  server's inventory and starts the CLI once more with them hidden, before any model request.
- "the adapter's inventory check leaves it and ToolSearch to native": before the first query, the MCP tools
  the CLI will offer are exactly the functions and the selected tools, or the start fails naming the others.
The real CLI is in tests/e2e/test_native_mcp_contract.py."""

from __future__ import annotations

import pytest

from runtime.harnesses.claude_code import config as adapter
from tests.unit.claude_code_replay import ReplayClient
from tests.unit.test_claude_code_driver import FN, driver, run, start_message  # noqa: F401 - the fixture

URL = "https://mcp.example/"


def http(label: str, allowed) -> dict:
    return {"type": "mcp", "server_label": label, "required": True, "allowed_tools": allowed,
            "transport": {"type": "http", "server_url": URL, "headers": {}}}


def connected(label: str, *tools: str) -> dict:
    return {"name": label, "status": "connected", "config": {"type": "http", "url": URL, "headers": {"Authorization": ""}},
            "tools": [{"name": t} for t in tools]}


def test_unselected_tools_of_an_http_server_are_hidden_before_the_model_sees_them(driver):  # noqa: F811
    status = {"mcpServers": [connected("tickets", "lookup", "secret"), connected("silent", "lookup")]}
    d = driver("fail", mcp_status=status)
    _, _, rec = run(d, start_message(tools=[FN, http("tickets", ["lookup"]), http("silent", [])]))
    rec.wait("turn.failed")  # the recorded scenario's provider failure: the Turn ran
    first, second = ReplayClient.instances
    assert "mcp__silent" in first.options.disallowed_tools  # [] permits none: hidden from the first start
    assert "mcp__tickets__secret" not in first.options.disallowed_tools and not first.queries
    assert sorted(second.options.disallowed_tools) == ["mcp__silent", "mcp__tickets__secret"]
    assert first.disconnected and second.queries == ["weather?"]  # only the second process met the model


def test_a_later_process_of_the_session_starts_with_them_hidden(driver):  # noqa: F811
    status = {"mcpServers": [connected("tickets", "lookup", "secret")]}
    d = driver("fail", mcp_status=status)
    start = start_message(tools=[FN, http("tickets", ["lookup"])])
    _, _, rec = run(d, start)
    rec.wait("turn.failed")
    session = d.sessions["sess_1"]
    d.submit(session.stop()).result(10)
    _, _, rec2 = run(d, {**start, "turn_id": "turn_2"})
    rec2.wait("turn.failed")
    assert len(ReplayClient.instances) == 3  # hidden learnt once; the resumed process needs no second start
    assert ReplayClient.instances[2].options.disallowed_tools == ["mcp__tickets__secret"]


def test_the_inventory_check_fails_the_start_on_an_undeclared_tool_and_leaves_native_ones(driver):  # noqa: F811
    class Offering(ReplayClient):
        async def get_context_usage(self):
            usage = await super().get_context_usage()
            return {"mcpTools": [*usage["mcpTools"], {"name": "mcp__plugin__shell"}]}

    d = driver("fail")
    d.client_factory = lambda options: Offering("fail", options)
    _, _, rec = run(d, start_message())
    failed = rec.wait("turn.failed")
    assert failed["error"]["message"] == "Claude Code offers tools the Session does not declare: mcp__plugin__shell."
    assert not ReplayClient.instances[0].queries
    assert adapter.native_inventory_check(["mcp__functions__get_weather"],
                                          ["mcp__functions__get_weather", "StructuredOutput", "ToolSearch"]) == []


@pytest.mark.parametrize(("allowed", "inventory", "hidden"), [
    (None, ["a", "b"], []),
    ([], ["a", "b"], ["mcp__tickets"]),
    (["a"], ["a", "b", "c"], ["mcp__tickets__b", "mcp__tickets__c"]),
    (["a"], None, []),  # not connected yet: nothing known to hide
])
def test_hidden_tools(allowed, inventory, hidden):
    start = start_message(tools=[FN, http("tickets", allowed)])
    assert adapter.hidden_tools(start, {"tickets": inventory} if inventory else None) == hidden
    assert adapter.options(start, hidden=hidden).get("disallowedTools", []) == hidden  # none profile
    # by default (the dry run, a first start) what is known before any connection: a [] server whole
    assert adapter.options(start).get("disallowedTools", []) == (["mcp__tickets"] if allowed == [] else [])
