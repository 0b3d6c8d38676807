"""Deferred acknowledgements (issue 36: a WebSocket message is USD 1 per million). A Runtime that beats and says
`deferred_acks` in its hello marks its observation messages `ack: false`: Core answers none of them with a `turn.ack`,
and the Runtime's `runtime.heartbeat` (sent anyway) asks about every Turn it holds unacknowledged observations of,
answered by one `turn.acks`. A Runtime that does not ask gets a `turn.ack` for every message, as before; a rejection
is answered at once either way; an observation lost on the way is found by the beat's answer and sent again."""

import time

from agents_contract import protocol
from agents_core.runtimes.connections import create_runtime_token
from local.inprocess import wait_for
from runtime.protocol import RESEND_SECONDS
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import HEARTBEAT_SECONDS, client, recording, stack  # noqa: F401 - fixtures

TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather",
          "parameters": {"type": "object", "properties": {}}}]


def create(client, text):
    return client.beta.agents.sessions.create(agent={"model": "gpt-5", "tools": TOOLS}, environment={"type": "none"},
                                              input=text, extra_body={"x_agents_core": {"harness": "scripted"}})


def one_call_turn(client, runtime):
    session = create(client, "call get_weather {}\nsay done")
    action = wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).required_actions, timeout=20)[0]
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
        "success": True, "output": "sunny"}])
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle", timeout=20)
    return action.turn_id


def of_type(runtime, kind):
    return [m for m in runtime.inbox if m.get("type") == kind]


def test_a_runtime_that_asks_gets_no_ack_per_message_and_its_beat_acknowledges_every_observation(client, stack):
    runtime = stack.connect_runtime(create_runtime_token(stack.store, "ops"), ["scripted"])
    welcome = wait_for(lambda: of_type(runtime, protocol.RUNTIME_WELCOME), timeout=10)[0]
    assert welcome[protocol.DEFERRED_ACKS_FIELD] is True
    sent = recording(runtime)
    turn_id = one_call_turn(client, runtime)
    # every observation of the Turn was acknowledged by a beat's answer: the Runtime keeps nothing, resends nothing
    # (a beat asks about what was sent RESEND_SECONDS ago: one answer for the Turn, which took less)
    wait_for(lambda: not any(c.unacknowledged for c in runtime.runtime.channels.values()),
             timeout=RESEND_SECONDS + HEARTBEAT_SECONDS * 3)
    assert not of_type(runtime, protocol.TURN_ACK)
    answers = [a for m in of_type(runtime, protocol.TURN_ACKS) for a in m[protocol.ACKS] if a["turn_id"] == turn_id]
    observed = [m for m in sent if m.get("turn_id") == turn_id and m.get("action") != protocol.TURN_HEARTBEAT]
    # three messages (the call, its receipt, the answer with the end), each sent once (none resent), one answer
    assert len(observed) == 3 and all(m[protocol.ACK] is False for m in observed)
    assert len(answers) == 1 and answers[0]["seq"] == observed[-1]["observations"][-1]["seq"]
    asks = [m for m in sent if m.get("action") == protocol.RUNTIME_HEARTBEAT and m.get(protocol.ACKS)]
    assert len(asks) == 1 and [a["turn_id"] for a in asks[0][protocol.ACKS]] == [turn_id]
    # once nothing is unacknowledged, a beat asks for nothing and gets no answer
    beats_then, answered_then = len(sent), len(of_type(runtime, protocol.TURN_ACKS))
    wait_for(lambda: len([m for m in sent[beats_then:] if m.get("action") == protocol.RUNTIME_HEARTBEAT]) >= 2,
             timeout=HEARTBEAT_SECONDS * 3)
    assert not [m for m in sent[beats_then:] if m.get(protocol.ACKS)]  # (the Turn ended: no beat names it either)
    assert len(of_type(runtime, protocol.TURN_ACKS)) == answered_then


