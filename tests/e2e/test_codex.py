"""Real Codex end to end: the official SDK over HTTP on the local stack, a Runtime process running the
pinned `codex app-server` (PyPI openai-codex-cli-bin) against the embedded scripted model provider on
loopback. No network, no key. The provider's request log shows what Codex actually sent the model."""

from __future__ import annotations

import json
import time

import openai
import pytest

from local.inprocess import wait_for
from tests.e2e.conftest import EnrolledRuntime, NativeRuntime, tenant_client

pytestmark = pytest.mark.e2e

FN = {"type": "function", "name": "get_weather", "description": "Weather for a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
SCHEMA = {"type": "object", "properties": {"forecast": {"type": "string"}}, "required": ["forecast"],
          "additionalProperties": False}
CODEX_VERSION = "0.163.0"


@pytest.fixture(scope="module")
def codex(local_stack, runtime_process, tmp_path_factory):
    # One warm idle process at most: a Session whose process was stopped resumes on its next Turn.
    runtime = NativeRuntime(local_stack, tmp_path_factory.mktemp("codex"), "codex", extra=("--warm-sessions", "1"))
    runtime.start()
    yield runtime
    runtime.stop()


def create(client, script=None, environment=None, **agent):
    body = {"model": "gpt-5", "tools": [FN], **agent}
    extra = {"input": script} if script is not None else {}
    return client.beta.agents.sessions.create(environment=environment or {"type": "none"}, agent=body,
                                              extra_body={"x_agents_core": {"harness": "codex"}}, **extra)


def first_turn(client, session_id):
    return client.beta.agents.sessions.turns.list(session_id).data[0]


def turn_status(client, session_id, turn_id):
    return client.beta.agents.sessions.turns.retrieve(turn_id, session_id=session_id).status


def pending(client, session_id):
    return wait_for(lambda: client.beta.agents.sessions.retrieve(session_id).required_actions, timeout=30)[0]


def result(action, **extra):
    return {"type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
            "success": True, **extra}


def rejected(call, status, message):
    with pytest.raises(openai.APIStatusError) as err:
        call()
    assert err.value.status_code == status
    assert err.value.body["message"] == message


def requests_of(codex, session_marker):
    """The provider requests whose conversation carries this script text."""
    return [r for r in codex.requests() if session_marker in json.dumps(r["body"].get("input"))]


def test_function_call_round_trip_on_real_codex(client, codex):
    session = create(client, 'say Checking.\ncall get_weather {"city": "Paris"}\nsay It is sunny in Paris.')
    action = pending(client, session.id)
    assert (action.type, action.name, action.arguments) == ("function_call", "get_weather", {"city": "Paris"})
    assert action.call_id.startswith("call_")  # the native callId, as Codex made it
    turn = client.beta.agents.sessions.turns.retrieve(action.turn_id, session_id=session.id)
    assert turn.status == "waiting"
    assert turn.model_extra["x_agents_core"]["engine"] == f"codex {CODEX_VERSION}"
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="sunny, 21 C")])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed", timeout=30)
    final = client.beta.agents.sessions.retrieve(session.id)
    assert final.status == "idle" and final.required_actions == []
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert [i.type for i in items] == ["message", "message", "function_call", "function_call_output", "message"]
    assert items[1].phase == "commentary" and items[1].content[0].text == "Checking."
    assert items[3].output == "sunny, 21 C" and items[3].call_id == action.call_id
    assert items[4].phase == "final_answer" and items[4].content[0].text == "It is sunny in Paris."
    # What Codex sent the model after our answer: the function output exactly as submitted.
    outputs = [i for r in requests_of(codex, "It is sunny in Paris.") for i in r["body"]["input"]
               if i.get("type") == "function_call_output"]
    assert outputs and outputs[-1]["call_id"] == action.call_id and outputs[-1]["output"] == "sunny, 21 C"


