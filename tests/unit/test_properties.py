"""Parser robustness: arbitrary JSON raises only domain errors; parse -> snapshot -> JSON -> parse is stable."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_contract import jsonutil, parser
from agents_contract.errors import AgentsError
from tests.unit.helpers import resolve

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)

KEYS = ["type", "name", "description", "parameters", "defer_loading", "mode", "context_size", "allowed_domains",
        "location", "server_label", "transport", "server_url", "headers", "command", "cwd", "args", "env_vars",
        "allowed_tools", "connection_origin", "required", "enabled", "format", "schema", "text", "tools", "model"]
TYPES = ["function", "tool_search", "programmatic_tool_calling", "mcp", "web_search", "http", "stdio",
         "json_schema", "text", "none", "self_hosted"]
shaped = st.recursive(
    st.sampled_from(TYPES) | st.booleans() | st.none() | st.integers(-3, 3) | st.text(max_size=4),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from(KEYS), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(json_values, shaped))
def test_agent_parser_raises_only_domain_errors(body):
    try:
        parser.parse_agent_create(body)
    except AgentsError:
        pass


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(tools=st.lists(shaped, max_size=3), env=st.sampled_from([{"type": "none"}, {"type": "self_hosted",
       "workspace_directory": "/w"}, {"type": "openai_hosted"}]), harness=st.sampled_from(
       ["codex", "claude_code", "minimax_code", "scripted"]))
def test_session_resolution_raises_only_domain_errors_and_round_trips(tools, env, harness):
    body = {"environment": env, "input": "x", "agent": {"model": "m", "tools": tools},
            "x_agents_core": {"harness": harness}}
    try:
        snapshot = resolve(body)
    except AgentsError:
        return
    again = parser.Snapshot.from_json(snapshot.to_json())
    assert again == snapshot
    assert jsonutil.loads(again.to_json()) == jsonutil.loads(snapshot.to_json())


def _tool(draw):
    kind = draw(st.sampled_from(["function", "web_search", "mcp", "ptc"]))
    name = draw(st.text("abcdefgh_", min_size=1, max_size=6))
    if kind == "function":
        return {"type": "function", "name": name, "description": draw(st.text(max_size=5)),
                "parameters": {"type": "object", "properties": draw(st.dictionaries(st.text(max_size=3),
                                                                                    json_values, max_size=2))},
                "defer_loading": False}
    if kind == "web_search":
        return {"type": "web_search", "mode": draw(st.sampled_from(["disabled", "cached", "live", None])),
                "location": draw(st.none() | st.just({}) | st.just({"city": "Paris"}))}
    if kind == "mcp":
        return {"type": "mcp", "server_label": name, "transport": {"type": "http",
                "server_url": "https://mcp.example.com/" + name}, "allowed_tools": draw(st.none() | st.just([]))}
    return {"type": "programmatic_tool_calling", "enabled": draw(st.booleans())}


@settings(max_examples=100)
@given(st.data())
def test_valid_sessions_round_trip_through_json(data):
    tools = data.draw(st.lists(st.builds(lambda: None).flatmap(lambda _: st.composite(lambda d: _tool(d))()),
                               max_size=5))
    body = {"environment": {"type": "none"}, "input": "x", "agent": {"model": "m", "tools": tools},
            "x_agents_core": {"harness": "codex"}}
    try:
        snapshot = resolve(json.loads(json.dumps(body)))
    except AgentsError:
        return
    text = snapshot.to_json()
    assert parser.Snapshot.from_json(text).to_json() == text
