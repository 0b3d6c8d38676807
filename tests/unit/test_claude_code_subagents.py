"""Issue 25: the Claude Code driver reports a child agent (the `Agent` tool) as a Subagent. The messages are the
CLI's stream-json shapes (claude-agent-sdk 0.2.189 / Claude Code 2.1.332, as listed in
../shared/notes/native-subagents.md), parsed with the SDK's own `parse_message`: `task_started` opens the
Subagent and a minted child Turn, child messages (`parent_tool_use_id` = the Agent call) are the child's Items,
a child's call of a caller function names the child Turn, `task_notification` / `task_updated` end it."""

from __future__ import annotations

import asyncio

from claude_agent_sdk._internal.message_parser import parse_message

from runtime.harnesses.claude_code.driver import ClaudeTurn
from runtime.harnesses.claude_code.session import Provider, sdk_options
from runtime.protocol import TurnChannel
from tests.unit.test_claude_code_driver import Recorder, _Session, start_message

AGENT_USE = "toolu_agent_1"  # the root's Agent tool use
CHILD_USE = "toolu_child_call"  # the child's call of mcp__functions__get_weather
TASK = "a1b2c3d4e5"


def cli(*raw):
    return [parse_message(r) for r in raw]


def root_spawn():
    return {"type": "assistant", "parent_tool_use_id": None, "session_id": "native", "message": {
        "id": "msg_root_1", "model": "m", "role": "assistant", "content": [
            {"type": "tool_use", "id": AGENT_USE, "name": "Agent", "input": {
                "description": "weather", "prompt": "call get_weather {}", "subagent_type": "general-purpose",
                "run_in_background": False}}]}}


def task_started():
    return {"type": "system", "subtype": "task_started", "task_id": TASK, "tool_use_id": AGENT_USE,
            "description": "weather", "uuid": "u1", "session_id": "native", "task_type": "local_agent",
            "prompt": "call get_weather {}", "subagent_type": "general-purpose"}


def child_message(*content):
    return {"type": "assistant", "parent_tool_use_id": AGENT_USE, "session_id": "native", "message": {
        "id": "msg_child_1", "model": "m", "role": "assistant", "content": list(content)}}


def task_notification(status):
    return {"type": "system", "subtype": "task_notification", "task_id": TASK, "tool_use_id": AGENT_USE,
            "status": status, "output_file": "", "summary": "done", "uuid": "u2", "session_id": "native"}


def turn():
    rec = Recorder()
    start = start_message()
    return ClaudeTurn(_Session(), start, TurnChannel(start, rec, heartbeat_seconds=30)), rec  # type: ignore[arg-type]


def feed(t, messages):
    for message in messages:
        t.on_message(message)


def test_a_child_task_is_a_subagent_with_a_minted_child_turn_and_its_text_and_call_are_the_childs():
    t, rec = turn()
    feed(t, cli(root_spawn(), task_started(),
                child_message({"type": "text", "text": "checking"},
                              {"type": "tool_use", "id": CHILD_USE, "name": "mcp__functions__get_weather",
                               "input": {}})))

    async def call_and_answer():
        pending = asyncio.ensure_future(t.on_tool_call(CHILD_USE, "get_weather", {}))
        await asyncio.sleep(0)
        await t._answer(CHILD_USE, {"success": True, "output": "sunny"})
        return await pending

    assert asyncio.run(call_and_answer()) == {"success": True, "output": "sunny"}
    feed(t, cli({"type": "user", "parent_tool_use_id": AGENT_USE, "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": CHILD_USE, "content": "sunny", "is_error": False}]}},
        task_notification("completed")))
    assert rec.actions() == ["turn.subagent.opened", "turn.subagent.turn.started", "turn.item.added",
                             "turn.item.done", "turn.function_call", "turn.tool_result.applied",
                             "turn.subagent.turn.ended", "turn.subagent.closed"]
    sent = {m["action"]: m for m in rec.sent}
    assert (sent["turn.subagent.opened"]["subagent_id"], sent["turn.subagent.opened"]["name"],
            sent["turn.subagent.opened"]["instructions"]) == (TASK, "weather", "call get_weather {}")
    child_turn = sent["turn.subagent.turn.started"]["child_turn_id"]
    assert sent["turn.function_call"]["child_turn_id"] == child_turn
    assert sent["turn.item.done"]["child_turn_id"] == child_turn
    assert sent["turn.item.done"]["item"]["content"][0]["text"] == "checking"
    assert sent["turn.subagent.turn.ended"]["status"] == "completed"
    assert sent["turn.subagent.closed"]["subagent_id"] == TASK