def test_identical_retry_accepted_and_different_result_conflicts_while_pending_and_after(client, codex):
    session = create(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    submit = client.beta.agents.sessions.events.create
    submit(session.id, events=[result(action, output="42")])
    submit(session.id, events=[result(action, output="42")])  # identical retry: 202
    rejected(lambda: submit(session.id, events=[result(action, output="43")]), 409,
             "The tool call already has a different result.")
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed", timeout=30)
    submit(session.id, events=[result(action, output="42")])
    rejected(lambda: submit(session.id, events=[result(action, output="43")]), 409,
             "The tool call already has a different result.")
    outputs = [i for i in client.beta.agents.sessions.items.list(session.id).data if i.type == "function_call_output"]
    assert len(outputs) == 1  # one receipt: the native result appeared once


def test_structured_output_is_the_native_final_message_unchanged_and_schema_on_every_root_turn(
        client, codex, local_stack):
    document = '{"forecast": "clear skies at noon"}'
    session = create(client, f"answer {document}", text={"format": {"type": "json_schema", "schema": SCHEMA}})
    turn = first_turn(client, session.id)
    wait_for(lambda: turn_status(client, session.id, turn.id) == "completed", timeout=30)
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert items[-1].phase == "final_answer" and items[-1].content[0].text == document
    # A Runtime restart: the next Turn resumes the native thread (history kept) under the same schema.
    codex.stop()
    codex.start()
    second = '{"forecast": "rain later"}'
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.message",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": f"answer {second}"}]}]}])
    turns = wait_for(lambda: [t for t in client.beta.agents.sessions.turns.list(session.id).data
                              if t.id != turn.id and t.status == "completed"], timeout=40)
    assert turns
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert items[-1].content[0].text == second
    sent = requests_of(codex, "rain later")
    assert sent, "the resumed Turn reached the provider"
    resumed = sent[-1]["body"]["input"]
    assert json.dumps(document)[1:-1] in json.dumps(resumed)  # the first answer: history came back
    root_turns = requests_of(codex, "clear skies at noon")  # the first Turn and the resumed one
    assert len(root_turns) == 2
    for request in root_turns:
        fmt = request["body"]["text"]["format"]
        assert fmt["type"] == "json_schema" and fmt["strict"] is True and fmt["schema"] == SCHEMA


def test_cancel_while_a_call_is_pending_abandons_it_and_a_late_result_conflicts(client, codex):
    session = create(client, "call get_weather {}\nsay never")
    action = pending(client, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "cancelled", timeout=30)
    assert client.beta.agents.sessions.retrieve(session.id).required_actions == []
    rejected(lambda: client.beta.agents.sessions.events.create(session.id, events=[result(action, output="late")]),
             409, "The Turn cannot accept this input in its current state.")
    assert not [i for i in client.beta.agents.sessions.items.list(session.id).data
                if i.type == "function_call_output"]  # no receipt


def test_steering_joins_the_running_codex_turn(client, codex):
    session = create(client, "call get_weather {}\nsay not steered")
    action = pending(client, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.message",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "say steered answer"}]}]}])
    time.sleep(0.3)  # the steered input reaches Codex before the result
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="ok")])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed", timeout=30)
    assert len(client.beta.agents.sessions.turns.list(session.id).data) == 1  # joined, not a new Turn
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert items[-1].content[0].text == "steered answer"
    sent = requests_of(codex, "steered answer")
    kinds = [(i.get("type"), i.get("role")) for i in sent[-1]["body"]["input"]]
    assert kinds.index(("function_call_output", None)) < len(kinds) - 1  # the input lands after the output


def test_provider_failure_fails_the_turn_with_a_readable_reason(client, codex):
    session = create(client, "fail The model is unavailable today.")
    turn = first_turn(client, session.id)
    wait_for(lambda: turn_status(client, session.id, turn.id) == "failed", timeout=30)
    failed = client.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id)
    assert failed.error.code == "internal_error" and failed.error.message == "The execution could not complete."
    assert "The model is unavailable today." in failed.model_extra["x_agents_core"]["error"]["message"]
    assert client.beta.agents.sessions.retrieve(session.id).status == "failed"


