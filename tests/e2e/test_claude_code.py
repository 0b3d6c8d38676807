"""Real Claude Code end to end: the official SDK over HTTP on the local stack, a Runtime process running the
Claude Code CLI bundled in PyPI claude-agent-sdk against the embedded scripted model provider on loopback
(the Anthropic Messages dialect). No network, no key. The provider's request log shows what Claude Code
actually sent the model. One Runtime process serves the whole module (the newest Runtime serving a Harness
claims its Turns, so it takes claude_code over from the impersonating scripted Runtime)."""

from __future__ import annotations

import json
import pathlib
import sys
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
CLAUDE_CODE_VERSION = "2.1.332"


@pytest.fixture(scope="module")
def claude(local_stack, runtime_process, tmp_path_factory):
    runtime = NativeRuntime(local_stack, tmp_path_factory.mktemp("claude_code"), "claude_code")
    runtime.start()
    yield runtime
    runtime.stop()


def create(client, script=None, environment=None, tools=None, **agent):
    body = {"model": "claude-sonnet-4-5", "tools": tools if tools is not None else [FN], **agent}
    extra = {"input": script} if script is not None else {}
    return client.beta.agents.sessions.create(environment=environment or {"type": "none"}, agent=body,
                                              extra_body={"x_agents_core": {"harness": "claude_code"}}, **extra)


def first_turn(client, session_id):
    return client.beta.agents.sessions.turns.list(session_id).data[0]


def turn_status(client, session_id, turn_id):
    return client.beta.agents.sessions.turns.retrieve(turn_id, session_id=session_id).status


def pending(client, session_id):
    return wait_for(lambda: client.beta.agents.sessions.retrieve(session_id).required_actions, timeout=30)[0]


def result(action, **extra):
    return {"type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
            "success": True, **extra}


def message(text):
    return {"type": "agent.session.input.message",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}


def rejected(call, status, message):
    with pytest.raises(openai.APIStatusError) as err:
        call()
    assert err.value.status_code == status
    assert err.value.body["message"] == message


def requests_of(claude, marker):
    """The provider requests whose conversation carries this script text."""
    return [r for r in claude.requests() if marker in json.dumps(r["body"].get("messages"))]


def tool_names(request):
    return sorted(t.get("name") for t in request["body"].get("tools") or [])


def tool_results(request):
    return [b for m in request["body"]["messages"] if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]


def test_function_call_round_trip_retries_and_conflicts_on_real_claude_code(client, claude):
    session = create(client, 'say Checking.\ncall get_weather {"city": "Paris"}\nsay It is sunny in Paris.')
    action = pending(client, session.id)
    assert (action.type, action.name, action.arguments) == ("function_call", "get_weather", {"city": "Paris"})
    assert action.call_id.startswith("toolu_")  # the native tool-use id, as Claude Code reported it
    turn = client.beta.agents.sessions.turns.retrieve(action.turn_id, session_id=session.id)
    assert turn.status == "waiting"
    assert turn.model_extra["x_agents_core"]["engine"] == f"claude_code {CLAUDE_CODE_VERSION}"
    submit = client.beta.agents.sessions.events.create
    submit(session.id, events=[result(action, output="sunny, 21 C")])
    submit(session.id, events=[result(action, output="sunny, 21 C")])  # identical retry: 202
    rejected(lambda: submit(session.id, events=[result(action, output="43")]), 409,
             "The tool call already has a different result.")
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed", timeout=30)
    final = client.beta.agents.sessions.retrieve(session.id)
    assert final.status == "idle" and final.required_actions == []
    submit(session.id, events=[result(action, output="sunny, 21 C")])  # identical, after completion: 202
    rejected(lambda: submit(session.id, events=[result(action, output="43")]), 409,
             "The tool call already has a different result.")
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert [i.type for i in items] == ["message", "message", "function_call", "function_call_output", "message"]
    assert items[1].phase == "commentary" and items[1].content[0].text == "Checking."
    assert items[3].output == "sunny, 21 C" and items[3].call_id == action.call_id  # one receipt
    assert items[4].phase == "final_answer" and items[4].content[0].text == "It is sunny in Paris."
    # What Claude Code sent the model after our answer: the tool result for that tool-use id, unchanged.
    sent = requests_of(claude, "It is sunny in Paris.")
    first = sent[0]
    assert "mcp__functions__get_weather" in tool_names(first)
    back = tool_results(sent[-1])
    assert back[-1]["tool_use_id"] == action.call_id
    assert [p["text"] for p in back[-1]["content"] if p["type"] == "text"][0].rstrip("\n") == "sunny, 21 C"


