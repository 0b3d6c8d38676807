"""Defaults the spec names, applied by the execution parser exactly once."""

import json

import pytest

from agents_contract import jsonutil, parser, resources
from agents_contract.admission import SavedAgent
from agents_contract.errors import AgentsError, InvalidRequest
from tests.unit.helpers import SELF_HOSTED, fn, http_mcp, resolve, session_body, stdio_mcp


def agent_tools(tools):
    request = parser.parse_agent_create({"model": "m", "tools": tools})
    record = {"id": "agent_1", "created_at": 1, "updated_at": 1, "config": parser.config_as_sent(request)}
    return resources.agent_resource(record)["tools"]


def test_defer_loading_defaults_to_false():
    assert agent_tools([fn()])[0]["defer_loading"] is False


@pytest.mark.parametrize("mode,saved", [(None, "live"), ("cached", "cached"), ("live", "live"), ("disabled", "disabled")])
def test_saved_web_search_modes(mode, saved):
    tool = {"type": "web_search"} if mode is None else {"type": "web_search", "mode": mode}
    assert agent_tools([tool])[0]["mode"] == saved
    assert agent_tools([{"type": "web_search", "mode": None}])[0]["mode"] == "live"


def test_search_settings_resolve():
    ws = agent_tools([{"type": "web_search"}])[0]
    assert (ws["context_size"], ws["allowed_domains"], ws["location"]) == ("medium", None, None)
    assert agent_tools([{"type": "web_search", "context_size": None}])[0]["context_size"] == "medium"


def test_empty_domain_list_stays_empty():
    assert agent_tools([{"type": "web_search", "allowed_domains": []}])[0]["allowed_domains"] == []


def test_empty_location_gets_four_nulls():
    loc = agent_tools([{"type": "web_search", "location": {}}])[0]["location"]
    assert loc == {"city": None, "country": None, "region": None, "timezone": None}
    loc = agent_tools([{"type": "web_search", "location": {"city": "Paris"}}])[0]["location"]
    assert loc == {"city": "Paris", "country": None, "region": None, "timezone": None}


def test_allowed_tools_null_and_empty_stay_distinct():
    tools = agent_tools([http_mcp("a"), http_mcp("b", allowed_tools=None), http_mcp("c", allowed_tools=[])])
    assert [t["allowed_tools"] for t in tools] == [None, None, []]


def test_connection_origin_defaults_by_transport_not_placement():
    """Omitted or null means `service` for HTTP on every placement (the SDK's rule; a workspace Session
    then needs an explicit `environment`), and `environment` for stdio."""
    assert resolve(session_body([http_mcp()])).tools[0]["connection_origin"] == "service"
    assert resolve(session_body([http_mcp(connection_origin=None)])).tools[0]["connection_origin"] == "service"
    assert agent_tools([http_mcp()])[0]["connection_origin"] == "service"
    with pytest.raises(AgentsError) as err:
        resolve(session_body([http_mcp()], env=SELF_HOSTED))
    assert err.value.message == "Service-origin MCP requires environment none."
    assert resolve(session_body([http_mcp(connection_origin="environment")], env=SELF_HOSTED)).tools[0][
        "connection_origin"] == "environment"
    assert resolve(session_body([stdio_mcp()], env=SELF_HOSTED)).tools[0]["connection_origin"] == "environment"


def test_mcp_defaults():
    tool = agent_tools([http_mcp()])[0]
    assert tool["request_metadata"] == {} and tool["required"] is False and tool["credential_id"] is None
    assert tool["transport"] == {"type": "http", "server_url": "https://mcp.example.com/mcp", "headers": {}}
    stdio = agent_tools([{"type": "mcp", "server_label": "s", "transport": {"type": "stdio", "command": "c",
                                                                              "cwd": "/w"}}])[0]
    assert stdio["transport"] == {"type": "stdio", "command": "c", "cwd": "/w", "args": [], "env_vars": []}


def test_agent_keeps_pinned_numbers_unchanged():
    body = jsonutil.loads('{"model":"m","tools":[{"type":"function","name":"f","description":"d",'
                          '"parameters":{"type":"object","maximum":0.10000000000000000001,"big":12345678901234567891}}]}')
    request = parser.parse_agent_create(body)
    record = {"id": "a", "created_at": 1, "updated_at": 1, "config": parser.config_as_sent(request)}
    text = jsonutil.dumps(resources.agent_resource(record))
    assert '"maximum":0.10000000000000000001' in text and '"big":12345678901234567891' in text


