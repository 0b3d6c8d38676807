"""Resources and events parse with the official SDK's strict models."""

import json

from openai.types.beta.agent import Agent
from openai.types.beta.agent_session import AgentSession
from openai.types.beta.agent_session_item import AgentSessionItem
from openai.types.beta.agents.sessions.turn import Turn
from pydantic import TypeAdapter

from agents_contract import errors, jsonutil, parser, resources
from tests.unit.helpers import SELF_HOSTED, fn, http_mcp, resolve, session_body, stdio_mcp

ITEM = TypeAdapter(AgentSessionItem)


def wire(obj):
    return json.loads(jsonutil.dumps(obj))


def test_agent_resource_is_an_sdk_agent():
    request = parser.parse_agent_create({"model": "gpt-5", "name": "n", "tools": [
        fn(), {"type": "tool_search"}, {"type": "web_search", "location": {}}, http_mcp(),
        {"type": "programmatic_tool_calling", "enabled": False}]})
    record = {"id": "agent_1", "created_at": 1, "updated_at": 2, "name": "n", "config": parser.config_as_sent(request),
              "harness": "codex"}
    agent = Agent.model_validate(wire(resources.agent_resource(record)))
    assert [t.type for t in agent.tools] == ["function", "tool_search", "web_search", "mcp",
                                             "programmatic_tool_calling"]


def test_session_resources_are_sdk_sessions_for_every_environment():
    for env, tools in [(None, [fn(), http_mcp()]), (SELF_HOSTED, [stdio_mcp()]), ({"type": "openai_hosted"}, [])]:
        snapshot = resolve(session_body(tools, env=env))
        session = {"id": "sess_1", "created_at": 1, "last_active_at": 2, "status": "requires_action",
                   "required_actions": [resources.function_call_action("call_1", "lookup", {"a": 1}, "turn_1")]}
        parsed = AgentSession.model_validate(wire(resources.session_resource(session, snapshot)))
        assert parsed.environment.type == (env or {"type": "none"})["type"]
        assert parsed.required_actions[0].call_id == "call_1"


def test_turn_and_items_are_sdk_shapes():
    turn = resources.turn_resource({"id": "turn_1", "agent_id": "a", "session_id": "s", "created_at": 1,
                                    "status": "failed"})
    assert Turn.model_validate(turn).error.code == "internal_error"
    msg = resources.user_message_item("item_1", "turn_1", resources.input_messages("hi")[0])
    assert ITEM.validate_python(msg).type == "message"
    out = resources.function_call_output_item("item_2", "turn_1", "call_1", {"success": True})
    assert out["output"] is None and out["error"] is None
    assert ITEM.validate_python(out).type == "function_call_output"


def test_error_types_derive_from_status_and_code():
    assert errors.error_type(500, None) == "server_error"
    assert errors.error_type(503, "x") == "server_error"
    assert errors.InvalidBeta().envelope()["error"] == {
        "message": "To access the Agents API, set the 'OpenAI-Beta' header to 'agents=v1'.", "type": "invalid_beta",
        "param": None, "code": "invalid_beta"}
    assert errors.NotFound().envelope()["error"]["type"] == "not_found_error"
    assert errors.IdempotencyConflict().envelope()["error"]["code"] == "idempotency_conflict"
    assert errors.Unauthorized("no").type == "invalid_request_error"
    assert errors.Unavailable().status == 429 and errors.Unavailable().type == "invalid_request_error"
