"""Protocol errors (request shape) use the official fields and messages (contract notes)."""

import pytest

from agents_contract import parser
from agents_contract.errors import InvalidRequest
from tests.unit.helpers import fn, http_mcp, resolve, session_body

FN = fn()

AGENT_CASES = [
    ("missing member", {"tools": [{"type": "function", "name": "lookup", "description": "d"}]},
     "Missing required parameter: 'tools[0].parameters'.", "tools[0].parameters"),
    ("missing model", {"model": None},
     "Invalid type for 'model': expected a string, but got null instead.", "model"),
    ("unknown member", {"tools": [{**FN, "strict": True}]},
     "Unknown parameter: 'tools[0].strict'.", "tools[0].strict"),
    ("wrong type", {"tools": [{**FN, "defer_loading": "yes"}]},
     "Invalid type for 'tools[0].defer_loading': expected a boolean, but got a string instead.",
     "tools[0].defer_loading"),
    ("defer_loading null is a type error", {"tools": [{**FN, "defer_loading": None}]},
     "Invalid type for 'tools[0].defer_loading': expected a boolean, but got null instead.",
     "tools[0].defer_loading"),
    ("bad tool type", {"tools": [{"type": "code_interpreter"}]},
     "Invalid value: 'code_interpreter'. Supported values are: 'function', 'tool_search', "
     "'programmatic_tool_calling', 'mcp', and 'web_search'.", "tools[0].type"),
    ("tool type missing", {"tools": [{"name": "x"}]}, "Missing required parameter: 'tools[0].type'.", "tools[0].type"),
    ("bad web_search mode", {"tools": [{"type": "web_search", "mode": "sometimes"}]},
     "Invalid value: 'sometimes'. Supported values are: 'disabled', 'cached', and 'live'.", "tools[0].mode"),
    ("bad context_size", {"tools": [{"type": "web_search", "context_size": "huge"}]},
     "Invalid value: 'huge'. Supported values are: 'low', 'medium', and 'high'.", "tools[0].context_size"),
    ("bad text.format type", {"text": {"format": {"type": "xml"}}},
     "Invalid value: 'xml'. Supported values are: 'text' and 'json_schema'.", "text.format.type"),
    ("text.format name is unknown", {"text": {"format": {"type": "json_schema", "name": "x", "schema": {}}}},
     "Unknown parameter: 'text.format.name'.", "text.format.name"),
    ("text.format strict is unknown", {"text": {"format": {"type": "json_schema", "strict": True, "schema": {}}}},
     "Unknown parameter: 'text.format.strict'.", "text.format.strict"),
    ("text.format without schema", {"text": {"format": {"type": "json_schema"}}},
     "Missing required parameter: 'text.format.schema'.", "text.format.schema"),
    ("explicit non-object output root", {"text": {"format": {"type": "json_schema", "schema": {"type": "array"}}}},
     'text.format.schema must have top-level type "object"; got "array"', "text.format.schema"),
    ("duplicate function name", {"tools": [FN, FN]}, "duplicate function tool name: lookup", None),
    ("duplicate web_search", {"tools": [{"type": "web_search"}, {"type": "web_search", "mode": "disabled"}]},
     "duplicate web_search tool", None),
    ("duplicate tool_search", {"tools": [{"type": "tool_search"}, {"type": "tool_search"}]},
     "duplicate tool_search tool", None),
    ("tool_search has only type", {"tools": [{"type": "tool_search", "max_results": 3}]},
     "Unknown parameter: 'tools[0].max_results'.", "tools[0].max_results"),
    ("non-object function schema root", {"tools": [fn(params={"type": "string"})]},
     "Invalid schema for function 'lookup': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"string\"'.",
     "tools[0].parameters"),
    ("blank function name", {"tools": [fn(name="  ")]},
     "Invalid 'tools[0].name': function names must be nonblank.", "tools[0].name"),
    ("empty server label", {"tools": [http_mcp(label="")]},
     "Invalid 'tools[0].server_label': server_label must be nonempty.", "tools[0].server_label"),
    ("duplicate server label", {"tools": [http_mcp(), http_mcp()]}, "duplicate mcp server_label: tickets", None),
    ("saved transport has no authorization", {"tools": [http_mcp(transport={"authorization": "Bearer x"})]},
     "Unknown parameter: 'tools[0].transport.authorization'.", "tools[0].transport.authorization"),
    ("saved transport has no env", {"tools": [{"type": "mcp", "server_label": "s", "transport": {
        "type": "stdio", "command": "c", "cwd": "/w", "env": {"A": "b"}}}]},
     "Unknown parameter: 'tools[0].transport.env'.", "tools[0].transport.env"),
    ("bad transport type", {"tools": [http_mcp(transport={"type": "sse"})]},
     "Invalid value: 'sse'. Supported values are: 'http' and 'stdio'.", "tools[0].transport.type"),
    ("tools not an array", {"tools": {}}, "Invalid type for 'tools': expected an array, but got an object instead.",
     "tools"),
    ("metadata too many pairs", {"metadata": {f"k{i}": "v" for i in range(17)}},
     "Invalid 'metadata': too many properties. Expected an object with at most 16 properties, but got an object "
     "with 17 properties instead.",
     "metadata"),
    ("metadata key too long", {"metadata": {"k" * 65: "v"}},
     f"Invalid property name in 'metadata': '{'k' * 65}' is too long. Expected a string with maximum length 64, "
     "but got a string with length 65 instead.", f"metadata.{'k' * 65}"),
    ("metadata value too long", {"metadata": {"k": "v" * 513}},
     "Invalid 'metadata.k': string too long. Expected a string with maximum length 512, but got a string with "
     "length 513 instead.", "metadata.k"),
    ("name too long", {"name": "n" * 129},
     "Invalid 'name': string too long. Expected a string with maximum length 128, but got a string with length 129 "
     "instead.", "name"),
    ("metadata values are strings", {"metadata": {"k": 1}},
     "Invalid type for 'metadata.k': expected a string, but got an integer instead.", "metadata.k"),
]


