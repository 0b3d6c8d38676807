"""Issue 13, cases 2-5: one Turn never fails another on the same Runtime connection, malformed and
hostile Runtime messages get error frames naming the field while the connection and the Runtime's
other Turns survive, a function call Core cannot accept fails its Turn visibly, and no
Runtime-supplied Item field ever reaches a caller's read.

The chatty and deterministic-failure cases run with the local gateway delivering one connection's
messages in order (as `make dev`) and concurrently out of order (as API Gateway with concurrent
Lambda invocations)."""

import json
import time

import pytest

from local.inprocess import wait_for
from runtime.protocol import WINDOW, ObservationTooLarge
from tests.integration.delivery_at_scale import all_items, chatty_beside_waiting
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import HEARTBEAT_SECONDS, client, runtime, stack  # noqa: F401 - fixtures
from tests.integration.test_turns import pending, result, session_with, turn_status


def scan(stack):
    items, kwargs = [], {"TableName": stack.table, "ConsistentRead": True}
    while True:
        out = stack.dynamodb.scan(**kwargs)
        items += out["Items"]
        if "LastEvaluatedKey" not in out:
            return items
        kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]


def error_for(raw, turn_id, param, timeout=3.0):
    """The error frame naming `param` for this Turn, within `timeout` (answered at once, never retried)."""
    return wait_for(lambda: [f for f in raw.errors(turn_id) if f["error"]["param"] == param], timeout=timeout)[0]


# ---- case 2: a chatty Turn beside a waiting Turn -------------------------------------------------

def test_a_chatty_turn_of_100_items_beside_a_waiting_turn_on_the_same_runtime_both_finish(client, stack):
    """As `make dev` delivers a connection's messages (one at a time, in order, the sender never
    waiting): the reference Runtime keeps at most a window of observations unacknowledged, so the
    waiting Turn's heartbeats never queue behind more than that, however long the chatty Turn floods the
    connection (100 Items are several heartbeat bounds of moto work; `make bench` runs 1,000)."""
    figures = chatty_beside_waiting(stack, client, items=100)
    assert figures["chatty_completed"] and figures["waiting_after_flood"] == "waiting"
    assert figures["waiting_completed"] and figures["waiting_session"] == "idle"
    # the script and its 100 messages, none lost or doubled, in order
    assert (figures["lost"], figures["duplicated"], figures["in_order"]) == (0, 0, True)
    # Heartbeats reached Core during the flood, each behind at most a window of the chatty Turn's
    # observations (and the waiting Turn's few), never behind the hundreds of observations 100 Items make.
    # Heartbeats queued ahead are not counted: how many pile up depends on the machine's load.
    assert figures["waiting_heartbeats"] >= 1
    assert figures["most_queued_ahead_of_a_heartbeat"] <= WINDOW + 4, figures
    # Case 8: no per-Item growth on the Turn item (Runtime Item ids live in their own RID# rows).
    assert figures["turn_item_bytes"] < 8_000
    assert figures["runtime_connected"]


# ---- case 2: deterministic failures are answered at once -----------------------------------------

