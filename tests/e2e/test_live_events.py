"""Live events on the local stack: the SDK's sessions.stream helper with a tool handler, and a
WebSocket client and an SSE client receiving the same full sequence of a call round trip."""

import json
import threading
import time

import pytest
from openai.types.beta.agent_session_event import AgentSessionEvent
from pydantic import TypeAdapter
from websockets.sync.client import connect

from tests.e2e.conftest import connected

pytestmark = pytest.mark.e2e
EVENT = TypeAdapter(AgentSessionEvent)
FN = {"type": "function", "name": "get_weather", "description": "Weather for a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def idle_session(client):
    return connected(client, client.beta.agents.sessions.create(
        environment={"type": "self_hosted", "workspace_directory": "/work"}, agent={"model": "gpt-5", "tools": [FN]},
        extra_body={"x_agents_core": {"harness": "scripted"}}))


def test_sdk_stream_helper_runs_tool_handlers_to_the_final_answer(client):
    session = idle_session(client)
    calls = []

    def get_weather(arguments):
        calls.append(arguments)
        return "sunny"

    with client.beta.agents.sessions.stream(session.id, input='call get_weather {"city": "Paris"}\nsay It is sunny.',
                                            tool_handlers={"get_weather": get_weather}) as stream:
        result = stream.get_final_result()
    assert calls and json.loads(json.dumps(calls[0], default=str)) in ({"city": "Paris"}, '{"city": "Paris"}')
    assert result.output_text == "It is sunny."
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert [i.type for i in items] == ["message", "function_call", "function_call_output", "message"]


def test_websocket_and_sse_clients_receive_the_same_full_sequence(client, local_stack):
    session = idle_session(client)
    ws_events, sse_events = [], []
    socket = connect(local_stack["websocket_url"], additional_headers={"Authorization": f"Bearer {client.api_key}"})
    socket.send(json.dumps({"action": "subscribe", "session_id": session.id}))
    assert json.loads(socket.recv(timeout=5))["type"] == "subscribed"
    stream = client.beta.agents.sessions.events.stream(session.id)

    def read_sse():
        for event in stream:
            sse_events.append(event)
            if event.type == "agent.session.idle":
                return

    reader = threading.Thread(target=read_sse, daemon=True)
    reader.start()
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.message", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "call get_weather {}\nsay done"}]}]}])
    while True:
        event = json.loads(socket.recv(timeout=10))
        ws_events.append(event)
        if event["type"] == "agent.session.requires_action":
            action = event["session"]["required_actions"][0]
            client.beta.agents.sessions.events.create(session.id, events=[{
                "type": "agent.session.input.tool_result", "turn_id": action["turn_id"],
                "call_id": action["call_id"], "success": True, "output": "ok"}])
        if event["type"] == "agent.session.idle":
            break
    reader.join(timeout=10)
    stream.close()
    socket.close()
    kinds = [e["type"] for e in ws_events]
    assert kinds[:4] == ["agent.session.turn.created", "agent.session.turn.item.added", "agent.session.in_progress",
                         "agent.session.turn.in_progress"]
    assert "agent.session.requires_action" in kinds and kinds[-2:] == ["agent.session.turn.completed",
                                                                       "agent.session.idle"]
    output_added = [e for e in ws_events if e["type"] == "agent.session.turn.item.added"
                    and e["item"]["type"] == "function_call_output"]
    assert len(output_added) == 1 and output_added[0]["item"]["error"] is None  # item.added only, with output/error
    ws_ids = [e["event_id"] for e in ws_events]
    assert len(ws_ids) == len(set(ws_ids))
    assert [e.event_id for e in sse_events] == ws_ids  # the same committed events, in order, once
    for event in ws_events:
        EVENT.validate_python(event)


def test_other_tenant_websocket_subscriber_receives_nothing(client, local_stack):
    import subprocess
    import sys

    from tests.e2e.conftest import ROOT
    key = subprocess.run([sys.executable, "-m", "agents_core.apikeys", "--tenant", "spy", "--table",
                          local_stack["table"], "--endpoint-url", local_stack["moto_endpoint"]], cwd=ROOT,
                         capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT / "layers" / "contract"), "AWS_ACCESS_KEY_ID": "local",
                              "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": "us-east-1",
                              "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled"}).stdout.strip()
    session = idle_session(client)
    with connect(local_stack["websocket_url"], additional_headers={"Authorization": f"Bearer {key}"}) as spy:
        spy.send(json.dumps({"action": "subscribe", "session_id": session.id}))
        reply = json.loads(spy.recv(timeout=5))
        assert reply["type"] == "error" and reply["error"]["message"] == "Resource not found."
        client.beta.agents.sessions.events.create(session.id, events=[{
            "type": "agent.session.input.message", "input": [{"role": "user", "content": [
                {"type": "input_text", "text": "say secret"}]}]}])
        deadline = time.time() + 3
        while client.beta.agents.sessions.retrieve(session.id).status != "idle" and time.time() < deadline:
            time.sleep(0.05)
        with pytest.raises(TimeoutError):
            spy.recv(timeout=0.5)


def test_sse_for_a_foreign_or_missing_session_is_404(client):
    import openai
    with pytest.raises(openai.NotFoundError):
        for _ in client.beta.agents.sessions.events.stream("sess_missing"):
            break
