"""The Turn workflow as Step Functions runs it (moto interprets statemachines/*.asl.json): a Lambda invoke that
Lambda itself refuses (throttled, a service error) is retried with backoff before any Catch, so the Turn goes
on instead of failing; and settling is idempotent, so a retried Settle changes nothing."""

import json

import boto3
import pytest
from moto.core.exceptions import JsonRESTError

from agents_core.store import unpack
from local.apigw import LambdaContext
from local.inprocess import wait_for
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import client, runtime, stack  # noqa: F401 - fixtures
from tests.integration.test_faults import scan
from tests.integration.test_turns import pending, result, session_with, turn_status

LAMBDA_ERRORS = {  # what Lambda's Invoke API answers itself (the function never ran), as Step Functions names it
    "Lambda.TooManyRequestsException": ("TooManyRequestsException", 429, "Rate Exceeded."),
    "Lambda.ServiceException": ("ServiceException", 500, "An internal error occurred."),
}


class _LambdaRefused(JsonRESTError):
    def __init__(self, error_type, status, message):
        self.code = status
        super().__init__(error_type, message)


def refuse_once(monkeypatch, function, error):
    """The next invoke of `function` is answered by the Lambda service with `error` (a throttle or a service
    error: the handler does not run); later invokes run it. Returns the calls made, by function."""
    import moto.awslambda.models as full
    import moto.awslambda_simple.models as simple

    calls = []
    pending_errors = [LAMBDA_ERRORS[error]]
    for backend in (full.LambdaBackend, simple.LambdaSimpleBackend):
        real = backend.invoke

        def invoke(self, function_name, *args, _real=real, **kwargs):
            name = function_name.split(":")[6] if function_name.startswith("arn:") else function_name
            calls.append(name)
            if name == function and pending_errors:
                raise _LambdaRefused(*pending_errors.pop())
            return _real(self, function_name, *args, **kwargs)

        monkeypatch.setattr(backend, "invoke", invoke)
    return calls


def history(stack, turn_id):
    machine = stack.state_machines["TurnStateMachine"]
    execution = machine.replace(":stateMachine:", ":execution:") + f":{turn_id}"
    return boto3.client("stepfunctions", region_name="us-east-1").get_execution_history(
        executionArn=execution, maxResults=1000)["events"]


def entered(events):
    return [e["stateEnteredEventDetails"]["name"] for e in events if e["type"] == "TaskStateEntered"]


def failures(events):
    return [e["taskFailedEventDetails"]["error"] for e in events if e["type"] == "TaskFailed"]


@pytest.mark.parametrize("error", sorted(LAMBDA_ERRORS))
def test_a_refused_dispatch_invoke_is_retried_and_the_turn_completes(stack, client, runtime, monkeypatch, error):
    calls = refuse_once(monkeypatch, "DispatchFunction", error)
    session = session_with(client, "say hello")
    turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
    wait_for(lambda: turn_status(client, session.id, turn_id) == "completed", timeout=30)
    # the completion commit settles the Turn, so the execution ends with Dispatch
    wait_for(lambda: any(e["type"] == "ExecutionSucceeded" for e in history(stack, turn_id)), timeout=30)
    events = history(stack, turn_id)
    assert failures(events) == [error]  # the refusal reached the state machine once...
    assert calls.count("DispatchFunction") == 2  # ...and the same state invoked Dispatch again
    assert entered(events) == ["Dispatch"]  # never the Catch's SettleLost
    assert client.beta.agents.sessions.retrieve(session.id).status == "idle"


def test_a_throttled_settle_invoke_is_retried_and_settles_once(stack, client, monkeypatch):
    calls = refuse_once(monkeypatch, "SettleFunction", "Lambda.TooManyRequestsException")
    raw = RawRuntime(stack)
    session = session_with(client, "say hello")
    route = raw.start()
    turn_id = route["turn_id"]
    # an unfinished Item: the completion commit leaves it to the Settle task
    raw.observe(route, "turn.item.added", item={"id": "m1", "type": "message", "role": "assistant",
                                                 "content": [{"type": "output_text", "text": "half"}]})
    raw.observe(route, "turn.completed")
    wait_for(lambda: turn_status(client, session.id, turn_id) == "completed", timeout=30)
    wait_for(lambda: any(e["type"] == "ExecutionSucceeded" for e in history(stack, turn_id)))
    events = history(stack, turn_id)
    assert failures(events) == ["SettleNeeded", "Lambda.TooManyRequestsException"]
    assert calls.count("SettleFunction") == 2
    assert entered(events) == ["Dispatch", "Settle"]  # not SettleLastResort
    events = [e for i in stack.store.query(pk=f"T#tenant-a#SESSION#{session.id}", sk_prefix="OUT#", limit=100).items
              for e in json.loads(unpack(i["events"]))]
    assert sum(1 for e in events if e["type"] == "agent.session.turn.completed") == 1
    assert client.beta.agents.sessions.retrieve(session.id).status == "idle"


def test_every_lambda_task_retries_lambdas_own_errors_before_any_catch():
    """What the ASL says (Step Functions' recommendation: docs bp-lambda-serviceexception), state by state."""
    from local import template

    wanted = {"Lambda.ServiceException", "Lambda.AWSLambdaException", "Lambda.SdkClientException",
              "Lambda.TooManyRequestsException"}
    tasks = 0
    for machine in template.state_machines():
        for name, state in json.loads(machine.definition)["States"].items():
            if state.get("Type") != "Task" or ":lambda:invoke" not in state["Resource"]:
                continue
            tasks += 1
            first = state["Retry"][0]  # retriers are tried in order: Lambda's own errors first
            assert set(first["ErrorEquals"]) == wanted, name
            assert first["JitterStrategy"] == "FULL" and first["BackoffRate"] > 1, name
            assert first["IntervalSeconds"] >= 1 and first["MaxAttempts"] >= 3, name
    assert tasks == 5  # Dispatch, Settle, SettleLost, SettleLastResort, ConnectionWait's Expire


@pytest.mark.parametrize("kind", ["completed", "lost", "last_resort"])
def test_settling_again_changes_nothing(stack, client, runtime, kind):
    """A Settle task retried after its first attempt committed (a timeout, a lost response): same answer, and not
    one row of the table changes (no second event, no Session status flip)."""
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    if kind == "completed":
        client.beta.agents.sessions.events.create(session.id, events=[result(action, output="sunny")])
        wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed")
        event = {"outcome": {"status": "completed"}}
    else:
        runtime.hang()
        event = {"lost": True, "error": {"Error": "States.HeartbeatTimeout"}, "last_resort": kind == "last_resort"}
        wait_for(lambda: turn_status(client, session.id, action.turn_id) == "failed", timeout=20)
    wait_for(lambda: any(e["type"] == "ExecutionSucceeded" for e in history(stack, action.turn_id)))
    settle = stack.handlers["SettleFunction"]
    event.update({"tenant": "tenant-a", "session_id": session.id, "turn_id": action.turn_id})
    before = scan(stack)
    first = settle(dict(event), LambdaContext("settle"))
    assert settle(dict(event), LambdaContext("settle")) == first
    assert first["status"] == ("completed" if kind == "completed" else "failed")
    assert scan(stack) == before
