"""Native Harness adapters: every adapter sentence of the spec, native configuration compared field
by field (Codex TOML rendered with a real TOML writer and parsed back)."""

import json
import subprocess
import sys
import tomllib

import pytest

from runtime.harnesses.claude_code import config as claude_code
from runtime.harnesses.codex import config as codex
from runtime.harnesses.common import AdapterError, as_start
from runtime.harnesses.minimax_code import config as minimax_code
from tests.unit.helpers import SELF_HOSTED, fn, http_mcp, resolve, session_body, stdio_mcp

SCHEMA = {"type": "json_schema", "schema": {"type": "object", "properties": {"x": {"type": "number"}}}}


def start(tools=None, harness="codex", env=None, text=None):
    return as_start(json.loads(resolve(session_body(tools, harness=harness, env=env, text=text)).to_json()))


# ---- Codex -----------------------------------------------------------------------------------------

def test_codex_writes_command_args_cwd_and_env_vars_to_its_mcp_servers_table():
    native = codex.config(start([stdio_mcp("files", cwd="/opt/tools")], env=SELF_HOSTED))
    assert native["mcp_servers"]["files"] == {"command": "mcp-files", "args": ["--ro"], "cwd": "/opt/tools",
                                              "env_vars": ["TOKEN_PATH"], "default_tools_approval_mode": "approve",
                                              "required": False}


def test_codex_http_server_url_bearer_reference_headers_and_required():
    s = start([http_mcp("tickets", transport={"headers": {"X-Team": "core"}}, required=True,
                        allowed_tools=["lookup"])])
    entry = codex.config(s, credentials={"tickets": "TICKETS_TOKEN"})["mcp_servers"]["tickets"]
    assert entry == {"url": "https://mcp.example.com/mcp", "http_headers": {"X-Team": "core"},
                     "bearer_token_env_var": "TICKETS_TOKEN", "enabled_tools": ["lookup"],
                     "default_tools_approval_mode": "approve", "required": True}


def test_codex_native_toml_round_trips_through_a_real_toml_writer():
    s = start([fn(), http_mcp(transport={"headers": {"X-A": "1"}}, connection_origin="environment"), stdio_mcp(),
               {"type": "web_search", "location": {"city": "Paris"}},
               {"type": "programmatic_tool_calling", "enabled": False}], env=SELF_HOSTED)
    native = codex.config(s)
    assert tomllib.loads(codex.render_toml(native)) == native


def test_codex_rejects_reserved_native_labels():
    s = start([http_mcp("tickets")])
    s["agent"]["tools"][0]["server_label"] = "codex_apps"  # admission already refuses it; the adapter too
    with pytest.raises(AdapterError):
        codex.config(s)


def test_codex_verifies_each_declared_server_before_a_connection_with_a_credential():
    s = start([http_mcp("tickets", transport={"headers": {"X-A": "1"}})])
    declared = codex.config(s, credentials={"tickets": "T"})
    codex.verify_servers(declared, declared)
    for key, value in [("url", "https://evil.example/mcp"), ("bearer_token_env_var", "OTHER"),
                       ("http_headers", {"X-A": "2"})]:
        loaded = {"mcp_servers": {"tickets": {**declared["mcp_servers"]["tickets"], key: value}}}
        with pytest.raises(AdapterError):
            codex.verify_servers(declared, loaded)
    with pytest.raises(AdapterError):
        codex.verify_servers(declared, {"mcp_servers": {}})
    stored = {"mcp_servers": {"tickets": {**declared["mcp_servers"]["tickets"], "bearer_token": "secret"}}}
    with pytest.raises(AdapterError):
        codex.verify_servers(declared, stored)


@pytest.mark.parametrize("mode", ["disabled", "cached", "live"])
def test_codex_web_search_modes_as_native_web_search(mode):
    assert codex.config(start([{"type": "web_search", "mode": mode}]))["web_search"] == mode


