"""Every admission failure over HTTP: status, type, code, param and message, and the table is
unchanged after each rejection. Tenant isolation on every route."""

import json

import openai
import pytest

from tests.integration.conftest import scan
from tests.unit.helpers import session_body
from tests.unit.test_admission import MESSAGES
from tests.unit.test_protocol_errors import SESSION_CASES


def post_session(gateway, key, body):
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    return gateway.handle("POST", "/v1/agents/sessions", "", {"authorization": f"Bearer {key}",
                                                             "openai-beta": "agents=v1"}, raw)


@pytest.mark.parametrize("message,param,body", MESSAGES, ids=[f"{i}-{m[0][:40]}" for i, m in enumerate(MESSAGES)])
def test_admission_rejection_over_http_writes_nothing(gateway, keys, aws, message, param, body):
    before = scan(aws)
    response = post_session(gateway, keys["a"], body)
    assert response.status == 400
    assert json.loads(response.body) == {"error": {"message": message, "type": "invalid_request_error",
                                                   "param": param, "code": "unsupported_or_invalid_configuration"}}
    assert response.headers["x-should-retry"] == "false"
    assert scan(aws) == before


@pytest.mark.parametrize("case,agent,message,param", SESSION_CASES, ids=[c[0] for c in SESSION_CASES])
def test_protocol_errors_through_the_sdk_write_nothing(client, aws, case, agent, message, param):
    body = session_body(**agent)
    before = scan(aws)
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.sessions.create(environment=body["environment"], input=body["input"],
                                           agent=body["agent"], extra_body={"x_agents_core": body["x_agents_core"]})
    assert err.value.body == {"message": message, "type": "invalid_request_error", "param": param,
                              "code": "invalid_request_error"}
    assert scan(aws) == before


def test_saved_agent_rejected_at_session_admission_not_at_save(client, aws):
    agent = client.beta.agents.create(model="gpt-5", tools=[{"type": "web_search", "mode": "cached"}],
                                      extra_body={"x_agents_core": {"harness": "claude_code"}})
    assert agent.tools[0].mode == "cached"
    before = scan(aws)
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.sessions.create(agent_id=agent.id, environment={"type": "none"}, input="x")
    assert err.value.code == "unsupported_or_invalid_configuration" and err.value.param == "agent.tools[0].mode"
    assert scan(aws) == before


def test_missing_saved_agent_is_404_and_writes_nothing(client, aws):
    before = scan(aws)
    with pytest.raises(openai.NotFoundError) as err:
        client.beta.agents.sessions.create(agent_id="agent_nope", environment={"type": "none"}, input="x")
    assert err.value.body == {"message": "Resource not found.", "type": "not_found_error", "param": None,
                              "code": "not_found_error"}
    assert scan(aws) == before


def test_tenant_isolation_on_every_route(client, other, aws):
    agent = client.beta.agents.create(model="gpt-5")
    session = client.beta.agents.sessions.create(agent_id=agent.id, environment={"type": "none"}, input="hi")
    turn = client.beta.agents.sessions.turns.list(session.id).data[0]
    calls = [
        lambda: other.beta.agents.retrieve(agent.id),
        lambda: other.beta.agents.update(agent.id, name="stolen"),
        lambda: other.beta.agents.delete(agent.id),
        lambda: other.beta.agents.sessions.create(agent_id=agent.id, environment={"type": "none"}, input="x"),
        lambda: other.beta.agents.sessions.retrieve(session.id),
        lambda: other.beta.agents.sessions.update(session.id, metadata={"a": "b"}),
        lambda: other.beta.agents.sessions.delete(session.id),
        lambda: other.beta.agents.sessions.turns.list(session.id),
        lambda: other.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id),
        lambda: other.beta.agents.sessions.turns.items.list(turn.id, session_id=session.id),
        lambda: other.beta.agents.sessions.items.list(session.id),
    ]
    before = scan(aws)
    for call in calls:
        with pytest.raises(openai.NotFoundError) as err:
            call()
        assert err.value.body["message"] == "Resource not found."
    assert scan(aws) == before
    assert other.beta.agents.list().data == [] and other.beta.agents.sessions.list().data == []
    assert client.beta.agents.retrieve(agent.id).name is None


def test_api_keys_are_stored_hashed(keys, aws):
    dump = json.dumps(scan(aws))
    assert keys["a"] not in dump and keys["b"] not in dump
    import hashlib
    assert hashlib.sha256(keys["a"].encode()).hexdigest() in dump
