"""Issue 35, item 4 on the real local stack (`python -m local`, as `make dev`) with `$disconnect` never delivered
(AGENTS_CORE_WS_DISCONNECT=never: API Gateway delivers it on a best-effort basis). A Runtime process that is
killed leaves its rows in the pool; the first turn.start that meets its GoneException deletes them and the Turn
runs on the live Runtime, so Sessions created afterwards all complete on a live Runtime and the vanished one is
never chosen again."""

from __future__ import annotations

import time

import pytest
from openai import OpenAI

from local.inprocess import wait_for
from tests.e2e.conftest import aws_client, start_runtime, start_stack, stop_stack

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


def declared(info: dict) -> set[str]:
    dynamodb = aws_client(info, "dynamodb")
    out = dynamodb.query(TableName=info["table"], IndexName="GSI1", KeyConditionExpression="GSI1PK = :p",
                         ExpressionAttributeValues={":p": {"S": "RUNTIME#scripted"}})
    return {i["connection_id"]["S"] for i in out["Items"]}


def test_a_killed_runtime_is_forgotten_at_its_first_gone_post_and_every_later_session_completes(stack):
    live = start_runtime(stack, ["scripted"])
    ghost = None
    try:
        wait_for(lambda: len(declared(stack)) == 1, timeout=30)
        (live_id,) = declared(stack)
        # the pool reads newest first by the second a Runtime connected: the ghost's must be a later second,
        # so it is the first pick while its rows stay (within one second the order is the connection ids')
        declared_by = int(time.time())
        wait_for(lambda: int(time.time()) > declared_by, timeout=5, interval=0.05)
        ghost = start_runtime(stack, ["scripted"])
        wait_for(lambda: len(declared(stack)) == 2, timeout=30)
        (ghost_id,) = declared(stack) - {live_id}
        ghost.kill()  # no goodbye, and the gateway delivers no $disconnect
        ghost.wait(timeout=10)
        assert ghost_id in runtime_connections(stack)  # nothing told Core
        client = OpenAI(base_url=stack["base_url"], api_key=stack["api_key"], max_retries=0)
        sessions = [client.beta.agents.sessions.create(
            environment={"type": "none"}, agent={"model": "gpt-5"}, input=f"say hello {i}",
            extra_body={"x_agents_core": {"harness": "scripted"}}) for i in range(5)]
        for session in sessions:
            wait_for(lambda s=session: client.beta.agents.sessions.turns.list(s.id).data[0].status == "completed",
                     timeout=30)
        assert [client.beta.agents.sessions.retrieve(s.id).status for s in sessions] == ["idle"] * 5
        # the vanished Runtime is gone from the pool (its rows deleted at its first GoneException), the live one stays
        assert declared(stack) == {live_id} and ghost_id not in runtime_connections(stack)
    finally:
        for process in (live, ghost):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=10)