def test_codex_search_settings_as_tools_web_search():
    native = codex.config(start([{"type": "web_search", "context_size": "low", "allowed_domains": [],
                                  "location": {"country": "FR"}}]))
    assert native["tools"]["web_search"] == {"context_size": "low", "allowed_domains": [],
                                             "location": {"country": "FR"}}
    assert "allowed_domains" not in codex.config(start([{"type": "web_search"}]))["tools"]["web_search"]


def test_an_omitted_web_search_or_programmatic_tool_calling_keeps_native_behavior():
    native = codex.config(start([fn()]))
    assert "web_search" not in native and "features" not in native and "tools" not in native


def test_codex_enabled_true_turns_on_native_code_mode():
    assert codex.config(start([{"type": "programmatic_tool_calling", "enabled": True}]))["features"] == {
        "code_mode": True}


def test_codex_false_turns_off_code_mode_only_and_prewarm_and_checks_managed_requirements():
    native = codex.config(start([{"type": "programmatic_tool_calling", "enabled": False}]))
    assert native["features"] == {"code_mode": False, "code_mode_only": False, "code_mode_prewarm": False}
    codex.check_managed_requirements(native, {})
    with pytest.raises(AdapterError):
        codex.check_managed_requirements(native, {"features": {"code_mode_only": True}})


def test_codex_sends_the_schema_unchanged_as_output_schema_on_every_root_turn_never_on_subagents():
    s = start(text={"format": SCHEMA})
    assert codex.turn_params(s) == {"outputSchema": SCHEMA["schema"]}
    assert codex.turn_params(s) == codex.turn_params(s)  # after resume or recovery: the same frozen schema
    assert codex.turn_params(s, subagent=True) == {}
    assert codex.turn_params(start()) == {}


# ---- Claude Code -------------------------------------------------------------------------------

def test_claude_passes_output_format_and_leaves_structured_output_and_tool_search_to_native():
    s = start([fn()], harness="claude_code", text={"format": SCHEMA})
    opts = claude_code.options(s)
    assert opts["outputFormat"] == {"type": "json_schema", "schema": SCHEMA["schema"]}
    assert "StructuredOutput" not in opts["allowedTools"]  # internal, never an extra caller function
    assert claude_code.native_inventory_check(opts["allowedTools"], opts["allowedTools"] + [
        "StructuredOutput", "ToolSearch"]) == []
    assert claude_code.native_inventory_check(opts["allowedTools"], ["Bash"]) == ["Bash"]


def test_claude_mcp_server_marks_eager_always_load_true_and_deferred_false_and_sets_enable_tool_search():
    s = start([fn("eager"), fn("lazy", defer_loading=True), {"type": "tool_search"}], harness="claude_code")
    opts = claude_code.options(s)
    tools = opts["mcpServers"]["functions"]["tools"]
    assert [(t["name"], t["_meta"]["anthropic/alwaysLoad"]) for t in tools] == [("eager", True), ("lazy", False)]
    assert opts["env"] == {"ENABLE_TOOL_SEARCH": "true"}


def test_claude_none_profile_allows_only_declared_callbacks_declared_mcp_tools_and_tool_search():
    s = start([fn("eager"), fn("lazy", defer_loading=True), {"type": "tool_search"},
               http_mcp("tickets", allowed_tools=["lookup"]), http_mcp("docs")], harness="claude_code")
    assert claude_code.options(s)["allowedTools"] == [
        "mcp__functions__eager", "mcp__functions__lazy", "mcp__tickets__lookup", "mcp__docs", "ToolSearch"]
    assert claude_code.options(s)["tools"] == ["ToolSearch"]  # no built-in tools; native search is enabled
    assert claude_code.options(start([fn()], harness="claude_code"))["tools"] == []


def test_claude_none_live_adds_only_web_search():
    opts = claude_code.options(start([{"type": "web_search", "mode": "live"}], harness="claude_code"))
    assert opts["tools"] == ["WebSearch"] and "WebFetch" not in opts["allowedTools"]


