"""End to end on the local stack: the official SDK over real HTTP, Runtimes over real WebSockets,
moto executing the Turn workflow from template.yaml."""

import json
import subprocess
import sys
import time

import openai
import pytest
from openai import OpenAI

from local.inprocess import wait_for
from tests.e2e.conftest import HEARTBEAT, ROOT, aws_client, start_runtime

pytestmark = pytest.mark.e2e
FN = {"type": "function", "name": "get_weather", "description": "Weather for a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}




def create(client, script, harness="scripted"):
    return client.beta.agents.sessions.create(environment={"type": "none"}, input=script,
                                              agent={"model": "gpt-5", "tools": [FN]},
                                              extra_body={"x_agents_core": {"harness": harness}})


def test_call_round_trip_over_http_with_the_state_machine_from_the_template(client, local_stack):
    session = create(client, 'call get_weather {"city": "Paris"}\nsay Sunny.')
    action = wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).required_actions)[0]
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
        "success": True, "output": "sunny"}])
    wait_for(lambda: client.beta.agents.sessions.turns.retrieve(action.turn_id, session_id=session.id).status
             == "completed")
    sfn = aws_client(local_stack, "stepfunctions")
    execution = wait_for(lambda: [e for e in sfn.list_executions(stateMachineArn=local_stack["state_machine_arn"])[
        "executions"] if e["name"] == action.turn_id and e["status"] == "SUCCEEDED"])[0]
    history = sfn.get_execution_history(executionArn=execution["executionArn"])["events"]
    entered = [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]
    assert entered == ["Dispatch"]  # waitForTaskToken completed by SendTaskSuccess; settled: no Settle state


def _states_entered(local_stack, turn_id):
    sfn = aws_client(local_stack, "stepfunctions")
    execution = [e for e in sfn.list_executions(stateMachineArn=local_stack["state_machine_arn"])["executions"]
                 if e["name"] == turn_id][0]
    history = sfn.get_execution_history(executionArn=execution["executionArn"])["events"]
    return [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e], history


def test_a_hung_runtime_heartbeat_timeout_is_caught(client, local_stack):
    import signal
    hung = start_runtime(local_stack, ["minimax_code"])
    try:
        session = create(client, "call get_weather {}\nsay never", harness="minimax_code")
        action = wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).required_actions)[0]
        hung.send_signal(signal.SIGSTOP)  # the process hangs: its socket stays open, heartbeats stop
        stopped = time.time()
        wait_for(lambda: client.beta.agents.sessions.turns.retrieve(action.turn_id, session_id=session.id).status
                 == "failed", timeout=HEARTBEAT + 10)
        assert time.time() - stopped > HEARTBEAT - 1  # it waited for the heartbeat bound (the wait above caps it)
    finally:
        hung.kill()
    entered, history = _states_entered(local_stack, action.turn_id)
    assert entered == ["Dispatch", "SettleLost"]
    assert any(e["type"] == "TaskTimedOut" or "Timeout" in json.dumps(e, default=str) for e in history)
    assert client.beta.agents.sessions.retrieve(session.id).required_actions == []


def test_runtime_killed_mid_turn_fails_its_turn_at_the_heartbeat_bound(client, local_stack):
    """An unplanned loss: the Runtime (which names its instance in runtime.hello, so its $disconnect keeps its
    claims for a planned reconnection) never comes back, and its claimed Turn fails when the heartbeat bound
    passes with no connection of it, without replay (docs/runtime-protocol.md, 'Connection rotation')."""
    doomed = start_runtime(local_stack, ["minimax_code"])
    try:
        session = create(client, "call get_weather {}\nsay never", harness="minimax_code")
        action = wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).required_actions)[0]
        doomed.kill()  # the socket closes; no connection of this instance comes back
        wait_for(lambda: client.beta.agents.sessions.turns.retrieve(action.turn_id, session_id=session.id).status
                 == "failed", timeout=HEARTBEAT + 10)
    finally:
        doomed.kill()
    entered, history = _states_entered(local_stack, action.turn_id)
    assert entered == ["Dispatch", "SettleLost"]
    # the heartbeat bound failed the task (no SendTaskFailure at the disconnect)
    assert [e["type"] for e in history if e["type"] in ("TaskFailed", "TaskTimedOut")] == ["TaskTimedOut"]


def test_second_tenant_key_from_the_cli_is_isolated(client, local_stack):
    out = subprocess.run([sys.executable, "-m", "agents_core.apikeys", "--tenant", "other", "--table",
                          local_stack["table"], "--endpoint-url", local_stack["moto_endpoint"]],
                         cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT / "layers" / "contract"), "AWS_ACCESS_KEY_ID": "local",
                              "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": "us-east-1",
                              "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled"})
    other = OpenAI(base_url=local_stack["base_url"], api_key=out.stdout.strip(), max_retries=0)
    session = create(client, "say hi")
    with pytest.raises(openai.NotFoundError):
        other.beta.agents.sessions.retrieve(session.id)
    assert other.beta.agents.sessions.list().data == []


def test_websocket_rejects_bad_tokens(local_stack):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect
    with pytest.raises(InvalidStatus):
        with connect(local_stack["websocket_url"], additional_headers={"Authorization": "Bearer rt-wrong"}):
            pass


def test_stack_file_names_everything_a_script_needs(local_stack):
    for key in ("base_url", "websocket_url", "api_key", "runtime_token", "moto_endpoint", "table"):
        assert local_stack[key]
    assert local_stack["base_url"].endswith("/v1")
    print(json.dumps({"startup_seconds": local_stack["startup_seconds_measured"]}))
