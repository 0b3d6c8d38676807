"""The Codex driver against recorded `codex app-server` exchanges (tests/unit/codex_replay.py): what it
sends Codex, and which observations it reports - receipts only for the native result we answered,
abandonment on interrupt or a call completed without our answer."""

from __future__ import annotations

import json
import pathlib
import sys
import time

import pytest

from runtime.harnesses.codex.driver import CodexDriver, CodexUnavailable, Provider, find_codex, result_content
from runtime.protocol import TurnChannel

REPLAY = pathlib.Path(__file__).with_name("codex_replay.py")
CALL = "call_acf156658351471fafa68aa2"
SCHEMA = {"type": "object", "properties": {"t": {"type": "string"}}, "required": ["t"]}
FN = {"type": "function", "name": "get_weather", "description": "Weather", "defer_loading": True,
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


@pytest.fixture
def replay(tmp_path, monkeypatch):
    binary = tmp_path / "codex"
    binary.write_text(f"#!/bin/sh\nexec {sys.executable} {REPLAY} \"$@\"\n")
    binary.chmod(0o755)
    log = tmp_path / "exchange.jsonl"
    monkeypatch.setenv("FAKE_CODEX_LOG", str(log))

    def make(scenario: str, loaded: dict | None = None) -> tuple[CodexDriver, pathlib.Path]:
        monkeypatch.setenv("FAKE_CODEX_SCENARIO", scenario)
        monkeypatch.setenv("FAKE_CODEX_LOADED", json.dumps(loaded or {}))
        driver = CodexDriver(Provider("scripted", "http://127.0.0.1:9/v1"), str(tmp_path / "state"), binary=str(binary))
        drivers.append(driver)
        return driver, log

    drivers: list[CodexDriver] = []
    yield make
    for driver in drivers:
        driver.close()


def start_message(tools=None, schema=None, turn_id="turn_1"):
    agent = {"model": "gpt-5", "tools": tools if tools is not None else [FN], "reasoning": None, "service_tier": None,
             "text": {"format": {"type": "json_schema", "schema": schema} if schema else {"type": "text"},
                      "verbosity": None}}
    return {"type": "turn.start", "tenant": "t", "session_id": "sess_1", "turn_id": turn_id, "harness": "codex",
            "agent": agent, "environment": {"type": "none"}, "execution_controls": {},
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "weather?"}]}]}


class Recorder:
    def __init__(self):
        self.sent: list[dict] = []

    def __call__(self, message: dict) -> None:
        if message["action"] == "turn.batch":
            self.sent += message["observations"]
        else:
            self.sent.append(message)

    def actions(self) -> list[str]:
        return [m["action"] for m in self.sent if m["action"] != "turn.heartbeat"]

    def wait(self, action: str, timeout: float = 10.0) -> dict:
        end = time.time() + timeout
        while time.time() < end:
            found = [m for m in self.sent if m["action"] == action]
            if found:
                return found[-1]
            time.sleep(0.01)
        raise AssertionError(f"{action} not observed; saw {self.actions()}")


def run(driver, start):
    recorder = Recorder()
    channel = TurnChannel(start, recorder, heartbeat_seconds=30)
    return driver.start_turn(start, channel), channel, recorder


