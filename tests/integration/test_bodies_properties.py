"""hypothesis on every POST route: arbitrary JSON bodies (lone surrogates, deep nesting, near-valid
shapes included) never get a 5xx, every non-2xx carries the official envelope, and a rejection
writes nothing."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.conftest import scan

# Text that includes lone surrogates: json.dumps writes them as \udxxx escapes, as a raw body would.
text = st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0xFFFF), max_size=6)
KEYS = ["model", "name", "instructions", "metadata", "tools", "type", "parameters", "properties", "description",
        "text", "format", "schema", "environment", "input", "agent", "agent_id", "events", "role", "content",
        "output", "call_id", "turn_id", "success", "x_agents_core", "harness", "required", "$schema"]
VALUES = ["function", "object", "string", "strnig", "none", "self_hosted", "json_schema", "user", "input_text",
          "agent.session.input.message", "agent.session.input.cancel", "agent.session.input.tool_result", "scripted"]
leaf = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False, allow_infinity=False) | text \
    | st.sampled_from(VALUES)
json_value = st.recursive(leaf, lambda children: st.lists(children, max_size=3)
                          | st.dictionaries(st.sampled_from(KEYS) | text, children, max_size=4), max_leaves=25)


@st.composite
def nested(draw):
    """A value nested far deeper than the limit (sometimes just past it), inside a plausible body."""
    depth = draw(st.sampled_from([63, 64, 65, 200, 1200]))
    opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
    inner = opener * depth + "1" + closer * depth if opener == '{"a":' else opener * depth + closer * depth
    where = draw(st.sampled_from(KEYS))
    return ('{"model": "m", "' + where + '": ' + inner + "}").encode()


bodies = st.one_of(json_value.map(lambda v: json.dumps(v).encode()), nested(),
                   st.binary(max_size=20), st.just(b""), st.just(b'{"model": "\\udfff"}'))


def test_every_post_route_never_answers_5xx_and_rejections_write_nothing(client, gateway, keys, aws):
    agent = client.beta.agents.create(model="gpt-5")
    session = client.beta.agents.sessions.create(environment={"type": "self_hosted", "workspace_directory": "/w"},
                                                 agent={"model": "gpt-5"})
    routes = ["/v1/agents", f"/v1/agents/{agent.id}", "/v1/agents/sessions", f"/v1/agents/sessions/{session.id}",
              f"/v1/agents/sessions/{session.id}/events", f"/v1/agents/sessions/{session.id}/stream_tickets",
              "/v1/agents/environments", "/v1/vaults/vault_1/credentials"]
    headers = {"authorization": f"Bearer {keys['a']}", "openai-beta": "agents=v1"}

    @given(route=st.sampled_from(routes), body=bodies)
    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(route, body):
        before = scan(aws)
        response = gateway.handle("POST", route, "", headers, body)
        assert response.status < 500, (route, body[:200], response.body[:300])
        if response.status >= 300:
            error = json.loads(response.body)["error"]
            assert set(error) == {"message", "type", "param", "code"}
            assert response.headers.get("x-should-retry") == "false"
            assert scan(aws) == before

    run()


@pytest.mark.parametrize("body", [b'{"model": "\\ud800"}', b"[" * 5000 + b"]" * 5000])
def test_the_property_covers_the_cases_that_crashed(gateway, keys, aws, body):
    response = gateway.handle("POST", "/v1/agents", "", {"authorization": f"Bearer {keys['a']}",
                                                         "openai-beta": "agents=v1"}, body)
    assert response.status == 400
