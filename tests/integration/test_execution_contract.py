"""Issue 37's contract-side sentences of the spec, each against the in-process stack with a test acting as
the Runtime over the WebSocket protocol (`raw_runtime.RawRuntime`), so what Core sends and admits is seen
as a Runtime sees it:

- "The Runtime needs only the execution_controls capability" (web_search, programmatic_tool_calling);
- "Results with image parts need the Runtime's function_result_images capability": a 400 that leaves the
  call pending, nothing written;
- "A function declaration requires name, description ..."; a tool result requires success: 400
  `Missing required parameter` naming the param, nothing written;
- "Session and SSE resources project tool_search out while the frozen configuration keeps it";
- "Core carries the schema in ExecutionControls.OutputFormat": turn.start, on every Turn.
"""

import json

import openai
import pytest

from agents_core.apikeys import create_key
from agents_core.store import unpack
from local.inprocess import wait_for
from runtime.capabilities import declarations
from tests.integration import raw_runtime as raw_module
from tests.integration.conftest import sdk
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import stack  # noqa: F401 - fixture

PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather",
           "parameters": {"type": "object", "properties": {}}}
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
          "additionalProperties": False}


@pytest.fixture
def client(stack):  # noqa: F811 - the stack fixture
    return sdk(stack.http, create_key(stack.store, "tenant-a"))


def runtime_without(stack, monkeypatch, harness, *lacking):  # noqa: F811
    """A Runtime serving `harness` with its usual declaration less `lacking` (each still declared, false)."""
    def declared(harnesses):
        out = declarations(harnesses)
        for entry in out:
            entry["capabilities"].update({name: False for name in lacking})
        return out

    monkeypatch.setattr(raw_module, "declarations", declared)
    try:
        return RawRuntime(stack, (harness,))
    finally:
        monkeypatch.setattr(raw_module, "declarations", declarations)


def create(client, harness, tools, input="go", **agent):
    return client.beta.agents.sessions.create(
        environment={"type": "none"}, input=input, agent={"model": "gpt-5", "tools": tools, **agent},
        extra_body={"x_agents_core": {"harness": harness}})


def scan(stack):  # noqa: F811
    items, kwargs = [], {"TableName": stack.table, "ConsistentRead": True}
    while True:
        out = stack.dynamodb.scan(**kwargs)
        items += out["Items"]
        if "LastEvaluatedKey" not in out:
            return sorted(items, key=lambda i: (i["PK"]["S"], i["SK"]["S"]))
        kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]


def events_of(stack, session_id):  # noqa: F811
    rows = stack.store.query(pk=f"T#tenant-a#SESSION#{session_id}", sk_prefix="OUT#", limit=100, consistent=True)
    return [e for i in rows.items for e in json.loads(unpack(i["events"]))]


def rejected(call, status=400):
    with pytest.raises(openai.APIStatusError) as err:
        call()
    assert err.value.status_code == status
    return err.value.body


# ---- "The Runtime needs only the execution_controls capability" ----------------------------------------------

def test_a_runtime_advertising_execution_controls_receives_web_search_and_programmatic_calling_sessions(
        stack, client, monkeypatch):  # noqa: F811
    raw = runtime_without(stack, monkeypatch, "codex", "web_search_control", "programmatic_tool_calling_disable")
    session = create(client, "codex", [{"type": "web_search", "mode": "disabled"},
                                       {"type": "programmatic_tool_calling", "enabled": False}])
    route = raw.start(timeout=10)  # before the fix the Turn stayed queued: no Runtime covered it
    assert route["session_id"] == session.id
    start = next(f for f in raw.frames if f.get("type") == "turn.start")
    assert {t["type"] for t in start["agent"]["tools"]} == {"web_search", "programmatic_tool_calling"}


# ---- results with image parts need function_result_images ----------------------------------------------------

def call_pending(client, raw, harness, calls=("c1",)):
    session = create(client, harness, [WEATHER])
    route = raw.start(timeout=10)
    for call_id in calls:
        raw.observe(route, "turn.function_call", call_id=call_id, name="get_weather", arguments={})
    actions = wait_for(lambda: [a for a in client.beta.agents.sessions.retrieve(session.id).required_actions]
                       if len(client.beta.agents.sessions.retrieve(session.id).required_actions) == len(calls)
                       else None, timeout=10)
    return session, route, actions[0]


def image_result(action, **extra):
    return {"type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
            "success": True, "output": [{"type": "input_text", "text": "a map"},
                                        {"type": "input_image", "image_url": PNG}], **extra}


