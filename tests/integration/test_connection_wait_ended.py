"""A waiting workspace Turn pays for its ConnectionWait only while it waits (issue 36, item 5): once a connection
claims it, the outbox stops the `wait-{turn id}` execution, so neither its Expire transition nor the settle
function's invocation is paid. A Turn claimed in the commit that starts it never starts one."""

import boto3

from local.inprocess import wait_for
from tests.integration.stack_fixtures import client, stack  # noqa: F401 - fixtures
from tests.integration.test_environment_enrollment import enroll, self_hosted


def wait_executions(stack, status):
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    return [e["name"] for e in sfn.list_executions(stateMachineArn=stack.state_machines["ConnectionWaitStateMachine"],
                                                   statusFilter=status)["executions"]]


def test_the_connection_wait_of_a_claimed_turn_is_stopped_and_the_turn_runs(client, stack, tmp_path):
    session = self_hosted(client, "say hello from my machine", workspace=str(tmp_path))
    turn = client.beta.agents.sessions.turns.list(session.id).data[0]
    assert wait_for(lambda: wait_executions(stack, "RUNNING") == [f"wait-{turn.id}"], timeout=10)

    machine = stack.connect_runtime(enroll(client, session.environment.id)["token"], ["scripted"],
                                    workspace=str(tmp_path))
    wait_for(lambda: client.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id).status
             == "completed", timeout=20)
    assert wait_for(lambda: wait_executions(stack, "ABORTED") == [f"wait-{turn.id}"], timeout=10)
    assert wait_executions(stack, "RUNNING") == [] and wait_executions(stack, "SUCCEEDED") == []

    # the next Turn is claimed in the commit that starts it: no wait at all
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.message",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "say again"}]}]}])
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle"
             and len(client.beta.agents.sessions.turns.list(session.id).data) == 2, timeout=20)
    assert wait_executions(stack, "RUNNING") == [] and len(wait_executions(stack, "ABORTED")) == 1
    assert machine.connection_id is not None
