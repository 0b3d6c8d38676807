"""The scripted model provider's Anthropic Messages dialect: the script language played as Claude Code's
model, on request bodies shaped as Claude Code 2.1.332 sends them (system-role environment message, system
reminders beside the prompt, "\\n" appended to text tool results, steering inside a tool result)."""

from __future__ import annotations

import json
import urllib.request

from runtime.providers import ScriptedProvider
from runtime.providers.anthropic import plan_blocks

FN = {"name": "mcp__functions__get_weather", "description": "Weather", "input_schema": {"type": "object"}}
PLACEHOLDER = {"name": "DeferredToolPlaceholder", "description": "", "input_schema": {"type": "object"},
               "defer_loading": True}
TOOL_SEARCH = {"name": "ToolSearch", "description": "", "input_schema": {"type": "object"}}
STRUCTURED = {"name": "StructuredOutput", "description": "", "input_schema": {"type": "object"}}
REMINDER = {"type": "text", "text": "<system-reminder>\nToday's date is 2026-12-03.\n</system-reminder>\n"}


def body(script, tools, *turns):
    return {"model": "claude-sonnet-4-5", "tools": tools, "messages": [
        {"role": "user", "content": [REMINDER, {"type": "text", "text": script}]},
        {"role": "system", "content": "# Environment\nsay not a script"}, *turns]}


def tool_use(block_id, name, arguments=None):
    return {"role": "assistant", "content": [{"type": "tool_use", "id": block_id, "name": name,
                                              "input": arguments or {}}]}


def tool_result(block_id, text, *extra):
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block_id,
                                         "content": [{"type": "text", "text": text + "\n"}, REMINDER]}, *extra]}


def test_call_is_a_tool_use_of_the_declared_function_then_the_script_continues():
    script = 'say Checking.\ncall get_weather {"city": "Paris"}\nsay Sunny.'
    _, blocks, stop = plan_blocks(body(script, [PLACEHOLDER, FN]))
    assert [b["type"] for b in blocks] == ["text", "tool_use"] and stop == "tool_use"
    assert (blocks[1]["name"], blocks[1]["input"]) == ("mcp__functions__get_weather", {"city": "Paris"})
    _, blocks, stop = plan_blocks(body(script, [PLACEHOLDER, FN], tool_use("t1", FN["name"]),
                                       tool_result("t1", "sunny")))
    assert blocks == [{"type": "text", "text": "Sunny."}] and stop == "end_turn"


def test_a_deferred_function_is_loaded_through_tool_search_first():
    script = "say Looking.\ncall get_weather {}\nsay done"
    _, blocks, _ = plan_blocks(body(script, [PLACEHOLDER, TOOL_SEARCH]))
    assert blocks[-1]["name"] == "ToolSearch"
    assert blocks[-1]["input"]["query"] == "select:mcp__functions__get_weather"
    loaded = {**FN, "defer_loading": True}
    after_search = [tool_use("s1", "ToolSearch"), {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "s1", "content": [{"type": "tool_reference",
                                                                  "tool_name": FN["name"]}]},
        {"type": "text", "text": "Tool loaded."}]}]
    _, blocks, _ = plan_blocks(body(script, [TOOL_SEARCH, PLACEHOLDER, loaded], *after_search))
    assert [(b["type"], b.get("name")) for b in blocks] == [("tool_use", FN["name"])]  # "Looking." said once


def test_answer_calls_structured_output_when_offered_and_ends_after_its_result():
    script = 'say Thinking.\nanswer {"t": "x"}'
    _, blocks, _ = plan_blocks(body(script, [STRUCTURED]))
    assert [(b["type"], b.get("name"), b.get("input")) for b in blocks] == [
        ("text", None, None), ("tool_use", "StructuredOutput", {"t": "x"})]
    _, blocks, stop = plan_blocks(body(script, [STRUCTURED], tool_use("o1", "StructuredOutput"),
                                       tool_result("o1", "Structured output provided successfully")))
    assert blocks == [] and stop == "end_turn"
    _, blocks, _ = plan_blocks(body(script, [FN]))
    assert blocks[-1] == {"type": "text", "text": '{"t": "x"}'}  # plain text when not offered


def test_a_new_prompt_after_a_structured_result_is_the_next_script():
    turns = [tool_use("o1", "StructuredOutput"), {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "o1", "content": "Structured output provided successfully"},
        {"type": "text", "text": 'answer {"t": "y"}'},
        {"type": "text", "text": "[structured-output-enforce] You MUST call the StructuredOutput tool."}]}]
    _, blocks, _ = plan_blocks(body('answer {"t": "x"}', [STRUCTURED], *turns))
    assert blocks[-1]["input"] == {"t": "y"}


def test_steering_inside_a_tool_result_replaces_the_script():
    steered = {"type": "text", "text": "<system-reminder>\nThe user sent a new message while you were working:\n"
                                       "say steered answer\n\nThis is how Claude Code surfaces messages the user "
                                       "sends mid-turn.\n</system-reminder>\n"}
    turn = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                         "content": [{"type": "text", "text": "ok\n"}, steered]}]}
    _, blocks, _ = plan_blocks(body("call get_weather {}\nsay not steered", [FN], tool_use("t1", FN["name"]), turn))
    assert blocks == [{"type": "text", "text": "steered answer"}]


def test_a_steered_message_in_its_own_system_reminder_is_the_script():
    steered = {"type": "text", "text": "<system-reminder>\nThe user sent a new message while you were working:\n"
                                       "say late steer\n</system-reminder>"}
    turn = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok\n"}, steered]}
    _, blocks, _ = plan_blocks(body("call get_weather {}\nsay not steered", [FN], tool_use("t1", FN["name"]), turn))
    assert blocks == [{"type": "text", "text": "late steer"}]


def test_the_provider_streams_sse_logs_every_request_and_fail_is_an_http_error(tmp_path):
    log = tmp_path / "provider.jsonl"
    provider = ScriptedProvider(log_path=str(log)).start()
    try:
        def post(script):
            request = urllib.request.Request(provider.base_url + "/v1/messages?beta=true", method="POST",
                                             data=json.dumps(body(script, [FN])).encode(),
                                             headers={"content-type": "application/json"})
            return urllib.request.urlopen(request, timeout=5)  # noqa: S310 - loopback
        text = post("say hi").read().decode()
        events = [line[7:] for line in text.splitlines() if line.startswith("event: ")]
        assert events == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                          "message_delta", "message_stop"]
        assert '"text_delta", "text": "hi"' in text and '"stop_reason": "end_turn"' in text
        try:
            post("fail nope")
            raise AssertionError("expected an HTTP error")
        except urllib.error.HTTPError as err:
            assert err.code == 400 and json.loads(err.read())["error"]["message"] == "nope"
        logged = [json.loads(line) for line in log.read_text().splitlines()]
        assert [entry["path"] for entry in logged] == ["/v1/messages?beta=true"] * 2
    finally:
        provider.stop()
