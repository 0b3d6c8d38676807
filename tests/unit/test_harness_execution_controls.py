"""Issue 37, item 21: "Execution carries the resolved values to the Harness and validates them against its
declaration in internal/harnessconfig (Execution): ... reasoning efforts and summaries, service tiers ... and
text verbosities. A value outside the declaration is rejected at Session admission with a message naming the
field." Each declaration says what its Harness really runs, so nothing is dropped silently at execution:
Claude Code (the pinned Claude Agent SDK) has efforts low..max only, and no summary, tier or verbosity
setting; Codex passes every value to its app-server."""

from __future__ import annotations

import pytest

from agents_contract.errors import UnsupportedConfiguration
from agents_contract.harnessconfig import CLAUDE_CODE
from tests.unit.helpers import fn, resolve, session_body


def claude(**agent):
    return session_body([fn()], harness="claude_code", **agent)


@pytest.mark.parametrize(("agent", "field", "value"), [
    ({"reasoning": {"effort": "none"}}, "agent.reasoning.effort", "none"),
    ({"reasoning": {"effort": "minimal"}}, "agent.reasoning.effort", "minimal"),
    ({"reasoning": {"summary": "auto"}}, "agent.reasoning.summary", "auto"),
    ({"reasoning": {"summary": "detailed"}}, "agent.reasoning.summary", "detailed"),
    ({"service_tier": "flex"}, "agent.service_tier", "flex"),
    ({"service_tier": "priority"}, "agent.service_tier", "priority"),
    ({"text": {"verbosity": "low"}}, "agent.text.verbosity", "low"),
    ({"text": {"verbosity": "high"}}, "agent.text.verbosity", "high"),
])
def test_claude_code_rejects_what_it_would_drop_naming_the_field(agent, field, value):
    body = claude(**{k: v for k, v in agent.items() if k != "text"})
    if "text" in agent:
        body["agent"]["text"] = agent["text"]
    with pytest.raises(UnsupportedConfiguration) as err:
        resolve(body)
    assert (err.value.param, err.value.code, err.value.status) == (field, "unsupported_or_invalid_configuration", 400)
    assert field in err.value.message and repr(value) in err.value.message


@pytest.mark.parametrize("effort", sorted(CLAUDE_CODE.reasoning_efforts))
def test_claude_code_accepts_the_sdk_efforts_and_the_pinned_defaults(effort):
    resolved = resolve(claude(reasoning={"effort": effort}))
    assert resolved is not None


@pytest.mark.parametrize(("agent", "text"), [
    ({"reasoning": {"effort": effort, "summary": summary}, "service_tier": tier}, {"verbosity": verbosity})
    for effort, summary, tier, verbosity in [("none", "concise", "flex", "low"), ("minimal", "detailed", "priority",
                                                                                   "high"),
                                             ("xhigh", "auto", "default", "medium"), ("max", None, "fast", None)]])
def test_codex_runs_every_value(agent, text):
    body = session_body([fn()], harness="codex", **agent)
    body["agent"]["text"] = text
    assert resolve(body) is not None


def test_the_claude_driver_passes_the_effort_it_was_given(tmp_path):
    from runtime.harnesses.claude_code.session import Provider, sdk_options
    from tests.unit.test_claude_code_driver import start_message

    start = start_message()
    for effort in sorted(CLAUDE_CODE.reasoning_efforts):
        start["agent"]["reasoning"] = {"effort": effort, "summary": None}
        options = sdk_options(start, Provider("scripted"), None, config_dir=tmp_path, cwd=tmp_path, binary="x")
        assert options.effort == effort
