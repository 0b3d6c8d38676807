"""Turns end to end in one process: the real handlers, moto executing the Turn ASL, the stream
poller delivering outbox records, and the reference scripted Runtime over the WebSocket gateway."""

import pytest
from moto import mock_aws

from agents_core.apikeys import create_key
from agents_core.runtimes import create_runtime_token
from local.inprocess import InProcessStack, wait_for
from local.lambdas import MOTO_CONFIG
from tests.integration.conftest import sdk


@pytest.fixture
def stack(monkeypatch):
    monkeypatch.setenv("HEARTBEAT_SECONDS", "2")
    with mock_aws(config=MOTO_CONFIG):
        s = InProcessStack("agents-core-turns").start()
        yield s
        s.stop()


@pytest.fixture
def client(stack):
    return sdk(stack.http, create_key(stack.store, "tenant-a"))


@pytest.fixture
def runtime(stack):
    return stack.connect_runtime(create_runtime_token(stack.store, "test"), ["scripted", "codex", "claude_code"])


def session_with(client, script, **kwargs):
    return client.beta.agents.sessions.create(
        environment={"type": "none"}, input=script,
        agent={"model": "gpt-5", "tools": [{"type": "function", "name": "get_weather", "description": "Weather",
                                            "parameters": {"type": "object", "properties": {}}}],
               **kwargs.pop("agent", {})},
        extra_body={"x_agents_core": {"harness": kwargs.pop("harness", "scripted")}}, **kwargs)


def status(client, session_id):
    return client.beta.agents.sessions.retrieve(session_id).status


def test_call_round_trip(client, runtime):
    session = session_with(client, 'call get_weather {"city": "Paris"}\nsay It is sunny in Paris.')
    action = wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).required_actions)[0]
    assert (action.type, action.name, action.arguments) == ("function_call", "get_weather", {"city": "Paris"})
    assert status(client, session.id) == "requires_action"
    turn = client.beta.agents.sessions.turns.retrieve(action.turn_id, session_id=session.id)
    assert turn.status == "waiting"
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
        "success": True, "output": "sunny"}])
    wait_for(lambda: client.beta.agents.sessions.turns.retrieve(action.turn_id, session_id=session.id).status
             == "completed")
    final = client.beta.agents.sessions.retrieve(session.id)
    assert final.status == "idle" and final.required_actions == []
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert [i.type for i in items] == ["message", "function_call", "function_call_output", "message"]
    assert items[2].output == "sunny" and items[2].error is None
    assert items[3].content[0].text == "It is sunny in Paris." and items[3].phase == "final_answer"