def test_a_killed_child_ends_cancelled_and_a_root_call_stays_the_roots():
    t, rec = turn()
    feed(t, cli(task_started()))

    async def root_call():
        t.tool_uses["toolu_root"] = "mcp__functions__get_weather"  # the root made this one
        pending = asyncio.ensure_future(t.on_tool_call("toolu_root", "get_weather", {}))
        await asyncio.sleep(0)
        pending.cancel()

    asyncio.run(root_call())
    feed(t, cli({"type": "system", "subtype": "task_updated", "task_id": TASK, "patch": {"status": "killed"}},
                task_notification("stopped")))  # both arrive; the child ends once
    call = next(m for m in rec.sent if m["action"] == "turn.function_call")
    assert "child_turn_id" not in call
    ended = [m for m in rec.sent if m["action"] == "turn.subagent.turn.ended"]
    assert [m["status"] for m in ended] == ["cancelled"]


def test_sdk_options_forward_the_subagents_text(tmp_path):
    options = sdk_options(start_message(), Provider("scripted", "http://127.0.0.1:9"), None,
                          config_dir=tmp_path, cwd=tmp_path, binary="claude")
    assert options.forward_subagent_text is True


def result(uuids, text="done"):
    from claude_agent_sdk import ResultMessage

    return ResultMessage(subtype="success", duration_ms=1, duration_api_ms=1, is_error=False, num_turns=1,
                         session_id="native", result=text, user_message_uuids=uuids)


def test_a_background_child_keeps_the_turn_open_through_the_native_turn_claude_code_starts_when_it_finishes():
    """Real models default to run_in_background: the Agent call returns at once, the native result arrives
    while the child runs, and Claude Code answers the child's notification in a native turn of its own."""
    t, rec = turn()
    t.sent.append("u-input")
    background = {**root_spawn()}
    background["message"] = {**background["message"], "content": [{**background["message"]["content"][0], "input": {
        **background["message"]["content"][0]["input"], "run_in_background": True}}]}
    feed(t, cli(background, task_started(), {"type": "user", "parent_tool_use_id": None, "message": {
        "role": "user", "content": [{"type": "tool_result", "tool_use_id": AGENT_USE, "content": "launched"}]}}))
    t.on_message(result(["u-input"], "started it"))
    assert "turn.completed" not in rec.actions()  # the child still runs: the Turn stays open
    feed(t, cli(child_message({"type": "text", "text": "checking"}), task_notification("completed"),
                {"type": "assistant", "parent_tool_use_id": None, "session_id": "native", "message": {
                    "id": "msg_root_2", "model": "m", "role": "assistant",
                    "content": [{"type": "text", "text": "root done"}]}}))
    t.on_message(result(["u-notification"], "root done"))  # Claude Code's own turn, taking in the notification
    actions = rec.actions()
    assert actions[-1] == "turn.completed" and actions.count("turn.completed") == 1
    done = [m["item"] for m in rec.sent if m["action"] == "turn.item.done" and "child_turn_id" not in m]
    assert [(d["phase"], d["content"][0]["text"]) for d in done] == [("final_answer", "root done")]
    assert actions.index("turn.subagent.turn.ended") < actions.index("turn.completed")


def test_a_childs_call_of_a_declared_mcp_server_is_an_mcp_call_item_in_the_childs_history():
    rec = Recorder()
    mcp = {"type": "mcp", "server_label": "tickets", "allowed_tools": None, "required": False,
           "transport": {"type": "http", "server_url": "https://mcp.example.com/mcp", "headers": {}}}
    start = start_message(tools=[mcp])
    t = ClaudeTurn(_Session(), start, TurnChannel(start, rec, heartbeat_seconds=30))  # type: ignore[arg-type]
    feed(t, cli(task_started(), child_message({"type": "tool_use", "id": "toolu_mcp", "name": "mcp__tickets__lookup",
                                               "input": {"id": 7}}),
                {"type": "user", "parent_tool_use_id": AGENT_USE, "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_mcp", "content": "open", "is_error": False}]}}))
    child_turn = next(m for m in rec.sent if m["action"] == "turn.subagent.turn.started")["child_turn_id"]
    added = next(m for m in rec.sent if m["action"] == "turn.item.added")
    done = next(m for m in rec.sent if m["action"] == "turn.item.done")
    assert added["child_turn_id"] == child_turn and added["item"]["type"] == "mcp_call"
    assert (added["item"]["server_label"], added["item"]["name"]) == ("tickets", "lookup")
    assert done["item"]["status"] == "completed" and done["item"]["output"] == "open"
