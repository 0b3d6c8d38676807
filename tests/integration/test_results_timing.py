"""Issue 37, items 5, 6 and 15: when a function result stops being a required action, and what a retry gets,
with a test acting as the Runtime over the WebSocket protocol (`raw_runtime.RawRuntime`), which sends its
receipts and abandonments only when the test says so.

- "A pending function appears in Session reads and Session SSE as a required action ... until native
  application": admission and delivery leave it there; the Runtime's receipt removes it.
- "Identical retry, also after the Turn ends or the call is abandoned: Accepted"; a different result 409
  conflict_error; a first result for an abandoned call 409; an abandoned call has no output Item.
- "The call then stops being a required action, the Turn continues and returns to in_progress when no
  required action is left": the Session status and the agent.session.in_progress event come with the last
  abandonment, not before.
"""

import json

import openai
import pytest

from agents_core.apikeys import create_key
from agents_core.store import unpack
from local.inprocess import wait_for
from tests.integration.conftest import sdk
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import stack  # noqa: F401 - fixture

WEATHER = {"type": "function", "name": "get_weather", "description": "Weather",
           "parameters": {"type": "object", "properties": {}}}


@pytest.fixture
def client(stack):  # noqa: F811 - the stack fixture
    return sdk(stack.http, create_key(stack.store, "tenant-a"))


def events_of(stack, session_id):  # noqa: F811
    rows = stack.store.query(pk=f"T#tenant-a#SESSION#{session_id}", sk_prefix="OUT#", limit=200, consistent=True)
    return [e["type"] for i in rows.items for e in json.loads(unpack(i["events"]))]


def scan(stack):  # noqa: F811
    items, kwargs = [], {"TableName": stack.table, "ConsistentRead": True}
    while True:
        out = stack.dynamodb.scan(**kwargs)
        items += out["Items"]
        if "LastEvaluatedKey" not in out:
            return sorted(items, key=lambda i: (i["PK"]["S"], i["SK"]["S"]))
        kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]


def pending(client, raw, calls):
    """A Session whose Turn made `calls`, all pending; (session id, route)."""
    session = client.beta.agents.sessions.create(
        environment={"type": "none"}, input="go", agent={"model": "gpt-5", "tools": [WEATHER]},
        extra_body={"x_agents_core": {"harness": "scripted"}})
    route = raw.start()
    raw.batch(route, [("turn.function_call", {"call_id": c, "name": "get_weather", "arguments": {}}) for c in calls])
    wait_for(lambda: len(client.beta.agents.sessions.retrieve(session.id).required_actions) == len(calls), timeout=10)
    return session.id, route


def result(route, call_id, output="sunny"):
    return {"type": "agent.session.input.tool_result", "turn_id": route["turn_id"], "call_id": call_id,
            "success": True, "output": output}


def delivered(raw, call_id):
    return wait_for(lambda: [f for f in raw.frames if f.get("type") == "turn.tool_result"
                             and f.get("call_id") == call_id], timeout=10)


def outputs(client, session_id):
    return [i for i in client.beta.agents.sessions.items.list(session_id).data if i.type == "function_call_output"]


def test_a_delivered_result_stays_a_required_action_until_the_runtime_receipt(stack, client):  # noqa: F811
    raw = RawRuntime(stack)
    session_id, route = pending(client, raw, ["c1"])
    client.beta.agents.sessions.events.create(session_id, events=[result(route, "c1")])
    delivered(raw, "c1")  # admitted and delivered: the Runtime holds it, the Harness has not applied it
    held = client.beta.agents.sessions.retrieve(session_id)
    assert held.status == "requires_action" and [a.call_id for a in held.required_actions] == ["c1"]
    assert not outputs(client, session_id) and events_of(stack, session_id).count("agent.session.in_progress") == 1
    raw.observe(route, "turn.tool_result.applied", call_id="c1")  # the receipt, later
    wait_for(lambda: not client.beta.agents.sessions.retrieve(session_id).required_actions, timeout=10)
    applied = client.beta.agents.sessions.retrieve(session_id)
    assert applied.status == "in_progress"
    assert [o.call_id for o in outputs(client, session_id)] == ["c1"]
    assert events_of(stack, session_id)[-2:] == ["agent.session.turn.in_progress", "agent.session.in_progress"]


def test_retries_after_an_abandonment_and_after_the_turn_ends(stack, client):  # noqa: F811
    raw = RawRuntime(stack)
    session_id, route = pending(client, raw, ["c1", "c2", "c3"])
    client.beta.agents.sessions.events.create(session_id, events=[result(route, "c1")])
    delivered(raw, "c1")
    raw.batch(route, [("turn.call.abandoned", {"call_id": "c1"}), ("turn.call.abandoned", {"call_id": "c2"})])
    wait_for(lambda: len(client.beta.agents.sessions.retrieve(session_id).required_actions) == 1, timeout=10)
    rows = scan(stack)
    client.beta.agents.sessions.events.create(session_id, events=[result(route, "c1")])  # identical: accepted
    assert scan(stack) == rows  # accepted, nothing written
    with pytest.raises(openai.ConflictError) as err:
        client.beta.agents.sessions.events.create(session_id, events=[result(route, "c1", "rainy")])
    assert err.value.body["message"] == "The tool call already has a different result."
    with pytest.raises(openai.ConflictError) as err:  # a first result for an abandoned call
        client.beta.agents.sessions.events.create(session_id, events=[result(route, "c2")])
    assert err.value.body["message"] == "The Turn cannot accept this input in its current state."
    assert scan(stack) == rows
    assert not outputs(client, session_id)  # an abandoned call has no application receipt, so no output Item
    client.beta.agents.sessions.events.create(session_id, events=[result(route, "c3")])
    delivered(raw, "c3")
    raw.observe(route, "turn.tool_result.applied", call_id="c3")
    raw.observe(route, "turn.completed")
    wait_for(lambda: client.beta.agents.sessions.retrieve(session_id).status == "idle", timeout=15)
    for call_id in ("c1", "c3"):  # after the Turn ended too
        client.beta.agents.sessions.events.create(session_id, events=[result(route, call_id)])
    assert [o.call_id for o in outputs(client, session_id)] == ["c3"]


def test_the_last_abandonment_returns_the_session_to_in_progress(stack, client):  # noqa: F811
    raw = RawRuntime(stack)
    session_id, route = pending(client, raw, ["c1", "c2"])
    before = events_of(stack, session_id)
    raw.observe(route, "turn.call.abandoned", call_id="c1")
    wait_for(lambda: len(client.beta.agents.sessions.retrieve(session_id).required_actions) == 1, timeout=10)
    one_left = client.beta.agents.sessions.retrieve(session_id)
    assert one_left.status == "requires_action" and [a.call_id for a in one_left.required_actions] == ["c2"]
    assert events_of(stack, session_id) == before  # still waiting: no in_progress event
    raw.observe(route, "turn.call.abandoned", call_id="c2")
    wait_for(lambda: not client.beta.agents.sessions.retrieve(session_id).required_actions, timeout=10)
    assert client.beta.agents.sessions.retrieve(session_id).status == "in_progress"
    assert client.beta.agents.sessions.turns.retrieve(route["turn_id"], session_id=session_id).status == "in_progress"
    assert events_of(stack, session_id)[len(before):] == ["agent.session.turn.in_progress", "agent.session.in_progress"]
