"""The reference Runtime's side of issue 13: messages within API Gateway's 128 KB quota, a window of
unacknowledged observations, resending until acknowledged, unnumbered heartbeats, a Turn failed
(never a connection closed) when one observation no message can carry, and Core's chunks joined."""

import json
import threading
import time

import pytest

from runtime import protocol
from runtime.protocol import MAX_MESSAGE_BYTES, ObservationTooLarge, Reassembler, TurnChannel

START = {"tenant": "t", "session_id": "s", "turn_id": "turn_1"}


def channel(sent, acking=False):
    """A channel whose messages land in `sent`; with `acking`, Core acknowledges each at once."""
    def send(message):
        sent.append(message)
        if acking and message.get("action") != "turn.heartbeat":
            ch.ack(max(seqs(message)))

    ch = TurnChannel(START, send, heartbeat_seconds=0.05)
    return ch


def seqs(message):
    if message["action"] == "turn.batch":
        return [o["seq"] for o in message["observations"]]
    return [message["seq"]]


def test_observations_are_packed_into_messages_within_128_kb_and_numbered_in_order():
    sent = []
    ch = channel(sent, acking=True)
    ch.emit_batch([("turn.item.done", {"item": {"id": f"m{i}", "type": "message", "content": [
        {"type": "output_text", "text": "x" * 50_000}]}}) for i in range(6)])
    assert all(len(json.dumps(m).encode()) <= MAX_MESSAGE_BYTES for m in sent) and len(sent) == 3
    assert [s for m in sent for s in seqs(m)] == [1, 2, 3, 4, 5, 6]


def test_a_long_text_delta_is_split_and_joins_back_to_the_whole_text():
    sent = []
    text = "".join(chr(0x4E00 + i % 500) for i in range(200_000))  # non-ASCII: JSON escapes it
    channel(sent, acking=True).message("m1", text[:5_000], "final_answer")
    deltas = [o for m in sent for o in (m.get("observations") or [m]) if o["action"] == "turn.output_text.delta"]
    assert len(deltas) == 1
    sent.clear()
    channel(sent, acking=True).emit("turn.output_text.delta", item_id="m", content_index=0, delta=text)
    deltas = [o for m in sent for o in (m.get("observations") or [m])]
    assert len(deltas) > 1 and "".join(d["delta"] for d in deltas) == text
    assert all(len(json.dumps(m).encode()) <= MAX_MESSAGE_BYTES for m in sent)


def test_an_observation_no_message_can_carry_fails_the_turn_instead_of_being_sent():
    sent = []
    ch = channel(sent)
    with pytest.raises(ObservationTooLarge):
        ch.emit("turn.function_call", call_id="c", name="f", arguments={"blob": "x" * 250_000})
    assert [m["action"] for m in sent] == ["turn.failed"] and ch.done.is_set()
    assert "a Runtime message holds at most" in sent[0]["error"]["message"]


def test_at_most_a_window_is_unacknowledged_and_acks_release_it(monkeypatch):
    monkeypatch.setattr(protocol, "RESEND_SECONDS", 5.0)
    sent = []
    ch = channel(sent)
    done = threading.Event()

    def flood():
        for i in range(protocol.WINDOW + 5):
            ch.emit("turn.item.added", item={"id": f"m{i}", "type": "message", "content": []})
        done.set()

    threading.Thread(target=flood, daemon=True).start()
    time.sleep(0.2)
    assert len(sent) == protocol.WINDOW and not done.is_set()  # waiting for Core
    ch.ack(8)  # acks are cumulative and may arrive out of order
    ch.ack(3)
    assert done.wait(2) and len(sent) == protocol.WINDOW + 5 and ch.unacknowledged == protocol.WINDOW + 5 - 8


def test_what_stays_unacknowledged_is_sent_again_and_heartbeats_carry_no_seq(monkeypatch):
    monkeypatch.setattr(protocol, "RESEND_SECONDS", 0.1)
    sent = []
    ch = channel(sent)
    ch.emit("turn.item.added", item={"id": "m", "type": "message", "content": []})
    ch.emit("turn.completed")
    ch.done.set()
    ch.start_heartbeats()
    deadline = time.time() + 3
    while len([m for m in sent if m.get("seq") == 1]) < 2 and time.time() < deadline:
        time.sleep(0.02)
    assert len([m for m in sent if m.get("seq") == 1]) >= 2  # resent after the Turn ended too
    ch.ack(2)
    time.sleep(0.3)
    count = len(sent)
    time.sleep(0.3)
    assert len(sent) == count  # acknowledged: nothing more
    live = []
    beating = channel(live)
    beating.start_heartbeats()
    time.sleep(0.2)
    beating.done.set()
    assert live and all(m["action"] == "turn.heartbeat" and "seq" not in m for m in live)


def test_a_server_error_frame_resends_that_message_at_once():
    sent = []
    ch = channel(sent)
    ch.emit("turn.item.added", item={"id": "m", "type": "message", "content": []})
    ch.resend_from(1)
    assert [m["seq"] for m in sent] == [1, 1]


def test_core_chunks_are_joined_in_part_order():
    from agents_core.aws import chunks

    message = {"type": "turn.tool_result", "call_id": "c", "result": {"output": 'é "q" \\ ' * 40_000}}
    parts = [json.loads(p) for p in chunks(json.dumps(message))]
    assert len(parts) > 1 and all(len(json.dumps(p).encode()) <= MAX_MESSAGE_BYTES for p in parts)
    joiner = Reassembler()
    results = [joiner.feed(p) for p in reversed(parts)]  # any arrival order
    assert results[:-1] == [None] * (len(parts) - 1) and results[-1] == message
    assert joiner.feed({"type": "turn.cancel"}) == {"type": "turn.cancel"}
