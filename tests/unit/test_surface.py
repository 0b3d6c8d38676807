"""Resources of the pinned SDK that this deployment does not build (agents_contract.surface): a clear 400 in the
official envelope, code `unsupported_resource`, answered before routing, so no such request falls through to a
neighbouring route. Pure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agents_contract import surface

ROOT = Path(__file__).resolve().parents[2]

TEMPLATES = "Environment templates (client.beta.agents.environments.templates)"
TRACES = "Traces (client.beta.agents.sessions.traces)"


@pytest.mark.parametrize("method, path, name", [
    ("GET", "/v1/agents/environments/templates", TEMPLATES),
    ("POST", "/v1/agents/environments/templates", TEMPLATES),
    ("GET", "/v1/agents/environments/templates/tmpl_1", TEMPLATES),  # not the Environment `templates`
    ("GET", "/v1/agents/sessions/sess_1/traces", TRACES),
    ("get", "/v1/agents/sessions/sess_1/traces/tr_1", TRACES),  # the method is shown upper case
])
def test_a_resource_not_built_is_a_400_unsupported_resource(method, path, name):
    error = surface.not_built(method, path)
    assert error is not None and error.status == 400
    assert error.envelope() == {"error": {
        "message": f"{name} are not supported by this deployment yet ({method.upper()} {path}).",
        "type": "invalid_request_error", "param": None, "code": "unsupported_resource"}}


@pytest.mark.parametrize("method, path", [
    ("GET", "/v1/agents/environments"),
    ("GET", "/v1/agents/environments/env_1"),
    ("POST", "/v1/agents/environments/env_1/enrollments"),
    ("POST", "/v1/agents/environments/env_1/files"),  # built (issue 38): Environment files
    ("GET", "/v1/agents/environments/templatesx"),
    ("GET", "/v1/agents/sessions/sess_1"),
    ("POST", "/v1/agents/sessions/sess_1/events"),
    ("GET", "/v1/agents/sessions/sess_1/subagents"),
    ("GET", "/v1/agents/sessions/sess_1/artifacts"),  # built (issue 38): the files function serves them
    ("GET", "/v1/agents/sessions/sess_1/artifacts/art_1/content"),
    ("GET", "/v1/agents/sessions//traces"),  # no Session id
    ("GET", "/v1/agents/sessions/a/b/traces"),  # not a Session's traces
    ("GET", "/v1/agents/agent_automations"),
    ("POST", "/v1/agents/automations"),  # built (issue 39): the automations function's
    ("POST", "/v1/agents/automations/auto_1/invocations"),
    ("GET", "/v2/agents/automations"),
    ("GET", "v1/agents/automations"),
    ("GET", "/v1/vaults/vault_1/credentials"),
    ("GET", ""),
])
def test_built_and_unknown_routes_are_left_to_the_router(method, path):
    assert surface.not_built(method, path) is None


def test_the_readme_lists_every_resource_not_built_yet():
    readme = " ".join((ROOT / "README.md").read_text().split())
    not_yet = readme[readme.index("Not yet (clear 4xx, code `unsupported_resource`"):]
    for _, name in surface.NOT_BUILT:
        sdk_name = re.search(r"\((client\.[a-z.]+)\)", name).group(1)
        assert f"(`{sdk_name}`)" in not_yet[:1000], sdk_name
