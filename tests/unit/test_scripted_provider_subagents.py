"""Issue 25: the scripted model provider's `spawn NAME` (an indented child script) and `wait NAME` steps, in both
dialects, as ../shared/notes/native-subagents.md describes what worked on Codex 0.163.0 and Claude Code 2.1.332;
and every logged request carries its headers (lower-case names, credentials redacted)."""

from __future__ import annotations

import json
import urllib.request

from runtime.providers import ScriptedProvider, anthropic, responses, script

ROOT = "say spawning\nspawn weather\n  call get_weather {\"city\": \"Paris\"}\n  answer child done\nwait weather\nanswer root done"
CHILD = 'call get_weather {"city": "Paris"}\nanswer child done'


class Handler:
    """What a dialect answers, as (event name, data) pairs."""

    def __init__(self):
        self.events: list[tuple[str, dict]] = []

    def start_sse(self):
        pass

    def event(self, name, data):
        self.events.append((name, data))

    def error(self, status, message):
        self.events.append(("error", {"status": status, "message": message}))

    def items(self):
        return [d["item"] for n, d in self.events if n == "response.output_item.done"]


def user(text):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def codex(*items):
    handler = Handler()
    responses.answer(handler, {"model": "gpt-5", "input": list(items)})
    return handler.items()


def test_spawn_takes_the_indented_lines_as_the_childs_script():
    steps = script.parse(ROOT)
    assert [(s.verb, s.name) for s in steps] == [("say", ""), ("spawn", "weather"), ("wait", "weather"),
                                                 ("answer", "")]
    assert steps[1].script == CHILD


def test_codex_spawn_is_spawn_agent_with_fork_context_and_wait_targets_the_spawned_agent():
    first = codex(user(ROOT))
    assert [i["type"] for i in first] == ["message", "function_call"]
    spawn = first[1]
    assert (spawn["namespace"], spawn["name"]) == ("multi_agent_v1", "spawn_agent")
    assert json.loads(spawn["arguments"]) == {"message": CHILD, "fork_context": True}
    spawned = {"type": "function_call_output", "call_id": spawn["call_id"],
               "output": json.dumps({"agent_id": "019e-child", "nickname": "Euclid"})}
    wait = codex(user(ROOT), spawn, spawned)[0]
    assert (wait["namespace"], wait["name"]) == ("multi_agent_v1", "wait_agent")
    assert json.loads(wait["arguments"]) == {"targets": ["019e-child"], "timeout_ms": 3600000}
    waited = {"type": "function_call_output", "call_id": wait["call_id"], "output": '{"status": {}}'}
    notification = user('<subagent_notification>\n{"agent_path": "/root/weather", "status": {"completed": '
                        '"child done"}}\n</subagent_notification>')  # never read as a script
    final = codex(user(ROOT), spawn, spawned, wait, waited, notification)
    assert [(i["type"], i["content"][0]["text"]) for i in final] == [("message", "root done")]


def test_a_codex_child_plays_its_own_script_its_latest_user_message():
    call = codex(user(ROOT), user(CHILD))  # fork_context: the parent's user messages come first
    assert [(i["name"], json.loads(i["arguments"])) for i in call] == [("get_weather", {"city": "Paris"})]


def claude(messages, tools=("mcp__functions__get_weather", "Agent")):
    body = {"model": "claude", "messages": messages,
            "tools": [{"name": t, "input_schema": {"type": "object"}} for t in tools]}
    _, blocks, stop = anthropic.plan_blocks(body)
    return blocks, stop


def test_claude_spawn_is_a_synchronous_agent_call_and_wait_is_nothing():
    blocks, stop = claude([{"role": "user", "content": ROOT}])
    assert stop == "tool_use" and [b["type"] for b in blocks] == ["text", "tool_use"]
    assert (blocks[1]["name"], blocks[1]["input"]) == ("Agent", {
        "description": "weather", "prompt": CHILD, "subagent_type": "general-purpose", "run_in_background": False})
    after = [{"role": "user", "content": ROOT},
             {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "Agent", "input": {}}]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "child done"}]}]
    blocks, stop = claude(after)
    assert stop == "end_turn" and [b["text"] for b in blocks] == ["root done"]


def test_a_claude_child_plays_its_prompt():
    blocks, _ = claude([{"role": "user", "content": CHILD}])
    assert [(b["name"], b["input"]) for b in blocks] == [("mcp__functions__get_weather", {"city": "Paris"})]


def test_every_logged_request_carries_its_headers_with_lower_case_names_and_no_credential(tmp_path):
    log = tmp_path / "provider.jsonl"
    provider = ScriptedProvider(str(log)).start()
    try:
        request = urllib.request.Request(
            f"{provider.base_url}/v1/responses", method="POST", data=json.dumps({"input": "say hi"}).encode(),
            headers={"Content-Type": "application/json", "X-OpenAI-Subagent": "collab_spawn",
                     "X-Codex-Parent-Thread-Id": "thread-root", "Authorization": "Bearer sk-secret"})
        urllib.request.urlopen(request, timeout=10).read()  # noqa: S310 - loopback
    finally:
        provider.stop()
    entry = json.loads(log.read_text().splitlines()[0])
    headers = entry["headers"]
    assert headers["x-openai-subagent"] == "collab_spawn" and headers["x-codex-parent-thread-id"] == "thread-root"
    assert all(name == name.lower() for name in headers)
    assert headers["authorization"] == "[redacted]" and "sk-secret" not in log.read_text()
