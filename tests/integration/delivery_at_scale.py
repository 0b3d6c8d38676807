"""Two Runtime-traffic scenarios on the in-process stack, at any size, returning what they measured.

The tests run them at a size that proves the behaviour (100 messages, 100 Items) and assert the figures;
`make bench` (bench/bench_delivery.py) runs them at 1,000 and prints the same figures (lost, duplicated,
seconds). Neither scenario asserts: a run that loses or duplicates something reports it."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from typing import Any

import openai

from agents_core.apikeys import create_key
from agents_core.running_turns import live_turn
from agents_core.runtimes.connections import create_runtime_token
from local.inprocess import wait_for
from tests.integration.raw_runtime import RawRuntime
from tests.integration.test_turns import pending, result, session_with, turn_status


def all_items(client, session_id):
    """Every Item of a Session through the strict SDK (pages of 100)."""
    items, after = [], None
    while True:
        page = client.beta.agents.sessions.items.list(session_id, limit=100, order="asc",
                                                      **({"after": after} if after else {}))
        items += page.data
        if not page.has_more:
            return items
        after = page.data[-1].id


def tally(expected: list[str], seen: list[str]) -> dict[str, Any]:
    """Lost (expected, never seen), duplicated (seen more than once) and whether `seen` is `expected` in order."""
    counts = Counter(seen)
    return {"lost": sum(1 for text in expected if counts[text] == 0),
            "duplicated": sum(n - 1 for n in counts.values() if n > 1),
            "in_order": seen == expected}


def eventually(predicate: Any, timeout: float) -> bool:
    try:
        wait_for(predicate, timeout=timeout, interval=0.05)
        return True
    except AssertionError:
        return False


# ---- out-of-order delivery ---------------------------------------------------------------------------

ITEM_EVERY = 4  # one message in four reports an Item; the others are numbered heartbeats (their seq takes
#                 its place in the order like any observation's)
WAVE = 20  # messages in flight at once, as a Runtime's acknowledgement window allows


def _acked(raw, turn_id):
    return max([f["seq"] for f in raw.frames if f.get("type") == "turn.ack" and f.get("turn_id") == turn_id],
               default=0)


def out_of_order_delivery(stack, client, messages: int, seed: int = 13) -> dict[str, Any]:
    """`messages` observations of one Turn through the gateway's `concurrent` delivery (API Gateway's
    concurrent Lambda invocations), sent in shuffled waves with two of each wave sent twice and whatever
    stays unacknowledged 5 s sent again, as the reference Runtime does. Then: every Item and every
    item.done event once, in seq order?"""
    started = time.monotonic()
    stack.ws.delivery = "concurrent"
    raw = RawRuntime(stack)
    session = session_with(client, "say anything")
    events: list[dict[str, Any]] = []
    viewer = stack.ws.connect(lambda text: events.append(json.loads(text)),
                              {"Authorization": f"Bearer {create_key(stack.store, 'tenant-a')}"})
    stack.ws.message(viewer, json.dumps({"action": "subscribe", "session_id": session.id}))
    route = raw.start()
    sent = []
    for seq in range(1, messages + 1):
        if seq % ITEM_EVERY == 0:
            sent.append({"action": "turn.item.done", **route, "seq": seq, "item": {
                "id": f"m{seq}", "type": "message", "phase": "commentary",
                "content": [{"type": "output_text", "text": f"seq {seq}"}]}})
        else:
            sent.append({"action": "turn.heartbeat", **route, "seq": seq})
    shuffle = random.Random(seed)  # noqa: S311 - a deterministic send order
    resent = 0
    for start in range(0, messages, WAVE):
        wave = sent[start:start + WAVE]
        order = wave + shuffle.sample(wave, min(2, len(wave)))  # two of each wave sent twice
        resent += len(order) - len(wave)
        shuffle.shuffle(order)
        for message in order:
            raw.send(message)
        for _ in range(12):
            if eventually(lambda: _acked(raw, route["turn_id"]) >= start + len(wave), timeout=5):
                break
            for message in wave:  # what stays unacknowledged 5 s is sent again
                if message["seq"] > _acked(raw, route["turn_id"]):
                    raw.send(message)
                    resent += 1
    acked = _acked(raw, route["turn_id"])
    turn = live_turn(stack.store, "tenant-a", session.id, route["turn_id"])  # obs_seq is on the Session while it runs
    errors = len(raw.errors())
    raw.send({"action": "turn.completed", **route, "seq": messages + 1})
    completed = eventually(lambda: turn_status(client, session.id, route["turn_id"]) == "completed", timeout=30)
    expected = [f"seq {seq}" for seq in range(ITEM_EVERY, messages + 1, ITEM_EVERY)]

    def done_events():
        return [e["item"]["content"][0]["text"] for e in events if e.get("type") == "agent.session.turn.item.done"]

    eventually(lambda: len(done_events()) >= len(expected), timeout=30)
    leftovers = stack.store.query(pk=f"T#tenant-a#SESSION#{session.id}", sk_prefix=f"OBS#{route['turn_id']}#",
                                  limit=100, consistent=True).items
    items = tally(expected, [i.content[0].text for i in all_items(client, session.id)[1:]])
    delivered = tally(expected, done_events())
    return {"lost": items["lost"], "duplicated": items["duplicated"], "events_lost": delivered["lost"],
            "events_duplicated": delivered["duplicated"], "seconds": round(time.monotonic() - started, 1),
            "messages": messages, "items": len(expected), "in_order": items["in_order"],
            "events_in_order": delivered["in_order"], "completed": completed, "sent_again": resent,
            "reordered_by_gateway": stack.ws.reordered, "acked": acked, "obs_seq": int(turn["obs_seq"]),
            "buffered": int(turn.get("buffered", 0)), "leftover_observations": len(leftovers),
            "error_frames": errors}


# ---- a chatty Turn beside a waiting Turn -------------------------------------------------------------

def chatty_beside_waiting(stack, client, items: int) -> dict[str, Any]:
    """As `make dev` delivers a connection's messages (one at a time, in order, the sender never waiting),
    one reference Runtime runs a Turn waiting on a function call and a Turn saying `items` lines. Measured:
    how many observation messages were queued ahead of each of the waiting Turn's heartbeats on the shared
    connection (the Runtime's acknowledgement window bounds it, however fast the machine; the heartbeats
    queued too are counted apart, as they depend on the load), whether the waiting Turn
    outlived the flood, and whether every line became one Item, in order."""
    started = time.monotonic()
    stack.ws.delivery = "ordered"
    runtime = stack.connect_runtime(create_runtime_token(stack.store, "shared"), ["scripted"])
    # when the waiting Turn's heartbeat arrived: the observation messages queued ahead of it on the connection
    # (what the Runtime's window bounds), and the heartbeats (not windowed: how many pile up depends on how
    # fast Core works through the queue, that is on the machine's load)
    ahead: list[int] = []
    heartbeats_ahead: list[int] = []
    waiting_turn: dict[str, str] = {}
    receive = stack.ws.receive

    def heartbeat(body: str) -> bool:  # a Turn's own turn.heartbeat, or its Runtime's runtime.heartbeat naming it
        return '"turn.heartbeat"' in body or '"runtime.heartbeat"' in body

    def watched(connection_id: str, body: str) -> None:
        conn = stack.ws.connections.get(connection_id)
        if conn is not None and conn.inbox is not None and waiting_turn.get("id") and waiting_turn["id"] in body \
                and heartbeat(body):
            with conn.inbox.mutex:
                queued = [b for b in conn.inbox.queue if b]
            beats = sum(heartbeat(b) for b in queued)
            ahead.append(len(queued) - beats)
            heartbeats_ahead.append(beats)
        receive(connection_id, body)

    stack.ws.receive = watched
    try:
        waiting = session_with(client, "call get_weather {}\nsay done waiting")
        action = pending(client, waiting.id)
        waiting_turn["id"] = action.turn_id
        chatty = session_with(client, "\n".join(f"say line {i}" for i in range(items)))
        chatty_turn = client.beta.agents.sessions.turns.list(chatty.id).data[0].id
        flooding = time.monotonic()
        chatty_completed = eventually(lambda: turn_status(client, chatty.id, chatty_turn) == "completed",
                                      timeout=30 + items * 0.5)
        flood_seconds = time.monotonic() - flooding
        waiting_after_flood = turn_status(client, waiting.id, action.turn_id)
        try:
            client.beta.agents.sessions.events.create(waiting.id, events=[result(action, output="sunny")])
        except openai.ConflictError:
            pass  # the waiting Turn did not outlive the flood: it takes no result
        waiting_completed = eventually(lambda: turn_status(client, waiting.id, action.turn_id) == "completed",
                                       timeout=30)
    finally:
        stack.ws.receive = receive
    said = tally([f"line {i}" for i in range(items)], [i.content[0].text for i in all_items(client, chatty.id)[1:]])
    turn_item = stack.store.get({"PK": f"T#tenant-a#SESSION#{chatty.id}", "SK": f"TURN#{chatty_turn}"})
    return {"lost": said["lost"], "duplicated": said["duplicated"], "seconds": round(time.monotonic() - started, 1),
            "items": items, "in_order": said["in_order"], "flood_seconds": round(flood_seconds, 1),
            "waiting_after_flood": waiting_after_flood, "most_queued_ahead_of_a_heartbeat": max(ahead, default=0),
            "most_heartbeats_ahead_of_a_heartbeat": max(heartbeats_ahead, default=0),
            "waiting_heartbeats": len(ahead), "chatty_completed": chatty_completed,
            "waiting_completed": waiting_completed,
            "waiting_session": client.beta.agents.sessions.retrieve(waiting.id).status,
            "turn_item_bytes": len(json.dumps(turn_item, default=str)),
            "runtime_connected": runtime.connection_id in stack.ws.connections}
