"""IAM as AWS enforces it, in the in-process stack (local/iam.py): each function's AWS calls are checked
against its own policies from template.yaml. The gaps the suites exposed, each run with the template's
statement before its fix (`iam.overridden`) to show AWS would have denied it, and with the template as it
is; and a permission a path needs, removed, fails that path as AccessDenied: a 500 server_error over
HTTP with nothing half written."""

from __future__ import annotations

import json

import openai
import pytest
from botocore.exceptions import ClientError

from agents_core import aws
from agents_core.runtimes import connections
from local import iam
from local.inprocess import wait_for
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import client, runtime, stack  # noqa: F401 - fixtures
from tests.integration.test_bounded_commits import scan
from tests.integration.test_hosted_environment_lifecycle import HostedRuntime, hosted_session, wait_turn
from tests.integration.test_turns import session_with, turn_status


@pytest.fixture(autouse=True)
def iam_on(monkeypatch):
    monkeypatch.setenv("AGENTS_CORE_IAM", "on")  # these tests are about enforcement, whatever the shell says


def without(statement_action: str | None = None, leading_key: str | None = None):
    """An edit of a principal's statements: drop an action, or a LeadingKeys prefix, from every statement."""
    def edit(statements):
        for s in statements:
            if statement_action and isinstance(s.get("Action"), list) and statement_action in s["Action"]:
                s["Action"].remove(statement_action)
            keys = ((s.get("Condition") or {}).get("ForAllValues:StringLike") or {}).get("dynamodb:LeadingKeys")
            if leading_key and keys and leading_key in keys:
                keys.remove(leading_key)
        return statements
    return edit


def bound_hosted_session(client, stack):
    host = HostedRuntime(stack, "host-a")
    host.welcome()
    session = hosted_session(client)
    start = host.start()
    host.complete(start["turn_id"])
    wait_turn(client, session.id, start["turn_id"], "completed")
    assert bindings(stack, session.environment.id)  # the Environment is bound to its host
    return session, host


def bindings(stack, env_id):
    return [i for i in scan(stack) if i["PK"]["S"].startswith("HOST#") and i["SK"]["S"].endswith(env_id)]


@pytest.mark.parametrize("template", ["fixed", "before"])
def test_deleting_a_session_whose_hosted_environment_is_bound_to_a_host(client, stack, template):
    """AdmissionFunction's LeadingKeys lacked HOST#*: the delete failed after the Session rows were gone."""
    session, _ = bound_hosted_session(client, stack)
    edit = without(leading_key="HOST#*") if template == "before" else (lambda s: s)
    with iam.overridden("AdmissionFunction", edit):
        if template == "before":
            with pytest.raises(openai.InternalServerError) as err:
                client.beta.agents.sessions.delete(session.id)
            assert err.value.body["type"] == "server_error"
            return
        client.beta.agents.sessions.delete(session.id)
    assert not bindings(stack, session.environment.id)  # its binding went with it
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.environments.retrieve(session.environment.id)


@pytest.mark.parametrize("template", ["fixed", "before"])
def test_a_commit_over_one_outbox_record_reaches_subscribers(client, stack, template):
    """StreamFunction lacked dynamodb:BatchGetItem: a commit's later parts could not be read back."""
    from agents_core.apikeys import create_key

    with iam.overridden("StreamFunction", without("dynamodb:BatchGetItem") if template == "before" else (lambda s: s)):
        raw = RawRuntime(stack)
        session = session_with(client, "say anything")
        received = []
        viewer = stack.ws.connect(lambda text: received.append(json.loads(text)),
                                  {"Authorization": f"Bearer {create_key(stack.store, 'tenant-a')}"})
        stack.ws.message(viewer, json.dumps({"action": "subscribe", "session_id": session.id}))
        route = raw.start()
        for i in range(8):  # eight Items wait for seq 1, then one commit of ~480 KB applies them all
            raw.send({"action": "turn.item.done", **route, "seq": i + 2, "item": {
                "id": f"m{i}", "type": "message", "phase": "commentary",
                "content": [{"type": "output_text", "text": "x" * 60_000}]}})
        wait_for(lambda: len([f for f in raw.frames if f.get("type") == "turn.ack"]) >= 8)
        raw.send({"action": "turn.heartbeat", **route, "seq": 1})
        raw.seq[route["turn_id"]] = 9

        def done():
            return [e for e in received if e.get("type") == "agent.session.turn.item.done"]

        if template == "before":
            wait_for(lambda: any(i["SK"]["S"].startswith("OUT#") and "part_of" in i for i in scan(stack)))
            for _ in range(5):
                stack.poller.pump()  # retried, and denied again each time
            assert done() == []
            return
        wait_for(lambda: len(done()) == 8, timeout=30)
        assert [e["output_index"] for e in done()] == list(range(8))
        raw.observe(route, "turn.completed")
        wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "completed")


