"""Turns end to end in one process: the real handlers, moto executing the Turn ASL, the stream
poller delivering outbox records, and the reference scripted Runtime over the WebSocket gateway."""

import pytest

from agents_core.runtimes.connections import create_runtime_token
from local.inprocess import wait_for
from tests.integration.stack_fixtures import HEARTBEAT_SECONDS, client, runtime, stack  # noqa: F401 - fixtures


def session_with(client, script, **kwargs):
    return client.beta.agents.sessions.create(
        environment={"type": "none"}, input=script,
        agent={"model": "gpt-5", "tools": [{"type": "function", "name": "get_weather", "description": "Weather",
                                            "parameters": {"type": "object", "properties": {}}}],
               **kwargs.pop("agent", {})},
        extra_body={"x_agents_core": {"harness": kwargs.pop("harness", "scripted")}}, **kwargs)


def status(client, session_id):
    return client.beta.agents.sessions.retrieve(session_id).status


def test_call_round_trip(client, runtime):
    session = session_with(client, 'call get_weather {"city": "Paris"}\nsay It is sunny in Paris.')
    action = wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).required_actions)[0]
    assert (action.type, action.name, action.arguments) == ("function_call", "get_weather", {"city": "Paris"})
    assert status(client, session.id) == "requires_action"
    turn = client.beta.agents.sessions.turns.retrieve(action.turn_id, session_id=session.id)
    assert turn.status == "waiting"
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
        "success": True, "output": "sunny"}])
    wait_for(lambda: client.beta.agents.sessions.turns.retrieve(action.turn_id, session_id=session.id).status
             == "completed")
    final = client.beta.agents.sessions.retrieve(session.id)
    assert final.status == "idle" and final.required_actions == []
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert [i.type for i in items] == ["message", "function_call", "function_call_output", "message"]
    assert items[2].output == "sunny" and items[2].error is None
    assert items[3].content[0].text == "It is sunny in Paris." and items[3].phase == "final_answer"


def result(action, **extra):
    return {"type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
            "success": True, **extra}


def pending(client, session_id):
    return wait_for(lambda: client.beta.agents.sessions.retrieve(session_id).required_actions)[0]


def turn_status(client, session_id, turn_id):
    return client.beta.agents.sessions.turns.retrieve(turn_id, session_id=session_id).status


def conflict(call, message, status=409):
    import openai
    with pytest.raises(openai.APIStatusError) as err:
        call()
    assert err.value.status_code == status
    assert err.value.body["message"] == message
    assert err.value.response.headers["x-should-retry"] == "false"
    return err.value


def test_identical_retry_before_and_after_the_turn_ends_and_different_result(client, runtime):
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    submit = client.beta.agents.sessions.events.create
    submit(session.id, events=[result(action, output="42")])
    submit(session.id, events=[result(action, output="42")])  # identical retry: 202
    conflict(lambda: submit(session.id, events=[result(action, output="43")]),
             "The tool call already has a different result.")
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed")
    submit(session.id, events=[result(action, output="42")])  # identical retry after the Turn ended: 202
    conflict(lambda: submit(session.id, events=[result(action, output="42", error=None)]),
             "The tool call already has a different result.")  # field presence is identity


def test_unknown_call_and_other_turn_leave_the_action_unchanged(client, runtime):
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    submit = client.beta.agents.sessions.events.create
    err = conflict(lambda: submit(session.id, events=[{**result(action), "call_id": "call_nope"}]),
                   "Unknown pending tool call.", 400)
    assert err.body["param"] is None and err.body["type"] == "invalid_request_error"  # the official fields
    err = conflict(lambda: submit(session.id, events=[{**result(action), "turn_id": "turn_other"}]),
                   "The tool call belongs to a different Turn.", 400)
    assert err.body["param"] is None and err.body["code"] == "invalid_request_error"
    assert client.beta.agents.sessions.retrieve(session.id).required_actions == [action]
    submit(session.id, events=[result(action, output="ok")])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed")


def test_mixed_batch_is_rejected_whole(client, runtime):
    session = session_with(client, "call get_weather {}\ncall get_weather {}\nsay done")
    first = pending(client, session.id)
    before = client.beta.agents.sessions.retrieve(session.id)
    submit = client.beta.agents.sessions.events.create
    conflict(lambda: submit(session.id, events=[result(first, output="a"), {**result(first), "call_id": "nope"}]),
             "Unknown pending tool call.", 400)
    after = client.beta.agents.sessions.retrieve(session.id)
    assert after.required_actions == before.required_actions
    submit(session.id, events=[result(first, output="a")])  # the good half alone is accepted: nothing was kept
    second = wait_for(lambda: [a for a in client.beta.agents.sessions.retrieve(session.id).required_actions
                               if a.call_id != first.call_id])[0]
    submit(session.id, events=[result(second, output="b")])
    wait_for(lambda: turn_status(client, session.id, first.turn_id) == "completed")


