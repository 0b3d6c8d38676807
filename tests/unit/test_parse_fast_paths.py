"""The parse and admission fast paths answer exactly as the one-by-one checks: the same first
error (message and param) or the same snapshot, whatever mix of tools a request carries."""

from __future__ import annotations

import random
from typing import Any, Optional

import pytest

from agents_contract import admission, parser
from agents_contract.errors import InvalidRequest, UnsupportedConfiguration
from tests.unit.helpers import SELF_HOSTED, fn, http_mcp, resolve, session_body, stdio_mcp

GOOD = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
FUNCTION_VARIANTS: list[dict[str, Any]] = [
    fn("a", params=GOOD),
    fn("b", params={"properties": {}}),  # no type: fine
    fn("a", params=GOOD),  # a duplicate name once "a" is in
    fn("", params=GOOD),
    fn(" \t", params=GOOD),
    fn("c", params={"type": "string"}),  # non-object root
    fn("d", params={"type": ["object"]}),  # non-object root (a list)
    fn("e", params={"type": "object", "properties": {"x": {"type": "nope"}}}),  # invalid schema
    fn("f", params={"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}),
    fn("g", params={"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                    "properties": {"x": {"minimum": "1"}}}),
    fn("h", params={"$schema": None, "type": "object"}),
    fn("i", params={"$schema": "urn:unknown", "type": "object"}),
    fn("j", params={"type": "object", "pattern": "("}),
    fn("k", params={"type": "object", "minProperties": 1.5}),
]
OTHER_VARIANTS: list[dict[str, Any]] = [
    http_mcp("one"),
    http_mcp("one"),  # a duplicate label once "one" is in
    http_mcp(""),
    {"type": "web_search"},
    {"type": "programmatic_tool_calling"},
]


def _outcome(body: dict[str, Any]) -> tuple[Any, ...]:
    try:
        request = parser.parse_session_create(body)
    except InvalidRequest as e:
        return ("error", e.message, e.param)
    return ("ok", request.model_dump(by_alias=True))


@pytest.mark.parametrize("seed", range(8))
def test_check_tools_fast_path_matches_one_by_one(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    for _ in range(60):
        tools = [fn(f"ok{i}", params=GOOD) if rng.random() < 0.6
                 else rng.choice(FUNCTION_VARIANTS if rng.random() < 0.6 else OTHER_VARIANTS)
                 for i in range(rng.randrange(1, 7))]
        body = session_body(tools)
        fast = _outcome(body)
        with monkeypatch.context() as m:
            m.setattr(parser, "_functions_pass", lambda functions: False)
            slow = _outcome(body)
        assert fast == slow, tools


def test_functions_pass_says_not_sure_when_the_rust_check_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    request = parser.parse_session_create(session_body([fn("a", params=GOOD)]))
    functions = list(request.agent.tools)
    assert parser._functions_pass(functions) is True

    class Broken:
        def is_valid(self, instance: Any) -> bool:
            raise RuntimeError("no")

    monkeypatch.setattr(parser, "_fast_parameters_validator", lambda: Broken())
    assert parser._functions_pass(functions) is False
    monkeypatch.setattr(parser, "_fast_parameters_validator", lambda: None)
    assert parser._functions_pass(functions) is False
    parser.check_tools(functions, "agent.")  # the one-by-one checks still pass it
    monkeypatch.setattr(parser, "_fast_meta_validator", lambda: Broken())
    assert parser._surely_valid(GOOD) is False
    assert parser.schema_error(GOOD) is None  # the full check decides
    assert parser.schema_error({"type": "nope"}) is not None


def test_parameters_validator_checks_each_item() -> None:
    validator = parser._fast_parameters_validator()
    assert validator.is_valid([GOOD, {"properties": {}}, {"type": "object", "$defs": {"x": {"type": "string"}}}])
    for bad in ({"type": "string"}, {"$schema": None}, {"properties": {"x": {"type": "nope"}}},
                {"items": {"minLength": -1}}, {"$defs": {"x": {"pattern": "("}}}):
        assert not validator.is_valid([GOOD, bad])


def test_resolved_functions_are_copies_with_the_default_added() -> None:
    sent = [fn("a", params=GOOD), fn("b", params=GOOD, defer_loading=True), fn("c", params=GOOD, **{"async": True})]
    snapshot = resolve(session_body([*sent[:1], sent[2]]))
    a, c = snapshot.tools
    assert list(a) == ["type", "name", "description", "parameters", "defer_loading"] and a["defer_loading"] is False
    assert list(c)[-1] == "defer_loading" and c["async"] is True
    body = session_body([sent[1], {"type": "tool_search"}], harness="claude_code")
    request = parser.parse_session_create(body)
    resolved = parser.resolve_tools(request.agent.tools, body["agent"]["tools"])
    assert resolved[0] == sent[1] and resolved[0] is not body["agent"]["tools"][0]
    assert list(resolved[0]) == list(sent[1])
    assert resolved[1] == {"type": "tool_search"}


def _admission(body: dict[str, Any]) -> Optional[tuple[str, Optional[str]]]:
    try:
        resolve(body)
    except UnsupportedConfiguration as e:
        return (e.message, e.param)
    return None


@pytest.mark.parametrize("tools, harness, expected", [
    ([fn("a"), fn("b", params={"properties": {}})], "claude_code",
     ("The harness requires function parameters with an explicit top-level type \"object\".",
      "agent.tools[1].parameters")),
    ([http_mcp("x"), fn("a", params={"properties": {}})], "claude_code",
     ("The harness requires function parameters with an explicit top-level type \"object\".",
      "agent.tools[1].parameters")),
    ([{"type": "tool_search"}, fn("a")], "claude_code",
     ("Tool search requires deferred functions, and deferred functions require tool search.", "agent.tools")),
    ([fn("a", defer_loading=True)], "claude_code",
     ("Tool search requires deferred functions, and deferred functions require tool search.", "agent.tools")),
    ([fn("a", defer_loading=True), {"type": "tool_search"}], "codex",
     ("The harness does not support tool search.", "agent.tools")),
    ([fn("a", defer_loading=True), {"type": "tool_search"}, http_mcp("codex")], "claude_code", None),
    ([http_mcp("codex"), fn("a")], "codex",
     ("The MCP server label 'codex' is reserved by the configured engine.", "agent.tools[0].server_label")),
    ([fn("a"), http_mcp("t", url="ftp://x")], "codex",
     ("MCP server_url must be an absolute HTTP or HTTPS URL without credentials or fragment.",
      "agent.tools[1].transport.server_url")),
    ([http_mcp("t", url="https://u:p@x.example/")], "codex",
     ("MCP server_url must be an absolute HTTP or HTTPS URL without credentials or fragment.",
      "agent.tools[0].transport.server_url")),
    ([http_mcp("t", url="https://x.example:0/")], "codex",
     ("MCP server_url must be an absolute HTTP or HTTPS URL without credentials or fragment.",
      "agent.tools[0].transport.server_url")),
    ([http_mcp("t", url="https://[::1/")], "codex",
     ("MCP server_url must be an absolute HTTP or HTTPS URL without credentials or fragment.",
      "agent.tools[0].transport.server_url")),
    ([http_mcp("t", url="https://x.example/a b")], "codex",
     ("MCP server_url must be an absolute HTTP or HTTPS URL without credentials or fragment.",
      "agent.tools[0].transport.server_url")),
])
def test_admission_first_rejection(tools: list[dict[str, Any]], harness: str,
                                   expected: Optional[tuple[str, Optional[str]]]) -> None:
    assert _admission(session_body(tools, harness=harness)) == expected


def test_admission_accepts_a_mix_in_a_workspace() -> None:
    snapshot = resolve(session_body([fn("a"), stdio_mcp(), http_mcp(connection_origin="environment"),
                                     {"type": "web_search"}], env=SELF_HOSTED))
    assert [t["type"] for t in snapshot.tools] == ["function", "mcp", "mcp", "web_search"]
    assert admission._server_url_ok("https://mcp.example.com/mcp") is True
