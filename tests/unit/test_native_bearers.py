"""A turn.start's Vault bearers reach the native Harness through its process environment only: Codex gets
`bearer_token_env_var` (the variable excluded from the model's shell), Claude Code `Bearer ${VAR}` in its
server headers with VAR in the CLI's environment. No token in argv, config files or the declared-server check."""

import json

import pytest

from runtime.harnesses.claude_code import config as claude
from runtime.harnesses.claude_code.session import Provider, check_declared, sdk_options
from runtime.harnesses.codex import config as codex
from runtime.harnesses.codex.config import Provider as CodexProvider
from runtime.harnesses.codex.config import native_config
from runtime.harnesses.common import AdapterError, bearer_variables
from tests.unit.helpers import http_mcp
from tests.unit.test_adapters import start

TOKEN = "vault-bearer-9a7f"


def with_bearer(harness):
    s = start([http_mcp("tickets"), http_mcp("open", url="https://open.example/mcp")], harness=harness)
    s["mcp_credentials"] = {"tickets": {"type": "bearer", "token": TOKEN}}
    return s


def test_bearer_variables_name_each_credentialed_server():
    names, values = bearer_variables(with_bearer("codex"))
    assert names == {"tickets": "AGENTS_MCP_BEARER_0"} and values == {"AGENTS_MCP_BEARER_0": TOKEN}
    assert bearer_variables(start([http_mcp()])) == ({}, {})
    with pytest.raises(AdapterError, match="cannot use"):
        bearer_variables({**start([http_mcp()]), "mcp_credentials": {"tickets": {"type": "basic", "token": "x"}}})


def test_codex_config_names_the_variable_and_keeps_it_out_of_the_shell():
    s = with_bearer("codex")
    names, _ = bearer_variables(s)
    native = native_config(s, CodexProvider("scripted", "http://127.0.0.1:9"), None, names)
    assert native["mcp_servers"]["tickets"]["bearer_token_env_var"] == "AGENTS_MCP_BEARER_0"
    assert "bearer_token_env_var" not in native["mcp_servers"]["open"]
    assert native["shell_environment_policy"] == {"exclude": ["AGENTS_MCP_BEARER_0"]}
    assert native["mcp_servers"]["tickets"]["default_tools_approval_mode"] == "approve"
    assert TOKEN not in codex.render_toml(native)


def test_claude_code_gets_a_reference_in_its_servers_and_the_token_in_its_environment(tmp_path):
    s = with_bearer("claude_code")
    options = sdk_options(s, Provider("scripted", "http://127.0.0.1:9"), None, config_dir=tmp_path / "c",
                          cwd=tmp_path / "w", binary="/bin/true")
    assert options.mcp_servers["tickets"]["headers"]["Authorization"] == "Bearer ${AGENTS_MCP_BEARER_0}"
    assert options.mcp_servers["open"]["headers"]["Authorization"] == ""  # anonymous: no native OAuth
    assert options.env["AGENTS_MCP_BEARER_0"] == TOKEN
    assert TOKEN not in json.dumps(options.mcp_servers)  # what the SDK puts on the CLI's command line


def test_claude_declared_server_check_ignores_the_expanded_authorization():
    declared = claude.options(with_bearer("claude_code"), {"tickets": "AGENTS_MCP_BEARER_0"})["mcpServers"]["tickets"]
    loaded = {**declared, "headers": {**declared["headers"], "Authorization": f"Bearer {TOKEN}"}}
    check_declared("tickets", declared, loaded)  # no error, and nothing echoes the token
    with pytest.raises(AdapterError) as err:
        check_declared("tickets", declared, {**loaded, "headers": {**loaded["headers"], "X-Other": "1"}})
    assert TOKEN not in str(err.value)
