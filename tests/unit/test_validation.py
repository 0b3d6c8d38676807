"""pydantic's first error -> the official protocol message (agents_contract.validation): the JSON type names, the
quoted value lists, the request paths (union tags left out), and the generic translations any constraint gets, so
nothing a model rejects becomes a 500. Pure."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal, Union

import pytest
from pydantic import BaseModel, ConfigDict, Discriminator, Field

from agents_contract import validation, wire
from agents_contract.errors import InvalidRequest
from tests.unit.helpers import session_body


@pytest.mark.parametrize("value, name", [
    (None, "null"), (True, "a boolean"), (False, "a boolean"), (0, "an integer"), (-7, "an integer"),
    (1.5, "a number"), (Decimal("1.50"), "a number"), ("", "a string"), ([], "an array"), ({}, "an object"),
    ((1,), "an unsupported value"), (b"x", "an unsupported value"),
])
def test_json_type_name(value, name):
    assert validation.json_type_name(value) == name


@pytest.mark.parametrize("values, text", [
    (("text",), "'text'"),
    (["text", "json_schema"], "'text' and 'json_schema'"),
    (("disabled", "cached", "live"), "'disabled', 'cached', and 'live'"),
])
def test_quoted_list(values, text):
    assert validation.quoted_list(values) == text


_APPROVAL_TAGS = ",".join(wire.INPUT_EVENT_TYPES[3:])


@pytest.mark.parametrize("schema, loc, prefix, path", [
    (wire.SessionCreate, (), "", ""),
    (wire.SessionCreate, ("name",), "", "name"),
    (wire.InlineAgent, ("tools", 0, "function", "parameters"), "agent", "agent.tools[0].parameters"),
    (wire.SessionCreate, ("agent", "tools", 2, "mcp", "transport", "http", "server_url"), "",
     "agent.tools[2].transport.server_url"),
    (wire.SessionCreate, ("environment", "self_hosted", "workspace_directory"), "", "environment.workspace_directory"),
    (wire.SessionCreate, ("input", "array", 0, "content", 1, "input_image", "image_url"), "",
     "input[0].content[1].image_url"),
    (wire.EventBatch, ("events", 0, _APPROVAL_TAGS, "call_id"), "", "events[0].call_id"),  # a variant's tags, joined
    (wire.SessionCreate, ("metadata", "function"), "", "metadata.function"),  # a tag's name after a plain member
    # A member named like some union's tag is a member wherever no union of the request stands.
    (wire.SessionCreate, ("input", "array", 0, "content", 0, "input_text", "text"), "", "input[0].content[0].text"),
    (wire.EventBatch, ("events", 1, "agent.session.input.message", "input", 0, "content", 0, "input_text", "text"), "",
     "events[1].input[0].content[0].text"),
    (wire.EventBatch, ("events", 0, "agent.session.input.tool_result", "output", "array", 2, "input_text", "text"), "",
     "events[0].output[2].text"),
    (wire.SessionCreate, ("agent", "text", "format", "json_schema", "text"), "", "agent.text.format.text"),
    (wire.SessionCreate, ("agent", "tools", 0, "function", "function"), "", "agent.tools[0].function"),
    (wire.SessionCreate, ("agent", "tools", 0, "mcp", "transport", "http", "stdio"), "", "agent.tools[0].transport.stdio"),
    # Past a member the schema does not know, the rest is the request's own names.
    (wire.SessionCreate, ("agent", "unknown", "function", "text"), "", "agent.unknown.function.text"),
])
def test_render_path_leaves_out_union_tags_and_only_them(schema, loc, prefix, path):
    assert validation.render_path(schema, loc, prefix) == path


class _Constrained(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    labels: list[str] = Field(default=None, min_length=1, max_length=2)
    count: int = Field(default=None, ge=1, le=10)
    step: int = Field(default=None, multiple_of=3)


@pytest.mark.parametrize("body, message, param", [
    ({"labels": []}, "Invalid 'labels': list should have at least 1 item after validation, not 0.", "labels"),
    ({"labels": ["a", "b", "c"]}, "Invalid 'labels': list should have at most 2 items after validation, not 3.",
     "labels"),
    ({"count": 0}, "Invalid 'count': input should be greater than or equal to 1.", "count"),
    ({"count": 11}, "Invalid 'count': input should be less than or equal to 10.", "count"),
    ({"step": 4}, "Invalid value for 'step': Input should be a multiple of 3.", "step"),  # any other complaint
    ({"count": "1"}, "Invalid type for 'count': expected an integer, but got a string instead.", "count"),
    ({"unknown": 1}, "Unknown parameter: 'unknown'.", "unknown"),
])
def test_constraint_errors_keep_the_official_envelope(body, message, param):
    with pytest.raises(InvalidRequest) as err:
        validation.parse(_Constrained, body, prefix="")
    assert (err.value.message, err.value.param, err.value.code) == (message, param, "invalid_request_error")


@pytest.mark.parametrize("body, prefix, message, param", [
    ("x", "", "Invalid type for 'body': expected an object, but got a string instead.", None),
    (None, "", "Invalid type for 'body': expected an object, but got null instead.", None),
    ([], "agent.tools[0].transport", "Invalid type for 'agent.tools[0].transport': expected an object, but got an "
     "array instead.", "agent.tools[0].transport"),
])
def test_a_body_that_is_not_an_object(body, prefix, message, param):
    with pytest.raises(InvalidRequest) as err:
        validation.parse(wire.HttpTransport, body, prefix=prefix)
    assert (err.value.message, err.value.param) == (message, param)


def agent(**members):
    body = session_body()
    body["agent"].update(members)
    return body


@pytest.mark.parametrize("body, message, param", [
    (agent(tools=[{"type": "code_interpreter"}]), "Invalid value: 'code_interpreter'. Supported values are: "
     "'function', 'tool_search', 'programmatic_tool_calling', 'mcp', and 'web_search'.", "agent.tools[0].type"),
    (agent(tools=[{"type": 5}]), "Invalid type for 'agent.tools[0].type': expected a string, but got an integer "
     "instead.", "agent.tools[0].type"),
    ({**session_body(), "environment": {"type": None}}, "Invalid type for 'environment.type': expected a string, but "
     "got null instead.", "environment.type"),
    (agent(tools=[{"type": "web_search", "mode": "sometimes"}]), "Invalid value: 'sometimes'. Supported values are: "
     "'disabled', 'cached', and 'live'.", "agent.tools[0].mode"),
    (agent(reasoning={"effort": 5}), "Invalid type for 'agent.reasoning.effort': expected a string, but got an "
     "integer instead.", "agent.reasoning.effort"),
    ({**session_body(), "input": [{"role": True, "content": []}]}, "Invalid type for 'input[0].role': expected a "
     "string, but got a boolean instead.", "input[0].role"),
])
def test_tags_and_enumerations_answer_the_official_messages(body, message, param):
    with pytest.raises(InvalidRequest) as err:
        validation.parse(wire.SessionCreate, body)
    assert (err.value.message, err.value.param) == (message, param)


TEXT_5 = [{"role": "user", "content": [{"type": "input_text", "text": 5}]}]


@pytest.mark.parametrize("model, body, message, param", [
    (wire.SessionCreate, {**session_body(), "input": TEXT_5}, "Invalid type for 'input[0].content[0].text': expected "
     "a string, but got an integer instead.", "input[0].content[0].text"),
    (wire.EventBatch, {"events": [{"type": "agent.session.input.message", "input": TEXT_5}]}, "Invalid type for "
     "'events[0].input[0].content[0].text': expected a string, but got an integer instead.",
     "events[0].input[0].content[0].text"),
    (wire.EventBatch, {"events": [{"type": "agent.session.input.tool_result", "turn_id": "t", "call_id": "c",
                                   "success": True, "output": [{"type": "input_text", "text": 5}]}]},
     "Invalid type for 'events[0].output[0].text': expected a string, but got an integer instead.",
     "events[0].output[0].text"),
    (wire.SessionCreate, agent(text={"format": {"type": "json_schema", "schema": {"type": "object"}, "text": 1}}),
     "Unknown parameter: 'agent.text.format.text'.", "agent.text.format.text"),
])
def test_a_member_named_like_a_union_tag_is_named(model, body, message, param):
    with pytest.raises(InvalidRequest) as err:
        validation.parse(model, body)
    assert (err.value.message, err.value.param) == (message, param)


class _Circle(BaseModel):
    kind: Literal["circle"]
    text: str


class _Square(BaseModel):
    kind: Literal["square", "box"]
    circle: str


class _Line(BaseModel):
    kind: Literal["line"]
    square: str


class _Drawing(BaseModel):
    # a union nested in a union (its variants share the outer tag), a string Discriminator and a plain union
    shapes: list[Annotated[Union[Annotated[Union[_Circle, _Square], Field(discriminator="kind")], _Line],
                           Discriminator("kind")]]
    by_name: dict[str, Annotated[Union[_Circle, _Line], Field(discriminator="kind")]] = {}
    either: Union[int, list[_Circle]] = 0


@pytest.mark.parametrize("loc, path", [
    (("shapes", 0, "circle", "text"), "shapes[0].text"),
    (("shapes", 0, "box", "circle"), "shapes[0].circle"),
    (("shapes", 0, "square,box", "circle"), "shapes[0].circle"),
    (("shapes", 0, "line", "square"), "shapes[0].square"),
    (("shapes", 0, "circle,line", "text"), "shapes[0].circle,line.text"),  # two variants' tags: no tag
    (("by_name", "circle", "circle", "text"), "by_name.circle.text"),  # a key, then the tag
    (("either", "list[_Circle]", 0, "text"), "either.list[_Circle][0].text"),  # a plain union's members stay
])
def test_render_path_follows_the_schema(loc, path):
    assert validation.render_path(_Drawing, loc) == path
