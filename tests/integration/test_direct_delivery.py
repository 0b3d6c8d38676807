"""Runtime-bound messages leave the committing Lambda straight after its commit (no Streams hop between a
result and the Runtime); the outbox stays the at-least-once path behind it, and the Runtime drops the
repeat by its delivery id. A Runtime whose heartbeat names the calls it waits on (`waiting_calls`) gets each result
once: no outbox command, no outbox record for a commit with nothing else to publish, and its next beat has a post
that was lost made again (runtimes/redelivery.py)."""

import pytest

from agents_core import results
from agents_core.runtimes import redelivery
from agents_core.runtimes.connections import create_runtime_token
from local.inprocess import wait_for
from runtime.harnesses import TurnHandle
from runtime.protocol import TurnChannel
from runtime.router import Runtime
from tests.integration.stack_fixtures import client, stack  # noqa: F401 - fixtures
from tests.integration.test_turns import pending, result, session_with, turn_status


@pytest.fixture
def runtime(stack):
    """A Runtime that takes each result twice (its hello does not say waiting_calls), as Runtimes before it do."""
    return stack.connect_runtime(create_runtime_token(stack.store, "test"), ["scripted"], waiting_calls=False)


@pytest.fixture
def single(stack):
    """The reference Runtime as it is: its heartbeat names the calls it waits on, so each result is posted once."""
    return stack.connect_runtime(create_runtime_token(stack.store, "test"), ["scripted"])


def received(runtime, kind):
    return [m for m in runtime.inbox if m.get("type") == kind]


def output_items(client, session_id):
    return [i for i in client.beta.agents.sessions.items.list(session_id, limit=100).data
            if i.type == "function_call_output"]


def test_a_result_reaches_the_runtime_with_the_stream_stopped_and_the_outbox_repeat_is_dropped(client, runtime, stack):
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    stack.poller.pump = lambda: 0  # the stream consumer stops: only the direct post can deliver
    try:
        client.beta.agents.sessions.events.create(session.id, events=[result(action, output="sunny")])
        direct = wait_for(lambda: received(runtime, "turn.tool_result"), timeout=10)
        assert len(direct) == 1 and direct[0]["result"]["output"] == "sunny" and direct[0]["delivery_id"]
        wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed", timeout=20)
    finally:
        del stack.poller.pump  # the stream resumes: the outbox delivers the same message again
    repeat = wait_for(lambda: len(received(runtime, "turn.tool_result")) == 2 and received(runtime, "turn.tool_result"),
                      timeout=20)
    assert repeat[1]["delivery_id"] == repeat[0]["delivery_id"]
    assert turn_status(client, session.id, action.turn_id) == "completed"
    assert len(output_items(client, session.id)) == 1


def test_when_the_direct_post_is_lost_the_outbox_delivers_the_result(client, runtime, monkeypatch):
    monkeypatch.setattr(results, "send_now", lambda commands: None)
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="rain")])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed", timeout=20)
    assert [m["result"]["output"] for m in received(runtime, "turn.tool_result")] == ["rain"]


def deliver_commands(stack, tenant, session_id):
    """The deliver commands of every outbox record the Session's commits wrote."""
    from agents_contract import jsonutil
    from agents_core import keys as k
    from agents_core.store import unpack

    every = k.outbox_record(tenant, session_id, 0)
    rows = stack.store.query(pk=every["PK"], sk_prefix="OUT#", limit=200).items
    return [c for r in rows for c in jsonutil.loads(unpack(r["commands"]) if r.get("commands") else "[]")
            if c.get("type") == "deliver"]


def test_a_runtime_that_names_its_waiting_calls_gets_each_result_once_and_no_outbox_record_carries_it(
        client, single, stack):
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="sunny")])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed", timeout=20)
    got = received(single, "turn.tool_result")
    assert len(got) == 1 and got[0]["result"]["output"] == "sunny" and got[0]["delivery_id"]
    assert deliver_commands(stack, got[0]["tenant"], session.id) == []  # the outbox was never asked to post it
    assert len(output_items(client, session.id)) == 1


def test_a_lost_direct_post_is_repaired_by_the_runtimes_next_heartbeat(client, single, monkeypatch):
    monkeypatch.setattr(results, "send_now", lambda commands: None)  # the function died after its commit
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="rain")])
    # the beat names the call it still waits on; once the result is REPOST_AFTER_SECONDS old, Core posts it again
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed",
             timeout=redelivery.REPOST_AFTER_SECONDS + 15)
    got = received(single, "turn.tool_result")
    assert [m["result"]["output"] for m in got] == ["rain"] and got[0]["delivery_id"].startswith("dlv_")
    assert len(output_items(client, session.id)) == 1


