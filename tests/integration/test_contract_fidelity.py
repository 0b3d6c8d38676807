"""Issue 14: every request answered as the official API would, never a 500, and every rejection
writes nothing. Over HTTP through the real authorizer and handlers on moto: the official SDK with
strict response validation where it can send the request, raw HTTP where it cannot."""

import io
import json
import logging

import openai
import pytest

from agents_contract import jsonutil, limits
from tests.integration.conftest import scan

FN = {"type": "function", "name": "lookup", "description": "Look things up",
      "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}
IDLE_ENV = {"type": "self_hosted", "workspace_directory": "/work"}
NOT_FOUND = {"message": "Resource not found.", "type": "not_found_error", "param": None, "code": "not_found_error"}


def raw(gateway, key, method, path, body=None, headers=None, query=""):
    data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else b"")
    response = gateway.handle(method, path, query, {"authorization": f"Bearer {key}", "openai-beta": "agents=v1",
                                                    **(headers or {})}, data)
    return response.status, (json.loads(response.body) if response.body else None), response.headers


def rejected(gateway, key, aws, method, path, body, status=400):
    """The request is rejected with the official envelope, x-should-retry: false, and writes nothing."""
    before = scan(aws)
    code, payload, headers = raw(gateway, key, method, path, body)
    assert code == status, payload
    assert set(payload["error"]) == {"message", "type", "param", "code"}
    assert headers["x-should-retry"] == "false"
    assert scan(aws) == before
    return payload["error"]


def idle_session(client):
    return client.beta.agents.sessions.create(environment=IDLE_ENV, agent={"model": "gpt-5", "tools": [FN]},
                                              extra_body={"x_agents_core": {"harness": "scripted"}})


# ---- 2. strings are Unicode scalar values; JSON nests at most MAX_JSON_DEPTH levels --------------

SURROGATE = "\\ud800"  # the JSON escape of a lone surrogate, as a raw body carries it


def _with_surrogate(template: str) -> bytes:
    return template.replace("@", SURROGATE).encode()


@pytest.mark.parametrize("route,template,param", [
    ("agents", '{"model": "gpt-@"}', "model"),
    ("agents", '{"model": "m", "metadata": {"k": "v@"}}', "metadata.k"),
    ("agents", '{"model": "m", "instructions": "be @ brief"}', "instructions"),
    ("sessions", '{"environment": {"type": "none"}, "agent": {"model": "m"}, "input": "hi @"}', "input"),
    ("sessions", '{"environment": {"type": "none"}, "agent": {"model": "m"}, "input": '
                 '[{"role": "user", "content": [{"type": "input_text", "text": "@"}]}]}',
     "input[0].content[0].text"),
])
def test_a_lone_surrogate_is_a_400_naming_the_member_and_writes_nothing(client, gateway, keys, aws, route,
                                                                           template, param):
    path = "/v1/agents" if route == "agents" else "/v1/agents/sessions"
    error = rejected(gateway, keys["a"], aws, "POST", path, _with_surrogate(template))
    assert error == {"message": f"Invalid value for '{param}': the string contains an unpaired Unicode surrogate; "
                                "strings must be valid Unicode.",
                     "type": "invalid_request_error", "param": param, "code": "invalid_request_error"}


def test_a_lone_surrogate_in_a_tool_output_is_a_400_and_writes_nothing(client, gateway, keys, aws):
    session = idle_session(client)
    body = _with_surrogate('{"events": [{"type": "agent.session.input.tool_result", "turn_id": "turn_x", '
                           '"call_id": "call_x", "success": true, "output": "@"}]}')
    error = rejected(gateway, keys["a"], aws, "POST", f"/v1/agents/sessions/{session.id}/events", body)
    assert error["param"] == "events[0].output" and "unpaired Unicode surrogate" in error["message"]


def test_a_paired_surrogate_escape_is_an_ordinary_character(client, gateway, keys):
    code, agent, _ = raw(gateway, keys["a"], "POST", "/v1/agents", b'{"model": "m", "name": "\\ud83d\\ude00"}')
    assert code == 201 and agent["name"] == "\U0001F600"  # created