@pytest.mark.parametrize("delivery", ["direct", "concurrent"])
def test_a_runtime_sending_deterministic_failures_gets_error_frames_at_once_and_keeps_its_other_turns(
        client, stack, delivery):
    stack.ws.delivery = delivery
    raw = RawRuntime(stack)
    first = session_with(client, "say anything")
    one = raw.start()
    second = session_with(client, "say anything")
    two = raw.start()
    for call_id in ("c1", "c2"):
        raw.observe(one, "turn.function_call", call_id=call_id, name="get_weather", arguments={})
    wait_for(lambda: len(client.beta.agents.sessions.retrieve(first.id).required_actions) == 2)

    started = time.monotonic()
    raw.observe(one, "turn.tool_result.applied", call_id="c1")  # a receipt with no submitted result
    error = error_for(raw, one["turn_id"], "call_id")
    assert "has no submitted result" in error["error"]["message"] and error["action"] == "turn.tool_result.applied"
    assert time.monotonic() - started < 1.5  # classified once and answered, never retried for seconds

    client.beta.agents.sessions.events.create(first.id, events=[{
        "type": "agent.session.input.tool_result", "turn_id": one["turn_id"], "call_id": "c2", "success": True,
        "output": "ok"}])
    raw.observe(one, "turn.tool_result.applied", call_id="c2")
    wait_for(lambda: len(client.beta.agents.sessions.retrieve(first.id).required_actions) == 1)
    started = time.monotonic()
    raw.observe(one, "turn.call.abandoned", call_id="c2")  # abandon after applied
    wait_for(lambda: len([f for f in raw.errors(one["turn_id"]) if f["error"]["param"] == "call_id"]) == 2)
    assert "can no longer be abandoned" in raw.errors(one["turn_id"])[-1]["error"]["message"]
    assert time.monotonic() - started < 1.5

    # The first Turn goes on after both rejections (their seqs were consumed) ...
    raw.observe(one, "turn.item.done", item={"id": "m1", "type": "message", "content": [
        {"type": "output_text", "text": "still here"}]})
    wait_for(lambda: any(i.type == "message" and i.content and i.content[0].text == "still here"
                         for i in all_items(client, first.id)))
    # ... and a reused call_id is a call Core cannot accept: that Turn fails at once, visibly.
    raw.observe(one, "turn.function_call", call_id="c1", name="get_weather", arguments={})
    error = wait_for(lambda: [f for f in raw.errors(one["turn_id"]) if "already used" in f["error"]["message"]])[0]
    assert error["error"]["param"] == "call_id"
    wait_for(lambda: turn_status(client, first.id, one["turn_id"]) == "failed", timeout=HEARTBEAT_SECONDS * 2)

    # The Runtime's other Turn never noticed: it finishes normally on the same connection.
    assert turn_status(client, second.id, two["turn_id"]) == "in_progress"
    raw.observe(two, "turn.item.done", item={"id": "a", "type": "message", "phase": "final_answer",
                                             "content": [{"type": "output_text", "text": "fine"}]})
    raw.observe(two, "turn.completed")
    wait_for(lambda: turn_status(client, second.id, two["turn_id"]) == "completed")
    assert raw.conn in stack.ws.connections


# ---- case 3: malformed messages ------------------------------------------------------------------

def nested(depth):
    value = []
    for _ in range(depth - 1):
        value = [value]
    return value


MALFORMED = [
    ("a seq beyond 2**53", lambda route: {"action": "turn.heartbeat", **route, "seq": 10 ** 40}, "seq"),
    ("a content_index that is not an integer", lambda route: {
        "action": "turn.output_text.delta", **route, "seq": 1, "item_id": "m", "content_index": "PAYLOAD-Marker",
        "delta": "x"}, "content_index"),
    ("an item that is a list", lambda route: {"action": "turn.item.added", **route, "seq": 2, "item": [1, 2]},
     "item"),
    ("a batch entry that is not an object", lambda route: {"action": "turn.batch", **route,
                                                           "observations": ["x"]}, "observations[0]"),
    ("an unknown action", lambda route: {"action": "turn.explode", **route, "seq": 3}, "action"),
    ("a turn_id that is not a string", lambda route: {**route, "action": "turn.completed", "turn_id": 7, "seq": 3},
     "turn_id"),
]


class Recorder:
    """Stands in for the Powertools logger: what was logged, with its keys."""

    def __init__(self):
        self.entries = []

    def warning(self, message, extra=None):
        self.entries.append({"message": message, **(extra or {})})

    info = exception = error = warning


