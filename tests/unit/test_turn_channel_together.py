"""A Turn's last answer and its end go to Core in one message (issue 36, item 5: one Runtime message, one commit and
one acknowledgement fewer per Turn): what a driver emits inside `TurnChannel.together()` leaves on its end, in
order, and the channel is done only once that message is sent (so it is resent until acknowledged)."""

from runtime.harnesses.scripted.driver import ScriptedDriver
from runtime.protocol import TurnChannel
from tests.unit.test_turn_channel import START, channel, seqs


def test_the_answer_and_the_end_emitted_together_leave_as_one_numbered_message():
    sent = []
    ch = channel(sent)
    ch.emit("turn.function_call", call_id="c1", name="f", arguments="{}")
    with ch.together():
        ch.message("m1", "done", "final_answer")
        ch.finish("turn.completed")
        assert len(sent) == 1 and not ch.done.is_set()  # nothing more sent yet, and not done before it is
        ch.finish("turn.completed")  # a second end inside is ignored
    assert ch.done.is_set() and len(sent) == 2
    last = sent[-1]
    assert last["action"] == "turn.batch" and seqs(last) == [2, 3, 4, 5]
    assert [o["action"] for o in last["observations"]] == [
        "turn.item.added", "turn.output_text.delta", "turn.item.done", "turn.completed"]
    assert ch.unacknowledged == 2  # resent until Core acknowledges it
    ch.finish("turn.completed")
    assert len(sent) == 2


def test_nothing_emitted_together_sends_nothing_and_outside_it_each_emit_is_sent_at_once():
    sent = []
    ch = channel(sent)
    with ch.together():
        pass
    assert sent == [] and not ch.done.is_set()
    ch.emit("turn.item.added", item={"id": "m1"})
    ch.finish("turn.completed")
    assert [m["action"] for m in sent] == ["turn.item.added", "turn.completed"] and ch.done.is_set()


def test_the_scripted_harness_sends_its_final_answer_with_the_turns_end_as_the_native_drivers_do():
    sent = []
    start = {**START, "type": "turn.start", "harness": "scripted", "agent": {"model": "m", "tools": []},
             "environment": {"type": "none"}, "input": [{"type": "message", "role": "user", "content": [
                 {"type": "input_text", "text": "say first\nsay done"}]}]}
    ch = TurnChannel(start, sent.append, heartbeat_seconds=60)
    ScriptedDriver("scripted").start_turn(start, ch)
    assert ch.done.wait(10)
    assert [m["action"] for m in sent if m["action"] != "turn.heartbeat"] == ["turn.batch", "turn.batch"]
    assert sent[-1]["observations"][-1]["action"] == "turn.completed"
    assert [o["item"]["phase"] for o in sent[-1]["observations"] if o["action"] == "turn.item.done"] == [
        "final_answer"]