@pytest.mark.parametrize("body", [
    b"[" * 1000 + b"]" * 1000,
    ('{"model": "m", "tools": [{"type": "function", "name": "f", "description": "d", "parameters": '
     + '{"type": "object", "properties": {"a": ' * 350 + "{}" + "}}" * 350 + "}]}").encode(),
    ('{"model": "m", "metadata": ' + "[" * (limits.MAX_JSON_DEPTH) + "]" * limits.MAX_JSON_DEPTH + "}").encode(),
], ids=["1000 deep", "350 deep in tool parameters", "one level over the limit"])
def test_json_nested_deeper_than_the_limit_is_a_400_and_writes_nothing(gateway, keys, aws, body):
    error = rejected(gateway, keys["a"], aws, "POST", "/v1/agents", body)
    assert error == {"message": jsonutil.TOO_DEEP, "type": "invalid_request_error", "param": None,
                     "code": "invalid_request_error"}


def test_json_at_the_depth_limit_is_parsed(gateway, keys):
    inner = limits.MAX_JSON_DEPTH - 1  # the body object is the first level
    body = '{"model": "m", "instructions": ' + "[" * inner + "]" * inner + "}"
    code, payload, _ = raw(gateway, keys["a"], "POST", "/v1/agents", body.encode())
    assert code == 400 and payload["error"]["param"] == "instructions"  # a type error, not a depth error


# ---- 3. JSON Schemas are valid JSON Schemas (jsonschema, the dialect's meta-schema) --------------

INVALID_SCHEMAS = [
    ({"type": "object", "properties": 5}, "In context=('properties',), 5 is not of type 'object'."),
    ({"type": "object", "required": "x"}, "In context=('required',), 'x' is not of type 'array'."),
    ({"type": "object", "properties": {"a": {"type": "strnig"}}},
     "In context=('properties', 'a', 'type'), 'strnig' is not valid under any of the given schemas."),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"minimum": "1"}}},
     "In context=('properties', 'a', 'minimum'), '1' is not of type 'number'."),
    ({"$schema": "https://example.com/my-dialect", "type": "object"},
     "In context=('$schema',), unsupported JSON Schema dialect 'https://example.com/my-dialect'."),
]


@pytest.mark.parametrize("schema,context", INVALID_SCHEMAS, ids=[c[1][:40] for c in INVALID_SCHEMAS])
def test_invalid_function_parameters_are_rejected_on_save_and_session_creation(client, aws, schema, context):
    before = scan(aws)
    tool = {**FN, "parameters": schema}
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.create(model="gpt-5", tools=[tool])
    assert err.value.body == {"message": f"Invalid schema for function 'lookup': {context}",
                              "type": "invalid_request_error", "param": "tools[0].parameters",
                              "code": "invalid_request_error"}
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.sessions.create(environment={"type": "none"}, input="x",
                                           agent={"model": "gpt-5", "tools": [{**FN, "name": "other"}, tool]})
    assert err.value.body["param"] == "agent.tools[1].parameters"
    assert err.value.body["message"] == f"Invalid schema for function 'lookup': {context}"
    assert scan(aws) == before


def test_invalid_output_schema_is_rejected_on_save_and_session_creation(client, aws):
    before = scan(aws)
    schema = {"type": "object", "properties": {"a": {"type": 7}}}
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.create(model="gpt-5", text={"format": {"type": "json_schema", "schema": schema}})
    assert err.value.body["param"] == "text.format.schema"
    assert err.value.body["message"] == ("Invalid schema for 'text.format.schema': In context=('properties', 'a', "
                                         "'type'), 7 is not valid under any of the given schemas.")
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.sessions.create(environment={"type": "none"}, input="x", agent={
            "model": "gpt-5", "text": {"format": {"type": "json_schema", "schema": {"type": 7}}}})
    assert err.value.body["param"] == "agent.text.format.schema"
    assert scan(aws) == before


def test_a_valid_schema_the_harness_cannot_run_stays_savable(client, aws):
    """Saving never qualifies execution: Claude needs an explicit object root, but the schema is valid."""
    tool = {**FN, "parameters": {"properties": {"q": {"type": "string"}}}}
    agent = client.beta.agents.create(model="gpt-5", tools=[tool], extra_body={"x_agents_core": {"harness": "claude_code"}})
    assert agent.tools[0].parameters == tool["parameters"]
    before = scan(aws)
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.sessions.create(agent_id=agent.id, environment={"type": "none"}, input="x")
    assert err.value.code == "unsupported_or_invalid_configuration"
    assert scan(aws) == before


# ---- 4 and 8. empty batches; an Idempotency-Key names a batch that wrote nothing -----------------

