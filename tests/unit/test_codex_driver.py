"""The Codex driver against recorded `codex app-server` exchanges (tests/unit/codex_replay.py): what it
sends Codex, and which observations it reports - receipts only for the native result we answered,
abandonment on interrupt or a call completed without our answer."""

from __future__ import annotations

import json
import pathlib
import sys
import time

import pytest

from runtime.harnesses.codex.config import Provider
from runtime.harnesses.codex.driver import CodexDriver, CodexUnavailable, find_codex, result_content
from runtime.protocol import TurnChannel

REPLAY = pathlib.Path(__file__).with_name("codex_replay.py")
CALL = "call_acf156658351471fafa68aa2"
SCHEMA = {"type": "object", "properties": {"t": {"type": "string"}}, "required": ["t"]}
FN = {"type": "function", "name": "get_weather", "description": "Weather", "defer_loading": True,
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


# The shape `codex debug models --bundled` prints (two of its 11 models, the fields that decide tools).
CATALOG = {"models": [
    {"slug": "gpt-5.5", "tool_mode": None, "multi_agent_version": None, "experimental_supported_tools": [],
     "supports_search_tool": True, "use_responses_lite": False},
    {"slug": "gpt-6-sol", "tool_mode": "code_mode_only", "multi_agent_version": "v2",
     "experimental_supported_tools": ["send_user_message_async", "clock"], "supports_search_tool": True,
     "use_responses_lite": True}]}


@pytest.fixture
def replay(tmp_path, monkeypatch):
    binary = tmp_path / "codex"
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps(CATALOG))
    binary.write_text(f"#!/bin/sh\n[ \"$1 $2 $3\" = \"debug models --bundled\" ] && exec cat {catalog}\n"
                      f"exec {sys.executable} {REPLAY} \"$@\"\n")
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


