"""Issue 25 on real native Harnesses: the official SDK on the local stack, Runtime processes running the pinned
`codex app-server` and Claude Code against the scripted model provider, whose `spawn` step makes the root model
spawn a child (Codex: multi_agent_v1 `spawn_agent` with fork_context; Claude Code: the Agent tool) and the child
model call the Session's function. The child is a Subagent with a child Turn; its call is a required action of the
root Turn, answered under the child Turn id."""

from __future__ import annotations

import json

import openai
import pytest

from local.inprocess import wait_for
from tests.e2e.conftest import EnrolledRuntime, NativeRuntime, tenant_client

pytestmark = pytest.mark.e2e

FN = {"type": "function", "name": "get_weather", "description": "Weather for a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
SCRIPT = ('say spawning\nspawn weather\n  call get_weather {"city": "Paris"}\n  answer child done\n'
          'wait weather\nanswer root done')


@pytest.fixture(scope="module")
def codex(local_stack, runtime_process, tmp_path_factory):
    runtime = NativeRuntime(local_stack, tmp_path_factory.mktemp("codex_subagents"), "codex")
    runtime.start()
    yield runtime
    runtime.stop()


SCHEMA = {"type": "object", "properties": {"done": {"type": "string"}}, "required": ["done"],
          "additionalProperties": False}


def test_a_codex_child_agent_is_a_subagent_whose_call_is_a_required_action_of_the_root_turn(client, codex):
    sessions = client.beta.agents.sessions
    script = SCRIPT.replace("answer root done", 'answer {"done": "root"}')
    session = sessions.create(environment={"type": "none"}, input=script,
                              agent={"model": "gpt-5.5", "tools": [FN], "multi_agent": {"enabled": True},
                                     "text": {"format": {"type": "json_schema", "schema": SCHEMA}}},
                              extra_body={"x_agents_core": {"harness": "codex"}})
    action = wait_for(lambda: sessions.retrieve(session.id).required_actions, timeout=60)[0]
    root = sessions.turns.list(session.id).data
    assert [t.id for t in root] == [action.turn_id] and action.arguments == {"city": "Paris"}
    subagent = wait_for(lambda: sessions.subagents.list(session.id).data, timeout=10)[0]
    assert subagent.parent_agent_id == session.agent.id and subagent.status == "active"
    child = sessions.subagents.turns.list(subagent.id, session_id=session.id).data[0]
    call = wait_for(lambda: [i for i in sessions.subagents.items.list(subagent.id, session_id=session.id).data
                             if i.type == "function_call"], timeout=10)[0]
    assert (call.call_id, call.turn_id) == (action.call_id, child.id)
    sessions.events.create(session.id, events=[{"type": "agent.session.input.tool_result", "turn_id": child.id,
                                                "call_id": action.call_id, "success": True, "output": "sunny"}])
    wait_for(lambda: sessions.turns.retrieve(action.turn_id, session_id=session.id).status != "in_progress"
             and sessions.retrieve(session.id).status == "idle", timeout=90)
    assert sessions.turns.retrieve(action.turn_id, session_id=session.id).status == "completed"
    final = [i for i in sessions.items.list(session.id, order="asc").data if i.type == "message"]
    assert final[-1].content[0].text == '{"done": "root"}'  # the root's structured answer, unchanged
    history = sessions.subagents.turns.items.list(child.id, session_id=session.id, subagent_id=subagent.id,
                                                  order="asc").data
    assert [i.type for i in history if i.type != "message"] == ["function_call", "function_call_output"]
    assert history[-1].type == "message" and history[-1].content[0].text == "child done"
    assert sessions.subagents.turns.retrieve(child.id, session_id=session.id,
                                             subagent_id=subagent.id).status == "completed"
    # "Subagent threads do not receive the schema": the child's model requests (Codex marks them) carry no
    # text.format, the root's do
    requests = [r for r in codex.requests() if SCRIPT.split("\n")[0] in json.dumps(r["body"])]
    children = [r for r in requests if r.get("headers", {}).get("x-openai-subagent") == "collab_spawn"]
    roots = [r for r in requests if "x-openai-subagent" not in r.get("headers", {})]
    assert children and all("format" not in (r["body"].get("text") or {}) for r in children)
    assert roots and all((r["body"].get("text") or {}).get("format", {}).get("schema") == SCHEMA for r in roots)


def test_cancel_while_the_codex_childs_call_is_pending_interrupts_the_child_and_abandons_the_call(client, codex):
    sessions = client.beta.agents.sessions
    session = sessions.create(environment={"type": "none"}, input=SCRIPT,
                              agent={"model": "gpt-5.5", "tools": [FN], "multi_agent": {"enabled": True}},
                              extra_body={"x_agents_core": {"harness": "codex"}})
    action = wait_for(lambda: sessions.retrieve(session.id).required_actions, timeout=60)[0]
    subagent = wait_for(lambda: sessions.subagents.list(session.id).data, timeout=10)[0]
    child = sessions.subagents.turns.list(subagent.id, session_id=session.id).data[0]
    sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
    wait_for(lambda: sessions.turns.retrieve(action.turn_id, session_id=session.id).status == "cancelled"
             and sessions.retrieve(session.id).status == "idle", timeout=90)
    assert sessions.subagents.turns.retrieve(child.id, session_id=session.id,
                                             subagent_id=subagent.id).status == "cancelled"
    with pytest.raises(openai.ConflictError) as err:
        sessions.events.create(session.id, events=[{"type": "agent.session.input.tool_result", "turn_id": child.id,
                                                    "call_id": action.call_id, "success": True, "output": "late"}])
    assert err.value.body["message"] == "The Turn cannot accept this input in its current state."


def test_a_claude_code_child_agent_on_a_workspace_is_answered_by_the_sdk_stream_helper(local_stack, runtime_process,
                                                                                      tmp_path):
    # Claude Code offers its Agent tool on a workspace placement (on `none` the spec keeps no built-in tools).
    client = tenant_client(local_stack, "acme-claude-subagents")
    sessions = client.beta.agents.sessions
    session = sessions.create(environment={"type": "self_hosted", "workspace_directory": str(tmp_path)},
                              agent={"model": "claude-sonnet-4-5", "tools": [FN], "multi_agent": {"enabled": True}},
                              extra_body={"x_agents_core": {"harness": "claude_code"}})
    root = tmp_path / "machine"
    root.mkdir()
    machine = EnrolledRuntime(root, "claude_code", native=True)
    machine.connect(client, session, str(tmp_path))
    calls, events = [], []
    try:
        with sessions.stream(session.id, input=SCRIPT,
                             tool_handlers={"get_weather": lambda args: calls.append(args) or "sunny"}) as stream:
            stream.with_result_collection()
            for event in stream:
                events.append(event)
                if event.type in ("agent.session.idle", "agent.session.failed"):
                    break
            final = stream.get_final_result()
        assert calls == [{"city": "Paris"}] and final.output_text == "root done"
        subagent = sessions.subagents.list(session.id).data[0]
        assert (subagent.name, subagent.status) == ("weather", "closed")
        child = sessions.subagents.turns.list(subagent.id, session_id=session.id).data[0]
        assert child.status == "completed" and child.subagent_id == subagent.id
        added = [e for e in events if e.type == "agent.session.turn.item.added" and e.item.type == "function_call"]
        assert [e.item.turn_id for e in added] == [child.id]  # the SDK answered under the child Turn id
        history = sessions.subagents.items.list(subagent.id, session_id=session.id, order="asc").data
        assert {"function_call", "function_call_output"} <= {i.type for i in history}
        assert {i.turn_id for i in history} == {child.id}
        assert [t.id for t in sessions.turns.list(session.id).data] == [final.turn_id]
        children = [r for r in machine.requests() if r.get("headers", {}).get("x-claude-code-agent-id")]
        assert children  # the child's model requests are marked as the child's
    finally:
        machine.stop()


def test_cancel_while_a_claude_code_childs_call_is_pending_abandons_it(local_stack, runtime_process, tmp_path):
    client = tenant_client(local_stack, "acme-claude-subagent-cancel")
    sessions = client.beta.agents.sessions
    session = sessions.create(environment={"type": "self_hosted", "workspace_directory": str(tmp_path)},
                              agent={"model": "claude-sonnet-4-5", "tools": [FN], "multi_agent": {"enabled": True}},
                              extra_body={"x_agents_core": {"harness": "claude_code"}})
    root = tmp_path / "machine"
    root.mkdir()
    machine = EnrolledRuntime(root, "claude_code", native=True)
    machine.connect(client, session, str(tmp_path))
    try:
        sessions.events.create(session.id, events=[{"type": "agent.session.input.message", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": SCRIPT}]}]}])
        action = wait_for(lambda: sessions.retrieve(session.id).required_actions, timeout=60)[0]
        subagent = sessions.subagents.list(session.id).data[0]
        child = sessions.subagents.turns.list(subagent.id, session_id=session.id).data[0]
        sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
        wait_for(lambda: sessions.turns.retrieve(action.turn_id, session_id=session.id).status == "cancelled"
                 and sessions.retrieve(session.id).status == "idle", timeout=60)
        assert sessions.subagents.turns.retrieve(child.id, session_id=session.id,
                                                 subagent_id=subagent.id).status == "cancelled"
        with pytest.raises(openai.ConflictError):
            sessions.events.create(session.id, events=[{"type": "agent.session.input.tool_result",
                                                        "turn_id": child.id, "call_id": action.call_id,
                                                        "success": True, "output": "late"}])
    finally:
        machine.stop()


def test_with_multi_agent_off_claude_codes_model_is_offered_no_agent_tool_on_a_workspace(local_stack, runtime_process,
                                                                                        tmp_path):
    client = tenant_client(local_stack, "acme-claude-no-subagents")
    sessions = client.beta.agents.sessions
    session = sessions.create(environment={"type": "self_hosted", "workspace_directory": str(tmp_path)},
                              agent={"model": "claude-sonnet-4-5", "tools": [FN]},  # multi_agent off (the default)
                              extra_body={"x_agents_core": {"harness": "claude_code"}})
    root = tmp_path / "machine"
    root.mkdir()
    machine = EnrolledRuntime(root, "claude_code", native=True)
    machine.connect(client, session, str(tmp_path))
    try:
        sessions.events.create(session.id, events=[{"type": "agent.session.input.message", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "say no children here"}]}]}])
        wait_for(lambda: sessions.retrieve(session.id).status == "idle"
                 and sessions.turns.list(session.id).data, timeout=60)
        sent = [r for r in machine.requests() if "no children here" in json.dumps(r["body"])]
        names = {t.get("name") for r in sent for t in r["body"].get("tools") or []}
        assert sent and "Bash" in names and not {"Agent", "Task"} & names
    finally:
        machine.stop()