def test_malformed_messages_get_error_frames_naming_the_field_and_the_connection_survives(client, stack,
                                                                                         monkeypatch):
    from agents_core import runtimes
    log = Recorder()
    monkeypatch.setattr(runtimes.observations, "logger", log)
    raw = RawRuntime(stack)
    session = session_with(client, "say anything")
    route = raw.start()
    other = session_with(client, "say anything")
    other_route = raw.start()
    for _, build, param in MALFORMED:
        before = len(raw.errors())
        raw.send(build(route))
        frame = wait_for(lambda: raw.errors()[before:], timeout=3)[0]
        assert frame["error"]["param"] == param, frame
        assert frame["error"]["type"] == "invalid_request_error"
    raw.send("this is not JSON")
    wait_for(lambda: [f for f in raw.errors() if f["error"]["message"] == "Messages are JSON objects."])
    # Each rejection was logged with connection, Turn and reason, never the payload.
    logged = [e for e in log.entries if e["message"] == "rejected runtime message"]
    assert len(logged) == len(MALFORMED) + 1
    assert all(e["connection_id"] == raw.conn and e["reason"] for e in logged)
    assert [e["turn_id"] for e in logged[:3]] == [route["turn_id"]] * 3
    # never the payload (a marker no random id can contain: ids are lowercase base32 or url-safe base64)
    assert not any("PAYLOAD-Marker" in json.dumps(e, default=str) for e in logged)
    # The connection survived and the Turn goes on: seqs 1 and 2 (well formed messages with a bad
    # observation) were consumed, the messages rejected whole were not.
    assert raw.conn in stack.ws.connections and turn_status(client, session.id, route["turn_id"]) == "in_progress"
    raw.seq[route["turn_id"]] = 2
    raw.observe(route, "turn.item.done", item={"id": "m", "type": "message", "phase": "final_answer",
                                               "content": [{"type": "output_text", "text": "fine"}]})
    raw.observe(route, "turn.completed")
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "completed")
    # Arguments nested 600 deep: a call Core cannot accept fails that Turn, and only that Turn.
    raw.observe(other_route, "turn.function_call", call_id="deep", name="get_weather",
                arguments={"a": nested(600)})
    frame = error_for(raw, other_route["turn_id"], "arguments")
    assert "nested more than 64 deep" in frame["error"]["message"]
    wait_for(lambda: turn_status(client, other.id, other_route["turn_id"]) == "failed", timeout=HEARTBEAT_SECONDS * 2)
    assert raw.conn in stack.ws.connections
    assert client.beta.agents.sessions.retrieve(other.id).required_actions == []


# ---- case 4: a function call Core cannot accept --------------------------------------------------

def test_arguments_over_core_limit_fail_the_turn_visibly_within_the_heartbeat_bound(client, stack):
    raw = RawRuntime(stack)
    session = session_with(client, "say anything")
    route = raw.start()
    started = time.monotonic()
    raw.observe(route, "turn.function_call", call_id="big", name="get_weather", arguments={"blob": "x" * 100_000})
    frame = error_for(raw, route["turn_id"], "arguments")
    assert "at most 65536 bytes" in frame["error"]["message"]
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "failed", timeout=HEARTBEAT_SECONDS * 2)
    assert time.monotonic() - started < HEARTBEAT_SECONDS * 2
    assert any(f.get("type") == "turn.cancel" and f.get("turn_id") == route["turn_id"] for f in raw.frames)
    final = client.beta.agents.sessions.retrieve(session.id)
    assert final.required_actions == [] and final.status == "failed"
    assert not [i for i in all_items(client, session.id) if i.type == "function_call"]


def test_the_reference_runtime_fails_a_turn_whose_arguments_no_message_can_carry(client, stack, runtime):
    """~250 KB of arguments exceed API Gateway's 128 KB message quota: sending them would close the
    connection (and fail every Turn of the Runtime), so the reference Runtime reports turn.failed with
    the reason instead, and its other Turns go on."""
    session = session_with(client, "wait 30")
    other = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, other.id)
    turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
    handle = wait_for(lambda: runtime.runtime.turns.get(turn_id))
    started = time.monotonic()
    with pytest.raises(ObservationTooLarge):
        handle.channel.emit("turn.function_call", call_id="huge", name="get_weather",
                            arguments={"blob": "x" * 250_000})
    wait_for(lambda: turn_status(client, session.id, turn_id) == "failed", timeout=HEARTBEAT_SECONDS * 2)
    assert time.monotonic() - started < HEARTBEAT_SECONDS * 2
    turn = client.beta.agents.sessions.turns.retrieve(turn_id, session_id=session.id)
    assert "a Runtime message holds at most" in turn.model_extra["x_agents_core"]["error"]["message"]
    assert runtime.connection_id in stack.ws.connections  # nothing oversize was sent: the socket is open
    client.beta.agents.sessions.events.create(other.id, events=[result(action, output="ok")])
    wait_for(lambda: turn_status(client, other.id, action.turn_id) == "completed")


# ---- case 5: Core owns the identity of every Item ------------------------------------------------