def test_structured_output_is_native_result_unchanged_and_a_restart_resumes_history(client, claude):
    document = '{"forecast":  "clear skies at noon"}'
    session = create(client, f"say Thinking.\nanswer {document}",
                     text={"format": {"type": "json_schema", "schema": SCHEMA}})
    turn = first_turn(client, session.id)
    wait_for(lambda: turn_status(client, session.id, turn.id) == "completed", timeout=30)
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert [(i.type, i.phase) for i in items[1:]] == [("message", "commentary"), ("message", "final_answer")]
    assert items[1].content[0].text == "Thinking."  # parent assistant prose keeps its own Item
    # result.result as Claude Code reported it (its own serialization of the StructuredOutput input), never
    # the model's raw text nor structured_output serialized back by the adapter.
    assert items[-1].content[0].text == '{"forecast":"clear skies at noon"}'
    sent = requests_of(claude, "clear skies at noon")
    assert "StructuredOutput" in tool_names(sent[0])  # the native terminal tool was offered
    assert "mcp__functions__get_weather" in tool_names(sent[0])  # beside the caller's function, not as one
    # A Runtime restart: the next Turn resumes the native session (history kept) under the same schema.
    claude.stop()
    claude.start()
    client.beta.agents.sessions.events.create(session.id, events=[message('answer {"forecast": "rain later"}')])
    wait_for(lambda: [t for t in client.beta.agents.sessions.turns.list(session.id).data
                      if t.id != turn.id and t.status == "completed"], timeout=40)
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert items[-1].phase == "final_answer" and items[-1].content[0].text == '{"forecast":"rain later"}'
    resumed = requests_of(claude, "rain later")
    assert resumed, "the resumed Turn reached the provider"
    history = json.dumps(resumed[-1]["body"]["messages"])
    assert "clear skies at noon" in history and "Thinking." in history  # the first Turn came back
    assert "StructuredOutput" in tool_names(resumed[-1])


def test_deferred_function_loads_through_tool_search(client, claude):
    deferred = {**FN, "defer_loading": True}
    session = create(client, 'call get_weather {"city": "Lima"}\nsay Lima is foggy.',
                     tools=[deferred, {"type": "tool_search"}])
    action = pending(client, session.id)
    assert (action.name, action.arguments) == ("get_weather", {"city": "Lima"})
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="foggy")])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed", timeout=30)
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert items[-1].content[0].text == "Lima is foggy."
    assert [i.type for i in items].count("function_call") == 1  # ToolSearch is native, never a caller call
    sent = requests_of(claude, "Lima is foggy.")
    # The first request carried only the deferred placeholder and ToolSearch; the definition loaded later.
    assert tool_names(sent[0]) == ["DeferredToolPlaceholder", "ToolSearch"]
    placeholder = [t for t in sent[0]["body"]["tools"] if t["name"] == "DeferredToolPlaceholder"][0]
    assert placeholder["defer_loading"] is True
    assert "mcp__functions__get_weather" in tool_names(sent[-1])


def test_a_result_with_an_inline_png_reaches_the_model_as_an_image(client, claude):
    png = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
    session = create(client, "call get_weather {}\nsay Chart seen.")
    action = pending(client, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output=[
        {"type": "input_text", "text": "chart"}, {"type": "input_image", "image_url": f"data:image/png;base64,{png}"}])])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed", timeout=30)
    back = tool_results(requests_of(claude, "Chart seen.")[-1])[-1]["content"]
    assert back[0]["text"].rstrip("\n") == "chart"
    image = [p for p in back if p["type"] == "image"][0]
    assert image["source"]["media_type"] == "image/png" and image["source"]["data"]


def test_cancel_while_a_call_is_pending_abandons_it_and_a_late_result_conflicts(client, claude):
    session = create(client, "call get_weather {}\nsay never")
    action = pending(client, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "cancelled", timeout=30)
    assert client.beta.agents.sessions.retrieve(session.id).required_actions == []
    rejected(lambda: client.beta.agents.sessions.events.create(session.id, events=[result(action, output="late")]),
             409, "The Turn cannot accept this input in its current state.")
    assert not [i for i in client.beta.agents.sessions.items.list(session.id).data
                if i.type == "function_call_output"]  # no receipt for the synthesized rejection