@pytest.mark.parametrize("case,body,message,param", AGENT_CASES, ids=[c[0] for c in AGENT_CASES])
def test_agent_save_protocol_error(case, body, message, param):
    with pytest.raises(InvalidRequest) as err:
        parser.parse_agent_create({"model": "gpt-5", **body})
    assert err.value.envelope() == {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": "invalid_request_error"}
    }
    assert err.value.status == 400


SESSION_CASES = [
    ("paths are prefixed agent.", {"tools": [{"type": "function", "name": "lookup", "description": "d"}]},
     "Missing required parameter: 'agent.tools[0].parameters'.", "agent.tools[0].parameters"),
    ("unknown member", {"tools": [{**FN, "strict": True}]},
     "Unknown parameter: 'agent.tools[0].strict'.", "agent.tools[0].strict"),
    ("non-object root on Session creation", {"text": {"format": {"type": "json_schema", "schema": {"type": "array"}}}},
     'agent.text.format.schema must have top-level type "object"; got "array"', "agent.text.format.schema"),
    ("duplicate web_search on Session creation", {"tools": [{"type": "web_search"}, {"type": "web_search"}]},
     "duplicate web_search tool", None),
    ("function schema root on Session creation", {"tools": [fn(params={"type": "array"})]},
     "Invalid schema for function 'lookup': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"array\"'.",
     "agent.tools[0].parameters"),
]


@pytest.mark.parametrize("case,agent,message,param", SESSION_CASES, ids=[c[0] for c in SESSION_CASES])
def test_session_create_protocol_error(case, agent, message, param):
    body = session_body(**agent)
    with pytest.raises(InvalidRequest) as err:
        resolve(body)
    assert (err.value.message, err.value.param, err.value.code) == (message, param, "invalid_request_error")


@pytest.mark.parametrize("body,message,param", [
    ({"environment": {"type": "none"}}, "Missing required parameter: 'input'.", "input"),
    ({"environment": {"type": "none"}, "input": None},
     "Invalid type for 'input': expected a string or an array, but got null instead.", "input"),
    ({"environment": {"type": "none"}, "input": 3},
     "Invalid type for 'input': expected a string or an array, but got an integer instead.", "input"),
    ({"environment": {"type": "none"}, "input": "x", "agent_id": None},
     "Invalid type for 'agent_id': expected a string, but got null instead.", "agent_id"),
    ({"environment": {"type": "none"}, "input": "x", "stream": None},
     "Invalid type for 'stream': expected a boolean, but got null instead.", "stream"),
    ({"environment": {"type": "moon"}, "input": "x"},
     "Invalid value: 'moon'. Supported values are: 'none', 'openai_hosted', and 'self_hosted'.", "environment.type"),
    ({"input": "x"}, "Missing required parameter: 'environment'.", "environment"),
    ({"environment": {"type": "self_hosted"}}, "Missing required parameter: 'environment.workspace_directory'.",
     "environment.workspace_directory"),
    ({"environment": {"type": "none"}, "input": [{"role": "user", "content": [{"type": "input_file"}]}]},
     "Invalid value: 'input_file'. Supported values are: 'input_text' and 'input_image'.", "input[0].content[0].type"),
    ({"environment": {"type": "none"}, "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": "data:image/jpeg;base64,not base64!"}]}]},
     "Invalid 'input[0].content[0].image_url': the data URL's base64 data is not valid.", "input[0].content[0].image_url"),
    ({"environment": {"type": "none"}, "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": "cat.png"}]}]},
     "Invalid 'input[0].content[0].image_url': expected an absolute http or https URL, or a base64 data URL.",
     "input[0].content[0].image_url"),
    ({"environment": {"type": "none"}, "input": "x", "stream_options": {"include_obfuscation": False}},
     "Invalid 'stream_options': only allowed when 'stream' is true.", "stream_options"),
    ({"environment": {"type": "none"}, "input": "x", "stream": False, "stream_options": {}},
     "Invalid 'stream_options': only allowed when 'stream' is true.", "stream_options"),
    ({"environment": {"type": "none"}, "input": "x"}, "Missing required parameter: 'agent.model'.", "agent.model"),
    ({"environment": {"type": "none"}, "input": "x", "x_agents_core": {"harness": "gpt"}},
     "Invalid value: 'gpt'. Supported values are: 'codex', 'claude_code', 'minimax_code', and 'scripted'.",
     "x_agents_core.harness"),
])
def test_session_request_shape(body, message, param):
    with pytest.raises(InvalidRequest) as err:
        resolve(body, default_harness="codex")
    assert (err.value.message, err.value.param) == (message, param)


