"""Issue 13, case 7: API Gateway's WebSocket quotas hold on the local gateway (a message over 128 KB
closes the connection with 1009 and reaches no handler; a @connections post over 128 KB fails), and
large payloads travel by design: Core posts a message over 128 KB as `chunk` messages that the
reference Runtime and subscribers join, and the reference Runtime packs its observations into
messages within 128 KB."""

import json

import pytest

from agents_core.apikeys import create_key
from agents_core.aws import MAX_MESSAGE_BYTES, Messenger, chunks, default_messenger
from local.inprocess import wait_for
from local.websocket import TOO_BIG, ChunkJoiner
from runtime.protocol import Reassembler
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import client, runtime, stack  # noqa: F401 - fixtures
from tests.integration.test_runtime_robustness import all_items
from tests.integration.test_turns import pending, result, session_with, turn_status


def record_posts(stack, monkeypatch):
    """Sizes of everything posted through the @connections API."""
    sizes = []
    real = stack.ws.post

    def post(connection_id, data):
        sizes.append(len(data if isinstance(data, bytes) else data.encode()))
        return real(connection_id, data)

    monkeypatch.setattr(stack.ws, "post", post)
    return sizes


def record_received(stack, monkeypatch):
    """Sizes of every message the gateway received from a socket."""
    sizes = []
    real = stack.ws.receive

    def receive(connection_id, body):
        sizes.append(len(body.encode()))
        return real(connection_id, body)

    monkeypatch.setattr(stack.ws, "receive", receive)
    return sizes


# Quotes, backslashes, newlines and non-ASCII text: what escaping grows.
TRICKY = 'a "quoted" \\ back\\slash\nline é ü 中文 🙂 '


@pytest.mark.parametrize("text", ["x", TRICKY], ids=["ascii", "escaped"])
def test_a_300_kb_tool_result_reaches_the_reference_runtime_through_the_128_kb_gateway_unchanged(
        client, stack, runtime, monkeypatch, text):
    posted = record_posts(stack, monkeypatch)
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    output = (text * 300_000)[:300_000 if text == "x" else 110_000]  # escaped: ~300 KB as JSON too
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output=output)])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed", timeout=30)
    applied = runtime.runtime.turns[action.turn_id].results[action.call_id]
    assert applied["output"] == output and applied["success"] is True
    assert len(json.dumps(applied).encode()) >= 200_000
    assert max(posted) <= MAX_MESSAGE_BYTES and any(m.get("type") == "chunk" for m in runtime.inbox)
    outputs = [i for i in all_items(client, session.id) if i.type == "function_call_output"]
    assert outputs[0].output == output


def test_a_turn_start_with_a_large_snapshot_reaches_the_runtime_whole(client, stack, runtime, monkeypatch):
    posted = record_posts(stack, monkeypatch)
    instructions = "Be brief. " * 15_000  # ~150 KB of frozen configuration on every turn.start
    session = session_with(client, "say read it", agent={"instructions": instructions})
    turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
    wait_for(lambda: turn_status(client, session.id, turn_id) == "completed", timeout=30)
    assert runtime.runtime.turns[turn_id].start_message["agent"]["instructions"] == instructions
    assert max(posted) <= MAX_MESSAGE_BYTES


def test_a_large_event_reaches_a_subscriber_whole(client, stack, runtime, monkeypatch):
    posted = record_posts(stack, monkeypatch)
    session = session_with(client, "say first")
    turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
    wait_for(lambda: turn_status(client, session.id, turn_id) == "completed")
    received, joiner = [], Reassembler()
    viewer = stack.ws.connect(lambda text: received.append(joiner.feed(json.loads(text))),
                              {"Authorization": f"Bearer {create_key(stack.store, 'tenant-a')}"})
    stack.ws.message(viewer, json.dumps({"action": "subscribe", "session_id": session.id}))
    big = "say " + "y" * 150_000  # the user message's item.added event is over 128 KB
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.message", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": big}]}]}])
    added = wait_for(lambda: [e for e in received if e and e.get("type") == "agent.session.turn.item.added"
                              and e["item"].get("role") == "user"], timeout=30)[0]
    assert added["item"]["content"][0]["text"] == big
    assert max(posted) <= MAX_MESSAGE_BYTES
    # The SSE bridge of the local stack joins the same chunks.
    sse = ChunkJoiner()
    parts = chunks(json.dumps(added, separators=(",", ":")))
    assert len(parts) > 1 and [sse.feed(p) for p in parts][-1] == json.dumps(added, separators=(",", ":"))


def test_the_reference_runtimes_observations_stay_within_128_kb_messages(client, stack, runtime, monkeypatch):
    received = record_received(stack, monkeypatch)
    text = "z" * 100_000  # its delta and its item.done cannot share one message
    session = session_with(client, f"say {text}")
    turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
    wait_for(lambda: turn_status(client, session.id, turn_id) == "completed", timeout=30)
    assert max(received) <= MAX_MESSAGE_BYTES and stack.ws.too_big == 0
    assert all_items(client, session.id)[1].content[0].text == text


def test_a_message_over_128_kb_closes_the_connection_with_1009_and_reaches_no_handler(client, stack):
    raw = RawRuntime(stack)
    session = session_with(client, "say anything")
    route = raw.start()
    closed = []
    stack.ws.connections[raw.conn].close = closed.append
    raw.send({"action": "turn.item.done", **route, "seq": 1, "item": {
        "id": "m", "type": "message", "content": [{"type": "output_text", "text": "w" * 140_000}]}})
    assert closed == [TOO_BIG] and raw.conn not in stack.ws.connections
    # As on AWS, losing the connection fails the Runtime's Turns; the message itself did nothing.
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "failed", timeout=10)
    assert len(all_items(client, session.id)) == 1


def test_a_frame_over_32_kb_closes_the_connection_with_1009(client, stack):
    raw = RawRuntime(stack)
    frames = ['{"action": "turn.heartbeat", "pad": "', "p" * 40_000, '"}']
    stack.ws.receive_frames(raw.conn, frames)
    assert raw.conn not in stack.ws.connections and stack.ws.too_big == 1
    other = RawRuntime(stack)  # the same message in frames within 32 KB is fine
    stack.ws.receive_frames(other.conn, ['{"action": "turn.heartbeat", "pad": "', "p" * 30_000, "p" * 30_000, '"}'])
    assert other.conn in stack.ws.connections


def test_a_post_over_128_kb_fails_as_api_gateway_answers_and_the_messenger_chunks_it(stack):
    got = []
    conn = stack.ws.connect(got.append, {"Authorization": f"Bearer {create_key(stack.store, 'tenant-a')}"})
    api = default_messenger().client
    with pytest.raises(api.exceptions.PayloadTooLargeException):
        api.post_to_connection(ConnectionId=conn, Data=b"x" * (MAX_MESSAGE_BYTES + 1))
    message = {"type": "agent.session.turn.item.added", "text": TRICKY * 20_000}
    Messenger(api).post(conn, message)
    assert len(got) > 1 and all(len(g.encode()) <= MAX_MESSAGE_BYTES for g in got)
    joiner = Reassembler()
    assert [joiner.feed(json.loads(g)) for g in got][-1] == message
