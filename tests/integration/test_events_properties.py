"""hypothesis on the events endpoint: arbitrary batches never get a 5xx, and a rejected batch writes
nothing (the table is byte-for-byte unchanged)."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from agents_core.apikeys import create_key
from local.inprocess import InProcessStack
from local.lambdas import MOTO_CONFIG
from tests.integration.conftest import sdk
from tests.integration.stack_fixtures import stop_executions

TYPES = ["agent.session.input.tool_result", "agent.session.input.message", "agent.session.input.cancel",
         "agent.session.input.mcp_approval_request_result", "agent.session.input.bogus"]
scalar = st.none() | st.booleans() | st.integers(-2, 2) | st.text(max_size=6)
content = st.lists(st.fixed_dictionaries({"type": st.sampled_from(["input_text", "input_image", "x"]),
                                          "text": st.text(max_size=8)}), max_size=2)
event = st.fixed_dictionaries(
    {"type": st.sampled_from(TYPES)},
    optional={"turn_id": st.sampled_from(["turn_x", "", None]) | scalar,
              "call_id": st.sampled_from(["call_x", ""]) | scalar,
              "success": scalar, "output": scalar | content, "error": scalar,
              "input": st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                                       "content": content}), max_size=2) | scalar,
              "extra": scalar})
body = st.one_of(st.fixed_dictionaries({"events": st.lists(event, max_size=3)}),
                 st.dictionaries(st.text(max_size=5), scalar, max_size=2), st.lists(scalar, max_size=2), scalar)


@pytest.fixture(scope="module")
def stack():
    with mock_aws(config=MOTO_CONFIG):
        s = InProcessStack("agents-core-props").start()
        yield s
        s.stop()
        stop_executions(s)


def snapshot(stack):
    items = stack.dynamodb.scan(TableName=stack.table, ConsistentRead=True)["Items"]
    return sorted(json.dumps(i, sort_keys=True, default=bytes.hex) for i in items)  # packed (B) values as hex


def test_events_endpoint_never_5xx_and_rejections_write_nothing(stack):
    key = create_key(stack.store, "props")
    client = sdk(stack.http, key)
    session = client.beta.agents.sessions.create(environment={"type": "self_hosted", "workspace_directory": "/w"},
                                                 agent={"model": "m"},
                                                 extra_body={"x_agents_core": {"harness": "scripted"}})
    headers = {"authorization": f"Bearer {key}", "openai-beta": "agents=v1"}

    @given(payload=body, idempotency=st.none() | st.sampled_from(["k1", "k2"]))
    @settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(payload, idempotency):
        before = snapshot(stack)
        extra = {"idempotency-key": idempotency} if idempotency else {}
        response = stack.http.handle("POST", f"/v1/agents/sessions/{session.id}/events", "", {**headers, **extra},
                                     json.dumps(payload).encode())
        assert response.status < 500, response.body
        if response.status != 202:
            assert response.status in (400, 404, 409)
            envelope = json.loads(response.body)["error"]
            assert set(envelope) == {"message", "type", "param", "code"}
            assert snapshot(stack) == before  # a rejected batch writes nothing

    run()
