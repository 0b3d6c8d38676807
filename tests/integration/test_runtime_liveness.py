"""Dispatch never trusts a stale connection (issue 35, item 4), and one `runtime.heartbeat` carries a Runtime and
all its Turns (issue 36, item 5). Here no `$disconnect` is ever delivered, and a Runtime that "vanishes" hangs with
its socket open, as a frozen or cut-off process leaves it in API Gateway: a post to it succeeds and nothing answers,
so no GoneException ever gives it away. Only its silence does: its pool rows' `seen_at` grows older than the bound
(HEARTBEAT_SECONDS here) and Dispatch passes it by."""

import time

import pytest

from agents_contract import protocol
from agents_core import keys
from agents_core.runtimes.connections import create_runtime_token, eligible_runtimes
from local.inprocess import wait_for
from tests.integration.stack_fixtures import HEARTBEAT_SECONDS, client, recording, stack  # noqa: F401 - fixtures

TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather",
          "parameters": {"type": "object", "properties": {}}}]


@pytest.fixture
def no_disconnect(stack, monkeypatch):
    monkeypatch.setattr(stack.ws, "deliver_disconnect", False)  # AGENTS_CORE_WS_DISCONNECT=never


def create(client, text):
    return client.beta.agents.sessions.create(agent={"model": "gpt-5", "tools": TOOLS}, environment={"type": "none"},
                                              input=text, extra_body={"x_agents_core": {"harness": "scripted"}})


def turn_of(client, session_id):
    return client.beta.agents.sessions.turns.list(session_id).data[0]


def starts(runtime):
    return [m["turn_id"] for m in runtime.inbox if m.get("type") == protocol.TURN_START]


def pooled(stack):
    return {r["connection_id"] for r in eligible_runtimes(stack.store, "scripted", frozenset())}


def declaration(stack, connection_id):
    return stack.store.get(keys.declaration(connection_id, "scripted"))


def connected(stack, token):
    runtime = stack.connect_runtime(token, ["scripted"])
    wait_for(lambda: runtime.connection_id in pooled(stack), timeout=10)
    return runtime


def test_a_runtime_that_stopped_beating_is_never_chosen_and_every_later_session_completes_on_the_live_one(
        client, stack, no_disconnect):
    token = create_runtime_token(stack.store, "ops")
    live = connected(stack, token)
    # the pool reads newest first by the second a Runtime connected: the ghost's is a later second, so it would be
    # the first pick while its rows stay (its socket is open: its post would succeed, and its Turn would be lost)
    declared_by = int(time.time())
    wait_for(lambda: int(time.time()) > declared_by, timeout=5, interval=0.05)
    ghost = connected(stack, token)
    ghost.hang()  # frozen: no beat, no message, the socket open, no $disconnect
    wait_for(lambda: ghost.connection_id not in pooled(stack), timeout=HEARTBEAT_SECONDS * 5)
    assert declaration(stack, ghost.connection_id) is not None  # its rows stay: only their age gives it away
    assert live.connection_id in pooled(stack)  # the live one beats: always fresh
    sessions = [create(client, f"say hello {i}") for i in range(3)]
    for session in sessions:
        wait_for(lambda s=session: turn_of(client, s.id).status == "completed", timeout=20)
    assert sorted(starts(live)) == sorted(turn_of(client, s.id).id for s in sessions)  # each once
    assert starts(ghost) == []


def test_a_stale_runtime_that_beats_again_takes_the_turn_queued_meanwhile(client, stack, no_disconnect):
    runtime = connected(stack, create_runtime_token(stack.store, "ops"))
    runtime.runtime.stop_heartbeats()  # a pause longer than the bound (a frozen VM, a long GC)
    wait_for(lambda: runtime.connection_id not in pooled(stack), timeout=HEARTBEAT_SECONDS * 5)
    session = create(client, "say hello")
    wait_for(lambda: turn_of(client, session.id).status == "queued", timeout=10)
    assert starts(runtime) == []
    # a malformed beat is refused naming the field, and refreshes nothing
    before = declaration(stack, runtime.connection_id)
    runtime.send({"action": protocol.RUNTIME_HEARTBEAT, "turns": [{"tenant": "t", "session_id": "s"}]})
    error = wait_for(lambda: [m for m in runtime.inbox if m.get("type") == protocol.ERROR], timeout=10)[0]
    assert error["error"]["param"] == "turns[0]" and error["action"] == protocol.RUNTIME_HEARTBEAT
    assert declaration(stack, runtime.connection_id) == before and runtime.connection_id not in pooled(stack)
    assert turn_of(client, session.id).status == "queued"
    runtime.send({"action": protocol.RUNTIME_HEARTBEAT, "turns": []})  # back
    wait_for(lambda: turn_of(client, session.id).status == "completed", timeout=20)
    assert starts(runtime) == [turn_of(client, session.id).id]
    assert runtime.connection_id in pooled(stack)


def test_one_runtime_heartbeat_a_cadence_keeps_every_waiting_turn_of_the_connection_alive(client, stack):
    runtime = connected(stack, create_runtime_token(stack.store, "ops"))
    sent = recording(runtime)
    sessions = [create(client, "call get_weather {}\nsay done") for _ in range(3)]
    actions = [wait_for(lambda s=s: client.beta.agents.sessions.retrieve(s.id).required_actions, timeout=20)[0]
               for s in sessions]
    turn_ids = {a.turn_id for a in actions}

    def beats_naming_all():
        return [m for m in sent if m.get("action") == protocol.RUNTIME_HEARTBEAT
                and turn_ids <= {t["turn_id"] for t in m["turns"]}]

    # waiting well past the bound: without these beats the Turns' task heartbeats would time out
    waited_from = time.monotonic()
    wait_for(lambda: time.monotonic() - waited_from > 1.5 * HEARTBEAT_SECONDS and len(beats_naming_all()) >= 3,
             timeout=HEARTBEAT_SECONDS * 6, interval=0.1)
    assert [turn_of(client, s.id).status for s in sessions] == ["waiting"] * 3
    assert not [m for m in sent if m.get("action") == protocol.TURN_HEARTBEAT]  # no per-Turn heartbeat at all
    for session, action in zip(sessions, actions):
        client.beta.agents.sessions.events.create(session.id, events=[{
            "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
            "success": True, "output": "sunny"}])
    for session in sessions:
        wait_for(lambda s=session: turn_of(client, s.id).status == "completed", timeout=20)
