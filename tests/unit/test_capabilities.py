"""Runtime capability declarations and what a Turn of a Session requires."""

import pytest

from agents_contract import capabilities as caps
from agents_contract.errors import InvalidRequest
from tests.unit.helpers import SELF_HOSTED, fn, http_mcp, resolve, session_body, stdio_mcp

SCHEMA = {"format": {"type": "json_schema", "schema": {"type": "object"}}}


def test_a_complete_declaration_parses():
    declared = caps.full_declaration({"streaming", "function_tools"})
    assert caps.parse_declaration(declared) == {"streaming", "function_tools"}


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d.pop("streaming"), "Missing required parameter: 'capabilities.streaming'."),
    (lambda d: d.update(streaming=None), "Invalid type for 'capabilities.streaming': expected a boolean."),
    (lambda d: d.update(streaming="yes"), "Invalid type for 'capabilities.streaming': expected a boolean."),
    (lambda d: d.update(teleport=True), "Unknown parameter: 'capabilities.teleport'."),
])
def test_declaration_must_be_complete_and_boolean(mutate, message):
    declared = caps.full_declaration(caps.VOCABULARY)
    mutate(declared)
    with pytest.raises(InvalidRequest) as err:
        caps.parse_declaration(declared)
    assert err.value.message == message


def test_declaration_must_be_an_object():
    with pytest.raises(InvalidRequest):
        caps.parse_declaration(["streaming"])


BASE_NONE = set(caps.ALWAYS) | {"environment_none"}
BASE_WS = set(caps.ALWAYS) | {"local_environment"}

REQUIRED = [
    ("always required plus environment_none", session_body(), BASE_NONE),
    ("workspace placement", session_body(env=SELF_HOSTED), BASE_WS),
    ("function_tools when functions are declared", session_body([fn()]), BASE_NONE | {"function_tools"}),
    ("structured output", session_body(text=SCHEMA), BASE_NONE | {"structured_output", "message_items"}),
    ("workspace structured output", session_body(text=SCHEMA, env=SELF_HOSTED),
     BASE_WS | {"structured_output", "message_items", "workspace_structured_output"}),
    ("tool search", session_body([{"type": "tool_search"}, fn(defer_loading=True)], harness="claude_code"),
     BASE_NONE | {"function_tools", "tool_search"}),
    ("workspace tool search derives from workspace_tool_search",
     session_body([{"type": "tool_search"}, fn(defer_loading=True)], harness="claude_code", env=SELF_HOSTED),
     BASE_WS | {"function_tools", "workspace_tool_search"}),
    # "The Runtime needs only the execution_controls capability" (the spec wins over the notes' matrix).
    ("web search needs only execution_controls", session_body([{"type": "web_search", "mode": "disabled"}]),
     BASE_NONE),
    ("web search live needs only execution_controls",
     session_body([{"type": "web_search", "mode": "live"}], harness="codex"), BASE_NONE),
    ("programmatic tool calling disabled needs only execution_controls",
     session_body([{"type": "programmatic_tool_calling", "enabled": False}]), BASE_NONE),
    ("programmatic tool calling enabled needs only execution_controls",
     session_body([{"type": "programmatic_tool_calling", "enabled": True}]), BASE_NONE),
    ("any public MCP server needs mcp_http_tools", session_body([stdio_mcp()], env=SELF_HOSTED),
     BASE_WS | {"mcp_http_tools"}),
    ("a required server", session_body([http_mcp(required=True)]), BASE_NONE | {"mcp_http_tools", "mcp_http_required"}),
]


@pytest.mark.parametrize("case,body,expected", REQUIRED, ids=[r[0] for r in REQUIRED])
def test_required_capabilities(case, body, expected):
    assert caps.required_capabilities(resolve(body)) == expected


def test_images_in_messages_and_results_need_their_capabilities():
    snapshot = resolve(session_body([fn()]))
    need = caps.required_capabilities(
        snapshot,
        messages=[{"content": [{"type": "input_image", "image_url": "data:image/png;base64,AA=="}]}],
        results=[{"output": [{"type": "input_image", "image_url": "data:image/png;base64,AA=="}]}],
    )
    assert {"message_images", "function_result_images"} <= need


def test_an_advertisement_alone_never_enables_an_operation():
    """A Runtime that advertises tool_search does not make tool search admissible on Codex."""
    from agents_contract.errors import UnsupportedConfiguration
    with pytest.raises(UnsupportedConfiguration):
        resolve(session_body([{"type": "tool_search"}, fn(defer_loading=True)], harness="codex"))
    assert "tool_search" in caps.HARNESS_CAPABILITIES["scripted"]


def test_covers_and_missing():
    need = caps.required_capabilities(resolve(session_body([fn()])))
    assert caps.covers(caps.HARNESS_CAPABILITIES["codex"], need)
    assert caps.missing(frozenset(caps.ALWAYS), need) == ["environment_none", "function_tools"]
    for name, advertised in caps.HARNESS_CAPABILITIES.items():
        assert advertised <= set(caps.VOCABULARY), name
