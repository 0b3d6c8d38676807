"""Issue 35, item 3 on the in-process stack: a Runtime instance keeps one identity across its connections.
A hello with the same `instance` on a new connection takes over the Turns its earlier connection claimed
(results, observations, heartbeats and cancellation go on over the new one, nothing lost or repeated); the
old connection's close then fails nothing. Only the heartbeat bound passing with no connection of the
instance fails its Turns (without replay); a Runtime that names no instance still fails them at once."""

import time

import boto3

from agents_core.runtimes.connections import create_runtime_token
from local.inprocess import wait_for
from tests.integration.delivery_at_scale import all_items
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import HEARTBEAT_SECONDS, client, stack  # noqa: F401 - fixtures
from tests.integration.test_turns import pending, session_with, turn_status

INSTANCE = "rti_test_instance_0001"


def welcome(raw):
    return wait_for(lambda: [f for f in raw.frames if f.get("type") == "runtime.welcome"])[-1]


def task_failures(stack, turn_id):
    machine = stack.state_machines["TurnStateMachine"]
    execution = machine.replace(":stateMachine:", ":execution:") + f":{turn_id}"
    history = boto3.client("stepfunctions", region_name="us-east-1").get_execution_history(executionArn=execution)
    return [e["type"] for e in history["events"] if e["type"] in ("TaskFailed", "TaskTimedOut")]


def test_a_rotation_moves_a_claimed_turn_to_the_new_connection_and_it_completes(client, stack):
    token = create_runtime_token(stack.store, "rotating")
    old = RawRuntime(stack, token=token, instance=INSTANCE)
    assert welcome(old)["max_connection_seconds"] == 7200 and welcome(old)["resumed_turns"] == []
    session = session_with(client, "anything")
    route = old.start()
    old.observe(route, "turn.function_call", call_id="c1", name="get_weather", arguments={})
    action = pending(client, session.id)

    new = RawRuntime(stack, token=token, instance=INSTANCE)  # the same process, its next connection
    assert welcome(new)["resumed_turns"] == [route["turn_id"]]
    new.routes[route["turn_id"]] = route
    new.seq[route["turn_id"]] = old.seq[route["turn_id"]]
    # An observation sent on the old connection after the move is not taken there (the Runtime sends it
    # again on the new one: Core applies each seq once) ...
    seq = old.observe(route, "turn.item.added", item={"id": "m1", "type": "message", "role": "assistant",
                                                       "status": "in_progress", "content": []})
    old.drop()  # the old connection closes: nothing fails
    new.seq[route["turn_id"]] = seq - 1
    new.observe(route, "turn.item.added", item={"id": "m1", "type": "message", "role": "assistant",
                                                 "status": "in_progress", "content": []})
    # ... and the result answered after the rotation reaches the new connection.
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
        "success": True, "output": "sunny"}])
    delivered = wait_for(lambda: [f for f in new.frames if f.get("type") == "turn.tool_result"])
    assert len({f["delivery_id"] for f in delivered}) == 1
    new.observe(route, "turn.tool_result.applied", call_id="c1")
    time.sleep(HEARTBEAT_SECONDS + 1)  # past the heartbeat bound: the new connection's heartbeats keep it alive
    assert turn_status(client, session.id, route["turn_id"]) == "in_progress"
    new.observe(route, "turn.item.done", item={"id": "m1", "type": "message", "role": "assistant",
                                                "phase": "final_answer", "status": "completed",
                                                "content": [{"type": "output_text", "text": "done"}]})
    new.observe(route, "turn.completed")
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "completed")
    items = all_items(client, session.id)
    # m1 was added (once: the old connection's copy was not taken) before the result was applied
    assert [i.type for i in items] == ["message", "function_call", "message", "function_call_output"]
    assert len({i.id for i in items}) == len(items) and items[2].content[0].text == "done"
    assert task_failures(stack, route["turn_id"]) == []


def test_a_cancel_after_the_rotation_reaches_the_new_connection(client, stack):
    token = create_runtime_token(stack.store, "rotating")
    old = RawRuntime(stack, token=token, instance=INSTANCE)
    session = session_with(client, "anything")
    route = old.start()
    new = RawRuntime(stack, token=token, instance=INSTANCE)
    assert welcome(new)["resumed_turns"] == [route["turn_id"]]
    new.routes[route["turn_id"]] = route
    client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
    wait_for(lambda: [f for f in new.frames if f.get("type") == "turn.cancel"])
    new.observe(route, "turn.cancelled")
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "cancelled")


def test_another_runtime_naming_the_instance_takes_nothing_over(client, stack):
    old = RawRuntime(stack, token=create_runtime_token(stack.store, "one"), instance=INSTANCE)
    session_with(client, "anything")
    route = old.start()
    thief = RawRuntime(stack, token=create_runtime_token(stack.store, "two"), instance=INSTANCE)
    assert welcome(thief)["resumed_turns"] == []  # an instance is bound to the token it connected with
    thief.routes[route["turn_id"]] = route
    thief.observe(route, "turn.completed")
    time.sleep(0.5)
    assert turn_status(client, route["session_id"], route["turn_id"]) == "in_progress"


def test_a_malformed_instance_is_refused_and_writes_nothing(client, stack):
    raw = RawRuntime(stack, instance="short")
    error = wait_for(lambda: raw.errors())[0]
    assert error["error"]["param"] == "instance"
    assert not [f for f in raw.frames if f.get("type") == "runtime.welcome"]


def test_an_instance_that_never_comes_back_fails_its_turns_at_the_heartbeat_bound(client, stack):
    raw = RawRuntime(stack, instance=INSTANCE)
    session = session_with(client, "anything")
    route = raw.start()
    raw.observe(route, "turn.function_call", call_id="c1", name="get_weather", arguments={})
    pending(client, session.id)
    raw.drop()
    dropped = time.monotonic()
    time.sleep(HEARTBEAT_SECONDS * 0.5)
    assert turn_status(client, session.id, route["turn_id"]) != "failed"  # it may still come back
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "failed", timeout=HEARTBEAT_SECONDS * 4)
    assert HEARTBEAT_SECONDS - 0.5 < time.monotonic() - dropped < HEARTBEAT_SECONDS * 4
    assert task_failures(stack, route["turn_id"]) == ["TaskTimedOut"]  # the bound, not the $disconnect
    final = client.beta.agents.sessions.retrieve(session.id)
    assert final.status == "failed" and final.required_actions == []
    assert len(client.beta.agents.sessions.turns.list(session.id).data) == 1  # no replay


def test_an_instance_back_within_the_bound_after_an_unplanned_loss_goes_on(client, stack):
    token = create_runtime_token(stack.store, "flaky")
    raw = RawRuntime(stack, token=token, instance=INSTANCE)
    session = session_with(client, "anything")
    route = raw.start()
    raw.drop()  # the network dropped it; $disconnect keeps the instance's claims
    back = RawRuntime(stack, token=token, instance=INSTANCE)
    assert welcome(back)["resumed_turns"] == [route["turn_id"]]
    back.routes[route["turn_id"]] = route
    back.observe(route, "turn.item.done", item={"id": "m1", "type": "message", "role": "assistant",
                                                 "phase": "final_answer", "status": "completed",
                                                 "content": [{"type": "output_text", "text": "still here"}]})
    back.observe(route, "turn.completed")
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "completed")
