"""Native tools follow the placement: the configuration translation of each Harness, as data.

"On none, the model sees only what the Session declares: functions, tool_search, web_search per its
control, MCP tools. ... On a workspace placement the native workspace tools run." And
"programmatic_tool_calling: false must really turn code mode off for every model Codex knows": the
bundled catalog forces code_mode_only for most models, so the Codex adapter overrides the catalog.
What the model then really sees is proven end to end in tests/e2e/test_native_tool_sets.py."""

from __future__ import annotations

import json
import tomllib

import pytest

from runtime.harnesses.claude_code import config as claude_code
from runtime.harnesses.codex import config as codex
from runtime.harnesses.codex.config import Provider, native_config
from runtime.harnesses.common import as_start
from tests.unit.helpers import SELF_HOSTED, fn, http_mcp, resolve, session_body

OPENAI_HOSTED = {"type": "openai_hosted"}
PTC_OFF = {"type": "programmatic_tool_calling", "enabled": False}
PTC_ON = {"type": "programmatic_tool_calling", "enabled": True}
SEARCH = {"type": "web_search", "mode": "live"}
NO_SEARCH = {"type": "web_search", "mode": "disabled"}
TOOL_SEARCH = {"type": "tool_search"}


def start(tools=None, env=None, harness="codex", **agent):
    return as_start(json.loads(resolve(session_body(tools, harness=harness, env=env, **agent)).to_json()))


# ---- Codex: config.toml ------------------------------------------------------------------------------

NONE_PROFILE = {"tools": {"experimental_request_user_input": {"enabled": False}}, "features": {"goals": False},
                "agents": {"enabled": False}}


@pytest.mark.parametrize(("tools", "agent", "expected"), [
    pytest.param([fn()], {}, NONE_PROFILE, id="no subagents, request_user_input or goals; native web search kept"),
    pytest.param([fn(), SEARCH], {}, {**NONE_PROFILE, "web_search": "live",
                                      "tools": {**NONE_PROFILE["tools"], "web_search": {"context_size": "medium"}}},
                 id="web_search per its control"),
    pytest.param([fn(), NO_SEARCH], {}, {**NONE_PROFILE, "web_search": "disabled",
                                         "tools": {**NONE_PROFILE["tools"], "web_search": {"context_size": "medium"}}},
                 id="web_search disabled as declared"),
    pytest.param([fn()], {"multi_agent": {"enabled": True}},
                 {**NONE_PROFILE, "agents": {"max_threads": 6}}, id="multi_agent on keeps subagent tools"),
    pytest.param([fn(), PTC_OFF], {}, {**NONE_PROFILE, "features": {
        "code_mode": False, "code_mode_only": False, "code_mode_prewarm": False, "goals": False}},
        id="programmatic_tool_calling false beside the none profile"),
])
def test_codex_on_none_the_model_sees_only_what_the_session_declares(tools, agent, expected):
    assert codex.session_config(start(tools, **agent)) == expected


@pytest.mark.parametrize("env", [None, SELF_HOSTED, OPENAI_HOSTED], ids=["none", "self_hosted", "openai_hosted"])
def test_codex_an_omitted_web_search_keeps_native_search_on_every_placement(env):
    """Issue 37, item 1: "an omitted web_search or programmatic_tool_calling keeps each Harness's native
    behavior"; only a declared `disabled` writes web_search = "disabled", and setting a control removes nothing
    else (the none profile is the same with or without it)."""
    native = codex.session_config(start([fn()], env=env))
    assert "web_search" not in native and "web_search" not in (native.get("tools") or {})
    declared = codex.session_config(start([fn(), NO_SEARCH], env=env))
    assert declared["web_search"] == "disabled"
    assert {k: v for k, v in declared.items() if k not in ("web_search", "tools")} == \
        {k: v for k, v in native.items() if k != "tools"}


@pytest.mark.parametrize("env", [SELF_HOSTED, OPENAI_HOSTED], ids=["self_hosted", "openai_hosted"])
def test_codex_on_a_workspace_placement_the_native_workspace_tools_stay(env):
    assert codex.placement_config(start([fn()], env=env)) == {}
    assert codex.session_config(start([fn()], env=env)) == {"agents": {"enabled": False}}  # multi_agent off
    assert codex.turn_environment(start([fn()], env=env)) == {}  # the thread keeps its environment


def test_codex_none_turn_start_carries_empty_environments_on_every_turn():
    assert codex.turn_environment(start([fn()])) == {"environments": []}


def test_codex_the_none_profile_renders_to_toml_and_parses_back():
    native = native_config(start([fn(), SEARCH, PTC_OFF]), Provider("scripted", "http://127.0.0.1:9/v1"),
                           catalog="/state/codex/model_catalogs/0.163.0-abc.json")
    parsed = tomllib.loads(codex.render_toml(native))
    assert parsed == native
    assert parsed["model_catalog_json"] == "/state/codex/model_catalogs/0.163.0-abc.json"
    # the provider's network-off features and the Session's features side by side
    assert parsed["features"] == {"plugins": False, "apps": False, "remote_plugin": False, "code_mode": False,
                                  "code_mode_only": False, "code_mode_prewarm": False, "goals": False}
    assert parsed["tools"] == {"web_search": {"context_size": "medium"},
                               "experimental_request_user_input": {"enabled": False}}


