"""Issue 35, item 4 on the real local stack (`python -m local`, as `make dev`) with `$disconnect` never delivered
(AGENTS_CORE_WS_DISCONNECT=never: API Gateway delivers it on a best-effort basis). A Runtime process that is
killed leaves its rows in the pool; the first turn.start that meets its GoneException deletes them, or, once its
beats stopped longer than the bound, Dispatch passes its stale rows by; either way the Turn runs on the live
Runtime, so Sessions created afterwards all complete on a live Runtime and the vanished one is never chosen. A
Runtime process that is frozen (SIGSTOP: its socket open, a post to it succeeds, nothing answers, as a frozen or
cut-off machine leaves it in API Gateway) is given away by its silence alone: once its rows are older than the
bound it is never chosen."""

from __future__ import annotations

import signal
import time

import pytest
from openai import OpenAI

from local.inprocess import wait_for
from tests.e2e.conftest import HEARTBEAT, aws_client, start_runtime, start_stack, stop_stack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    process, info = start_stack(tmp_path_factory.mktemp("no-disconnect"), AGENTS_CORE_WS_DISCONNECT="never")
    yield info
    stop_stack(process)


def runtime_connections(info: dict) -> set[str]:
    dynamodb = aws_client(info, "dynamodb")
    items, kwargs = [], {"TableName": info["table"], "ConsistentRead": True,
                         "FilterExpression": "kind = :c AND #r = :r", "ExpressionAttributeNames": {"#r": "role"},
                         "ExpressionAttributeValues": {":c": {"S": "connection"}, ":r": {"S": "runtime"}}}
    while True:
        out = dynamodb.scan(**kwargs)
        items += out["Items"]
        if "LastEvaluatedKey" not in out:
            return {i["connection_id"]["S"] for i in items}
        kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]


def declared(info: dict, fresh_only: bool = False) -> set[str]:
    """The connections in the scripted pool (only those a Turn may be claimed for: seen within the bound)."""
    dynamodb = aws_client(info, "dynamodb")
    out = dynamodb.query(TableName=info["table"], IndexName="GSI1", KeyConditionExpression="GSI1PK = :p",
                         ExpressionAttributeValues={":p": {"S": "RUNTIME#scripted"}})
    return {i["connection_id"]["S"] for i in out["Items"]
            if not fresh_only or "seen_at" not in i or int(time.time()) - int(i["seen_at"]["N"]) <= HEARTBEAT}


def later_second() -> None:
    """The pool reads newest first by the second a Runtime connected: a Runtime started after this is in a later
    second than every one before, so it is the first pick while its rows stay (within one second the order is the
    connection ids')."""
    declared_by = int(time.time())
    wait_for(lambda: int(time.time()) > declared_by, timeout=5, interval=0.05)


def _turns(info: dict) -> list:
    dynamodb = aws_client(info, "dynamodb")
    out = dynamodb.scan(TableName=info["table"], FilterExpression="begins_with(SK, :t)",
                        ExpressionAttributeValues={":t": {"S": "TURN#"}})
    return [(i["SK"]["S"], i.get("status"), i.get("claimed_by"), i.get("error")) for i in out["Items"]]


def _pool(info: dict) -> list:
    dynamodb = aws_client(info, "dynamodb")
    out = dynamodb.query(TableName=info["table"], IndexName="GSI1", KeyConditionExpression="GSI1PK = :p",
                         ExpressionAttributeValues={":p": {"S": "RUNTIME#scripted"}})
    return [(i["connection_id"]["S"], i.get("seen_at"), time.time()) for i in out["Items"]]


def sessions_complete(info: dict, count: int) -> None:
    client = OpenAI(base_url=info["base_url"], api_key=info["api_key"], max_retries=0)
    sessions = [client.beta.agents.sessions.create(
        environment={"type": "none"}, agent={"model": "gpt-5"}, input=f"say hello {i}",
        extra_body={"x_agents_core": {"harness": "scripted"}}) for i in range(count)]
    for session in sessions:
        try:
            wait_for(lambda s=session: client.beta.agents.sessions.turns.list(s.id).data[0].status == "completed",
                     timeout=30)
        except AssertionError:
            raise AssertionError(f"{_turns(info)}\n{_pool(info)}") from None
    assert [client.beta.agents.sessions.retrieve(s.id).status for s in sessions] == ["idle"] * count


def test_a_killed_or_frozen_runtime_is_never_chosen_and_every_later_session_completes_on_the_live_one(stack):
    live = start_runtime(stack, ["scripted"])
    ghost = frozen = None
    try:
        wait_for(lambda: len(declared(stack)) == 1, timeout=30)
        (live_id,) = declared(stack)
        later_second()  # the ghost is the first pick while its rows stay
        ghost = start_runtime(stack, ["scripted"])
        wait_for(lambda: len(declared(stack)) == 2, timeout=30)
        (ghost_id,) = declared(stack) - {live_id}
        ghost.kill()  # no goodbye, and the gateway delivers no $disconnect
        ghost.wait(timeout=10)
        assert ghost_id in runtime_connections(stack)  # nothing told Core
        sessions_complete(stack, 3)
        # the killed Runtime is out of the pool: its rows deleted at its first GoneException, or (when its beats
        # stopped longer than the bound before the first Session was claimed) stale; the live one stays
        assert declared(stack, fresh_only=True) == {live_id}
        assert ghost_id not in runtime_connections(stack) or ghost_id not in declared(stack, fresh_only=True)

        # A frozen one (SIGSTOP): its socket stays open, a post to it succeeds and nothing answers; only its silence
        # tells, once its rows are older than the bound.
        later_second()  # the frozen one is the first pick while its rows are fresh
        frozen = start_runtime(stack, ["scripted"])
        wait_for(lambda: len(declared(stack, fresh_only=True)) == 2, timeout=30)
        (frozen_id,) = declared(stack, fresh_only=True) - {live_id}
        frozen.send_signal(signal.SIGSTOP)
        wait_for(lambda: frozen_id not in declared(stack, fresh_only=True), timeout=HEARTBEAT * 5)
        assert frozen_id in declared(stack) and frozen_id in runtime_connections(stack)
        assert live_id in declared(stack, fresh_only=True)  # the live one beats
        sessions_complete(stack, 3)  # had the frozen one been chosen, its Turn would fail at the bound
    finally:
        if frozen is not None:
            frozen.send_signal(signal.SIGCONT)
        for process in (live, ghost, frozen):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=10)