def test_idempotency_key_names_the_whole_batch(client, runtime):
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    submit = client.beta.agents.sessions.events.create
    submit(session.id, events=[result(action, output="x")], idempotency_key="key-1")
    submit(session.id, events=[result(action, output="x")], idempotency_key="key-1")
    err = conflict(lambda: submit(session.id, events=[result(action, output="y")], idempotency_key="key-1"),
                   "This idempotency key was used with different input.")
    assert err.body["code"] == "idempotency_conflict" and err.body["type"] == "conflict_error"


def test_result_after_cancel_is_409(client, runtime):
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
    assert client.beta.agents.sessions.retrieve(session.id).required_actions == []
    conflict(lambda: client.beta.agents.sessions.events.create(session.id, events=[result(action, output="x")]),
             "The Turn cannot accept this input in its current state.")
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "cancelled")
    assert status(client, session.id) == "idle"


def test_result_after_abandon_is_409(client, runtime):
    session = session_with(client, "abandon get_weather {}\nsay carried on")
    turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
    wait_for(lambda: turn_status(client, session.id, turn_id) == "completed")
    call = [i for i in client.beta.agents.sessions.items.list(session.id).data if i.type == "function_call"][0]
    conflict(lambda: client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.tool_result", "turn_id": turn_id, "call_id": call.call_id, "success": True}]),
        "The Turn cannot accept this input in its current state.")


@pytest.mark.parametrize("answer_under", ["root", "child"])
def test_subagent_call_answered_under_root_or_child_turn(client, runtime, answer_under):
    session = session_with(client, "subagent call get_weather {}\nsay done")
    action = pending(client, session.id)
    subagents = client.beta.agents.sessions.subagents
    subagent = wait_for(lambda: subagents.list(session.id).data)[0]
    item = [i for i in subagents.items.list(subagent.id, session_id=session.id).data if i.type == "function_call"][0]
    assert item.call_id == action.call_id and item.turn_id != action.turn_id  # the child Turn id
    turn_id = action.turn_id if answer_under == "root" else item.turn_id
    client.beta.agents.sessions.events.create(session.id, events=[{**result(action), "turn_id": turn_id}])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed")


SCHEMA = {"type": "json_schema", "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}


def test_structured_output_answer_is_published_unchanged(client, runtime):
    session = session_with(client, 'answer {"ok":  true}', agent={"text": {"format": SCHEMA}})
    turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
    wait_for(lambda: turn_status(client, session.id, turn_id) == "completed")
    final = client.beta.agents.sessions.items.list(session.id).data[0]
    assert final.phase == "final_answer" and final.content[0].text == '{"ok":  true}'


def test_missing_structured_answer_fails_the_turn(client, runtime):
    session = session_with(client, "sleep 0.1", agent={"text": {"format": SCHEMA}})
    turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
    wait_for(lambda: turn_status(client, session.id, turn_id) == "failed")
    turn = client.beta.agents.sessions.turns.retrieve(turn_id, session_id=session.id)
    assert turn.error.code == "internal_error" and turn.error.message == "The execution could not complete."
    assert status(client, session.id) == "failed"


def test_steering_message_joins_the_running_turn(client, runtime):
    session = session_with(client, "wait 10\nsay never")
    turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
    wait_for(lambda: turn_status(client, session.id, turn_id) == "in_progress")
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.message", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "say steered"}]}]}])
    wait_for(lambda: turn_status(client, session.id, turn_id) == "completed")
    turns = client.beta.agents.sessions.turns.list(session.id).data
    assert len(turns) == 1
    texts = [i.content[0].text for i in client.beta.agents.sessions.items.list(session.id, order="asc").data]
    assert texts[1] == "say steered" and "steered" in texts


def test_queued_turn_starts_when_a_runtime_connects(client, stack):
    session = session_with(client, "say hello", harness="claude_code")
    turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
    import time
    time.sleep(0.5)
    assert turn_status(client, session.id, turn_id) == "queued"
    stack.connect_runtime(create_runtime_token(stack.store, "late"), ["claude_code"])
    wait_for(lambda: turn_status(client, session.id, turn_id) == "completed")


def test_a_runtime_without_the_capability_is_not_eligible(client, stack):
    """minimax_code's capability set lacks structured_output: an advertisement decides dispatch."""
    session = session_with(client, "say hi", harness="scripted", agent={"text": {"format": SCHEMA}})
    turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
    from agents_contract import capabilities as caps
    conn = stack.ws.connect(lambda text: None, {"Authorization": f"Bearer {create_runtime_token(stack.store, 'w')}"})
    import json
    weak = caps.full_declaration(caps.HARNESS_CAPABILITIES["minimax_code"])
    stack.ws.message(conn, json.dumps({"action": "runtime.hello", "harnesses": [
        {"harness": "scripted", "capabilities": weak}]}))
    import time
    time.sleep(0.5)
    assert turn_status(client, session.id, turn_id) == "queued"


def test_runtime_killed_mid_turn_fails_at_once_without_replay(client, runtime, stack):
    """The socket closes: $disconnect fails the Turns the connection claimed (no heartbeat wait)."""
    import boto3
    session = session_with(client, "call get_weather {}\nsay never")
    action = pending(client, session.id)
    runtime.kill()
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "failed", timeout=20)
    machine = stack.state_machines["TurnStateMachine"]
    execution = machine.replace(":stateMachine:", ":execution:") + f":{action.turn_id}"
    history = boto3.client("stepfunctions", region_name="us-east-1").get_execution_history(executionArn=execution)
    failures = [e for e in history["events"] if e["type"] in ("TaskFailed", "TaskTimedOut")]
    # the Runtime's loss ended the Dispatch task, not the heartbeat bound
    assert [e["type"] for e in failures] == ["TaskFailed"], failures
    assert failures[0]["taskFailedEventDetails"]["error"] == "RuntimeLost"
    final = client.beta.agents.sessions.retrieve(session.id)
    assert final.status == "failed" and final.required_actions == []
    assert len(client.beta.agents.sessions.turns.list(session.id).data) == 1  # no replay