# ---- Codex: the model catalog ------------------------------------------------------------------------

@pytest.mark.parametrize(("tools", "env", "overrides"), [
    pytest.param([fn()], None, {"experimental_supported_tools": [], "supports_search_tool": False},
                 id="none: no clock or async messages, no undeclared tool_search"),
    pytest.param([fn(), PTC_OFF], None, {"tool_mode": None, "multi_agent_version": None,
                                         "experimental_supported_tools": [], "supports_search_tool": False},
                 id="none with programmatic_tool_calling false"),
    pytest.param([fn(), PTC_ON], None, {"experimental_supported_tools": [], "supports_search_tool": False},
                 id="none with programmatic_tool_calling true keeps the catalog's tool_mode"),
    pytest.param([fn(), PTC_OFF], SELF_HOSTED, {"tool_mode": None, "multi_agent_version": None},
                 id="workspace with programmatic_tool_calling false"),
    pytest.param([fn()], SELF_HOSTED, {}, id="workspace with omitted controls: the bundled catalog"),
])
def test_codex_catalog_overrides(tools, env, overrides):
    assert codex.catalog_overrides(start(tools, env=env)) == overrides


def test_codex_a_declared_tool_search_would_keep_native_search():
    # Codex's declaration refuses tool_search today (admission); the rule still only removes the undeclared.
    s = start([fn()])
    s["agent"]["tools"].append(TOOL_SEARCH)
    assert codex.catalog_overrides(s) == {"experimental_supported_tools": []}


def test_codex_catalog_copy_overrides_every_model_and_keeps_everything_else():
    bundled = {"models": [
        {"slug": "gpt-5.5", "tool_mode": None, "supports_search_tool": True, "base_instructions": "b"},
        {"slug": "gpt-6-sol", "tool_mode": "code_mode_only", "multi_agent_version": "v2",
         "experimental_supported_tools": ["clock"], "use_responses_lite": True}], "etag": "x"}
    copy = codex.model_catalog(bundled, {"tool_mode": None, "multi_agent_version": None})
    assert copy == {"models": [
        {"slug": "gpt-5.5", "tool_mode": None, "multi_agent_version": None, "supports_search_tool": True,
         "base_instructions": "b"},
        {"slug": "gpt-6-sol", "tool_mode": None, "multi_agent_version": None, "experimental_supported_tools": ["clock"],
         "use_responses_lite": True}], "etag": "x"}
    assert bundled["models"][1]["tool_mode"] == "code_mode_only"  # the bundled catalog is not changed


# ---- Claude Code ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("tools", "builtins", "allowed"), [
    pytest.param([fn()], [], ["mcp__functions__lookup"], id="functions only"),
    pytest.param([fn(), SEARCH], ["WebSearch"], ["mcp__functions__lookup", "WebSearch"],
                 id="live adds only WebSearch"),
    pytest.param([fn(), NO_SEARCH], [], ["mcp__functions__lookup"], id="disabled adds nothing"),
    pytest.param([fn(), fn("lazy", defer_loading=True), TOOL_SEARCH], ["ToolSearch"],
                 ["mcp__functions__lookup", "mcp__functions__lazy", "ToolSearch"], id="tool_search"),
    pytest.param([fn(), http_mcp("tickets", allowed_tools=["find"])], [],
                 ["mcp__functions__lookup", "mcp__tickets__find"], id="declared MCP tools"),
])
def test_claude_code_none_profile_keeps_no_built_in_tools(tools, builtins, allowed):
    opts = claude_code.options(start(tools, harness="claude_code", model="claude-sonnet-4-5"))
    assert opts["tools"] == builtins
    assert opts["allowedTools"] == allowed
    assert "disallowedTools" not in opts and "cwd" not in opts


def test_claude_code_none_profile_ignores_multi_agent_it_offers_no_agent_tool():
    opts = claude_code.options(start([fn()], harness="claude_code", model="claude-sonnet-4-5",
                                     multi_agent={"enabled": True}))
    assert opts["tools"] == [] and "Agent" not in opts["allowedTools"]


@pytest.mark.parametrize("env", [SELF_HOSTED, OPENAI_HOSTED], ids=["self_hosted", "openai_hosted"])
def test_claude_code_workspace_runs_the_native_preset(env):
    opts = claude_code.options(start([fn()], env=env, harness="claude_code", model="claude-sonnet-4-5"))
    assert opts["tools"] == {"type": "preset", "preset": "claude_code"}
    assert opts["disallowedTools"] == [*claude_code.WORKSPACE_EXCLUDED, "Agent", "Task"]  # multi_agent off
    assert opts["cwd"] == start([fn()], env=env, harness="claude_code")["environment"].get("workspace_directory")