def test_a_harness_is_required_when_none_is_selected():
    body = {"environment": {"type": "none"}, "input": "x", "agent": {"model": "m"}}
    with pytest.raises(InvalidRequest) as err:
        resolve(body, default_harness=None)
    assert err.value.param == "x_agents_core.harness"
    assert err.value.type == "invalid_request_error"


def test_body_must_be_an_object():
    with pytest.raises(InvalidRequest) as err:
        parser.parse_agent_create([1])
    assert err.value.message == "Invalid type for 'body': expected an object, but got an array instead."


def user(*parts):
    return [{"role": "user", "content": list(parts)}]


def with_input(value, harness="codex"):
    return {**session_body(harness=harness), "input": value}


TEXT = {"type": "input_text", "text": "hi"}
EMPTY = {"type": "input_text", "text": ""}
IMAGE = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}


@pytest.mark.parametrize("value,message,param", [
    ("", "Invalid 'input': empty string. Expected a string with minimum length 1, but got an empty string instead.",
     "input"),
    (user(), "Invalid 'input[0].content': empty array. Expected an array with minimum length 1, but got an empty "
             "array instead.", "input[0].content"),
    (user(EMPTY), "Invalid 'input[0].content': a message needs an image or a non-empty text part.", "input[0].content"),
    ([*user(TEXT), *user(EMPTY, EMPTY)], "Invalid 'input[1].content': a message needs an image or a non-empty text "
                                         "part.", "input[1].content"),
])
def test_an_empty_message_is_rejected_at_creation_and_in_events(value, message, param):
    with pytest.raises(InvalidRequest) as err:
        resolve(with_input(value))
    assert (err.value.message, err.value.param) == (message, param)
    if isinstance(value, list):
        with pytest.raises(InvalidRequest) as err:
            parser.parse_event_batch({"events": [{"type": "agent.session.input.message", "input": value}]})
        assert (err.value.message, err.value.param) == (message.replace("'input", "'events[0].input"),
                                                        "events[0]." + param)


@pytest.mark.parametrize("value", [user(EMPTY, TEXT), user(EMPTY, IMAGE), "x"])
def test_an_empty_text_part_beside_other_content_is_kept_as_sent(value):
    snapshot = resolve(with_input(value))
    assert snapshot is not None


@pytest.mark.parametrize("harness,accepted", [("codex", True), ("scripted", True), ("claude_code", False),
                                              ("minimax_code", False)])
@pytest.mark.parametrize("value", ["   ", "\n\t", "\u0085\ufeff\u2003", user({"type": "input_text", "text": " "})])
def test_whitespace_only_text_is_admitted_only_where_the_harness_can_run_it(harness, accepted, value):
    body = with_input(value, harness)
    if accepted:
        resolve(body)
        return
    from agents_contract.errors import UnsupportedConfiguration

    with pytest.raises(UnsupportedConfiguration) as err:
        resolve(body)
    assert err.value.message.startswith("This Session's harness does not accept a message whose text is only "
                                        "whitespace.") and err.value.param is None


def test_whitespace_beside_text_or_an_image_is_admitted_everywhere():
    for value in ["  hi  ", user({"type": "input_text", "text": " "}, IMAGE)]:
        resolve(with_input(value, "claude_code"))


def test_an_agent_update_with_a_name_over_128_characters_is_rejected():
    parser.parse_agent_update({"name": "n" * 128})
    with pytest.raises(InvalidRequest) as err:
        parser.parse_agent_update({"name": "n" * 129})
    assert err.value.param == "name"
