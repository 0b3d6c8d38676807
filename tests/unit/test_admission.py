"""Session admission against each Harness declaration: every admission message and every row of
the Harness matrix in the contract notes. Rejections are 400 unsupported_or_invalid_configuration."""

import pytest

from agents_contract.admission import SavedAgent
from agents_contract.errors import UnsupportedConfiguration
from tests.unit.helpers import SELF_HOSTED, WORKSPACE, fn, http_mcp, resolve, session_body, stdio_mcp

HARNESSES = ("codex", "claude_code", "minimax_code")
SEARCH_ON = [{"type": "tool_search"}, fn("deferred", defer_loading=True)]
SCHEMA = {"type": "json_schema", "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}


def rejected(body, message, param):
    with pytest.raises(UnsupportedConfiguration) as err:
        resolve(body)
    e = err.value
    assert (e.message, e.param, e.code, e.type, e.status) == (
        message, param, "unsupported_or_invalid_configuration", "invalid_request_error", 400)


# (rule, harness, body, accepted?) -- the matrix, row by row.
MATRIX = [
    # function tools, text results
    ("function tools", "codex", session_body([fn()], harness="codex"), True),
    ("function tools", "claude_code", session_body([fn()], harness="claude_code"), True),
    ("function tools", "minimax_code", session_body([fn()], harness="minimax_code"), True),
    ("claude parameters root must be type object", "claude_code",
     session_body([fn(params={"properties": {}})], harness="claude_code"), False),
    ("codex parameters root may omit type", "codex", session_body([fn(params={"properties": {}})]), True),
    # structured output
    ("structured output", "codex", session_body(text={"format": SCHEMA}), True),
    ("structured output", "claude_code", session_body(text={"format": SCHEMA}, harness="claude_code"), True),
    ("structured output", "minimax_code", session_body(text={"format": SCHEMA}, harness="minimax_code"), False),
    # tool_search + defer_loading
    ("tool search", "codex", session_body(SEARCH_ON, harness="codex"), False),
    ("tool search", "claude_code", session_body(SEARCH_ON, harness="claude_code"), True),
    ("tool search", "minimax_code", session_body(SEARCH_ON, harness="minimax_code"), False),
    # web_search modes and settings
    *[("web_search mode", h, session_body([{"type": "web_search", "mode": m}], harness=h), ok)
      for h, m, ok in [("codex", "disabled", True), ("codex", "cached", True), ("codex", "live", True),
                       ("claude_code", "disabled", True), ("claude_code", "cached", False),
                       ("claude_code", "live", True), ("minimax_code", "disabled", True),
                       ("minimax_code", "cached", False), ("minimax_code", "live", False)]],
    ("web_search settings", "codex", session_body([{"type": "web_search", "context_size": "high",
                                                    "allowed_domains": ["a.com"], "location": {}}]), True),
    ("claude context_size medium only", "claude_code",
     session_body([{"type": "web_search", "context_size": "medium"}], harness="claude_code"), True),
    # programmatic_tool_calling
    *[("programmatic tool calling", h, session_body([{"type": "programmatic_tool_calling", "enabled": v}], harness=h),
       ok) for h, v, ok in [("codex", True, True), ("codex", False, True), ("claude_code", False, True),
                            ("claude_code", True, False), ("minimax_code", False, True),
                            ("minimax_code", True, False)]],
    # HTTP MCP, origin service: on none only
    ("service MCP on none", "codex", session_body([http_mcp()]), True),
    ("service MCP on none", "claude_code", session_body([http_mcp()], harness="claude_code"), True),
    ("service MCP on none", "minimax_code", session_body([http_mcp()], harness="minimax_code"), False),
    # HTTP MCP, origin environment: workspace placements
    *[("environment MCP on workspace", h,
       session_body([http_mcp(connection_origin="environment")], harness=h, env=SELF_HOSTED), True)
      for h in HARNESSES],
    # an omitted origin is `service` on every placement: never the workspace's network by itself
    *[("omitted origin on workspace", h, session_body([http_mcp()], harness=h, env=SELF_HOSTED), False)
      for h in HARNESSES],
    ("minimax environment MCP allowed_tools null only", "minimax_code",
     session_body([http_mcp(allowed_tools=["a"], connection_origin="environment")], harness="minimax_code",
                  env=SELF_HOSTED), False),
    ("minimax environment MCP required false only", "minimax_code",
     session_body([http_mcp(required=True, connection_origin="environment")], harness="minimax_code",
                  env=SELF_HOSTED), False),
    # stdio MCP
    ("codex stdio with an absolute cwd", "codex", session_body([stdio_mcp(cwd="/opt/tools")], env=SELF_HOSTED), True),
    ("claude stdio in the workspace directory", "claude_code",
     session_body([stdio_mcp()], harness="claude_code", env=SELF_HOSTED), True),
    ("claude stdio elsewhere", "claude_code",
     session_body([stdio_mcp(cwd="/opt/tools")], harness="claude_code", env=SELF_HOSTED), False),
    ("minimax stdio rejected for every cwd", "minimax_code",
     session_body([stdio_mcp()], harness="minimax_code", env=SELF_HOSTED), False),
    # required MCP
    ("required MCP", "codex", session_body([http_mcp(required=True)]), True),
    ("required MCP", "claude_code", session_body([http_mcp(required=True)], harness="claude_code"), True),
    # labels
    ("codex reserved label", "codex", session_body([http_mcp(label="codex_apps")]), False),
    ("claude label charset", "claude_code", session_body([http_mcp(label="my.server")], harness="claude_code"), False),
    ("claude rejects functions label", "claude_code",
     session_body([http_mcp(label="functions")], harness="claude_code"), False),
    ("minimax functions label without functions", "minimax_code",
     session_body([http_mcp(label="functions", connection_origin="environment")], harness="minimax_code",
                  env=SELF_HOSTED), True),
    ("minimax functions label with functions", "minimax_code",
     session_body([fn(), http_mcp(label="functions", connection_origin="environment")], harness="minimax_code",
                  env=SELF_HOSTED), False),
]


@pytest.mark.parametrize("rule,harness,body,accepted", MATRIX, ids=[f"{m[0]}-{m[1]}" for m in MATRIX])
def test_harness_matrix(rule, harness, body, accepted):
    if accepted:
        snapshot = resolve(body)
        assert snapshot.harness == harness
    else:
        with pytest.raises(UnsupportedConfiguration):
            resolve(body)


@pytest.mark.parametrize("row", MATRIX, ids=[f"scripted-as-{m[1]}-{m[0]}" for m in MATRIX])
def test_scripted_impersonating_a_harness_follows_its_declaration(row):
    rule, harness, body, accepted = row
    body = {**body, "x_agents_core": {"harness": "scripted", "impersonate": harness}}
    if accepted:
        assert resolve(body).harness == "scripted"
    else:
        with pytest.raises(UnsupportedConfiguration):
            resolve(body)


@pytest.mark.parametrize("row", [m for m in MATRIX if m[3]], ids=[f"{m[1]}-{m[0]}" for m in MATRIX if m[3]])
def test_scripted_accepts_everything_the_other_three_accept(row):
    body = {**row[2], "x_agents_core": {"harness": "scripted"}}
    assert resolve(body).impersonate is None


MESSAGES = [
    ("The harness does not support tool search.", "agent.tools", session_body(SEARCH_ON, harness="codex")),
    ("Tool search requires deferred functions, and deferred functions require tool search.", "agent.tools",
     session_body([{"type": "tool_search"}, fn()], harness="claude_code")),
    ("Tool search requires deferred functions, and deferred functions require tool search.", "agent.tools",
     session_body([fn(defer_loading=True)], harness="claude_code")),
    ("The harness does not support json_schema output.", "agent.text.format",
     session_body(text={"format": SCHEMA}, harness="minimax_code")),
    ("This runtime requires an object schema with lossless JSON numbers.", "agent.text.format.schema",
     session_body(text={"format": {"type": "json_schema", "schema": {"properties": {}}}}, harness="claude_code")),
    ("This runtime requires an object schema with lossless JSON numbers.", "agent.text.format.schema",
     '{"environment":{"type":"none"},"input":"x","x_agents_core":{"harness":"claude_code"},"agent":{"model":"m",'
     '"text":{"format":{"type":"json_schema","schema":{"type":"object","maximum":12345678901234567891}}}}}'),
    ("This runtime requires an object schema with lossless JSON numbers.", "agent.text.format.schema",
     '{"environment":{"type":"none"},"input":"x","x_agents_core":{"harness":"claude_code"},"agent":{"model":"m",'
     '"text":{"format":{"type":"json_schema","schema":{"type":"object","minimum":0.10000000000000000001}}}}}'),
    ("Unsupported value for 'agent.tools[0].mode': 'cached'. The harness supports 'disabled' and 'live'.",
     "agent.tools[0].mode", session_body([{"type": "web_search", "mode": "cached"}], harness="claude_code")),
    ("Unsupported value for 'agent.tools[1].mode': 'live'. The harness supports 'disabled'.",
     "agent.tools[1].mode", session_body([fn(), {"type": "web_search"}], harness="minimax_code")),
    ("Unsupported value for 'agent.tools[0].context_size': the harness supports 'medium' only.",
     "agent.tools[0].context_size",
     session_body([{"type": "web_search", "context_size": "low"}], harness="claude_code")),
    ("The harness does not support 'agent.tools[0].allowed_domains'.", "agent.tools[0].allowed_domains",
     session_body([{"type": "web_search", "allowed_domains": []}], harness="claude_code")),
    ("The harness does not support 'agent.tools[0].location'.", "agent.tools[0].location",
     session_body([{"type": "web_search", "mode": "disabled", "location": {}}], harness="minimax_code")),
    ("Unsupported value for 'agent.tools[0].enabled': the harness accepts false only.", "agent.tools[0].enabled",
     session_body([{"type": "programmatic_tool_calling"}], harness="claude_code")),
    ("Nonempty MCP request_metadata is not supported yet.", "agent.tools[0].request_metadata",
     session_body([http_mcp(request_metadata={"a": 1})])),
    ("Inline MCP authorization is not supported; use credential_id.", "agent.tools[0].transport.authorization",
     session_body([http_mcp(transport={"authorization": "Bearer s3cret"})])),
    ("Inline MCP env is not supported; declare env_vars and set the values in the Environment.",
     "agent.tools[0].transport.env", session_body([stdio_mcp(transport={"env": {"A": "b"}})], env=SELF_HOSTED)),
    ("The configured engine starts MCP stdio servers in the workspace directory; set cwd to it.",
     "agent.tools[0].transport.cwd",
     session_body([stdio_mcp(cwd="/tmp")], harness="claude_code", env=SELF_HOSTED)),
    ("The harness requires allowed_tools null.", "agent.tools[0].allowed_tools",
     session_body([stdio_mcp(allowed_tools=[])], harness="claude_code", env=SELF_HOSTED)),
    ("The configured engine cannot start MCP stdio servers in the declared cwd.", "agent.tools[0].transport.cwd",
     session_body([stdio_mcp()], harness="minimax_code", env=SELF_HOSTED)),
    ("MCP stdio servers run in the Environment and need a workspace placement (openai_hosted or self_hosted).",
     "agent.tools[0].transport", session_body([stdio_mcp()])),
    ("MCP stdio servers require connection_origin environment.", "agent.tools[0].connection_origin",
     session_body([stdio_mcp(connection_origin="service")], env=SELF_HOSTED)),
    ("MCP stdio servers take no credential_id.", "agent.tools[0].credential_id",
     session_body([stdio_mcp(credential_id="cred_1")], env=SELF_HOSTED)),
    ("MCP stdio command must be nonempty.", "agent.tools[0].transport.command",
     session_body([stdio_mcp(transport={"command": " "})], env=SELF_HOSTED)),
    ("MCP stdio cwd must be an absolute path.", "agent.tools[0].transport.cwd",
     session_body([stdio_mcp(cwd="relative/dir")], env=SELF_HOSTED)),
    ("MCP stdio env_vars holds variable names; 'A=b' is not one.", "agent.tools[0].transport.env_vars",
     session_body([stdio_mcp(transport={"env_vars": ["A=b"]})], env=SELF_HOSTED)),
    ("MCP stdio command, args, cwd and env_vars cannot contain NUL.", "agent.tools[0].transport",
     session_body([stdio_mcp(transport={"args": ["a\x00b"]})], env=SELF_HOSTED)),
    ("Service-origin MCP requires environment none.", "agent.tools[0].connection_origin",
     session_body([http_mcp(connection_origin="service")], env=SELF_HOSTED)),
    ("Environment-origin MCP requires a managed or self-hosted execution environment.",
     "agent.tools[0].connection_origin", session_body([http_mcp(connection_origin="environment")])),
    ("The harness does not support this MCP connection origin.", "agent.tools[0].connection_origin",
     session_body([http_mcp()], harness="minimax_code")),
    ("The harness requires allowed_tools null.", "agent.tools[0].allowed_tools",
     session_body([http_mcp(allowed_tools=[], connection_origin="environment")], harness="minimax_code",
                  env=SELF_HOSTED)),
    ("The harness does not support required MCP servers.", "agent.tools[0].required",
     session_body([http_mcp(required=True, connection_origin="environment")], harness="minimax_code",
                  env=SELF_HOSTED)),
    ("Service-origin MCP requires environment none.", "agent.tools[0].connection_origin",
     session_body([http_mcp()], env=SELF_HOSTED)),  # omitted means service
    *[("MCP server_url must be an absolute HTTP or HTTPS URL without credentials or fragment.",
       "agent.tools[0].transport.server_url", session_body([http_mcp(url=u)]))
      for u in ["/relative", "ftp://x.example/mcp", "https://user:pw@x.example/mcp", "https://x.example/mcp#frag",
                "https:///nohost", "https://x.example:0/", "https://x.exa mple/"]],
    ("The configured engine does not accept '${' in MCP server_url.", "agent.tools[0].transport.server_url",
     session_body([http_mcp(url="https://x.example/${TENANT}/mcp")], harness="claude_code")),
    ("The configured engine does not accept '${' in MCP header values.", "agent.tools[0].transport.headers",
     session_body([http_mcp(transport={"headers": {"X-Tenant": "${TENANT}"}})], harness="claude_code")),
    ("MCP header name 'X Bad' is not a valid HTTP header name.", "agent.tools[0].transport.headers",
     session_body([http_mcp(transport={"headers": {"X Bad": "1"}})])),
    ("MCP header 'X-A' has a value that is not a valid HTTP header value.", "agent.tools[0].transport.headers",
     session_body([http_mcp(transport={"headers": {"X-A": "a\r\nInjected: 1"}})])),
    ("MCP header names must be unique ignoring case; 'x-a' repeats.", "agent.tools[0].transport.headers",
     session_body([http_mcp(transport={"headers": {"X-A": "1", "x-a": "2"}})])),
    ("An MCP Authorization header is not accepted; credentials enter only through a Vault credential.",
     "agent.tools[0].transport.headers",
     session_body([http_mcp(transport={"headers": {"authorization": "Bearer x"}})])),
    ("The MCP server label 'codex' is reserved by the configured engine.", "agent.tools[0].server_label",
     session_body([http_mcp(label="codex")])),
    ("The configured engine accepts MCP server labels of ASCII letters, digits, underscore and hyphen, except "
     "'functions'.", "agent.tools[0].server_label",
     session_body([http_mcp(label="tíckets")], harness="claude_code")),
    ("The configured engine normalizes the MCP tool names 'get.ticket' and 'get_ticket' of server 'tickets' to "
     "the same name.", "agent.tools[0].allowed_tools",
     session_body([http_mcp(allowed_tools=["get.ticket", "get_ticket"])], harness="claude_code")),
    ("The configured engine serves the Agent's functions as the MCP server 'functions'; choose another label.",
     "agent.tools[1].server_label",
     session_body([fn(), http_mcp(label="functions")], harness="minimax_code", env=SELF_HOSTED)),
    ("The harness requires function parameters with an explicit top-level type \"object\".",
     "agent.tools[0].parameters", session_body([fn(params={})], harness="claude_code")),
]


@pytest.mark.parametrize("message,param,body", MESSAGES, ids=[f"{i}-{m[0][:50]}" for i, m in enumerate(MESSAGES)])
def test_admission_message(message, param, body):
    rejected(body, message, param)


def test_claude_cwd_compares_against_the_hosted_workspace_directory():
    body = session_body([stdio_mcp(cwd="/workspace")], harness="claude_code", env={"type": "openai_hosted"})
    assert resolve(body).environment["workspace_directory"] == "/workspace"


def test_saving_never_qualifies_execution_but_session_admission_does():
    """An Agent keeps `cached`; a Session on Claude rejects it unless it replaces the saved tools."""
    saved = SavedAgent(id="agent_1", name="a", config={"model": "m", "tools": [{"type": "web_search", "mode": "cached"}]})
    body = {"environment": {"type": "none"}, "input": "x", "x_agents_core": {"harness": "claude_code"}}
    with pytest.raises(UnsupportedConfiguration) as err:
        resolve(body, saved=saved)
    assert err.value.param == "agent.tools[0].mode"
    replaced = {**body, "agent": {"tools": [{"type": "web_search", "mode": "live"}]}}
    assert resolve(replaced, saved=saved).tools[0]["mode"] == "live"


def test_codex_reads_numbers_losslessly():
    text = ('{"environment":{"type":"none"},"input":"x","x_agents_core":{"harness":"codex"},"agent":{"model":"m",'
            '"text":{"format":{"type":"json_schema","schema":{"maximum":12345678901234567891,"type":"object"}}}}}')
    snapshot = resolve(text)
    assert snapshot.output_schema["maximum"] == 12345678901234567891
    assert "12345678901234567891" in snapshot.to_json()


def test_claude_accepts_binary64_exact_numbers():
    text = ('{"environment":{"type":"none"},"input":"x","x_agents_core":{"harness":"claude_code"},"agent":{"model":"m",'
            '"text":{"format":{"type":"json_schema","schema":{"type":"object","maximum":0.1,"minimum":-3,"x":true}}}}}')
    assert resolve(text).output_schema["maximum"] == __import__("decimal").Decimal("0.1")


def test_minimax_environment_mcp_with_null_allowed_tools_is_admitted():
    snapshot = resolve(session_body([http_mcp(allowed_tools=None, connection_origin="environment")],
                                    harness="minimax_code", env=SELF_HOSTED))
    assert snapshot.tools[0]["connection_origin"] == "environment"
    assert snapshot.tools[0]["allowed_tools"] is None


def test_default_harness_applies_when_none_is_sent():
    body = session_body()
    del body["x_agents_core"]
    assert resolve(body, default_harness="claude_code").harness == "claude_code"


def test_agent_harness_applies_before_the_deployment_default():
    saved = SavedAgent(id="agent_1", name=None, config={"model": "m"}, harness="minimax_code")
    body = {"environment": {"type": "none"}, "input": "x"}
    assert resolve(body, saved=saved, default_harness="codex").harness == "minimax_code"


def test_workspace_directory_is_the_claude_cwd():
    assert resolve(session_body([stdio_mcp(cwd=WORKSPACE + "/")], harness="claude_code", env=SELF_HOSTED))