def exchange(log: pathlib.Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_round_trip_answers_the_native_call_unchanged_and_receipts_after_the_native_result(replay):
    driver, log = replay("round_trip")
    assert driver.engine == "codex 0.163.0-replay"
    handle, channel, recorder = run(driver, start_message(schema=SCHEMA))
    call = recorder.wait("turn.function_call")
    assert (call["call_id"], call["name"], call["arguments"]) == (CALL, "get_weather", {"city": "Paris"})
    assert "turn.tool_result.applied" not in recorder.actions()  # nothing applied before our answer
    handle.deliver_result(CALL, {"success": True, "output": "sunny"})
    handle.deliver_result(CALL, {"success": True, "output": "sunny"})  # a redelivery: a no-op
    assert channel.done.wait(10)
    sent = exchange(log)
    answers = [m for m in sent if "method" not in m]
    assert answers == [{"id": 0, "result": {"success": True, "contentItems": [{"type": "inputText", "text": "sunny"}]}}]
    thread = next(m for m in sent if m.get("method") == "thread/start")["params"]
    assert thread["approvalPolicy"] == "never" and thread["ephemeral"] is False
    assert thread["dynamicTools"] == [{"type": "function", "name": "get_weather", "description": "Weather",
                                       "inputSchema": FN["parameters"], "deferLoading": True}]
    turn = next(m for m in sent if m.get("method") == "turn/start")["params"]
    assert turn["outputSchema"] == SCHEMA  # unchanged, on the root Turn
    assert recorder.actions() == ["turn.item.added", "turn.output_text.delta", "turn.item.done", "turn.function_call",
                                  "turn.tool_result.applied", "turn.item.added", "turn.output_text.delta",
                                  "turn.item.done", "turn.completed"]
    done = [m["item"] for m in recorder.sent if m["action"] == "turn.item.done"]
    # A message of unknown phase is commentary when something follows it, the final answer when last.
    assert [(d["phase"], d["content"][0]["text"]) for d in done] == [("commentary", "Checking."),
                                                                    ("final_answer", "It is sunny.")]
    assert [m["seq"] for m in recorder.sent] == list(range(1, len(recorder.sent) + 1))


def test_interrupt_abandons_the_pending_call_and_cancels_the_turn(replay):
    driver, log = replay("interrupt")
    handle, channel, recorder = run(driver, start_message())
    recorder.wait("turn.function_call")
    handle.cancel()
    assert channel.done.wait(10)
    assert recorder.actions()[-2:] == ["turn.call.abandoned", "turn.cancelled"]
    assert "turn.tool_result.applied" not in recorder.actions()
    assert any(m.get("method") == "turn/interrupt" for m in exchange(log))


def test_a_call_completed_without_our_answer_is_abandoned_never_a_receipt(replay):
    driver, log = replay("abandon")
    handle, channel, recorder = run(driver, start_message())
    assert channel.done.wait(10)
    assert "turn.call.abandoned" in recorder.actions() and "turn.tool_result.applied" not in recorder.actions()
    assert recorder.actions()[-1] == "turn.completed"
    handle.deliver_result(CALL, {"success": True, "output": "late"})  # after abandonment: nothing is sent
    time.sleep(0.2)
    assert not [m for m in exchange(log) if "method" not in m]


def test_a_failed_native_turn_fails_with_the_native_reason(replay):
    driver, _ = replay("failed")
    _, channel, recorder = run(driver, start_message())
    assert channel.done.wait(10)
    failed = recorder.wait("turn.failed")
    assert "The model is unavailable today." in failed["error"]["message"]


def test_a_declared_mcp_server_missing_from_the_loaded_configuration_fails_the_start_before_the_thread(replay):
    mcp = {"type": "mcp", "server_label": "tickets", "allowed_tools": None, "required": False,
           "transport": {"type": "http", "server_url": "https://mcp.example.com/mcp", "headers": {}}}
    driver, log = replay("round_trip", loaded={"mcp_servers": {}})
    _, channel, recorder = run(driver, start_message(tools=[FN, mcp]))
    assert channel.done.wait(10)
    assert "Declared MCP server 'tickets' is missing" in recorder.wait("turn.failed")["error"]["message"]
    assert not any(m.get("method") in ("thread/start", "turn/start") for m in exchange(log))


def test_a_changed_mcp_url_in_the_loaded_configuration_fails_the_start(replay):
    mcp = {"type": "mcp", "server_label": "tickets", "allowed_tools": None, "required": True,
           "transport": {"type": "http", "server_url": "https://mcp.example.com/mcp", "headers": {}}}
    loaded = {"mcp_servers": {"tickets": {"url": "https://evil.example.com/mcp"}}}
    driver, log = replay("round_trip", loaded=loaded)
    _, channel, recorder = run(driver, start_message(tools=[FN, mcp]))
    assert channel.done.wait(10)
    assert "changed 'url'" in recorder.wait("turn.failed")["error"]["message"]
    assert not any(m.get("method") == "thread/start" for m in exchange(log))


def test_results_become_native_content_items_unchanged():
    assert result_content({"success": True, "output": "a\nb"}) == [{"type": "inputText", "text": "a\nb"}]
    assert result_content({"success": True, "output": [
        {"type": "input_text", "text": "see"}, {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}) \
        == [{"type": "inputText", "text": "see"}, {"type": "inputImage", "imageUrl": "data:image/png;base64,AAAA"}]
    assert result_content({"success": False, "error": "boom"}) == [{"type": "inputText", "text": "boom"}]


def test_a_missing_binary_is_a_clear_start_error(tmp_path):
    with pytest.raises(CodexUnavailable, match="not an executable"):
        find_codex(str(tmp_path / "nope"))