def test_agent_keeps_a_negative_zero():
    """-0 and 0 are different binary64 values (the sign): a saved -0 reads back as -0."""
    body = jsonutil.loads('{"model":"m","tools":[{"type":"function","name":"f","description":"d",'
                          '"parameters":{"type":"object","properties":{"x":{"type":"number","maximum":-0,'
                          '"minimum":-0.0,"default":0}}}}]}')
    request = parser.parse_agent_create(body)
    record = {"id": "a", "created_at": 1, "updated_at": 1, "config": parser.config_as_sent(request)}
    text = jsonutil.dumps(resources.agent_resource(record))
    assert '"maximum":-0,"minimum":-0.0,"default":0' in text


def test_agent_resource_defaults():
    request = parser.parse_agent_create({"model": "gpt-5"})
    record = {"id": "a", "created_at": 1, "updated_at": 2, "config": parser.config_as_sent(request)}
    agent = resources.agent_resource(record)
    assert agent["text"] == {"format": {"type": "text"}, "verbosity": "medium"}
    assert agent["service_tier"] == "auto" and agent["tools"] == [] and agent["metadata"] == {}
    assert agent["multi_agent"] == {"enabled": False, "max_concurrent_subagents": None}
    for sent, shown in [({"enabled": True}, 6), ({"enabled": True, "max_concurrent_subagents": 2}, 2),
                        ({"enabled": False, "max_concurrent_subagents": 2}, None)]:
        saved = parser.parse_agent_create({"model": "gpt-5", "multi_agent": sent})
        record = {"id": "a", "created_at": 1, "updated_at": 1, "config": parser.config_as_sent(saved)}
        assert resources.agent_resource(record)["multi_agent"]["max_concurrent_subagents"] == shown


def test_inline_overrides_resolve_over_the_saved_agent():
    saved = SavedAgent(id="agent_1", name="n", config={"model": "gpt-5", "instructions": "be brief",
                                                        "tools": [fn("saved")]})
    body = {"environment": {"type": "none"}, "input": "x", "agent": {"model": "gpt-5-mini"},
            "x_agents_core": {"harness": "codex"}}
    snapshot = resolve(body, saved=saved)
    assert snapshot.agent["model"] == "gpt-5-mini"
    assert snapshot.agent["instructions"] == "be brief"
    assert [t["name"] for t in snapshot.functions] == ["saved"]
    replaced = resolve({**body, "agent": {"tools": [fn("inline")]}}, saved=saved)
    assert [t["name"] for t in replaced.functions] == ["inline"]


def test_snapshot_keeps_tool_search_but_the_session_resource_projects_it_out():
    snapshot = resolve(session_body([{"type": "tool_search"}, fn(defer_loading=True), http_mcp(
        transport={"headers": {"X-A": "1"}})], harness="claude_code"))
    assert [t["type"] for t in snapshot.tools] == ["tool_search", "function", "mcp"]
    session = resources.session_resource({"id": "sess_1", "created_at": 1, "last_active_at": 1, "status": "idle"},
                                         snapshot)
    assert [t["type"] for t in session["agent"]["tools"]] == ["function", "mcp"]
    assert session["agent"]["tools"][1]["transport"] == {"type": "http", "server_url": "https://mcp.example.com/mcp"}


def test_agent_update_model_cannot_be_null():
    with pytest.raises(InvalidRequest):
        parser.parse_agent_update({"model": None})
    update = parser.parse_agent_update({"instructions": None})
    merged = parser.merge_config({"model": "m", "instructions": "x"}, parser.config_as_sent(update))
    assert merged == {"model": "m", "instructions": None}


def test_snapshot_json_round_trip_is_stable():
    snapshot = resolve(session_body([fn(), {"type": "web_search", "location": {}}, http_mcp()]))
    again = parser.Snapshot.from_json(snapshot.to_json())
    assert again == snapshot and json.loads(again.to_json()) == json.loads(snapshot.to_json())


def test_functions_copied_from_the_body_equal_the_field_by_field_resolution():
    from agents_contract import wire
    raw = [fn("a"), fn("b", defer_loading=True), {**fn("c"), "async": True}, {"type": "web_search"}]
    tools = parser.tools_from_config(raw)
    assert parser.resolve_tools(tools, raw) == [parser.resolve_tool(t) for t in tools]
    assert all(isinstance(t, wire.FunctionTool) for t in tools[:3])
