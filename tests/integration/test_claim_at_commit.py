"""A Turn is claimed in the commit that starts it when a connected Runtime covers it: the committing
Lambda (Session create, or a message to an idle Session) starts the execution right after its commit,
so no DynamoDB Streams hop lies between a message and `turn.start`. The commit's outbox record still
carries `start_execution`, the at-least-once path if the direct start is lost; with no eligible
Runtime the Turn stays queued for its `dispatch` command, as before."""

import json

from agents_core.runtimes import connections, dispatch
from agents_core.store import unpack
from local.inprocess import wait_for
from tests.integration.stack_fixtures import client, runtime, stack  # noqa: F401 - fixtures
from tests.integration.test_turns import pending, result, session_with, turn_status


def outbox(stack, session_id):
    items = stack.store.query(pk=f"T#tenant-a#SESSION#{session_id}", sk_prefix="OUT#", limit=100,
                              consistent=True).items
    return [(json.loads(unpack(i["events"])), json.loads(unpack(i["commands"]))) for i in items]


def claims(stack, connection_id):
    return stack.store.query(pk=f"CONN#{connection_id}", sk_prefix="CLAIM#", limit=100, consistent=True).items


def started(runtime, turn_id):
    return [m for m in runtime.inbox if m.get("type") == "turn.start" and m["turn_id"] == turn_id]


def test_session_create_claims_its_turn_and_starts_it_with_the_stream_stopped(client, runtime, stack):
    stack.poller.pump = lambda: 0  # no stream consumer: only the committing Lambda can start the Turn
    try:
        session = session_with(client, "call get_weather {}\nsay done")
        turn = client.beta.agents.sessions.turns.list(session.id).data[0]
        # claimed in the create commit itself (never queued); the Runtime may already have made its call (waiting)
        assert turn.status in ("in_progress", "waiting")
        assert [c["turn_id"] for c in claims(stack, runtime.connection_id)] == [turn.id]
        (events, commands), = outbox(stack, session.id)  # one commit: created, queued and claimed
        assert [e["type"] for e in events] == [
            "agent.session.created", "agent.session.turn.created", "agent.session.turn.item.added",
            "agent.session.in_progress", "agent.session.turn.in_progress"]
        assert commands == [{"type": "start_execution", "turn_id": turn.id}]
        wait_for(lambda: started(runtime, turn.id), timeout=10)
        action = pending(client, session.id)
    finally:
        del stack.poller.pump
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="sunny")])
    wait_for(lambda: turn_status(client, session.id, turn.id) == "completed", timeout=20)
    assert len(started(runtime, turn.id)) == 1  # the outbox's repeated start started nothing new


def test_a_message_to_an_idle_session_claims_the_new_turn_in_its_commit(client, runtime, stack):
    session = session_with(client, "say first")
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle", timeout=20)
    stack.poller.pump = lambda: 0
    try:
        client.beta.agents.sessions.events.create(session.id, events=[{
            "type": "agent.session.input.message",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "say second"}]}]}])
        turns = client.beta.agents.sessions.turns.list(session.id, order="desc").data
        assert turns[0].status in ("in_progress", "completed")  # claimed in its commit, never queued
        wait_for(lambda: started(runtime, turns[0].id), timeout=10)
        (events, commands), = [(e, c) for e, c in outbox(stack, session.id)
                               if any(x["type"] == "agent.session.turn.created" and x["turn"]["id"] == turns[0].id
                                      for x in e)]  # the message's own commit
        assert events[-1]["type"] == "agent.session.turn.in_progress"
        assert commands == [{"type": "start_execution", "turn_id": turns[0].id}]
    finally:
        del stack.poller.pump
    wait_for(lambda: turn_status(client, session.id, turns[0].id) == "completed", timeout=20)


def test_when_the_direct_start_is_lost_the_outbox_starts_the_execution(client, runtime, monkeypatch):
    monkeypatch.setattr(dispatch, "start_now", lambda *args: None)
    session = session_with(client, "say hello")
    turn = client.beta.agents.sessions.turns.list(session.id).data[0]
    wait_for(lambda: turn_status(client, session.id, turn.id) == "completed", timeout=20)
    assert len(started(runtime, turn.id)) == 1


def test_a_failing_direct_start_never_fails_the_request(client, runtime, monkeypatch):
    class Broken:
        def start(self, *args):
            raise RuntimeError("Step Functions is down")

    import functools

    import agents_core.aws as aws
    monkeypatch.setattr(aws, "default_workflow", functools.lru_cache(maxsize=1)(Broken))  # cached, as the real one
    session = session_with(client, "say hello")  # 201: the commit stands, the outbox starts the Turn
    turn = client.beta.agents.sessions.turns.list(session.id).data[0]
    assert turn.status in ("in_progress", "completed")  # claimed in the commit; the outbox starts it


