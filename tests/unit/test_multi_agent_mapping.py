"""Issue 25: the Agent's `multi_agent` in each native Harness's configuration, as data. "`multi_agent.enabled`
false removes the subagent tools, true sets `agents.max_threads` from `max_concurrent_subagents`" (Codex reads
`agents.max_threads` as its max_concurrent_threads_per_session, checked with `config/read` on codex 0.163.0).
Claude Code's `Agent` tool is removed from a workspace Session when multi_agent is off; on `none` the spec keeps
no built-in tools, so Claude Code offers none there either way."""

from __future__ import annotations

import json

import pytest

from runtime.harnesses.claude_code import config as claude_code
from runtime.harnesses.codex import config as codex
from runtime.harnesses.common import as_start
from tests.unit.helpers import SELF_HOSTED, fn, resolve, session_body


def start(env=None, harness="codex", **agent):
    return as_start(json.loads(resolve(session_body([fn()], harness=harness, env=env, **agent)).to_json()))


@pytest.mark.parametrize(("multi_agent", "expected"), [
    ({"enabled": False}, {"enabled": False}),
    ({"enabled": True}, {"max_threads": 6}),  # the SDK's default limit when enabled
    ({"enabled": True, "max_concurrent_subagents": 2}, {"max_threads": 2}),
], ids=["off", "on", "on with a limit"])
@pytest.mark.parametrize("env", [None, SELF_HOSTED], ids=["none", "self_hosted"])
def test_codex_multi_agent_maps_to_the_agents_table_on_every_placement(env, multi_agent, expected):
    assert codex.session_config(start(env, multi_agent=multi_agent))["agents"] == expected


@pytest.mark.parametrize(("on", "disallowed"), [(True, False), (False, True)], ids=["on", "off"])
def test_claude_code_on_a_workspace_the_agent_tool_is_removed_when_multi_agent_is_off(on, disallowed):
    options = claude_code.options(start(SELF_HOSTED, harness="claude_code", multi_agent={"enabled": on}))
    assert options["tools"] == {"type": "preset", "preset": "claude_code"}
    assert ({"Agent", "Task"} <= set(options["disallowedTools"])) is disallowed


def test_claude_code_on_none_offers_no_agent_tool_even_with_multi_agent_on():
    """The spec: "environment: none keeps no built-in tools" - the Agent tool is one."""
    options = claude_code.options(start(harness="claude_code", multi_agent={"enabled": True}))
    assert "Agent" not in options["tools"] and "Agent" not in options["allowedTools"]
