"""The reference Runtime with deferred acknowledgements (issue 36): its messages go `ack: false` until half its window
is unacknowledged (that one is left unmarked, so Core acks it at once and a long Turn never waits a cadence), no timer
resends a message Core was told not to acknowledge, the connection's heartbeat asks about Turns holding observations
sent RESEND_SECONDS ago, and the answer frees them or gives a lost one away; without the grant nothing changes."""

from agents_contract import protocol
from runtime.protocol import RESEND_SECONDS, WINDOW, TurnChannel
from runtime.router import Runtime

START = {"tenant": "t", "session_id": "s", "turn_id": "turn_1"}


def deferred(sent):
    ch = TurnChannel(START, sent.append, heartbeat_seconds=0.05)
    ch.deferred_acks = True
    return ch


def age(ch, seconds):
    """As if every unacknowledged message was sent `seconds` earlier."""
    with ch._acks:
        for last, (message, at, first) in list(ch._unacked.items()):
            ch._unacked[last] = (message, at - seconds, first - seconds)


def test_messages_ask_for_no_ack_until_half_the_window_is_unacknowledged():
    sent = []
    ch = deferred(sent)
    for i in range(WINDOW // 2):
        ch.emit("turn.item.added", item={"id": f"m{i}"})
    assert [m.get("ack") for m in sent] == [False] * (WINDOW // 2 - 1) + [None]
    ch.ack(WINDOW // 2)  # Core acknowledged the unmarked one at once: the next half window goes unmarked again
    ch.emit("turn.item.added", item={"id": "n"})
    assert sent[-1]["ack"] is False and ch.unacknowledged == 1


def test_without_the_grant_messages_are_unmarked_and_no_ack_is_asked():
    sent = []
    ch = TurnChannel(START, sent.append, heartbeat_seconds=0.05)
    ch.emit("turn.item.added", item={"id": "m"})
    age(ch, RESEND_SECONDS + 1)
    assert "ack" not in sent[0] and ch.ack_request() is None


def test_no_timer_resends_a_deferred_message_and_the_beat_asks_only_about_old_ones():
    sent = []
    ch = deferred(sent)
    ch.emit("turn.function_call", call_id="c", name="f", arguments="{}")
    assert ch.ack_request() is None  # sent just now: an answer could not tell yet
    age(ch, RESEND_SECONDS + 1)
    ch._resend()  # the channel's timer: a message marked ack: false is not Core's to acknowledge unasked
    assert len(sent) == 1
    assert ch.ack_request() == {**START, "seq": 1}


def test_the_answer_frees_what_core_applied_and_resends_only_what_was_lost_before_the_ask():
    sent = []
    ch = deferred(sent)
    ch.emit("turn.item.added", item={"id": "a"})
    ch.emit("turn.item.added", item={"id": "b"})
    age(ch, RESEND_SECONDS + 1)
    ch.emit("turn.item.added", item={"id": "c"})  # sent just before the beat: maybe not applied yet
    assert ch.ack_request() == {**START, "seq": 3}
    sent.clear()
    ch.acks_answered(1)  # seq 2 was lost on the way; seq 3 may still be in flight
    assert [m["seq"] for m in sent] == [2] and ch.unacknowledged == 2
    ch.acks_answered(3)
    assert ch.unacknowledged == 0 and ch.ack_request() is None


def test_the_router_asks_in_its_heartbeat_and_applies_the_answer_only_when_the_welcome_granted_it():
    sent = []
    runtime = Runtime(sent.append, {}, heartbeat_seconds=0.05)
    runtime.on_message({"type": "runtime.welcome", "harnesses": [], "heartbeat_seconds": 60, "deferred_acks": True})
    runtime.stop_heartbeats()
    ch = TurnChannel(START, runtime.send, heartbeat_seconds=0.05)
    runtime._defer_acks(ch)
    runtime.channels["turn_1"] = ch
    assert ch.deferred_acks and ch.linger >= 180  # a lost answer is asked for again at the next beats
    ch.emit("turn.completed")
    age(ch, RESEND_SECONDS + 1)
    sent.clear()
    runtime.heartbeat()
    assert sent == [{"action": "runtime.heartbeat", "turns": [], "acks": [{**START, "seq": 1}]}]
    runtime.on_message({"type": protocol.TURN_ACKS, "acks": [{"turn_id": "turn_1", "seq": 1}]})
    assert ch.unacknowledged == 0
    sent.clear()
    runtime.heartbeat()
    assert sent == [{"action": "runtime.heartbeat", "turns": []}]  # nothing to ask: a plain beat
    older = Runtime([].append, {}, heartbeat_seconds=0.05)
    older.on_message({"type": "runtime.welcome", "harnesses": [], "heartbeat_seconds": 60})
    older.stop_heartbeats()
    assert older.deferred_acks is False


def test_the_heartbeat_names_the_calls_a_turn_waits_on_until_their_result_arrives_when_the_welcome_granted_it():
    sent = []
    runtime = Runtime(sent.append, {}, heartbeat_seconds=0.05)
    runtime.on_message({"type": "runtime.welcome", "harnesses": [], "heartbeat_seconds": 60, "waiting_calls": True})
    runtime.stop_heartbeats()
    ch = TurnChannel(START, runtime.send, heartbeat_seconds=0.05)
    ch._beating = True  # its heartbeats started: runtime.heartbeat names it
    runtime.channels["turn_1"] = ch
    ch.emit_batch([("turn.function_call", {"call_id": "c1", "name": "f", "arguments": "{}"}),
                   ("turn.function_call", {"call_id": "c2", "name": "f", "arguments": "{}"})])
    sent.clear()
    runtime.heartbeat()
    assert sent[-1]["turns"] == [{**START, "waiting_calls": ["c1", "c2"]}]
    runtime.on_message({"type": protocol.TURN_TOOL_RESULT, "turn_id": "turn_1", "call_id": "c1",
                        "result": {"output": "ok"}, "delivery_id": "dlv_1"})
    ch.emit("turn.call.abandoned", call_id="c2")
    runtime.heartbeat()
    assert sent[-1]["turns"] == [START]  # nothing awaited: the entry is the route alone
    older = Runtime([].append, {}, heartbeat_seconds=0.05)
    older.on_message({"type": "runtime.welcome", "harnesses": [], "heartbeat_seconds": 60})
    older.stop_heartbeats()
    assert older.waiting_calls is False
