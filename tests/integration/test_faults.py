"""Fault injection: DynamoDB throttling and transaction conflicts, a Step Functions task token that
expired, and Lambda invocations retried after a timeout (the same request twice). Each proves no
lost and no doubled admission or event, and never a 5xx."""

import json
import types

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from agents_core.aws import Workflow
from agents_core.keys import call as call_key
from agents_core.store import unpack
from local.apigw import LambdaContext
from local.inprocess import wait_for
from tests.integration.stack_fixtures import client, runtime, stack  # noqa: F401 - fixtures
from tests.integration.test_turns import pending, result, session_with, turn_status


def scan(stack):
    """The table without the Runtime's own bookkeeping (its connection rows, its heartbeats' seq markers),
    which the Runtime keeps writing while a request is rejected."""
    items = stack.dynamodb.scan(TableName=stack.table, ConsistentRead=True)["Items"]
    return sorted((i for i in items if not i["PK"]["S"].startswith("CONN#") and not i["SK"]["S"].startswith("OBS#")),
                  key=lambda i: (i["PK"]["S"], i["SK"]["S"]))


def _cancelled(code):
    return ClientError({"Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                        "CancellationReasons": [{"Code": code}]}, "TransactWriteItems")


def flaky(monkeypatch, store, errors):
    """The next len(errors) TransactWriteItems calls fail with these errors, then calls pass."""
    real = store.client.transact_write_items
    queue = list(errors)

    def transact(**kwargs):
        if queue:
            raise queue.pop(0)
        return real(**kwargs)

    monkeypatch.setattr(store.client, "transact_write_items", transact)
    return queue


def test_transaction_conflicts_and_throttling_are_retried_and_admit_exactly_once(stack, client, runtime,
                                                                                   monkeypatch):
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    flaky(monkeypatch, stack.store, [_cancelled("TransactionConflict"), ClientError(
        {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "TransactWriteItems"),
        _cancelled("ThrottlingError")])
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="once")])
    stored = stack.store.get(call_key("tenant-a", session.id, action.call_id))
    assert stored["state"] in ("submitted", "applied") and json.loads(stored["result"])["output"] == "once"
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed")
    outputs = [i for i in client.beta.agents.sessions.items.list(session.id).data if i.type == "function_call_output"]
    assert len(outputs) == 1  # not doubled


def test_persistent_throttling_is_a_clear_429_and_writes_nothing(stack, client, runtime, monkeypatch):
    import openai
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    before = scan(stack)
    conflicts = flaky(monkeypatch, stack.store, [_cancelled("TransactionConflict")] * 100)
    # Every attempt fails here: the backoff's random jitter (~7 s of sleeping in all) is beside the point.
    monkeypatch.setattr("agents_core.engine.random", types.SimpleNamespace(random=lambda: 0.0))
    with pytest.raises(openai.RateLimitError) as err:
        client.beta.agents.sessions.events.create(session.id, events=[result(action, output="x")])
    assert err.value.status_code == 429 and err.value.body["code"] == "rate_limit_exceeded"
    assert err.value.response.headers.get("x-should-retry") != "false"  # safe to retry
    assert scan(stack) == before
    assert len(conflicts) < 100 - 2  # it was retried before giving up
    monkeypatch.undo()
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="x")])  # the retry works
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed", timeout=30)


def test_an_expired_task_token_is_ignored_not_raised():
    import boto3
    sfn = boto3.client("stepfunctions", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(sfn) as stub:
        stub.add_client_error("send_task_success", service_error_code="TaskTimedOut")
        stub.add_client_error("send_task_heartbeat", service_error_code="TaskTimedOut")
        stub.add_client_error("send_task_success", service_error_code="InvalidToken")
        workflow = Workflow(sfn, "arn:aws:states:us-east-1:123456789012:stateMachine:turn")
        assert workflow.succeed("token", {"status": "completed"}) is False
        assert workflow.heartbeat("token") is False
        assert workflow.succeed("token", {"status": "completed"}) is False
    with Stubber(sfn) as stub:
        stub.add_client_error("start_execution", service_error_code="ExecutionAlreadyExists")
        Workflow(sfn, "arn:aws:states:us-east-1:123456789012:stateMachine:turn").start("t", "s", "turn_1")


def test_a_terminal_observation_after_the_token_expired_settles_once(stack, client, runtime):
    """The Runtime reports completion after the heartbeat bound: SettleLost already failed the Turn."""
    session = session_with(client, "call get_weather {}\nsay late")
    action = pending(client, session.id)
    turn_item = stack.store.get({"PK": f"T#tenant-a#SESSION#{session.id}", "SK": f"TURN#{action.turn_id}"})
    from agents_core.aws import default_workflow
    from agents_core.runtimes import observations, settlement
    assert settlement.settle(stack.store, "tenant-a", session.id, action.turn_id, None, lost=True) == "failed"
    outcome = observations.observe(stack.store, default_workflow(), turn_item["claimed_by"], {
        "action": "turn.completed", "tenant": "tenant-a", "session_id": session.id, "turn_id": action.turn_id,
        "seq": 999})
    assert outcome == "ignored"
    assert turn_status(client, session.id, action.turn_id) == "failed"
    turns = client.beta.agents.sessions.turns.list(session.id).data
    assert len(turns) == 1 and client.beta.agents.sessions.retrieve(session.id).status == "failed"


def test_lambda_retried_after_a_timeout_admits_and_settles_once(stack, client, runtime):
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    key = client.api_key
    body = json.dumps({"events": [result(action, output="same")]}).encode()
    headers = {"authorization": f"Bearer {key}", "openai-beta": "agents=v1"}
    for _ in range(2):  # the results Lambda ran twice for one request
        assert stack.http.handle("POST", f"/v1/agents/sessions/{session.id}/events", "", headers, body).status == 202
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed")
    settle = stack.handlers["SettleFunction"]
    event = {"tenant": "tenant-a", "session_id": session.id, "turn_id": action.turn_id,
             "outcome": {"status": "completed"}}
    assert settle(event, LambdaContext("settle"))["status"] == "completed"  # settling again changes nothing
    items = client.beta.agents.sessions.items.list(session.id).data
    assert sum(1 for i in items if i.type == "function_call_output") == 1
    events = [e for i in stack.store.query(pk=f"T#tenant-a#SESSION#{session.id}", sk_prefix="OUT#", limit=100).items
              for e in json.loads(unpack(i["events"]))]
    assert sum(1 for e in events if e["type"] == "agent.session.turn.completed") == 1
    dispatch = stack.handlers["DispatchFunction"]
    # turn.start once on the normal path (docs/runtime-protocol.md, "Delivery"): the direct start and the outbox's
    # start_execution are one execution, and a retried results Lambda starts nothing
    started = [m for m in runtime.inbox if m.get("type") == "turn.start" and m["turn_id"] == action.turn_id]
    assert len(started) == 1 and started[0]["session_id"] == session.id
    with pytest.raises(Exception):  # a retried Dispatch after settlement: the Turn is no longer claimable
        dispatch({"tenant": "tenant-a", "session_id": session.id, "turn_id": action.turn_id, "task_token": "t2"},
                 LambdaContext("dispatch"))
