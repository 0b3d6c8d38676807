"""Issue 13, case 1: no operation needs more than DynamoDB allows in one transaction (100 writes,
4 MB) or one item (400 KB). Settle and SettleLost converge for Turns with 120 and 500 pending calls
on cancel, on completion and on Runtime loss, and the Session then runs a new Turn; too many input
messages are a clear 400 that writes nothing."""

import json
import os

import openai
import pytest

from agents_core.runtimes.connections import create_runtime_token
from local.inprocess import wait_for
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import client, runtime, stack  # noqa: F401 - fixtures
from tests.integration.test_turns import session_with, status, turn_status


def scan(stack):
    items, kwargs = [], {"TableName": stack.table, "ConsistentRead": True}
    while True:
        out = stack.dynamodb.scan(**kwargs)
        items += out["Items"]
        if "LastEvaluatedKey" not in out:
            return sorted(items, key=lambda i: (i["PK"]["S"], i["SK"]["S"]))
        kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]


def make_calls(raw, route, count):
    """`count` pending function calls, 50 per turn.batch (each batch still commits in bounded steps)."""
    for start in range(0, count, 50):
        raw.batch(route, [("turn.function_call", {"call_id": f"call_{i:04d}", "name": "get_weather",
                                                  "arguments": {"i": i}})
                          for i in range(start, min(count, start + 50))])


def new_turn_runs(client, stack, session_id):
    """After settling, the Session takes a new Turn and the scripted Runtime completes it."""
    client.beta.agents.sessions.events.create(session_id, events=[{
        "type": "agent.session.input.message",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "say again"}]}]}])
    return client.beta.agents.sessions.turns.list(session_id, order="desc").data[0]  # newest (created_at ties)


ENDINGS = ["cancel", "completion", "runtime_loss"]
# make test runs every ending at 120 calls (two transactions' worth, one of them full: 120 pending calls
# then a Runtime loss is what wedged Sessions); `make bench` (bench/bench_bounded.py,
# AGENTS_CORE_BOUNDED_FULL=1) runs every ending at 500 too (~20-60 s each on moto) and reports the timings.
SHAPES = [(120, e) for e in ENDINGS] + [(500, e) for e in ENDINGS if os.environ.get("AGENTS_CORE_BOUNDED_FULL")]
if os.environ.get("AGENTS_CORE_BOUNDED_SMOKE"):  # bench/bench_bounded.py --smoke (make test): its code path once
    SHAPES = [(3, "completion")]


@pytest.mark.parametrize(("count", "ending"), SHAPES)
def test_a_turn_with_many_pending_calls_settles_and_the_session_runs_a_new_turn(client, stack, count, ending):
    raw = RawRuntime(stack)
    session = session_with(client, "say anything")
    route = raw.start()
    make_calls(raw, route, count)
    wait_for(lambda: len(client.beta.agents.sessions.retrieve(session.id).required_actions) == count, timeout=60,
             interval=0.25)
    assert status(client, session.id) == "requires_action"
    if ending == "cancel":
        client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
        assert client.beta.agents.sessions.retrieve(session.id).required_actions == []
        wait_for(lambda: any(f.get("type") == "turn.cancel" for f in raw.frames))
        raw.observe(route, "turn.cancelled")
        expected = "cancelled"
    elif ending == "completion":
        raw.observe(route, "turn.completed")
        expected = "completed"
    else:
        raw.drop()
        expected = "failed"
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == expected, timeout=60, interval=0.25)
    final = client.beta.agents.sessions.retrieve(session.id)
    assert final.required_actions == [] and final.status == ("failed" if expected == "failed" else "idle")
    calls = [i for i in scan(stack) if i["SK"]["S"].startswith("CALL#")]
    assert len(calls) == count and all(c["state"]["S"] in ("cancelled", "settled") for c in calls)
    # A first result for any of them is the 409 of a Turn that cannot accept it.
    with pytest.raises(openai.ConflictError):
        client.beta.agents.sessions.events.create(session.id, events=[{
            "type": "agent.session.input.tool_result", "turn_id": route["turn_id"], "call_id": "call_0000",
            "success": True, "output": "late"}])
    raw.drop()
    stack.connect_runtime(create_runtime_token(stack.store, "next"), ["scripted"])
    newest = new_turn_runs(client, stack, session.id)
    assert newest.id != route["turn_id"]
    wait_for(lambda: turn_status(client, session.id, newest.id) == "completed", timeout=30)
    assert status(client, session.id) == "idle"