def test_claude_workspace_runs_the_native_tool_set_without_excluded_tools():
    opts = claude_code.options(start([{"type": "web_search", "mode": "live"}], harness="claude_code",
                                     env=SELF_HOSTED))
    assert opts["tools"] == {"type": "preset", "preset": "claude_code"}
    assert {"AskUserQuestion", "ListAgents"} <= set(opts["disallowedTools"])
    assert "WebSearch" not in opts["disallowedTools"] and "WebFetch" not in opts["disallowedTools"]


def test_claude_workspace_disabled_removes_web_search_and_web_fetch():
    opts = claude_code.options(start([{"type": "web_search", "mode": "disabled"}], harness="claude_code",
                                     env=SELF_HOSTED))
    assert {"WebSearch", "WebFetch"} <= set(opts["disallowedTools"])


def test_claude_workspace_omitted_control_keeps_web_search_and_web_fetch():
    opts = claude_code.options(start([fn()], harness="claude_code", env=SELF_HOSTED))
    assert "WebSearch" not in opts["disallowedTools"] and "WebFetch" not in opts["disallowedTools"]


def test_claude_starts_stdio_servers_in_the_workspace_directory():
    opts = claude_code.options(start([stdio_mcp()], harness="claude_code", env=SELF_HOSTED))
    assert opts["cwd"] == SELF_HOSTED["workspace_directory"]
    assert opts["mcpServers"]["files"] == {"type": "stdio", "command": "mcp-files", "args": ["--ro"]}


def test_claude_anonymous_requests_send_a_blank_authorization_header():
    s = start([http_mcp("tickets", transport={"headers": {"X-Team": "core"}})], harness="claude_code")
    assert claude_code.options(s)["mcpServers"]["tickets"]["headers"] == {"X-Team": "core", "Authorization": ""}
    authed = claude_code.options(s, credentials={"tickets": "TICKETS_TOKEN"})
    assert authed["mcpServers"]["tickets"]["headers"]["Authorization"] == "Bearer ${TICKETS_TOKEN}"


# ---- MiniMax Code ---------------------------------------------------------------------------------

def test_minimax_disabled_web_search_is_native_features_web_search_false():
    assert minimax_code.config(start([{"type": "web_search", "mode": "disabled"}], harness="minimax_code"))[
        "features"] == {"webSearch": False}


def test_minimax_workspace_disabled_also_removes_web_fetch_and_omitted_keeps_it():
    env = SELF_HOSTED
    assert minimax_code.config(start([{"type": "web_search", "mode": "disabled"}], harness="minimax_code",
                                     env=env))["disabledTools"] == ["web_fetch"]
    assert "disabledTools" not in minimax_code.config(start([fn()], harness="minimax_code", env=env))


def test_minimax_none_has_no_built_in_tools_and_serves_functions_as_the_functions_server():
    native = minimax_code.config(start([fn("lookup")], harness="minimax_code"))
    assert native["builtinTools"] == []
    assert [t["name"] for t in native["mcpServers"]["functions"]["tools"]] == ["lookup"]


# ---- the Runtime's --dry-run ---------------------------------------------------------------------

def test_dry_run_prints_valid_toml_for_codex_and_options_json_for_claude(root):
    env = {"PYTHONPATH": str(root / "layers" / "contract")}
    out = subprocess.run([sys.executable, "-m", "runtime", "--harness", "codex", "--dry-run", "--snapshot",
                          "events/runtime-snapshot-codex.json"], cwd=root, capture_output=True, text=True,
                         check=True, env=env).stdout
    parsed = tomllib.loads(out)
    assert parsed["web_search"] == "cached" and parsed["features"]["code_mode"] is False
    out = subprocess.run([sys.executable, "-m", "runtime", "--harness", "claude_code", "--dry-run", "--snapshot",
                          "events/runtime-snapshot-claude.json"], cwd=root, capture_output=True, text=True,
                         check=True, env=env).stdout
    assert json.loads(out)["env"] == {"ENABLE_TOOL_SEARCH": "true"}
