"""Agents and Sessions through the official SDK, the real authorizer and handlers, against moto."""

import json

import httpx2
import openai
import pytest

from tests.integration.conftest import scan

FN = {"type": "function", "name": "get_weather", "description": "Weather for a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def test_agent_crud(client):
    agent = client.beta.agents.create(model="gpt-5", name="weather", instructions="be brief", tools=[FN],
                                      metadata={"team": "core"})
    assert agent.id.startswith("agent_") and agent.tools[0].defer_loading is False
    assert client.beta.agents.retrieve(agent.id) == agent
    updated = client.beta.agents.update(agent.id, instructions=None, metadata={"team": "x"})
    assert updated.instructions is None and updated.metadata == {"team": "x"} and updated.tools == agent.tools
    assert updated.updated_at >= agent.updated_at
    deleted = client.beta.agents.delete(agent.id)
    assert deleted.deleted and deleted.object == "agent.deleted"
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.retrieve(agent.id)


def test_agent_list_pagination(client):
    ids = [client.beta.agents.create(model="gpt-5", name=f"a{i}").id for i in range(5)]
    first = client.beta.agents.list(limit=2)
    assert [a.id for a in first.data] == ids[::-1][:2] and first.has_more
    assert [a.id for a in client.beta.agents.list(limit=2, order="asc").data] == ids[:2]
    assert [a.id for a in client.beta.agents.list(limit=100, order="asc")] == ids
    assert [a.id for a in client.beta.agents.list(limit=2, order="desc")] == ids[::-1]  # auto-pagination
    assert [a.id for a in client.beta.agents.list(after=ids[1], order="asc", limit=10).data] == ids[2:]


def test_session_with_saved_agent_and_first_turn(client):
    agent = client.beta.agents.create(model="gpt-5", tools=[FN, {"type": "web_search", "mode": "cached"}],
                                      extra_body={"x_agents_core": {"harness": "codex"}})
    session = client.beta.agents.sessions.create(agent_id=agent.id, environment={"type": "none"},
                                                 input="call get_weather {\"city\": \"Paris\"}",
                                                 metadata={"k": "v"})
    assert session.agent.id == agent.id and session.status == "in_progress"
    assert session.agent.tools[1].mode == "cached"
    assert client.beta.agents.sessions.retrieve(session.id) == session
    turns = client.beta.agents.sessions.turns.list(session.id)
    assert [t.status for t in turns.data] == ["queued"]
    items = client.beta.agents.sessions.items.list(session.id)
    assert items.data[0].type == "message" and items.data[0].content[0].text.startswith("call get_weather")
    turn = client.beta.agents.sessions.turns.retrieve(turns.data[0].id, session_id=session.id)
    assert turn.agent_id == agent.id
    assert [i.id for i in client.beta.agents.sessions.turns.items.list(turn.id, session_id=session.id).data] == [
        items.data[0].id]


def test_session_update_metadata_only(client):
    session = client.beta.agents.sessions.create(environment={"type": "none"}, input="say hi",
                                                 agent={"model": "gpt-5"}, metadata={"a": "1"})
    assert client.beta.agents.sessions.update(session.id).metadata == {"a": "1"}  # omitted keeps
    assert client.beta.agents.sessions.update(session.id, metadata={"b": "2"}).metadata == {"b": "2"}  # replaces
    assert client.beta.agents.sessions.update(session.id, metadata={}).metadata == {}  # {} clears
    client.beta.agents.sessions.update(session.id, metadata={"c": "3"})
    assert client.beta.agents.sessions.update(session.id, metadata=None).metadata == {}  # null clears
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.sessions.update(session.id, review="auto_review")
    assert err.value.body["param"] == "review"


def test_session_list_filters_and_delete(client):
    a1 = client.beta.agents.create(model="gpt-5")
    s1 = client.beta.agents.sessions.create(agent_id=a1.id, environment={"type": "none"}, input="x",
                                            metadata={"env": "prod"})
    s2 = client.beta.agents.sessions.create(environment={"type": "none"}, input="y", agent={"model": "m"})
    assert [s.id for s in client.beta.agents.sessions.list().data] == [s2.id, s1.id]
    assert [s.id for s in client.beta.agents.sessions.list(agent_id=a1.id).data] == [s1.id]
    assert [s.id for s in client.beta.agents.sessions.list(metadata={"env": "prod"}).data] == [s1.id]
    assert client.beta.agents.sessions.delete(s1.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.sessions.retrieve(s1.id)
    assert [s.id for s in client.beta.agents.sessions.list().data] == [s2.id]


def test_exact_numbers_survive_save_and_read(gateway, keys):
    body = ('{"model":"gpt-5","tools":[{"type":"function","name":"f","description":"d","parameters":'
            '{"type":"object","properties":{"x":{"type":"number","maximum":0.10000000000000000001,'
            '"minimum":-12345678901234567891}}}}]}')
    created = gateway.handle("POST", "/v1/agents", "", {"authorization": f"Bearer {keys['a']}",
                                                       "openai-beta": "agents=v1"}, body.encode())
    assert created.status == 201  # created, as the official API answers a create
    assert b'"maximum":0.10000000000000000001' in created.body and b"-12345678901234567891" in created.body
    agent_id = json.loads(created.body)["id"]
    read = gateway.handle("GET", f"/v1/agents/{agent_id}", "", {"authorization": f"Bearer {keys['a']}",
                                                               "openai-beta": "agents=v1"}, b"")
    assert b'"maximum":0.10000000000000000001' in read.body


def test_a_rejected_streamed_create_is_the_same_400_and_writes_nothing(client, aws):
    before = scan(aws)
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as err:
            client.beta.agents.sessions.create(environment={"type": "none"}, input="x",
                                               agent={"model": "m", "tools": [{"type": "code_interpreter"}]},
                                               stream=stream)
        assert err.value.body["param"] == "agent.tools[0].type"
    with pytest.raises(openai.BadRequestError) as err:  # stream: true needs a first Turn to stream
        client.beta.agents.sessions.create(environment={"type": "openai_hosted"}, agent={"model": "m"}, stream=True)
    assert err.value.body["param"] in ("input", "environment")
    assert scan(aws) == before


def test_beta_header_required(gateway, keys):
    response = gateway.handle("GET", "/v1/agents", "", {"authorization": f"Bearer {keys['a']}"}, b"")
    assert response.status == 400
    assert json.loads(response.body) == {"error": {
        "message": "To access the Agents API, set the 'OpenAI-Beta' header to 'agents=v1'.", "type": "invalid_beta",
        "param": None, "code": "invalid_beta"}}
    assert response.headers["x-should-retry"] == "false"


def test_invalid_api_key_is_401_with_the_envelope(gateway, keys):
    client = __import__("tests.integration.conftest", fromlist=["sdk"]).sdk(gateway, "sk-not-a-key")
    with pytest.raises(openai.AuthenticationError) as err:
        client.beta.agents.list()
    assert err.value.body["code"] == "invalid_api_key"


def test_missing_authorization_header_is_the_official_401(gateway):
    response = gateway.handle("GET", "/v1/agents", "", {"openai-beta": "agents=v1"}, b"")
    assert response.status == 401 and response.headers["x-should-retry"] == "false"
    assert json.loads(response.body)["error"]["code"] == "invalid_api_key"


@pytest.mark.parametrize("raw,message", [
    (b"{not json", "We could not parse the JSON body of your request. The API expects a JSON payload."),
    (b"", "The request body must be a JSON object."),
    (b"[1,2]", "Invalid type for 'body': expected an object, but got an array instead."),
    (b'{"model": NaN}', "We could not parse the JSON body of your request. The API expects a JSON payload."),
])
def test_bad_bodies_are_400_and_write_nothing(gateway, keys, aws, raw, message):
    before = scan(aws)
    response = gateway.handle("POST", "/v1/agents", "", {"authorization": f"Bearer {keys['a']}",
                                                        "openai-beta": "agents=v1"}, raw)
    assert response.status == 400 and json.loads(response.body)["error"]["message"] == message
    assert scan(aws) == before


@pytest.mark.parametrize("path", ["/v1/agents", "/v1/agents/sessions"])
@pytest.mark.parametrize("raw,kind", [(b'"x"', "a string"), (b"null", "null"), (b"3", "an integer"),
                                      (b"[1]", "an array")])
def test_a_body_that_is_not_an_object_names_its_own_type(gateway, keys, aws, path, raw, kind):
    before = scan(aws)
    response = gateway.handle("POST", path, "", {"authorization": f"Bearer {keys['a']}",
                                                "openai-beta": "agents=v1"}, raw)
    assert response.status == 400, response.body
    assert json.loads(response.body)["error"]["message"] == (
        f"Invalid type for 'body': expected an object, but got {kind} instead.")
    assert scan(aws) == before


@pytest.mark.parametrize("query,param", [("limit=0", "limit"), ("limit=101", "limit"), ("limit=x", "limit"),
                                         ("order=up", "order")])
def test_list_parameters_are_checked(gateway, keys, query, param):
    response = gateway.handle("GET", "/v1/agents", query, {"authorization": f"Bearer {keys['a']}",
                                                          "openai-beta": "agents=v1"}, b"")
    assert response.status == 400 and json.loads(response.body)["error"]["param"] == param


@pytest.mark.parametrize("method,path", [
    ("GET", "/v1/agents/sessions/%F0%9F%98%80"), ("GET", "/v1/agents/agent_%00"),
    ("GET", "/v1/agents/sessions/sess_x/turns/%00/items"), ("DELETE", "/v1/agents/%F0%9F%98%80"),
    ("POST", "/v1/agents/sessions/%00/events")])
def test_an_id_of_odd_characters_on_a_known_route_is_the_official_404(gateway, keys, method, path):
    response = gateway.handle(method, path, "", {"authorization": f"Bearer {keys['a']}",
                                                 "openai-beta": "agents=v1"}, b'{"events": []}' if method == "POST" else b"")
    assert response.status == 404, response.body
    assert json.loads(response.body)["error"] == {"message": "Resource not found.", "type": "not_found_error",
                                                  "param": None, "code": "not_found_error"}


def test_a_method_a_known_path_lacks_is_still_405(gateway, keys):
    response = gateway.handle("PUT", "/v1/agents", "", {"authorization": f"Bearer {keys['a']}",
                                                        "openai-beta": "agents=v1"}, b"{}")
    assert response.status == 405 and json.loads(response.body)["error"]["code"] == "method_not_allowed"


def test_stream_options_without_stream_is_a_400_and_writes_nothing(client, aws):
    before = scan(aws)
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.sessions.create(environment={"type": "none"}, input="say hi", agent={"model": "gpt-5"},
                                           extra_body={"stream_options": {"include_obfuscation": False},
                                                       "x_agents_core": {"harness": "scripted"}})
    assert err.value.body["param"] == "stream_options"
    assert scan(aws) == before


def test_oversized_configuration_is_a_clear_400(client, aws):
    before = scan(aws)
    big = [{**FN, "name": f"f{i}", "description": "x" * 4000} for i in range(120)]
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.create(model="gpt-5", tools=big)
    assert "400 KB" in err.value.body["message"]
    assert scan(aws) == before


def test_unknown_route_is_404_in_the_official_envelope(gateway, keys):
    response = gateway.handle("GET", "/v1/nothing", "", {}, b"")
    assert response.status == 404
    assert json.loads(response.body)["error"] == {"message": "Invalid URL: no route matches this path.",
                                                  "type": "not_found_error", "param": None, "code": "invalid_url"}


def test_sdk_uses_httpx2_transport():
    assert hasattr(httpx2, "BaseTransport")


def test_metadata_filter_pages_stay_full(client):
    ids = []
    for i in range(6):
        s = client.beta.agents.sessions.create(environment={"type": "none"}, input="x", agent={"model": "m"},
                                               metadata={"team": "a" if i % 2 else "b", "n": str(i)})
        ids.append((s.id, i % 2))
    first = client.beta.agents.sessions.list(metadata={"team": "a"}, limit=2, order="asc")
    assert [s.metadata["team"] for s in first.data] == ["a", "a"] and first.has_more
    everything = [s.id for s in client.beta.agents.sessions.list(metadata={"team": "a"}, limit=2, order="asc")]
    assert everything == [sid for sid, odd in ids if odd]
    both = client.beta.agents.sessions.list(metadata={"team": "a", "n": "3"}).data
    assert [s.metadata["n"] for s in both] == ["3"]
    updated = client.beta.agents.sessions.update(ids[0][0], metadata={"team": "a"})
    assert updated.id in [s.id for s in client.beta.agents.sessions.list(metadata={"team": "a"}, limit=100).data]


def test_every_response_names_its_request_as_the_sdk_reads_it(client, gateway, keys):
    import re

    agent = client.beta.agents.with_raw_response.create(model="gpt-5")
    assert re.fullmatch(r"req_[0-9a-f]{32}", agent.headers["x-request-id"])
    assert agent.parse()._request_id == agent.headers["x-request-id"]
    for method, path, body in [("GET", "/v1/agents", b""), ("GET", "/v1/agents/agent_missing", b""),
                               ("POST", "/v1/agents/sessions", b"{}"), ("PUT", "/v1/agents", b"{}")]:
        response = gateway.handle(method, path, "", {"authorization": f"Bearer {keys['a']}",
                                                     "openai-beta": "agents=v1"}, body)
        assert re.fullmatch(r"req_[0-9a-f]{32}", response.headers.get("x-request-id", "")), (method, path)