def test_an_empty_batch_is_accepted_and_changes_nothing(client, aws):
    session = idle_session(client)
    before = scan(aws)
    response = client.beta.agents.sessions.events.with_raw_response.create(session.id, events=[])
    assert response.status_code == 202
    assert scan(aws) == before
    with pytest.raises(openai.NotFoundError) as err:
        client.beta.agents.sessions.events.create("sess_missing", events=[])
    assert err.value.body == NOT_FOUND


def test_an_idempotency_key_on_an_empty_batch_names_that_batch(client, other, aws):
    session = idle_session(client)
    key = {"Idempotency-Key": "empty-1"}
    before = scan(aws)
    client.beta.agents.sessions.events.create(session.id, events=[], extra_headers=key)
    written = [i for i in scan(aws) if i not in before]
    assert [i["SK"]["S"] for i in written] == ["I"]  # only the key's record
    client.beta.agents.sessions.events.create(session.id, events=[], extra_headers=key)  # replayed: 202
    after = scan(aws)
    with pytest.raises(openai.ConflictError) as err:
        client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}],
                                                  extra_headers=key)
    assert err.value.body == {"message": "This idempotency key was used with different input.",
                              "type": "conflict_error", "param": None, "code": "idempotency_conflict"}
    assert err.value.response.headers["x-should-retry"] == "false"
    with pytest.raises(openai.NotFoundError):
        other.beta.agents.sessions.events.create(session.id, events=[], extra_headers=key)
    assert scan(aws) == after


# ---- 5. list cursors that name nothing ----------------------------------------------------------

def test_agent_and_session_cursors_that_name_nothing_are_404(client, other, aws):
    agent = client.beta.agents.create(model="gpt-5")
    session = idle_session(client)
    assert client.beta.agents.list(after=agent.id).data == []
    assert client.beta.agents.sessions.list(after=session.id).data == []
    before = scan(aws)
    for call in (lambda: client.beta.agents.list(after="agent_missing"),
                 lambda: client.beta.agents.list(after="not a cursor"),
                 lambda: client.beta.agents.list(after=session.id),  # another resource type
                 lambda: other.beta.agents.list(after=agent.id),  # another tenant's Agent
                 lambda: client.beta.agents.sessions.list(after="sess_missing"),
                 lambda: client.beta.agents.sessions.list(after=agent.id),
                 lambda: other.beta.agents.sessions.list(after=session.id)):
        with pytest.raises(openai.NotFoundError) as err:
            call()
        assert err.value.body == NOT_FOUND
    assert scan(aws) == before


def test_turn_cursors_that_name_nothing_are_404_and_item_cursors_the_official_400(client, aws):
    first = client.beta.agents.sessions.create(environment={"type": "none"}, input="say one",
                                               agent={"model": "gpt-5"})
    second = client.beta.agents.sessions.create(environment={"type": "none"}, input="say two",
                                                agent={"model": "gpt-5"})
    turn = client.beta.agents.sessions.turns.list(first.id).data[0]
    item = client.beta.agents.sessions.items.list(first.id).data[0]
    other_turn = client.beta.agents.sessions.turns.list(second.id).data[0]
    other_item = client.beta.agents.sessions.items.list(second.id).data[0]
    assert client.beta.agents.sessions.turns.list(first.id, after=turn.id).data == []
    assert client.beta.agents.sessions.items.list(first.id, after=item.id).data == []
    assert client.beta.agents.sessions.turns.items.list(turn.id, session_id=first.id, after=item.id).data == []
    before = scan(aws)
    turns, items = client.beta.agents.sessions.turns, client.beta.agents.sessions.items
    for call in (lambda: turns.list(first.id, after="turn_missing"),
                 lambda: turns.list(first.id, after=other_turn.id),  # another Session's Turn
                 lambda: turns.list(first.id, after=item.id)):  # another resource type
        with pytest.raises(openai.NotFoundError) as err:
            call()
        assert err.value.body == NOT_FOUND
    for call in (lambda: items.list(first.id, after="item_missing"),  # malformed
                 lambda: items.list(first.id, after=item.id[:-1] + ("y" if item.id.endswith("x") else "x")),
                 # (right position, wrong id)
                 lambda: items.list(first.id, after=other_item.id),  # another Session's Item
                 lambda: items.list(first.id, after=turn.id),
                 lambda: turns.items.list(turn.id, session_id=first.id, after=other_item.id)):
        with pytest.raises(openai.BadRequestError) as err:
            call()
        assert err.value.body == {"message": "Invalid session item ID in `after`", "type": "invalid_request_error",
                                  "param": None, "code": "invalid_request_error"}
    assert scan(aws) == before