def start_message(tools=None, schema=None, turn_id="turn_1", environment=None, session_id="sess_1"):
    agent = {"model": "gpt-5", "tools": tools if tools is not None else [FN], "reasoning": None, "service_tier": None,
             "text": {"format": {"type": "json_schema", "schema": schema} if schema else {"type": "text"},
                      "verbosity": None}, "multi_agent": {"enabled": False, "max_concurrent_subagents": None}}
    return {"type": "turn.start", "tenant": "t", "session_id": session_id, "turn_id": turn_id, "harness": "codex",
            "agent": agent, "environment": environment or {"type": "none"}, "execution_controls": {},
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


# ---- Native tools follow the placement -------------------------------------------------------------

def config_toml(driver, session_id="sess_1") -> dict:
    import tomllib

    return tomllib.loads((driver.state_dir / session_id / "home" / "config.toml").read_text())


def test_on_none_every_turn_start_carries_empty_environments_and_the_session_catalog(replay):
    driver, log = replay("round_trip")
    ptc_off = {"type": "programmatic_tool_calling", "enabled": False}
    handle, channel, recorder = run(driver, start_message(tools=[FN, ptc_off]))
    recorder.wait("turn.function_call")
    handle.deliver_result(CALL, {"success": True, "output": "sunny"})
    assert channel.done.wait(10)
    turn = next(m for m in exchange(log) if m.get("method") == "turn/start")["params"]
    assert turn["environments"] == []  # "Empty disables environment access"
    native = config_toml(driver)
    assert native["agents"] == {"enabled": False} and native["features"]["goals"] is False
    assert native["tools"]["experimental_request_user_input"] == {"enabled": False}
    assert "web_search" not in native  # an omitted control keeps Codex's native web search (issue 37, item 1)
    catalog = json.loads(pathlib.Path(native["model_catalog_json"]).read_text())
    assert [m["slug"] for m in catalog["models"]] == ["gpt-5.5", "gpt-6-sol"]
    for model in catalog["models"]:  # every model Codex knows, not only the Session's
        assert (model["tool_mode"], model["multi_agent_version"], model["experimental_supported_tools"],
                model["supports_search_tool"]) == (None, None, [], False)
    assert catalog["models"][1]["use_responses_lite"] is True  # nothing else changes


def test_a_resumed_thread_gets_empty_environments_again(replay):
    driver, log = replay("abandon")
    _, channel, _ = run(driver, start_message())
    assert channel.done.wait(10)
    driver.submit(driver.sessions["sess_1"].stop()).result(10)  # the process goes; the thread stays
    _, channel, _ = run(driver, start_message(turn_id="turn_2"))
    assert channel.done.wait(10)
    sent = exchange(log)
    assert [m["method"] for m in sent if m.get("method") in ("thread/start", "thread/resume")] == [
        "thread/start", "thread/resume"]
    assert [m["params"].get("environments") for m in sent if m.get("method") == "turn/start"] == [[], []]


def test_a_workspace_session_keeps_the_native_tool_set(replay, tmp_path):
    driver, log = replay("abandon")
    workspace = {"type": "self_hosted", "workspace_directory": str(tmp_path)}
    _, channel, _ = run(driver, start_message(environment=workspace))
    assert channel.done.wait(10)
    turn = next(m for m in exchange(log) if m.get("method") == "turn/start")["params"]
    assert "environments" not in turn  # the thread's own environment: exec_command, apply_patch, ...
    native = config_toml(driver)
    assert not {"web_search", "model_catalog_json"} & set(native)
    assert native["agents"] == {"enabled": False}  # only multi_agent (off here) changes the subagent tools
    assert "goals" not in native["features"] and "tools" not in native


def test_programmatic_tool_calling_false_on_a_workspace_still_gets_a_catalog_without_code_mode(replay, tmp_path):
    driver, _ = replay("abandon")
    workspace = {"type": "self_hosted", "workspace_directory": str(tmp_path)}
    start = start_message(tools=[FN, {"type": "programmatic_tool_calling", "enabled": False}], environment=workspace)
    _, channel, _ = run(driver, start)
    assert channel.done.wait(10)
    catalog = json.loads(pathlib.Path(config_toml(driver)["model_catalog_json"]).read_text())
    sol = catalog["models"][1]
    assert (sol["tool_mode"], sol["multi_agent_version"]) == (None, None)
    assert sol["experimental_supported_tools"] == ["send_user_message_async", "clock"]  # workspace: native
    assert sol["supports_search_tool"] is True


def test_sessions_with_the_same_overrides_share_one_catalog_file(replay):
    driver, _ = replay("abandon")
    for session_id in ("sess_a", "sess_b"):
        _, channel, _ = run(driver, start_message(session_id=session_id))
        assert channel.done.wait(10)
    assert config_toml(driver, "sess_a")["model_catalog_json"] == config_toml(driver, "sess_b")["model_catalog_json"]
    assert len(list((driver.state_dir / "model_catalogs").glob("*.json"))) == 1


def test_a_binary_without_a_bundled_catalog_fails_a_none_session_with_the_reason(tmp_path, monkeypatch):
    binary = tmp_path / "codex"
    binary.write_text(f"#!/bin/sh\nexec {sys.executable} {REPLAY} \"$@\"\n")  # prints no catalog
    binary.chmod(0o755)
    monkeypatch.setenv("FAKE_CODEX_LOG", str(tmp_path / "exchange.jsonl"))
    driver = CodexDriver(Provider("scripted", "http://127.0.0.1:9/v1"), str(tmp_path / "state"), binary=str(binary))
    try:
        _, channel, recorder = run(driver, start_message())
        assert channel.done.wait(10)
        message = recorder.wait("turn.failed")["error"]["message"]
        assert "needs Codex's model catalog" in message and "debug models --bundled" in message
        assert not (tmp_path / "exchange.jsonl").exists()  # no native process started
    finally:
        driver.close()