FORGED = [
    ("turn_id", {"id": "f1", "type": "message", "turn_id": "turn_someone_else", "content": []}, "item.turn_id"),
    ("session_id", {"id": "f2", "type": "message", "session_id": "sess_other", "content": []}, "item.session_id"),
    ("role", {"id": "f3", "type": "message", "role": "user", "content": []}, "item.role"),
    ("status", {"id": "f4", "type": "message", "status": "failed", "content": []}, "item.status"),
    ("extra keys", {"id": "f5", "type": "message", "content": [], "x_injected": True}, "item.x_injected"),
    ("content extra keys", {"id": "f6", "type": "message", "content": [
        {"type": "output_text", "text": "t", "annotations": ["<script>"]}]}, "item.content[0].annotations"),
    ("malformed mcp_call", {"id": "f7", "type": "mcp_call", "server_label": "s", "arguments": "{}"}, "item.name"),
    ("mcp_call with a non-string name", {"id": "f8", "type": "mcp_call", "name": ["x"], "server_label": "s"},
     "item.name"),
    ("a type Core builds itself", {"id": "f9", "type": "function_call_output", "call_id": "c", "output": "o"},
     "item.type"),
]


@pytest.mark.parametrize(("what", "item", "param"), FORGED, ids=[f[0] for f in FORGED])
def test_forged_item_fields_are_rejected_naming_the_field(client, stack, what, item, param):
    raw = RawRuntime(stack)
    session_with(client, "say anything")
    route = raw.start()
    raw.observe(route, "turn.item.added", item=item)
    assert error_for(raw, route["turn_id"], param)["action"] == "turn.item.added"


def test_forged_item_fields_never_reach_reads_and_strict_sdk_parsing_of_every_read_passes(client, stack):
    raw = RawRuntime(stack)
    victim = session_with(client, "say anything")
    victim_route = raw.start()
    session = session_with(client, "say anything")
    route = raw.start()
    for _, item, _ in FORGED:
        raw.observe(route, "turn.item.added", item=item)
        raw.observe(route, "turn.item.done", item=item)
    wait_for(lambda: len(raw.errors(route["turn_id"])) == 2 * len(FORGED), timeout=10)
    # What a Runtime may send is stored with Core's identity: a message without role or status, an MCP call.
    raw.observe(route, "turn.item.added", item={"id": "ok1", "type": "message", "content": []})
    raw.observe(route, "turn.item.done", item={"id": "ok1", "type": "message", "phase": "final_answer",
                                               "content": [{"type": "output_text", "text": "real"}]})
    raw.observe(route, "turn.item.done", item={"id": "ok2", "type": "mcp_call", "name": "lookup",
                                               "server_label": "docs", "arguments": "{}", "output": "x",
                                               "status": "failed"})
    raw.observe(route, "turn.completed")
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "completed")
    raw.observe(victim_route, "turn.completed")
    wait_for(lambda: turn_status(client, victim.id, victim_route["turn_id"]) == "completed")

    for sid, turn_id in ((session.id, route["turn_id"]), (victim.id, victim_route["turn_id"])):
        # Every read, parsed strictly by the official SDK (the client fixture validates strictly).
        items = all_items(client, sid)
        turn_items = client.beta.agents.sessions.turns.items.list(turn_id, session_id=sid).data
        client.beta.agents.sessions.retrieve(sid)
        client.beta.agents.sessions.turns.list(sid)
        client.beta.agents.sessions.turns.retrieve(turn_id, session_id=sid)
        assert {i.turn_id for i in items} == {turn_id} and len(turn_items) == len(items)
        for item in items:
            raw_json = item.model_dump(mode="json")
            assert "x_injected" not in raw_json and not getattr(item, "model_extra", None)
            assert not (item.type == "message" and item.role == "user" and item.turn_id != turn_id)
    items = all_items(client, session.id)
    assert [(i.type, i.status) for i in items] == [("message", "completed"), ("message", "completed"),
                                                   ("mcp_call", "failed")]
    assert items[1].role == "assistant" and items[1].id != "ok1"
    assert len(all_items(client, victim.id)) == 1  # nothing moved into another Turn or Session
    stored = [i for i in scan(stack) if i["SK"]["S"].startswith("ITEM#")]
    assert not any("x_injected" in i.get("doc", {}).get("S", "") for i in stored)