def test_with_no_eligible_runtime_the_turn_stays_queued_for_dispatch(client, stack):
    session = session_with(client, "say hello", harness="claude_code")
    turn = client.beta.agents.sessions.turns.list(session.id).data[0]
    assert turn.status == "queued"
    (events, commands), = outbox(stack, session.id)
    assert commands == [{"type": "dispatch", "turn_id": turn.id, "harness": "claude_code"}]
    assert "agent.session.turn.in_progress" not in [e["type"] for e in events]


def test_a_message_cancelled_in_its_own_batch_is_not_claimed(client, runtime, stack):
    session = session_with(client, "say first")
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle", timeout=20)
    client.beta.agents.sessions.events.create(session.id, events=[
        {"type": "agent.session.input.message",
         "input": [{"role": "user", "content": [{"type": "input_text", "text": "say second"}]}]},
        {"type": "agent.session.input.cancel"}])
    turns = client.beta.agents.sessions.turns.list(session.id, order="desc").data
    wait_for(lambda: turn_status(client, session.id, turns[0].id) == "cancelled", timeout=20)
    assert not started(runtime, turns[0].id)
    assert not claims(stack, runtime.connection_id)


def steer(client, session_id, text):
    client.beta.agents.sessions.events.create(session_id, events=[{
        "type": "agent.session.input.message",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}])


def test_a_steer_that_reaches_the_runtime_before_turn_start_joins_the_turn_once(client, runtime, stack, monkeypatch):
    """The steer is posted straight after its commit while turn.start comes from the Turn's workflow:
    the Runtime holds it until the start, and the start carries only the input from before the claim."""
    monkeypatch.setattr(dispatch, "start_now", lambda *args: None)  # the start waits for the outbox ...
    stack.poller.pump = lambda: 0  # ... which is stopped for now
    try:
        session = session_with(client, "wait 20")
        turn = client.beta.agents.sessions.turns.list(session.id).data[0]
        assert turn.status == "in_progress"  # claimed, but the Runtime has not been told
        steer(client, session.id, "say steered in")
        wait_for(lambda: [m for m in runtime.inbox if m.get("type") == "turn.input"], timeout=10)
        assert not started(runtime, turn.id)
    finally:
        del stack.poller.pump
    start, = wait_for(lambda: started(runtime, turn.id), timeout=10)
    assert [m["content"][0]["text"] for m in start["input"]] == ["wait 20"]  # the steer is not repeated
    wait_for(lambda: turn_status(client, session.id, turn.id) == "completed", timeout=10)  # not after 20 s
    texts = [i.content[0].text for i in client.beta.agents.sessions.items.list(session.id)
             if i.type == "message" and i.role == "assistant"]
    assert texts == ["steered in"]


def test_a_message_to_a_queued_turn_is_part_of_its_start(client, stack):
    """With no Runtime yet the Turn stays queued: a message added meanwhile is delivered by turn.start."""
    session = session_with(client, "wait 0.1")
    steer(client, session.id, "say also this")
    runtime = stack.connect_runtime(connections.create_runtime_token(stack.store, "late"), ["scripted"])
    turn = client.beta.agents.sessions.turns.list(session.id).data[0]
    start, = wait_for(lambda: started(runtime, turn.id), timeout=10)
    assert [m["content"][0]["text"] for m in start["input"]] == ["wait 0.1", "say also this"]
    wait_for(lambda: turn_status(client, session.id, turn.id) == "completed", timeout=10)


def test_a_cancel_that_reaches_the_runtime_before_turn_start_cancels_the_turn(client, runtime, stack, monkeypatch):
    monkeypatch.setattr(dispatch, "start_now", lambda *args: None)
    stack.poller.pump = lambda: 0
    try:
        session = session_with(client, "wait 20\nsay never")
        turn = client.beta.agents.sessions.turns.list(session.id).data[0]
        client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
        wait_for(lambda: [m for m in runtime.inbox if m.get("type") == "turn.cancel"], timeout=10)
        assert not started(runtime, turn.id)
    finally:
        del stack.poller.pump
    wait_for(lambda: turn_status(client, session.id, turn.id) == "cancelled", timeout=10)  # not after 20 s
    assert client.beta.agents.sessions.retrieve(session.id).status == "idle"
    assert not [i for i in client.beta.agents.sessions.items.list(session.id) if i.role == "assistant"]