# ---- 6. an empty input cannot start a Turn --------------------------------------------------------

def test_empty_input_on_session_create_is_a_400_naming_input(client, aws):
    before = scan(aws)
    for env in ({"type": "none"}, IDLE_ENV):
        with pytest.raises(openai.BadRequestError) as err:
            client.beta.agents.sessions.create(environment=env, input=[], agent={"model": "gpt-5"})
        assert err.value.body == {"message": "Invalid 'input': empty array. Expected an array with minimum length 1, "
                                             "but got an empty array instead.",
                                  "type": "invalid_request_error", "param": "input", "code": "invalid_request_error"}
    assert scan(aws) == before


def test_an_empty_message_event_is_a_400_naming_its_input(client, aws):
    session = idle_session(client)
    before = scan(aws)
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.sessions.events.create(session.id, events=[
            {"type": "agent.session.input.cancel"}, {"type": "agent.session.input.message", "input": []}])
    assert err.value.body["param"] == "events[1].input"
    assert scan(aws) == before


# ---- 7. SDK resources that are not built answer a clear 400 ---------------------------------------

def _not_built_calls(c, session_id):
    a = c.beta.agents
    return {
        "environments.templates.create": lambda: a.environments.templates.create(),
        "environments.templates.retrieve": lambda: a.environments.templates.retrieve("tpl_1"),
        "environments.templates.update": lambda: a.environments.templates.update("tpl_1"),
        "environments.templates.list": lambda: a.environments.templates.list(),
        "environments.templates.delete": lambda: a.environments.templates.delete("tpl_1"),
        "sessions.traces.list": lambda: a.sessions.traces.list(session_id),
    }


def test_every_sdk_resource_not_built_answers_a_clear_400_and_writes_nothing(client, aws):
    session = idle_session(client)
    calls = _not_built_calls(client, session.id)
    before = scan(aws)
    for name, call in calls.items():
        with pytest.raises(openai.BadRequestError) as err:
            call()
        body = err.value.body
        assert body["type"] == "invalid_request_error" and body["code"] == "unsupported_resource", name
        assert "not supported by this deployment yet" in body["message"] and body["param"] is None, name
        assert err.value.response.headers["x-should-retry"] == "false"
    assert scan(aws) == before
    # environments.create, .retrieve and .list, the six Subagent reads, Vaults and automations (issue 39) are built
    assert len(calls) == 6


def test_not_built_resources_are_named_in_the_readme():
    from agents_contract.surface import NOT_BUILT
    from tests.e2e.conftest import ROOT

    not_yet = (ROOT / "README.md").read_text().split("Not yet", 1)[1].split("\n\n", 1)[0]
    for _, name in NOT_BUILT:
        assert name.split(" (")[1].rstrip(")") in not_yet, name


# ---- 10. every log line names only its own request ------------------------------------------------

@pytest.fixture
def log_lines():
    from agents_core.observability import logger

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logger.registered_formatter)
    handler.setLevel(logging.INFO)
    logger._logger.addHandler(handler)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    logger._logger.removeHandler(handler)


def test_log_lines_carry_only_their_own_request_keys(client, gateway, keys, log_lines, monkeypatch):
    from agents_core import agents

    session = client.beta.agents.sessions.create(environment={"type": "none"}, input="say hi",
                                                 agent={"model": "gpt-5"})
    client.beta.agents.sessions.retrieve(session.id)  # appends session_id in ReadsFunction
    client.beta.agents.sessions.update(session.id, metadata={"a": "b"})  # and in AdmissionFunction

    def boom(*args, **kwargs):
        raise RuntimeError("unexpected")

    monkeypatch.setattr(agents, "create", boom)
    code, payload, _ = raw(gateway, keys["a"], "POST", "/v1/agents", {"model": "m"})
    assert code == 500 and payload["error"]["type"] == "server_error"
    line = [entry for entry in log_lines() if entry.get("message") == "unexpected failure"][-1]
    assert "session_id" not in line and "turn_id" not in line
    assert line["function_name"] == "AdmissionFunction"
    assert line["correlation_id"] and line["request_id"]
    assert "RuntimeError" in line["exception"] and keys["a"] not in json.dumps(line)  # no secrets either
