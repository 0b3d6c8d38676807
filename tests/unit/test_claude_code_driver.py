"""The Claude Code driver against a recorded Claude Agent SDK exchange (tests/unit/claude_code_replay.py):
what it gives the SDK and its `functions` MCP server, and which observations it reports - receipts only for
the native tool result that follows our answer, abandonment on interrupt, the StructuredOutput answer as
the native result.result."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from runtime.harnesses.claude_code.driver import ClaudeCodeDriver, ClaudeCodeUnavailable, ClaudeTurn, find_claude
from runtime.harnesses.claude_code.functions import FunctionsServer, result_content
from runtime.harnesses.claude_code.session import Provider, check_inventory, permission_callback, sdk_options
from runtime.harnesses.common import AdapterError
from runtime.protocol import TurnChannel
from tests.unit.claude_code_replay import ReplayClient, recorded

SCHEMA = {"type": "object", "properties": {"t": {"type": "string"}}, "required": ["t"]}
FN = {"type": "function", "name": "get_weather", "description": "Weather", "defer_loading": False,
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
PNG = "data:image/png;base64,iVBORw0KGgo="


@pytest.fixture
def driver(tmp_path):
    binary = tmp_path / "claude"
    binary.write_text("#!/bin/sh\necho '2.1.332 (Claude Code)'\n")
    binary.chmod(0o755)
    drivers: list[ClaudeCodeDriver] = []

    def make(scenario: str, **replay) -> ClaudeCodeDriver:
        d = ClaudeCodeDriver(Provider("scripted", "http://127.0.0.1:9"), str(tmp_path / "state"), binary=str(binary),
                             client_factory=ReplayClient.factory(scenario, **replay))
        drivers.append(d)
        return d

    ReplayClient.instances.clear()
    yield make
    for d in drivers:
        d.close()


def start_message(tools=None, schema=None, turn_id="turn_1", environment=None, text="weather?"):
    agent = {"model": "claude-sonnet-4-5", "tools": tools if tools is not None else [FN], "reasoning": None,
             "service_tier": None, "text": {"format": {"type": "json_schema", "schema": schema} if schema
                                            else {"type": "text"}, "verbosity": None}}
    return {"type": "turn.start", "tenant": "t", "session_id": "sess_1", "turn_id": turn_id, "harness": "claude_code",
            "agent": agent, "environment": environment or {"type": "none"}, "execution_controls": {},
            "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}


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


def test_engine_names_the_bundled_claude_code_version(driver):
    assert driver("fail").engine == "claude_code 2.1.332"


def test_a_missing_binary_is_a_clear_start_error(tmp_path):
    with pytest.raises(ClaudeCodeUnavailable, match="not an executable"):
        find_claude(str(tmp_path / "nope"))


def test_function_call_round_trip_receipt_only_after_the_handler_answered(driver):
    d = driver("round_trip")
    handle, _, rec = run(d, start_message())
    call = rec.wait("turn.function_call")
    tool_use = recorded("round_trip", "mcp")["params"]["_meta"]["claudecode/toolUseId"]
    # call_id = the native tool-use id the CLI put in the MCP call's _meta
    assert (call["call_id"], call["item_id"], call["name"], call["arguments"]) == (
        tool_use, tool_use, "get_weather", {"city": "Paris"})
    assert "turn.tool_result.applied" not in rec.actions()
    handle.deliver_result(tool_use, {"success": True, "output": "sunny"})
    handle.deliver_result(tool_use, {"success": True, "output": "sunny"})  # redelivered: a no-op
    rec.wait("turn.completed")
    client = ReplayClient.instances[0]
    # the admitted result resolved the handler unchanged: the exact MCP answer the CLI recorded
    assert client.replies[-1] == recorded("round_trip", "mcp_reply")
    assert client.queries == ["weather?"]
    actions = rec.actions()
    assert actions.count("turn.tool_result.applied") == 1
    assert actions.index("turn.function_call") < actions.index("turn.tool_result.applied")
    messages = [m["item"] for m in rec.sent if m["action"] == "turn.item.done"]
    native_id = recorded("round_trip", "cli", 1)["message"]["id"]
    assert [(m["id"], m["phase"], m["content"][0]["text"]) for m in messages] == [
        (native_id, "commentary", "Checking."),
        (recorded("round_trip", "cli", 4)["message"]["id"], "final_answer", "It is sunny.")]


def test_functions_server_marks_eager_always_load_true_and_deferred_false(driver):
    d = driver("round_trip")
    lazy = {**FN, "name": "lazy", "defer_loading": True}
    _, _, rec = run(d, start_message(tools=[FN, lazy, {"type": "tool_search"}]))
    rec.wait("turn.function_call")
    listed = ReplayClient.instances[0].replies[1]["result"]["tools"]
    assert [(t["name"], t["_meta"]) for t in listed] == [
        ("get_weather", {"anthropic/alwaysLoad": True}), ("lazy", {"anthropic/alwaysLoad": False})]
    assert listed[0] == {"_meta": {"anthropic/alwaysLoad": True}, "description": "Weather",  # as the CLI listed it
                         "inputSchema": FN["parameters"], "name": "get_weather"}


def test_interrupt_while_pending_is_an_abandonment_never_a_receipt(driver):
    d = driver("interrupt")
    handle, _, rec = run(d, start_message())
    call = rec.wait("turn.function_call")
    handle.cancel()
    rec.wait("turn.cancelled")
    handle.deliver_result(call["call_id"], {"success": True, "output": "late"})  # after the Turn: ignored
    time.sleep(0.05)
    actions = rec.actions()
    assert "turn.call.abandoned" in actions and "turn.tool_result.applied" not in actions
    assert [m["call_id"] for m in rec.sent if m["action"] == "turn.call.abandoned"] == [call["call_id"]]
    # the handler was cancelled: mcp answered the CLI's cancellation, never our result
    assert ReplayClient.instances[0].replies[-1]["error"]["message"] == "Request cancelled"


def test_structured_output_publishes_result_result_unchanged_with_the_native_tool_use_id(driver):
    d = driver("structured")
    _, _, rec = run(d, start_message(schema=SCHEMA))
    rec.wait("turn.completed")
    result = recorded("structured", "cli", 4)
    tool_use = recorded("structured", "cli", 2)["message"]["content"][0]
    assert tool_use["name"] == "StructuredOutput"
    deltas = [m for m in rec.sent if m["action"] == "turn.output_text.delta"]
    done = [m["item"] for m in rec.sent if m["action"] == "turn.item.done"]
    assert done[-1]["id"] == tool_use["id"] and done[-1]["phase"] == "final_answer"
    assert done[-1]["content"][0]["text"] == result["result"]  # the native string, never re-serialized
    # No delta observation (one over 32,000 bytes would be split): Core publishes the whole text in one
    # output_text.delta from item.done (tests/e2e/test_claude_code.py, a large answer).
    assert not deltas
    # parent assistant prose keeps its own id and is not the answer
    assert (done[0]["id"], done[0]["phase"]) == (recorded("structured", "cli", 1)["message"]["id"], "commentary")


def test_a_missing_structured_call_fails_the_result(driver):
    d = driver("round_trip")
    handle, _, rec = run(d, start_message(schema=SCHEMA))
    call = rec.wait("turn.function_call")
    handle.deliver_result(call["call_id"], {"success": True, "output": "sunny"})
    failed = rec.wait("turn.failed")
    assert "structured output" in failed["error"]["message"]
    assert all(m["item"]["phase"] != "final_answer" for m in rec.sent if m["action"] == "turn.item.done")


def test_provider_failure_fails_the_turn_with_its_reason(driver):
    d = driver("fail")
    _, _, rec = run(d, start_message())
    failed = rec.wait("turn.failed")
    assert "The model is unavailable today." in failed["error"]["message"]
    assert "turn.item.done" not in rec.actions()  # the synthetic error message is not assistant prose


def test_native_session_id_is_kept_so_a_new_process_resumes(driver, tmp_path):
    d = driver("fail")
    _, _, rec = run(d, start_message())
    rec.wait("turn.failed")
    native = recorded("fail", "cli", 0)["session_id"]
    saved = json.loads((tmp_path / "state" / "claude_code" / "sess_1" / "session.json").read_text())
    assert saved == {"native_session_id": native}
    assert ReplayClient.instances[0].options.resume is None
    d2 = driver("fail")  # a Runtime restart: the same state directory
    _, _, rec2 = run(d2, start_message(turn_id="turn_2"))
    rec2.wait("turn.failed")
    assert ReplayClient.instances[-1].options.resume == native


def test_steering_is_a_mid_turn_query(driver):
    d = driver("round_trip")
    handle, _, rec = run(d, start_message())
    call = rec.wait("turn.function_call")
    handle.steer({"role": "user", "content": [{"type": "input_text", "text": "use Celsius"}]})
    deadline = time.time() + 5
    while len(ReplayClient.instances[0].queries) < 2 and time.time() < deadline:
        time.sleep(0.01)
    assert ReplayClient.instances[0].queries == ["weather?", "use Celsius"]
    handle.deliver_result(call["call_id"], {"success": True, "output": "sunny"})
    rec.wait("turn.completed")


def test_steering_that_arrives_while_the_process_starts_follows_the_first_query(driver):
    d = driver("fail", connect_seconds=0.3)
    handle, _, rec = run(d, start_message())
    handle.steer({"role": "user", "content": [{"type": "input_text", "text": "early"}]})
    rec.wait("turn.failed")
    assert ReplayClient.instances[0].queries == ["weather?", "early"]


def test_a_required_mcp_server_that_fails_to_connect_fails_the_start_an_optional_one_is_dropped(driver):
    def server(label, required):
        return {"type": "mcp", "server_label": label, "required": required, "allowed_tools": None,
                "transport": {"type": "http", "server_url": "https://mcp.example/", "headers": {}}}
    status = {"mcpServers": [{"name": "docs", "status": "failed", "error": "connection refused",
                              "config": {"type": "http", "url": "https://mcp.example/"}}]}
    d = driver("fail", mcp_status=status)
    _, _, rec = run(d, start_message(tools=[FN, server("docs", True)]))
    failed = rec.wait("turn.failed")
    assert failed["error"]["message"] == "Required MCP server 'docs' did not connect: connection refused"
    d2 = driver("fail", mcp_status=status)
    _, _, rec2 = run(d2, start_message(tools=[FN, server("docs", False)], turn_id="turn_2"))
    assert "unavailable today" in rec2.wait("turn.failed")["error"]["message"]  # the Turn ran on


@pytest.mark.parametrize(("tools", "error"), [
    ([{"name": "a.b"}, {"name": "c"}], None),
    ([{"name": "a.b"}, {"name": "a_b"}], "MCP server 'docs' tools 'a.b' and 'a_b' collide as 'a_b' in Claude Code."),
    (None, "MCP server 'docs' reported no static tool inventory."),
])
def test_connected_servers_need_a_static_inventory_without_normalized_collisions(tools, error):
    if error is None:
        check_inventory("docs", tools)
    else:
        with pytest.raises(AdapterError) as err:
            check_inventory("docs", tools)
        assert str(err.value) == error


def test_a_connected_server_keeps_its_declared_url_and_headers_blank_authorization_when_anonymous(driver):
    declared = {"type": "mcp", "server_label": "docs", "required": True, "allowed_tools": None,
                "transport": {"type": "http", "server_url": "https://mcp.example/", "headers": {"X-Team": "a"}}}
    loaded = {"type": "http", "url": "https://mcp.example/", "headers": {"X-Team": "a", "Authorization": ""}}
    status = {"mcpServers": [{"name": "docs", "status": "connected", "config": loaded, "tools": [{"name": "q"}]}]}
    d = driver("fail", mcp_status=status)
    _, _, rec = run(d, start_message(tools=[FN, declared]))
    assert "unavailable today" in rec.wait("turn.failed")["error"]["message"]  # started: the Turn ran
    changed = {"mcpServers": [{**status["mcpServers"][0], "config": {**loaded, "headers": {"X-Team": "b"}}}]}
    d2 = driver("fail", mcp_status=changed)
    _, _, rec2 = run(d2, start_message(tools=[FN, declared], turn_id="turn_2"))
    assert rec2.wait("turn.failed")["error"]["message"] == (
        "Declared MCP server 'docs' changed 'headers' in the configuration Claude Code loaded.")


def test_sdk_options_none_profile_private_config_dir_and_scripted_provider(tmp_path):
    lazy = {**FN, "name": "lazy", "defer_loading": True}
    start = start_message(tools=[FN, lazy, {"type": "tool_search"}], schema=SCHEMA)
    functions = FunctionsServer([FN, lazy], handler=None)  # type: ignore[arg-type]
    options = sdk_options(start, Provider("scripted", "http://127.0.0.1:9"), functions, config_dir=tmp_path / "c",
                          cwd=tmp_path / "w", binary="/bin/true")
    assert options.tools == ["ToolSearch"]
    assert options.allowed_tools == ["mcp__functions__get_weather", "mcp__functions__lazy", "ToolSearch"]
    assert options.mcp_servers["functions"]["type"] == "sdk"
    assert options.mcp_servers["functions"]["instance"] is functions.server
    assert options.output_format == {"type": "json_schema", "schema": SCHEMA}
    assert options.env["ENABLE_TOOL_SEARCH"] == "true" and options.env["CLAUDE_CONFIG_DIR"] == str(tmp_path / "c")
    assert options.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert options.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert options.setting_sources == [] and options.cwd == str(tmp_path / "w")
    assert "StructuredOutput" not in options.allowed_tools  # native, never a caller function
    assert options.effort is None
    start["agent"]["reasoning"] = {"effort": "high", "summary": None}
    assert sdk_options(start, Provider("scripted"), None, config_dir=tmp_path, cwd=tmp_path, binary="x").effort == "high"


def test_sdk_options_real_provider_keeps_the_key_from_the_environment_and_workspace_cwd(tmp_path):
    start = start_message(environment={"type": "self_hosted", "workspace_directory": str(tmp_path)})
    options = sdk_options(start, Provider("anthropic"), None, config_dir=tmp_path / "c", cwd=tmp_path / "w",
                          binary="/bin/true")
    assert "ANTHROPIC_API_KEY" not in options.env and "ANTHROPIC_BASE_URL" not in options.env
    assert options.tools == {"type": "preset", "preset": "claude_code"}
    assert options.cwd == str(tmp_path) and "AskUserQuestion" in options.disallowed_tools


def test_permission_callback_refuses_tools_outside_a_servers_allowed_tools():
    from claude_agent_sdk.types import PermissionResultAllow, PermissionResultDeny

    decide = permission_callback(["mcp__functions__f", "mcp__tickets__lookup", "mcp__docs"],
                                 {"functions", "tickets", "docs"})

    def check(name):
        return asyncio.run(decide(name, {}, None))
    assert isinstance(check("mcp__functions__f"), PermissionResultAllow)
    assert isinstance(check("mcp__tickets__lookup"), PermissionResultAllow)
    assert isinstance(check("mcp__docs__anything"), PermissionResultAllow)
    assert isinstance(check("mcp__tickets__delete"), PermissionResultDeny)
    assert isinstance(check("Bash"), PermissionResultAllow)  # the placement's native tools never prompt Core


@pytest.mark.parametrize(("result", "expected"), [
    ({"success": True, "output": "sunny"}, ([{"type": "text", "text": "sunny"}], False)),
    ({"success": False, "output": "no city"}, ([{"type": "text", "text": "no city"}], True)),
    ({"success": True, "output": [{"type": "input_text", "text": "a"}, {"type": "input_image", "image_url": PNG}]},
     ([{"type": "text", "text": "a"}, {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}], False)),
    ({"success": False, "output": [{"type": "input_image", "image_url": PNG}]}, ([], True)),
])
def test_result_content_is_the_admitted_result_unchanged_images_only_on_success(result, expected):
    assert result_content(result) == expected



class _Session:
    """The part of a ClaudeSession a Turn's message handling touches."""

    def __init__(self):
        self.saved: list[str] = []

    def save(self, native: str) -> None:
        self.saved.append(native)