def test_an_image_result_for_a_runtime_without_function_result_images_is_a_400_leaving_the_call_pending(
        stack, client, monkeypatch):  # noqa: F811
    raw = runtime_without(stack, monkeypatch, "codex", "function_result_images")
    session, route, action = call_pending(client, raw, "codex", calls=("c1", "c2"))
    before = scan(stack)
    body = rejected(lambda: client.beta.agents.sessions.events.create(session.id, events=[image_result(action)]))
    assert body["param"] == "events[0].output" and body["code"] == "unsupported_or_invalid_configuration"
    assert "function_result_images" in body["message"]
    assert scan(stack) == before  # nothing written
    assert not [f for f in raw.frames if f.get("type") == "turn.tool_result"]
    retrieved = client.beta.agents.sessions.retrieve(session.id)
    assert retrieved.status == "requires_action"
    assert sorted(a.call_id for a in retrieved.required_actions) == ["c1", "c2"]
    # A batch with a text result before the image result is rejected whole; text results are admitted.
    text = {**image_result(action), "output": "sunny"}
    body = rejected(lambda: client.beta.agents.sessions.events.create(
        session.id, events=[{**text, "call_id": "c2"}, image_result(action)]))
    assert body["param"] == "events[1].output"
    assert scan(stack) == before
    client.beta.agents.sessions.events.create(session.id, events=[text])
    delivered = wait_for(lambda: [f for f in raw.frames if f.get("type") == "turn.tool_result"], timeout=10)
    assert delivered[0]["result"]["output"] == "sunny"


def test_an_image_result_reaches_a_runtime_that_advertises_function_result_images(stack, client):  # noqa: F811
    raw = RawRuntime(stack, ("claude_code",))
    session, route, action = call_pending(client, raw, "claude_code")
    client.beta.agents.sessions.events.create(session.id, events=[image_result(action)])
    delivered = wait_for(lambda: [f for f in raw.frames if f.get("type") == "turn.tool_result"], timeout=10)
    assert delivered[0]["result"]["output"][1] == {"type": "input_image", "image_url": PNG}


# ---- missing required members: 400 naming the param, nothing written -----------------------------------------

def test_a_function_without_name_or_description_is_missing_a_required_parameter(stack, client):  # noqa: F811
    before = scan(stack)
    for member in ("name", "description"):
        function = {k: v for k, v in WEATHER.items() if k != member}
        body = rejected(lambda: client.beta.agents.create(model="gpt-5", tools=[function]))  # noqa: B023
        assert (body["message"], body["param"], body["type"]) == (
            f"Missing required parameter: 'tools[0].{member}'.", f"tools[0].{member}", "invalid_request_error")
        body = rejected(lambda: create(client, "scripted", [WEATHER, function]))  # noqa: B023
        assert (body["message"], body["param"]) == (
            f"Missing required parameter: 'agent.tools[1].{member}'.", f"agent.tools[1].{member}")
    assert scan(stack) == before  # nothing written


def test_a_tool_result_without_success_is_missing_a_required_parameter(stack, client):  # noqa: F811
    raw = RawRuntime(stack, ("scripted",))
    session, route, action = call_pending(client, raw, "scripted")
    before = scan(stack)
    event = {"type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
             "output": "sunny"}
    body = rejected(lambda: client.beta.agents.sessions.events.create(session.id, events=[event]))
    assert (body["message"], body["param"], body["type"]) == (
        "Missing required parameter: 'events[0].success'.", "events[0].success", "invalid_request_error")
    assert scan(stack) == before
    assert [a.call_id for a in client.beta.agents.sessions.retrieve(session.id).required_actions] == ["c1"]


# ---- tool_search projected out of Session resources, kept in the frozen configuration --------------------------

def test_session_events_project_tool_search_out_while_the_frozen_configuration_keeps_it(stack, client):  # noqa: F811
    raw = RawRuntime(stack, ("claude_code",))
    deferred = {**WEATHER, "defer_loading": True}
    session = create(client, "claude_code", [{"type": "tool_search"}, deferred])
    raw.start(timeout=10)
    start = next(f for f in raw.frames if f.get("type") == "turn.start")
    assert [t["type"] for t in start["agent"]["tools"]] == ["tool_search", "function"]  # frozen: kept
    assert start["agent"]["tools"][1]["defer_loading"] is True and start["execution_controls"]["tool_search"] is True
    assert [t.type for t in session.agent.tools] == ["function"]  # the create response
    assert [t.type for t in client.beta.agents.sessions.retrieve(session.id).agent.tools] == ["function"]
    events = events_of(stack, session.id)
    created = next(e for e in events if e["type"] == "agent.session.created")
    assert [t["type"] for t in created["session"]["agent"]["tools"]] == ["function"]
    for carried in [e["session"] for e in events if "session" in e]:  # any other event carrying the Session
        assert [t["type"] for t in carried["agent"]["tools"]] == ["function"]


# ---- turn.start carries the frozen schema in execution_controls.output_format -------------------------------

def test_turn_start_carries_the_frozen_schema_on_every_turn(stack, client):  # noqa: F811
    raw = RawRuntime(stack, ("codex",))
    text = {"format": {"type": "json_schema", "schema": SCHEMA}}
    session = create(client, "codex", [WEATHER], text=text)
    frozen = client.beta.agents.sessions.retrieve(session.id).agent.text.format.to_dict()
    assert frozen == {"type": "json_schema", "schema": SCHEMA}
    first = raw.start(timeout=10)
    raw.observe(first, "turn.completed")
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status in ("idle", "failed"), timeout=10)
    client.beta.agents.sessions.events.create(session.id, events=[
        {"type": "agent.session.input.message",
         "input": [{"role": "user", "content": [{"type": "input_text", "text": "again"}]}]}])
    raw.start(timeout=10)
    starts = [f for f in raw.frames if f.get("type") == "turn.start"]
    assert len(starts) == 2
    for start in starts:
        assert start["execution_controls"]["output_format"] == frozen
        assert start["agent"]["text"]["format"] == frozen
