"""Issue 25: the Codex driver routes `codex app-server` notifications by thread (tests/unit/codex_subagent_replay.py):
a child thread known from the root's `collabAgentToolCall` (`spawnAgent`, `receiverThreadIds`) or from
`turn/started` with our `rootTurnId` is a Subagent, its turns child Turns, its messages and calls carry
`child_turn_id`; a thread this Turn does not run is never published as the root's; a cancel interrupts the
child's turn first, then the root's."""

from __future__ import annotations

import json
import pathlib
import sys
import time

import pytest

from runtime.harnesses.codex.config import Provider
from runtime.harnesses.codex.driver import CodexDriver
from tests.unit.test_codex_driver import exchange, run, start_message

REPLAY = pathlib.Path(__file__).with_name("codex_subagent_replay.py")


@pytest.fixture
def replay(tmp_path, monkeypatch):
    binary = tmp_path / "codex"
    binary.write_text(f"#!/bin/sh\n[ \"$1\" = \"debug\" ] && echo '{{\"models\": []}}' && exit 0\n"
                      f"exec {sys.executable} {REPLAY} \"$@\"\n")
    binary.chmod(0o755)
    log = tmp_path / "exchange.jsonl"
    monkeypatch.setenv("FAKE_CODEX_LOG", str(log))
    drivers: list[CodexDriver] = []

    def make(scenario: str) -> tuple[CodexDriver, pathlib.Path]:
        monkeypatch.setenv("FAKE_CODEX_SCENARIO", scenario)
        driver = CodexDriver(Provider("scripted", "http://127.0.0.1:9/v1"), str(tmp_path / "state"), binary=str(binary))
        drivers.append(driver)
        return driver, log

    yield make
    for driver in drivers:
        driver.close()


def multi_agent_start():
    start = start_message()
    start["agent"]["multi_agent"] = {"enabled": True, "max_concurrent_subagents": 2}
    return start


def test_a_child_thread_is_a_subagent_and_its_call_names_the_child_turn(replay):
    driver, log = replay("subagent")
    handle, channel, recorder = run(driver, multi_agent_start())
    call = recorder.wait("turn.function_call")
    assert (call["call_id"], call["child_turn_id"]) == ("call_child_1", "turn-child")
    handle.deliver_result("call_child_1", {"success": True, "output": "sunny"})
    assert channel.done.wait(10)
    assert recorder.actions() == [
        "turn.item.added", "turn.output_text.delta", "turn.item.done",  # the root's commentary
        "turn.subagent.opened", "turn.subagent.turn.started",
        "turn.item.added", "turn.item.done",  # the child's commentary, as the child's
        "turn.function_call", "turn.tool_result.applied",
        "turn.item.added", "turn.item.done", "turn.subagent.turn.ended",
        "turn.item.added", "turn.output_text.delta", "turn.item.done", "turn.completed"]
    sent = {m["action"]: m for m in recorder.sent}
    assert {k: v for k, v in sent["turn.subagent.opened"].items() if k in ("subagent_id", "parent_subagent_id", "instructions")} == {
        "subagent_id": "thread-child", "instructions": "call get_weather {}"}
    assert sent["turn.subagent.turn.started"]["child_turn_id"] == "turn-child"
    assert sent["turn.subagent.turn.ended"]["status"] == "completed"
    child_items = [m for m in recorder.sent if m.get("child_turn_id") == "turn-child" and "item" in m]
    assert [m["item"]["id"] for m in child_items] == ["msg_child_c", "msg_child_c", "msg_child", "msg_child"]
    deltas = [m for m in recorder.sent if m["action"] == "turn.output_text.delta"]
    assert {d["item_id"] for d in deltas} == {"msg_spawn", "msg_root"}  # no child text as the root's
    answers = [m for m in exchange(log) if "method" not in m]
    assert answers == [{"id": 0, "result": {"success": True, "contentItems": [{"type": "inputText", "text": "sunny"}]}}]


def test_cancel_interrupts_the_child_turn_first_then_the_root_and_abandons_the_childs_call(replay):
    driver, log = replay("subagent_cancel")
    handle, channel, recorder = run(driver, multi_agent_start())
    recorder.wait("turn.function_call")
    handle.cancel()
    assert channel.done.wait(10)
    interrupts = [m["params"] for m in exchange(log) if m.get("method") == "turn/interrupt"]
    assert interrupts == [{"threadId": "thread-child", "turnId": "turn-child"},
                          {"threadId": "thread-root", "turnId": "turn-root"}]
    assert recorder.actions()[-3:] == ["turn.call.abandoned", "turn.subagent.turn.ended", "turn.cancelled"]
    assert {m["action"]: m for m in recorder.sent}["turn.subagent.turn.ended"]["status"] == "cancelled"
    assert "turn.tool_result.applied" not in recorder.actions()


def test_a_thread_this_turn_does_not_run_is_never_published_as_the_roots(replay):
    driver, log = replay("stranger")
    _, channel, recorder = run(driver, multi_agent_start())
    assert channel.done.wait(10)
    assert recorder.actions() == ["turn.item.added", "turn.output_text.delta", "turn.item.done", "turn.completed"]
    assert json.dumps(recorder.sent).count("not yours") == 0
    end = time.time() + 5  # the call of the other thread is declined (asynchronously), never answered
    while not (declined := [m for m in exchange(log) if m.get("id") == 7 and "error" in m]) and time.time() < end:
        time.sleep(0.02)
    assert declined and "not available" in declined[0]["error"]["message"]


def test_a_root_turn_that_completes_while_its_child_runs_ends_when_the_child_does(replay):
    """"Without wait_agent the root turn can complete while a child still runs; the child's later calls still
    arrive": the Turn stays open for them."""
    driver, log = replay("detached")
    handle, channel, recorder = run(driver, multi_agent_start())
    call = recorder.wait("turn.function_call")
    assert call["child_turn_id"] == "turn-child" and "turn.completed" not in recorder.actions()
    handle.deliver_result("call_child_1", {"success": True, "output": "sunny"})
    assert channel.done.wait(10)
    actions = recorder.actions()
    assert actions[-3:] == ["turn.item.done", "turn.subagent.turn.ended", "turn.completed"]
    assert "turn.call.abandoned" not in actions and "turn.tool_result.applied" in actions
    done = [m["item"] for m in recorder.sent if m["action"] == "turn.item.done" and "child_turn_id" not in m]
    assert done[-1]["content"][0]["text"] == "root done" and done[-1]["phase"] == "final_answer"