def test_a_turn_with_many_open_items_settles_them_incomplete(client, stack):
    raw = RawRuntime(stack)
    session = session_with(client, "say anything")
    route = raw.start()
    for start in range(0, 150, 50):
        raw.batch(route, [("turn.item.added", {"item": {"id": f"m{i}", "type": "message", "content": []}})
                          for i in range(start, start + 50)])
    raw.observe(route, "turn.completed")
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "completed", timeout=60)
    items = list(client.beta.agents.sessions.items.list(session.id, limit=100, order="asc").data)
    items += client.beta.agents.sessions.items.list(session.id, limit=100, order="asc", after=items[-1].id).data
    assert len(items) == 151 and all(i.status == "incomplete" for i in items[1:])


def test_input_messages_beyond_the_per_request_limit_are_a_clear_400_that_writes_nothing(client, stack):
    before = scan(stack)
    messages = [{"role": "user", "content": [{"type": "input_text", "text": f"say {i}"}]} for i in range(200)]
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.sessions.create(environment={"type": "none"}, input=messages,
                                           agent={"model": "gpt-5"})
    assert "at most 64 input messages" in err.value.body["message"]
    assert scan(stack) == before


def test_sixty_four_input_messages_start_one_turn(client, runtime):
    messages = [{"role": "user", "content": [{"type": "input_text", "text": f"say {i}"}]} for i in range(64)]
    session = client.beta.agents.sessions.create(environment={"type": "none"}, input=messages,
                                                 agent={"model": "gpt-5"})
    turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
    turn = wait_for(lambda: (t := client.beta.agents.sessions.turns.retrieve(turn_id, session_id=session.id)).status
                    in ("completed", "failed", "cancelled") and t, timeout=60)
    assert turn.status == "completed", turn.error  # a failure names its reason (e.g. a heartbeat timeout)
    assert len(list(client.beta.agents.sessions.items.list(session.id, limit=100))) == 64 + 64


def test_a_commit_larger_than_one_outbox_record_is_delivered_whole_and_in_order(client, stack):
    """Events of one commit beyond 300 KB go in several OUT# parts; a subscriber gets all, in order."""
    raw = RawRuntime(stack)
    session = session_with(client, "say anything")
    received = []
    from agents_core.apikeys import create_key
    viewer = stack.ws.connect(lambda text: received.append(json.loads(text)),
                              {"Authorization": f"Bearer {create_key(stack.store, 'tenant-a')}"})
    stack.ws.message(viewer, json.dumps({"action": "subscribe", "session_id": session.id}))
    route = raw.start()
    text = "x" * 60_000
    # A Runtime message holds at most 128 KB (API Gateway's quota), so the large commit is a drain:
    # eight Items wait for seq 1, which then applies all nine in one commit (~480 KB of events).
    for i in range(8):
        raw.send({"action": "turn.item.done", **route, "seq": i + 2, "item": {
            "id": f"m{i}", "type": "message", "phase": "commentary",
            "content": [{"type": "output_text", "text": text}]}})
    wait_for(lambda: len([f for f in raw.frames if f.get("type") == "turn.ack"]) >= 8)
    assert not [e for e in received if e.get("type") == "agent.session.turn.item.done"]  # all waiting
    raw.send({"action": "turn.heartbeat", **route, "seq": 1})
    raw.seq[route["turn_id"]] = 9
    done = wait_for(lambda: [e for e in received if e.get("type") == "agent.session.turn.item.done"], timeout=30)
    wait_for(lambda: len([e for e in received if e.get("type") == "agent.session.turn.item.done"]) == 8)
    done = [e for e in received if e.get("type") == "agent.session.turn.item.done"]
    assert [e["output_index"] for e in done] == list(range(8))
    parts = [i for i in scan(stack) if i["SK"]["S"].startswith("OUT#") and "part_of" in i]
    assert parts  # it took more than one record
    raw.observe(route, "turn.completed")
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "completed")