class Recording(TurnHandle):
    def __init__(self):
        self.delivered = []
        self.channel = TurnChannel({"tenant": "t", "session_id": "s", "turn_id": "turn_1"}, lambda message: None)

    def deliver_result(self, call_id, result):
        self.delivered.append(("result", call_id))

    def steer(self, item):
        self.delivered.append(("steer", item["id"]))

    def cancel(self):
        self.delivered.append(("cancel", None))


def test_the_runtime_applies_each_delivery_once():
    router = Runtime(lambda message: None, {})
    handle = router.turns["turn_1"] = Recording()
    steer = {"type": "turn.input", "turn_id": "turn_1", "item": {"id": "msg_1"}, "delivery_id": "dlv_a"}
    router.on_message(steer)
    router.on_message(dict(steer))  # the outbox repeat
    router.on_message({**steer, "delivery_id": "dlv_b", "item": {"id": "msg_2"}})  # a new message
    router.on_message({"type": "turn.input", "turn_id": "turn_1", "item": {"id": "msg_3"}})  # no id: applied
    assert handle.delivered == [("steer", "msg_1"), ("steer", "msg_2"), ("steer", "msg_3")]


class RecordingDriver:
    harness = engine = "scripted"

    def __init__(self):
        self.handles = {}

    def start_turn(self, start, channel):
        handle = self.handles[start["turn_id"]] = Recording()
        handle.channel = channel
        return handle

    def close(self):
        pass


def start(turn_id):
    return {"type": "turn.start", "tenant": "t", "session_id": "s", "turn_id": turn_id, "harness": "scripted"}


def test_messages_ahead_of_turn_start_are_held_and_applied_at_the_start_in_order():
    driver = RecordingDriver()
    router = Runtime(lambda message: None, {"scripted": driver})
    router.on_message({"type": "turn.input", "turn_id": "turn_1", "item": {"id": "msg_1"}, "delivery_id": "dlv_1"})
    router.on_message({"type": "turn.cancel", "turn_id": "turn_1", "delivery_id": "dlv_2"})
    router.on_message({"type": "turn.input", "turn_id": "turn_1", "item": {"id": "msg_1"}, "delivery_id": "dlv_1"})
    router.on_message(start("turn_1"))
    assert driver.handles["turn_1"].delivered == [("steer", "msg_1"), ("cancel", None)]
    router.on_message({"type": "turn.input", "turn_id": "turn_1", "item": {"id": "msg_3"}, "delivery_id": "dlv_3"})
    assert driver.handles["turn_1"].delivered[-1] == ("steer", "msg_3")  # started: delivered at once
    assert router._held == {}


def test_held_messages_are_bounded_by_turns_count_and_age(monkeypatch):
    import runtime.router as router_module

    driver = RecordingDriver()
    router = Runtime(lambda message: None, {"scripted": driver})
    monkeypatch.setattr(router_module, "HELD_TURNS", 2)
    monkeypatch.setattr(router_module, "HELD_PER_TURN", 3)
    for n in range(5):  # a Turn never started here holds at most HELD_PER_TURN messages
        router.on_message({"type": "turn.input", "turn_id": "turn_a", "item": {"id": f"a{n}"}})
    router.on_message({"type": "turn.input", "turn_id": "turn_b", "item": {"id": "b"}})
    router.on_message({"type": "turn.input", "turn_id": "turn_c", "item": {"id": "c"}})  # turn_a, the oldest, goes
    assert list(router._held) == ["turn_b", "turn_c"]
    clock = [1000.0]
    monkeypatch.setattr(router_module.time, "monotonic", lambda: clock[0])
    router._held = {}
    router.on_message({"type": "turn.input", "turn_id": "turn_d", "item": {"id": "d"}})
    clock[0] += router_module.HELD_SECONDS + 1
    router.on_message({"type": "turn.input", "turn_id": "turn_e", "item": {"id": "e"}})  # turn_d is stale
    assert list(router._held) == ["turn_e"]
    router.on_message(start("turn_a"))  # what was dropped is not replayed
    assert driver.handles["turn_a"].delivered == []


def test_a_long_lived_runtime_lets_go_of_ended_turns_but_still_drops_their_late_messages():
    driver = RecordingDriver()
    router = Runtime(lambda message: None, {"scripted": driver})
    router.on_message(start("turn_1"))
    first = driver.handles["turn_1"]
    first.channel.emit("turn.completed")  # sent, not yet acknowledged: kept for resending
    first.channel.done.set()
    router.on_message(start("turn_2"))
    assert "turn_1" in router.turns
    router.on_message({"type": "turn.ack", "turn_id": "turn_1", "seq": 1})
    router.on_message(start("turn_3"))  # the next start lets the acknowledged, ended Turn go
    assert set(router.turns) == {"turn_2", "turn_3"} and "turn_1" not in router.channels
    router.on_message(start("turn_1"))  # a redelivered start runs nothing
    assert driver.handles["turn_1"] is first
    router.on_message({"type": "turn.cancel", "turn_id": "turn_1", "delivery_id": "dlv_late"})
    assert router._held == {} and first.delivered == []