@pytest.mark.parametrize("template", ["fixed", "before"])
def test_the_stream_function_forgets_a_gone_hosted_host(client, stack, template):
    """StreamFunction lacked dynamodb:DeleteItem: a post answered GoneException (its fanout and its dispatch
    commands use post_safely) could not forget a hosted host's connection, so its Environments stayed
    connected."""
    session, host = bound_hosted_session(client, stack)
    stack.ws.deliver_disconnect = False  # $disconnect is best effort: this one never arrives
    conn = host.conn
    host.drop()
    stack.ws.deliver_disconnect = True
    env_id = session.environment.id
    assert client.beta.agents.environments.retrieve(env_id).status == "connected"
    edit = without("dynamodb:DeleteItem") if template == "before" else (lambda s: s)
    with iam.overridden("StreamFunction", edit), iam.acting_as("StreamFunction"):
        if template == "before":
            with pytest.raises(Exception) as err:  # noqa: B017 - the store's ServerError, from AWS's denial
                connections.post_safely(aws.default_messenger(), stack.store, conn, {"type": "ping"})
            denied = err.value.__cause__ or err.value.__context__
            assert isinstance(denied, ClientError) and denied.response["Error"]["Code"] == "AccessDeniedException"
            assert "dynamodb:DeleteItem" in denied.response["Error"]["Message"]
            return
        assert connections.post_safely(aws.default_messenger(), stack.store, conn, {"type": "ping"}) is False
    wait_for(lambda: client.beta.agents.environments.retrieve(env_id).status == "disconnected", timeout=10)


def test_a_permission_removed_fails_its_path_as_access_denied_with_nothing_half_written(client, stack):
    before = scan(stack)
    with iam.overridden("AdmissionFunction", without("dynamodb:PutItem")):
        with pytest.raises(openai.InternalServerError) as err:
            client.beta.agents.create(name="denied", model="gpt-5")
    assert err.value.status_code == 500
    assert err.value.body["type"] == "server_error" and err.value.body["code"] == "server_error"
    assert scan(stack) == before  # nothing half written
    assert client.beta.agents.create(name="allowed", model="gpt-5").name == "allowed"


def test_a_state_machine_task_is_checked_against_the_state_machines_role(client, stack, runtime):
    """The Turn workflow invokes Dispatch with its own role: without lambda:InvokeFunction on Dispatch the
    Turn never reaches the Runtime and fails."""
    def no_dispatch(statements):
        return [s for s in statements if not any("DispatchFunction" in r for r in s["Resource"])]

    import boto3

    with iam.overridden("TurnStateMachine", no_dispatch):
        session = session_with(client, "say hello")
        turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
        wait_for(lambda: turn_status(client, session.id, turn_id) == "failed", timeout=20)
    arn = stack.state_machines["TurnStateMachine"].replace(":stateMachine:", ":execution:") + f":{turn_id}"
    history = json.dumps(boto3.client("stepfunctions", region_name="us-east-1").get_execution_history(
        executionArn=arn)["events"], default=str)
    assert "Lambda.AccessDeniedException" in history and "lambda:InvokeFunction" in history
    assert not [m for m in runtime.inbox if m.get("type") == "turn.start" and m.get("turn_id") == turn_id]