def structured_turn(*messages):
    rec = Recorder()
    start = start_message(schema=SCHEMA)
    turn = ClaudeTurn(_Session(), start, TurnChannel(start, rec, heartbeat_seconds=30))  # type: ignore[arg-type]
    for message in messages:
        turn.on_message(message)
    return turn, rec


def _use(block_id):
    from claude_agent_sdk import AssistantMessage, ToolUseBlock

    return AssistantMessage(content=[ToolUseBlock(id=block_id, name="StructuredOutput", input={"t": block_id})],
                            model="m", message_id=f"msg_{block_id}")


def _back(block_id, error):
    from claude_agent_sdk import ToolResultBlock, UserMessage

    return UserMessage(content=[ToolResultBlock(tool_use_id=block_id, content="x", is_error=error)])


def _result(text, subtype="success", is_error=False):
    from claude_agent_sdk import ResultMessage

    return ResultMessage(subtype=subtype, duration_ms=1, duration_api_ms=1, is_error=is_error, num_turns=1,
                         session_id="native", result=text, structured_output={"t": "parsed"})


def test_an_unvalidated_structured_retry_never_becomes_the_answer():
    _, rec = structured_turn(_use("toolu_a"), _back("toolu_a", True), _use("toolu_b"), _back("toolu_b", None),
                             _result('{"t": "toolu_b"}'))
    done = [m["item"] for m in rec.sent if m["action"] == "turn.item.done"]
    assert [(d["id"], d["content"][0]["text"]) for d in done] == [("toolu_b", '{"t": "toolu_b"}')]
    assert rec.actions()[-1] == "turn.completed"


def test_a_cancelled_structured_candidate_never_becomes_the_answer():
    turn, rec = structured_turn(_use("toolu_a"))
    turn.cancel_requested = True
    turn.on_message(_result(None, subtype="error_during_execution", is_error=True))
    assert rec.actions() == ["turn.cancelled"]


def test_only_unvalidated_candidates_fail_the_result():
    _, rec = structured_turn(_use("toolu_a"), _back("toolu_a", True), _result('{"t": "toolu_a"}'))
    assert rec.actions() == ["turn.failed"]