def test_steering_joins_the_running_turn_and_fail_fails_the_next(client, claude):
    session = create(client, "call get_weather {}\nsay not steered")
    action = pending(client, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[message("say steered answer")])
    time.sleep(0.3)  # the steered input reaches Claude Code before the result
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="ok")])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed", timeout=30)
    assert len(client.beta.agents.sessions.turns.list(session.id).data) == 1  # joined, not a new Turn
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert items[-1].phase == "final_answer" and items[-1].content[0].text == "steered answer"
    sent = requests_of(claude, "say steered answer")
    last = json.dumps(sent[-1]["body"]["messages"][-1])  # Claude Code puts it beside the function output
    assert '"tool_result"' in last and last.index('"ok') < last.index("The user sent a new message")
    # `fail`: the provider answers an error, the next Turn fails with a readable reason.
    client.beta.agents.sessions.events.create(session.id, events=[message("fail The model is unavailable today.")])
    failed = wait_for(lambda: [t for t in client.beta.agents.sessions.turns.list(session.id).data
                               if t.status == "failed"], timeout=30)[0]
    assert failed.error.code == "internal_error" and failed.error.message == "The execution could not complete."
    assert "The model is unavailable today." in failed.model_extra["x_agents_core"]["error"]["message"]
    assert client.beta.agents.sessions.retrieve(session.id).status == "failed"


def test_steering_while_the_model_runs_is_answered_in_the_same_turn(client, claude):
    # No call to fold it into: Claude Code answers the steered message in a native turn of its own, and the
    # Turn ends only with the result that took it in.
    session = create(client, "sleep 2.5\nsay first reply")  # time for the steer to arrive mid-request
    turn = first_turn(client, session.id)
    wait_for(lambda: requests_of(claude, "first reply"), timeout=30)
    client.beta.agents.sessions.events.create(session.id, events=[message("say second reply")])
    wait_for(lambda: turn_status(client, session.id, turn.id) == "completed", timeout=30)
    assert len(client.beta.agents.sessions.turns.list(session.id).data) == 1
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert [(i.phase, i.content[0].text) for i in items if i.type == "message" and i.role == "assistant"] == [
        ("commentary", "first reply"), ("final_answer", "second reply")]


def on_machine(local_stack, claude, tmp_path, tenant):
    """A tenant whose workspace Sessions run on an enrolled machine running Claude Code natively (its
    model requests go to the same provider log as the shared native Runtime's)."""
    client = tenant_client(local_stack, tenant)
    machines = []

    def connect(session, workspace):
        root = tmp_path / f"machine-{len(machines)}"
        root.mkdir()
        machine = EnrolledRuntime(root, "claude_code", native=True, log=claude.log)
        machines.append(machine)
        machine.connect(client, session, str(workspace))

    return client, connect, machines


def test_declared_mcp_servers_required_fails_the_start_optional_is_dropped(local_stack, claude, tmp_path):
    client, connect, machines = on_machine(local_stack, claude, tmp_path, "acme-claude-mcp")
    stdio = {"type": "mcp", "server_label": "tickets", "required": True, "transport": {
        "type": "stdio", "command": sys.executable, "args": [str(pathlib.Path(__file__).with_name("mcp_stdio_server.py"))],
        "cwd": str(tmp_path), "env_vars": []}}
    down = {"type": "mcp", "server_label": "down", "connection_origin": "environment",  # omitted is service
            "transport": {"type": "http", "server_url": "http://127.0.0.1:9/mcp"}}
    workspace = {"type": "self_hosted", "workspace_directory": str(tmp_path)}
    # the stdio server starts in the workspace; the optional server that cannot connect is dropped
    session = create(client, "say MCP ready.", environment=workspace, tools=[FN, stdio, {**down, "required": False}])
    connect(session, tmp_path)
    turn = first_turn(client, session.id)
    wait_for(lambda: turn_status(client, session.id, turn.id) == "completed", timeout=40)
    offered = json.dumps(requests_of(claude, "MCP ready.")[0]["body"])  # loaded or named for ToolSearch
    assert "mcp__tickets__lookup" in offered and "mcp__down" not in offered
    # a required server that does not connect fails the start
    session = create(client, "say never", environment=workspace, tools=[FN, {**down, "required": True}])
    connect(session, tmp_path)
    turn = first_turn(client, session.id)
    wait_for(lambda: turn_status(client, session.id, turn.id) == "failed", timeout=40)
    failed = client.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id)
    assert "Required MCP server 'down' did not connect" in failed.model_extra["x_agents_core"]["error"]["message"]
    for machine in machines:
        machine.stop()


