"""Issue 13, cases 10 and 11: nothing is left behind. Claim rows go when their Turn ends, a deleted
Session leaves no ITEM#/OUT# rows (and nothing without a TTL, even when its Runtime keeps talking),
and the local stack hands the Runtime its token through the environment, never the command line.
(Ended SSE subscribers and the stack file's mode are checked on the real stack: tests/e2e/test_aws_limits.py.)"""

import subprocess

import openai
import pytest

from local.inprocess import wait_for
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import client, runtime, stack  # noqa: F401 - fixtures
from tests.integration.test_turns import pending, result, session_with, turn_status


def rows(stack, prefix):
    items, kwargs = [], {"TableName": stack.table, "ConsistentRead": True}
    while True:
        out = stack.dynamodb.scan(**kwargs)
        items += [i for i in out["Items"] if i["PK"]["S"].startswith(prefix)]
        if "LastEvaluatedKey" not in out:
            return items
        kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]


def claims(stack):
    return [i for i in rows(stack, "CONN#") if i["SK"]["S"].startswith("CLAIM#")]


def test_claim_rows_are_removed_when_turns_complete_or_fail(client, stack, runtime):
    done = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, done.id)
    failing = session_with(client, "fail")
    assert claims(stack)  # a running Turn's claim is what $disconnect fails it by
    client.beta.agents.sessions.events.create(done.id, events=[result(action, output="ok")])
    wait_for(lambda: turn_status(client, done.id, action.turn_id) == "completed")
    failed_turn = client.beta.agents.sessions.turns.list(failing.id).data[0].id
    wait_for(lambda: turn_status(client, failing.id, failed_turn) == "failed")
    wait_for(lambda: not claims(stack), timeout=5)


def test_deleting_a_session_with_a_queued_turn_leaves_no_rows(client, stack):
    session = session_with(client, "say nobody runs me")  # no Runtime is connected: the Turn stays queued
    assert client.beta.agents.sessions.turns.list(session.id).data[0].status == "queued"
    client.beta.agents.sessions.delete(session.id)
    assert rows(stack, f"T#tenant-a#SESSION#{session.id}") == []


def test_deleting_a_session_mid_turn_leaves_no_item_or_outbox_rows_and_nothing_without_ttl(client, stack):
    raw = RawRuntime(stack)
    session = session_with(client, "say anything")
    route = raw.start()
    raw.batch(route, [("turn.item.added", {"item": {"id": f"m{i}", "type": "message", "content": []}})
                      for i in range(5)] + [("turn.function_call", {"call_id": "c1", "name": "get_weather",
                                                                    "arguments": {}})])
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).required_actions)
    with pytest.raises(openai.ConflictError):  # running execution is cancelled first
        client.beta.agents.sessions.delete(session.id)
    client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
    wait_for(lambda: any(f.get("type") == "turn.cancel" for f in raw.frames))
    raw.observe(route, "turn.cancelled")
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "cancelled")
    client.beta.agents.sessions.delete(session.id)
    # The Runtime keeps talking about the deleted Session's Turn: nothing lands.
    raw.observe(route, "turn.item.done", item={"id": "late", "type": "message", "content": []})
    raw.send({"action": "turn.heartbeat", **route, "seq": raw.next_seq(route["turn_id"])})
    raw.observe(route, "turn.function_call", call_id="c2", name="get_weather", arguments={})
    wait_for(lambda: len([f for f in raw.frames if f.get("turn_id") == route["turn_id"]
                          and f.get("type") in ("error", "turn.ack")]) >= 2, timeout=5)
    left = rows(stack, f"T#tenant-a#SESSION#{session.id}")
    assert not [i for i in left if i["SK"]["S"].startswith(("ITEM#", "OUT#", "CALL#", "TURN#", "S"))]
    assert all("ttl" in i for i in left)
    assert not [c for c in claims(stack) if c["turn_id"]["S"] == route["turn_id"]]


def test_the_local_stack_passes_the_runtime_token_in_the_environment_not_the_command_line(monkeypatch, tmp_path):
    from local.server import Config, LocalStack

    started = []

    class Recorder:
        def __init__(self, argv, **kwargs):
            started.append((argv, kwargs.get("env") or {}))

    monkeypatch.setattr(subprocess, "Popen", Recorder)
    stack = LocalStack(Config())
    stack.runtime_token = "rt-secret-token"
    stack._start_runtimes({"websocket_url": "ws://127.0.0.1:1"})
    assert started
    for argv, env in started:
        assert not any("rt-secret-token" in arg for arg in argv)
        assert env["AGENTS_CORE_RUNTIME_TOKEN"] == "rt-secret-token"
