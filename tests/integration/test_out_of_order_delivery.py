"""Issue 13, case 6: on AWS, API Gateway hands one connection's messages to concurrent Lambda
invocations, so they can arrive in any order. The local gateway's `concurrent` delivery does the same
(AGENTS_CORE_WS_DELIVERY=concurrent); with it, 1,000 messages of one Turn sent out of order, some of
them twice, lose nothing and duplicate nothing."""

import json
import random

from agents_core.apikeys import create_key
from local.inprocess import wait_for
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import client, stack  # noqa: F401 - fixtures
from tests.integration.test_runtime_robustness import all_items
from tests.integration.test_turns import session_with, turn_status

MESSAGES = 1000
ITEM_EVERY = 4  # one message in four reports an Item; the others are numbered heartbeats (their seq
#                 takes its place in the order like any observation's)
WAVE = 20  # messages in flight at once, as a Runtime's acknowledgement window allows


def acked(raw, turn_id):
    return max([f["seq"] for f in raw.frames if f.get("type") == "turn.ack" and f.get("turn_id") == turn_id],
               default=0)


def test_concurrent_out_of_order_delivery_loses_and_duplicates_no_observation_over_1000_messages(client, stack,
                                                                                                 monkeypatch):
    from agents_core.settings import get_settings

    # This test is the Runtime, and its heartbeats ride in its waves: on a loaded machine a wave can
    # take longer than the fixture's 2 s heartbeat bound, which is not what this test is about.
    monkeypatch.setenv("HEARTBEAT_SECONDS", "120")
    get_settings.cache_clear()
    stack.ws.delivery = "concurrent"
    raw = RawRuntime(stack)
    session = session_with(client, "say anything")
    events = []
    viewer = stack.ws.connect(lambda text: events.append(json.loads(text)),
                              {"Authorization": f"Bearer {create_key(stack.store, 'tenant-a')}"})
    stack.ws.message(viewer, json.dumps({"action": "subscribe", "session_id": session.id}))
    route = raw.start()
    messages = []
    for seq in range(1, MESSAGES + 1):
        if seq % ITEM_EVERY == 0:
            messages.append({"action": "turn.item.done", **route, "seq": seq, "item": {
                "id": f"m{seq}", "type": "message", "phase": "commentary",
                "content": [{"type": "output_text", "text": f"seq {seq}"}]}})
        else:
            messages.append({"action": "turn.heartbeat", **route, "seq": seq})
    shuffle = random.Random(13)  # noqa: S311 - a deterministic test order
    resent = 0
    for start in range(0, MESSAGES, WAVE):
        wave = messages[start:start + WAVE]
        order = wave + shuffle.sample(wave, 2)  # two of each wave sent twice
        resent += 2
        shuffle.shuffle(order)
        for message in order:
            raw.send(message)
        for _ in range(12):  # as the reference Runtime does: what stays unacknowledged 5 s is sent again
            try:
                wait_for(lambda: acked(raw, route["turn_id"]) >= start + len(wave), timeout=5)
                break
            except AssertionError:
                for message in wave:
                    if message["seq"] > acked(raw, route["turn_id"]):
                        raw.send(message)
                        resent += 1
        assert acked(raw, route["turn_id"]) >= start + len(wave)
    assert acked(raw, route["turn_id"]) == MESSAGES
    assert stack.ws.reordered > 0  # the gateway really handled later messages first
    turn = stack.store.get({"PK": f"T#tenant-a#SESSION#{session.id}", "SK": f"TURN#{route['turn_id']}"})
    assert int(turn["obs_seq"]) == MESSAGES and int(turn.get("buffered", 0)) == 0
    assert not raw.errors()
    raw.send({"action": "turn.completed", **route, "seq": MESSAGES + 1})
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "completed", timeout=30)
    # 0 lost, 0 duplicated: every Item once, in seq order, and each item.done event delivered once.
    items = all_items(client, session.id)[1:]
    expected = [f"seq {seq}" for seq in range(ITEM_EVERY, MESSAGES + 1, ITEM_EVERY)]
    assert [i.content[0].text for i in items] == expected
    done = wait_for(lambda: [e for e in events if e.get("type") == "agent.session.turn.item.done"]
                    if len([e for e in events if e.get("type") == "agent.session.turn.item.done"]) >= len(expected)
                    else None, timeout=30)
    assert [e["item"]["content"][0]["text"] for e in done] == expected
    leftovers = stack.store.query(pk=f"T#tenant-a#SESSION#{session.id}", sk_prefix=f"OBS#{route['turn_id']}#",
                                  limit=100, consistent=True).items
    assert leftovers == []  # nothing left waiting for a gap