def test_a_runtime_that_does_not_ask_gets_a_turn_ack_for_every_message(client, stack):
    runtime = stack.connect_runtime(create_runtime_token(stack.store, "ops"), ["scripted"], deferred_acks=False)
    welcome = wait_for(lambda: of_type(runtime, protocol.RUNTIME_WELCOME), timeout=10)[0]
    assert protocol.DEFERRED_ACKS_FIELD not in welcome
    sent = recording(runtime)
    turn_id = one_call_turn(client, runtime)
    wait_for(lambda: len([a for a in of_type(runtime, protocol.TURN_ACK) if a["turn_id"] == turn_id]) >= 3, timeout=10)
    assert not of_type(runtime, protocol.TURN_ACKS)
    assert not [m for m in sent if protocol.ACK in m or m.get(protocol.ACKS)]


def test_a_lost_observation_is_found_by_the_beats_answer_and_sent_again(client, stack):
    runtime = stack.connect_runtime(create_runtime_token(stack.store, "ops"), ["scripted"])
    wait_for(lambda: of_type(runtime, protocol.RUNTIME_WELCOME), timeout=10)
    forward, lost = runtime.runtime.send, []

    def send(message):  # the first function call message never reaches Core (an invocation that died silently)
        actions = [message.get("action"), *(o.get("action") for o in message.get("observations") or [])]
        if protocol.TURN_FUNCTION_CALL in actions and not lost:
            lost.append(message)
            return
        forward(message)

    runtime.runtime.send = send
    session = create(client, "call get_weather {}\nsay done")
    # no turn.ack comes, and no timer resends a message marked ack: false; the beat's answer (seq 0, sent before it
    # asked) gives the loss away within a cadence or two after RESEND_SECONDS
    action = wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).required_actions,
                      timeout=2 * RESEND_SECONDS + HEARTBEAT_SECONDS * 3)[0]
    assert lost and lost[0][protocol.ACK] is False
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
        "success": True, "output": "sunny"}])
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle", timeout=20)


def test_core_answers_a_heartbeat_asking_about_acks_and_rejects_a_malformed_ask(client, stack):
    raw = RawRuntime(stack)
    session = create(client, "call get_weather {}\nsay done")
    route = raw.start()
    seq = raw.next_seq(route["turn_id"])
    raw.send({"action": protocol.TURN_FUNCTION_CALL, **route, "seq": seq, "call_id": "c1", "name": "get_weather",
              "arguments": "{}", protocol.ACK: False})
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).required_actions, timeout=10)
    time.sleep(0.3)
    assert not [f for f in raw.frames if f.get("type") == protocol.TURN_ACK]  # ack: false is honoured at once
    raw.send({"action": protocol.RUNTIME_HEARTBEAT, "turns": [route], protocol.ACKS: [{**route, "seq": seq},
              {"tenant": route["tenant"], "session_id": route["session_id"], "turn_id": "turn_unknown", "seq": 4}]})
    answer = wait_for(lambda: [f for f in raw.frames if f.get("type") == protocol.TURN_ACKS], timeout=10)[0]
    assert answer[protocol.ACKS] == [{"turn_id": route["turn_id"], "seq": seq}]  # a Turn it does not hold: left out
    # an unmarked message is acknowledged at once, as before; a malformed mark is refused naming it
    raw.send({"action": protocol.TURN_ITEM_ADDED, **route, "seq": raw.next_seq(route["turn_id"]), protocol.ACK: "no",
              "item": {"id": "m1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}})
    error = wait_for(lambda: raw.errors(route["turn_id"]), timeout=10)[0]
    assert error["error"]["param"] == protocol.ACK
    raw.send({"action": protocol.RUNTIME_HEARTBEAT, "turns": [], protocol.ACKS: [{**route, "seq": 0}]})
    error = wait_for(lambda: [e for e in raw.errors() if e.get("action") == protocol.RUNTIME_HEARTBEAT], timeout=10)[0]
    assert error["error"]["param"] == "acks[0]"
    # the calls a beat names as awaited (runtimes/redelivery.py) are shape-checked too
    raw.send({"action": protocol.RUNTIME_HEARTBEAT, "turns": [{**route, protocol.WAITING_CALLS: "c1"}]})
    wait_for(lambda: len([e for e in raw.errors() if e.get("action") == protocol.RUNTIME_HEARTBEAT]) == 2, timeout=10)
    assert raw.errors()[-1]["error"]["param"] == "turns[0].waiting_calls"