def test_sdk_stream_helper_with_tool_handlers_on_claude_code(local_stack, claude, tmp_path):
    # A workspace Session: the native claude_code tool set runs in that directory, on its enrolled machine.
    client, connect, machines = on_machine(local_stack, claude, tmp_path, "acme-claude-stream")
    session = create(client, environment={"type": "self_hosted", "workspace_directory": str(tmp_path)})
    connect(session, tmp_path)
    calls = []

    def get_weather(arguments):
        calls.append(arguments)
        return "sunny"

    with client.beta.agents.sessions.stream(session.id, input='call get_weather {"city": "Oslo"}\nsay Sunny in Oslo.',
                                            tool_handlers={"get_weather": get_weather}) as stream:
        final = stream.get_final_result()
    assert calls == [{"city": "Oslo"}]
    assert final.output_text == "Sunny in Oslo."
    sent = requests_of(claude, "Sunny in Oslo.")
    names = tool_names(sent[0])
    assert "Bash" in names and "AskUserQuestion" not in names  # the workspace tool set, less ask-user
    machines[0].stop()


def test_a_large_structured_answer_streams_as_one_delta(client, claude):
    """Issue 37, item 7: "The stream follows the official message sequence with the whole text in one
    output_text.delta", whatever its size (the Runtime splits a streamed delta over 32,000 bytes)."""
    words = " ".join(f"w{i:05d}" for i in range(7000))  # 48 KB of text in the answer
    stream = client.beta.agents.sessions.create(
        environment={"type": "none"}, input=f'answer {{"forecast": "{words}"}}', stream=True,
        agent={"model": "claude-sonnet-4-5", "tools": [FN], "text": {"format": {"type": "json_schema", "schema": SCHEMA}}},
        extra_body={"x_agents_core": {"harness": "claude_code"}})
    events = []
    for event in stream:
        events.append(event)
        if event.type in ("agent.session.idle", "agent.session.failed") and len(events) > 1:
            break
    stream.close()
    assert events[-1].type == "agent.session.idle", [e.type for e in events[-4:]]
    answer = [e for e in events if e.type == "agent.session.turn.item.done" and e.item.type == "message"][-1].item
    assert answer.phase == "final_answer" and json.loads(answer.content[0].text) == {"forecast": words}
    deltas = [e for e in events if e.type == "agent.session.turn.output_text.delta" and e.item_id == answer.id]
    assert len(deltas) == 1 and deltas[0].delta == answer.content[0].text
    sequence = [e.type for e in events if getattr(e, "item_id", None) == answer.id
                or getattr(getattr(e, "item", None), "id", None) == answer.id]
    assert sequence == ["agent.session.turn.item.added", "agent.session.turn.content_part.added",
                        "agent.session.turn.output_text.delta", "agent.session.turn.output_text.done",
                        "agent.session.turn.content_part.done", "agent.session.turn.item.done"]


def test_real_claude_code_schedules_its_own_wake_up_with_the_automations_tool(client, claude):
    """Issue 39: the `automations` Agent tool on real Claude Code, offered in its functions MCP server (turn.start
    carries it as a function); Core serves the model's call: no required action, an automation targeting the
    Session with created_by agent, and Claude Code gets the tool result."""
    script = ('call automations {"action": "create", "name": "nightly", "run_at": 4102444800, '
              '"instructions": "say Happy new year."}\nsay Scheduled the nightly run.')
    session = create(client, script, tools=[{"type": "automations"}])
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle", timeout=30)
    [automation] = client.beta.agents.automations.list(session_id=session.id).data
    assert (automation.type, automation.run_at, automation.created_by.type) == ("once", 4102444800, "agent")
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    call = next(i for i in items if i.type == "function_call")
    assert (call.name, automation.created_by.tool_call_id) == ("automations", call.call_id)
    assert client.beta.agents.sessions.retrieve(session.id).required_actions == []
    assert items[-1].type == "message" and items[-1].content[0].text == "Scheduled the nightly run."
    sent = requests_of(claude, "Scheduled the nightly run.")
    assert "mcp__functions__automations" in tool_names(sent[0])
    results = [b for r in sent for m in r["body"]["messages"] if isinstance(m.get("content"), list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert results and automation.id in json.dumps(results[-1])
    client.beta.agents.automations.delete(automation.id)