def test_a_hung_runtime_fails_the_turn_within_the_heartbeat_bound(client, runtime):
    """The socket stays open but heartbeats stop: the heartbeat timeout is caught (SettleLost)."""
    import time
    session = session_with(client, "call get_weather {}\nsay never")
    action = pending(client, session.id)
    runtime.hang()  # the process hangs: no more heartbeats, no more messages
    hung_at = time.time()
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "failed", timeout=20)
    elapsed = time.time() - hung_at
    assert HEARTBEAT_SECONDS - 0.5 < elapsed < HEARTBEAT_SECONDS + 3  # the bound, plus the settle path
    assert client.beta.agents.sessions.retrieve(session.id).required_actions == []


def test_forty_concurrent_submissions_store_exactly_one_result(client, runtime, stack):
    """20 identical and 20 different submissions for one call, through the handler against moto."""
    import json
    from concurrent.futures import ThreadPoolExecutor

    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    key = client.api_key
    bodies = [json.dumps({"events": [result(action, output="same")]})] * 20
    bodies += [json.dumps({"events": [result(action, output=f"other-{i}")]}) for i in range(20)]
    headers = {"authorization": f"Bearer {key}", "openai-beta": "agents=v1"}

    def post(body):
        response = stack.http.handle("POST", f"/v1/agents/sessions/{session.id}/events", "", headers, body.encode())
        return body, response.status

    with ThreadPoolExecutor(max_workers=40) as pool:
        outcomes = list(pool.map(post, bodies))
    statuses = sorted(status for _, status in outcomes)
    assert set(statuses) <= {202, 409}, statuses
    winners = {body for body, status in outcomes if status == 202}
    assert len(winners) == 1, statuses  # one result stored: every 202 carried exactly it
    winner = winners.pop()
    assert all(status == 202 for body, status in outcomes if body == winner)
    assert all(status == 409 for body, status in outcomes if body != winner)
    from agents_core import keys
    stored = stack.store.get(keys.call("tenant-a", session.id, action.call_id))
    assert json.loads(stored["result"])["output"] == json.loads(winner)["events"][0]["output"]
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed", timeout=30)


def test_duplicate_observations_are_ignored(client, stack):
    """Each observation carries (turn_id, seq); a repeated seq changes nothing."""
    import json

    from runtime.capabilities import declarations
    received = []
    conn = stack.ws.connect(lambda text: received.append(json.loads(text)),
                            {"Authorization": f"Bearer {create_runtime_token(stack.store, 'raw')}"})
    stack.ws.message(conn, json.dumps({"action": "runtime.hello", "harnesses": declarations(["scripted"])}))
    session = session_with(client, "say hi")
    start = wait_for(lambda: [m for m in received if m.get("type") == "turn.start"])[0]
    route = {k: start[k] for k in ("tenant", "session_id", "turn_id")}
    item = {"id": "m1", "type": "message", "role": "assistant", "phase": "final_answer", "status": "completed",
            "content": [{"type": "output_text", "text": "hi"}]}
    for _ in range(2):
        stack.ws.message(conn, json.dumps({"action": "turn.item.done", **route, "seq": 1, "item": item}))
    batch = {"action": "turn.batch", **route, "observations": [
        {"action": "turn.item.done", "seq": 1, "item": item}, {"action": "turn.completed", "seq": 2}]}
    for _ in range(2):
        stack.ws.message(conn, json.dumps(batch))
    wait_for(lambda: turn_status(client, session.id, start["turn_id"]) == "completed")
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert [i.type for i in items] == ["message", "message"]
    stack.ws.message(conn, json.dumps({"action": "turn.item.done", **route, "seq": 3, "item": {**item, "id": "m2"}}))
    assert len(client.beta.agents.sessions.items.list(session.id).data) == 2  # a settled Turn takes no more
