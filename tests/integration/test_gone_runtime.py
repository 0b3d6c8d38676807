"""Dispatch never trusts a gone connection (issue 35, item 4): API Gateway delivers `$disconnect` on a best-effort
basis, so a Runtime can vanish with its rows still in the pool. The turn.start that meets its GoneException deletes
that connection's rows (the connection, its pool declarations, its claims) and claims the Turn again for a live
Runtime, or puts it back in its queue for the next one that says hello; only the wait for a Runtime running out
(the heartbeat bound) fails it, with an error that says so. Here no `$disconnect` is ever delivered."""

import time

import pytest

from agents_core import keys
from agents_core.runtimes.connections import create_runtime_token, eligible_runtimes
from local.inprocess import wait_for
from tests.integration.stack_fixtures import HEARTBEAT_SECONDS, client, stack  # noqa: F401 - fixtures


@pytest.fixture
def no_disconnect(stack, monkeypatch):
    monkeypatch.setattr(stack.ws, "deliver_disconnect", False)  # AGENTS_CORE_WS_DISCONNECT=never


def create(client, text):
    return client.beta.agents.sessions.create(agent={"model": "gpt-5"}, environment={"type": "none"}, input=text,
                                              extra_body={"x_agents_core": {"harness": "scripted"}})


def turn_of(client, session_id):
    return client.beta.agents.sessions.turns.list(session_id).data[0]


def starts(runtime):
    return [m["turn_id"] for m in runtime.inbox if m.get("type") == "turn.start"]


def rows_of(stack, connection_id):
    return stack.store.query(pk=keys.connection_partition(connection_id), limit=100, consistent=True).items


def pooled(stack):
    return {r["connection_id"] for r in eligible_runtimes(stack.store, "scripted", frozenset())}


def vanished(stack, token):
    """A Runtime that said hello, then vanished: its socket closed, its `$disconnect` never delivered. One of the
    older protocol (no runtime.heartbeat: its rows are never stale), so only the GoneException gives it away (a
    silent Runtime that beats is passed by once stale: test_runtime_liveness.py)."""
    ghost = stack.connect_runtime(token, ["scripted"], beats=False)
    connection_id = ghost.connection_id
    wait_for(lambda: connection_id in pooled(stack), timeout=10)
    ghost.kill()
    assert rows_of(stack, connection_id)  # nothing told Core
    return ghost, connection_id


def test_a_turn_claimed_for_a_vanished_runtime_waits_and_runs_on_the_next_live_one(client, stack, no_disconnect):
    token = create_runtime_token(stack.store, "ops")
    ghost, gone = vanished(stack, token)
    session = create(client, "say hello")
    turn = turn_of(client, session.id)
    # turn.start met GoneException: the connection's rows went and the Turn waits in its queue
    wait_for(lambda: turn_of(client, session.id).status == "queued" and not rows_of(stack, gone), timeout=10)
    assert gone not in pooled(stack)
    waiting = turn_of(client, session.id).x_agents_core["error"]["message"]  # why it waits, while it waits
    assert "GoneException" in waiting and "no other live Runtime" in waiting
    live = stack.connect_runtime(token, ["scripted"])
    wait_for(lambda: turn_of(client, session.id).status == "completed", timeout=HEARTBEAT_SECONDS * 5)
    assert turn_of(client, session.id).error is None
    assert starts(live) == [turn.id] and starts(ghost) == []
    assert client.beta.agents.sessions.retrieve(session.id).status == "idle"


def test_sessions_after_a_runtime_vanished_all_complete_on_the_live_one(client, stack, no_disconnect):
    token = create_runtime_token(stack.store, "ops")
    live = stack.connect_runtime(token, ["scripted"])
    wait_for(lambda: live.connection_id in pooled(stack), timeout=10)
    # the pool reads newest first by the second a Runtime connected (then by connection id): the ghost's is a
    # later second, so it is the first pick while its rows stay
    declared_by = int(time.time())
    wait_for(lambda: int(time.time()) > declared_by, timeout=5, interval=0.05)
    ghost, gone = vanished(stack, token)  # the newest declaration: the first pick while its rows stay
    sessions = [create(client, f"say hello {i}") for i in range(4)]
    for session in sessions:
        wait_for(lambda s=session: turn_of(client, s.id).status == "completed", timeout=20)
    assert sorted(starts(live)) == sorted(turn_of(client, s.id).id for s in sessions)  # each once
    assert starts(ghost) == [] and not rows_of(stack, gone) and pooled(stack) == {live.connection_id}


def test_with_no_live_runtime_the_turn_fails_when_the_wait_runs_out_saying_so(client, stack, no_disconnect):
    _, gone = vanished(stack, create_runtime_token(stack.store, "ops"))
    session = create(client, "say hello")
    wait_for(lambda: turn_of(client, session.id).status == "failed", timeout=HEARTBEAT_SECONDS * 5)
    turn = turn_of(client, session.id)
    assert "no other live Runtime took the Turn" in turn.error.message and "GoneException" in turn.error.message
    assert not rows_of(stack, gone)
    assert client.beta.agents.sessions.retrieve(session.id).status == "failed"