def test_sdk_stream_helper_with_tool_handlers_on_codex(local_stack, codex, tmp_path):
    # An idle Session (no input) needs a workspace: Codex runs in that directory, on its enrolled machine.
    client = tenant_client(local_stack, "acme-codex-stream")
    session = create(client, environment={"type": "self_hosted", "workspace_directory": str(tmp_path)})
    (tmp_path / "machine").mkdir()
    machine = EnrolledRuntime(tmp_path / "machine", "codex", native=True, log=codex.log)
    machine.connect(client, session, str(tmp_path))
    calls = []

    def get_weather(arguments):
        calls.append(arguments)
        return "sunny"

    with client.beta.agents.sessions.stream(session.id, input='call get_weather {"city": "Oslo"}\nsay Sunny in Oslo.',
                                            tool_handlers={"get_weather": get_weather}) as stream:
        final = stream.get_final_result()
    assert calls == [{"city": "Oslo"}]
    assert final.output_text == "Sunny in Oslo."
    assert requests_of(codex, "Sunny in Oslo.")  # the native engine on the machine played it
    machine.stop()


def test_an_idle_process_beyond_the_warm_limit_stops_and_its_session_resumes(client, codex):
    first = create(client, "say first session")
    wait_for(lambda: turn_status(client, first.id, first_turn(client, first.id).id) == "completed", timeout=30)
    other = create(client, "say another session")
    wait_for(lambda: turn_status(client, other.id, first_turn(client, other.id).id) == "completed", timeout=30)
    wait_for(lambda: f"stopping the idle process of {first.id}" in codex.stderr.read_text(), timeout=10)
    client.beta.agents.sessions.events.create(first.id, events=[{
        "type": "agent.session.input.message",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "say back again"}]}]}])
    wait_for(lambda: client.beta.agents.sessions.retrieve(first.id).status == "idle"
             and len(client.beta.agents.sessions.turns.list(first.id).data) == 2, timeout=40)
    items = client.beta.agents.sessions.items.list(first.id, order="asc").data
    assert items[-1].content[0].text == "back again"
    resumed = requests_of(codex, "say back again")[-1]["body"]["input"]
    assert "first session" in json.dumps(resumed)  # a new process, the same native thread


def test_real_codex_schedules_its_own_wake_up_with_the_automations_tool(client, codex):
    """Issue 39: the `automations` Agent tool on real Codex. turn.start carries it as a function, Codex offers it
    to its model as a dynamic tool, and Core serves the model's call: no required action, an automation targeting
    the Session with created_by agent and the call's id, and Codex gets the tool result."""
    script = ('call automations {"action": "create", "name": "check-in", "expression": "0 9 * * 1-5", '
              '"timezone": "Europe/Paris", "instructions": "say Good morning."}\nsay Scheduled your check-in.')
    session = create(client, script, tools=[{"type": "automations"}])
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle", timeout=30)
    [automation] = client.beta.agents.automations.list(session_id=session.id).data
    assert (automation.created_by.type, automation.created_by.session_id) == ("agent", session.id)
    assert (automation.expression, automation.timezone, automation.status) == ("0 9 * * 1-5", "Europe/Paris", "active")
    assert automation.target.type == "existing_session" and automation.target.session_id == session.id
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    call = next(i for i in items if i.type == "function_call")
    assert (call.name, automation.created_by.tool_call_id) == ("automations", call.call_id)
    output = next(i for i in items if i.type == "function_call_output")
    assert automation.id in str(output.output)
    assert items[-1].content[0].text == "Scheduled your check-in."
    assert client.beta.agents.sessions.retrieve(session.id).required_actions == []
    # what Codex offered its model: the automations function with its schema, and our result sent back
    sent = requests_of(codex, "Scheduled your check-in.")
    offered = [t for t in sent[0]["body"].get("tools") or [] if t.get("name") == "automations"]
    assert offered and offered[0]["parameters"]["properties"]["action"]["enum"] == ["create", "list", "update",
                                                                                   "delete"]
    outputs = [i for r in sent for i in r["body"]["input"] if i.get("type") == "function_call_output"]
    assert outputs and outputs[-1]["call_id"] == call.call_id and automation.id in outputs[-1]["output"]
    client.beta.agents.automations.delete(automation.id)
