"""Recovery on the native engines: a Turn whose model provider fails, then the Session's next Turn completes
on the same real Claude Code / Codex process, answering the new message (issue 22).

Claude Code keeps a user message that got no assistant reply and appends the next message to it as more
content blocks; Codex sends the next message as a new user item. Either way the model must answer what the
caller last sent, so these tests check the product's recovery, not the test double replaying `fail`."""

from __future__ import annotations

import json

import pytest

from local.inprocess import wait_for
from tests.e2e.conftest import NativeRuntime

pytestmark = pytest.mark.e2e

FN = {"type": "function", "name": "get_weather", "description": "Weather for a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
ENGINES = {"claude_code": ("claude-sonnet-4-5", "claude_code 2.1.332", ()),
           "codex": ("gpt-5", "codex 0.163.0", ("--warm-sessions", "1"))}


@pytest.fixture(scope="module", params=sorted(ENGINES))
def native(request, local_stack, runtime_process, tmp_path_factory):
    harness = request.param
    runtime = NativeRuntime(local_stack, tmp_path_factory.mktemp(harness), harness, extra=ENGINES[harness][2])
    runtime.start()
    yield runtime
    runtime.stop()


def message(text):
    return {"type": "agent.session.input.message",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}


def turns(client, session_id):
    """Oldest first, as the API orders them (two Turns created in the same second tie on created_at)."""
    return client.beta.agents.sessions.turns.list(session_id, order="asc").data


def sent_with(native, marker):
    """The provider requests whose conversation carries `marker` (Anthropic `messages`, Responses `input`)."""
    return [r["body"] for r in native.requests()
            if marker in json.dumps(r["body"].get("messages") or r["body"].get("input"))]


def test_after_a_provider_failure_the_next_turn_completes_on_the_native_engine(client, native):
    model, engine, _ = ENGINES[native.harness]
    session = client.beta.agents.sessions.create(
        environment={"type": "none"}, agent={"model": model, "tools": [FN]}, input="fail The model is unavailable.",
        extra_body={"x_agents_core": {"harness": native.harness}})
    failed = wait_for(lambda: [t for t in turns(client, session.id) if t.status == "failed"], timeout=40)[0]
    assert "The model is unavailable." in failed.model_extra["x_agents_core"]["error"]["message"]
    assert client.beta.agents.sessions.retrieve(session.id).status == "failed"

    client.beta.agents.sessions.events.create(session.id, events=[message(
        'say Recovered.\ncall get_weather {"city": "Oslo"}\nsay Sunny in Oslo.')])
    action = wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).required_actions, timeout=40)[0]
    assert (action.name, action.arguments) == ("get_weather", {"city": "Oslo"})
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
        "success": True, "output": "sunny"}])
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle", timeout=40)

    first, second = turns(client, session.id)
    assert (first.id, first.status, second.id, second.status) == (failed.id, "failed", action.turn_id, "completed")
    assert second.model_extra["x_agents_core"]["engine"] == engine  # the native process, not the scripted one
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    answers = [(i.phase, i.content[0].text) for i in items if i.type == "message" and i.role == "assistant"]
    assert answers == [("commentary", "Recovered."), ("final_answer", "Sunny in Oslo.")]
    assert client.beta.agents.sessions.retrieve(session.id).error is None
    # The native engine really did send the failed message again beside the new one: the history the
    # provider had to read the newest input from.
    recovered = sent_with(native, "Sunny in Oslo.")
    assert recovered and "The model is unavailable." in json.dumps(recovered[0])
