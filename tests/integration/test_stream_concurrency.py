"""SSE streams run under a reserved concurrency of their own (template parameter StreamReservedConcurrency on the
session_stream function): a stream over the cap is a clear, retryable 429 that wrote nothing, never a slot taken
from the account's concurrency. The local gateway counts open invocations per function against the template's
ReservedConcurrentExecutions and answers what API Gateway answers when Lambda throttles (INTEGRATION_FAILURE)."""

import json

from local import apigw, template
from tests.integration.conftest import scan
from tests.integration.test_rest_gateway import envelope, headers


def test_the_stream_function_has_a_reserved_concurrency_parameter():
    props = template.resources("AWS::Serverless::Function")["SessionStreamFunction"]["Properties"]
    assert props["ReservedConcurrentExecutions"] == {"Ref": "StreamReservedConcurrency"}
    parameter = template.load()["Parameters"]["StreamReservedConcurrency"]
    assert parameter["Type"] == "Number" and 1 <= parameter["Default"] < 1000  # under the account's default
    assert template.reserved_concurrency() == {"SessionStreamFunction": parameter["Default"]}
    status, _, body = template.gateway_responses()["INTEGRATION_FAILURE"]
    assert status == 429 and json.loads(body)["error"]["code"] == "rate_limit_exceeded"


def test_a_stream_over_the_reserved_concurrency_is_429_and_writes_nothing(gateway, keys, aws):
    slots = gateway.reserved["SessionStreamFunction"]
    held = 0
    while slots.take():  # every slot held by an open stream
        held += 1
    assert held == template.reserved_concurrency()["SessionStreamFunction"]
    before = scan(aws)
    for method, path, body in [("GET", "/v1/agents/sessions/sess_x/events", b""),
                               ("POST", "/v1/agents/sessions", json.dumps({"agent": "x", "stream": True}).encode())]:
        response = gateway.handle(method, path, "", headers(keys["a"]), body)
        assert response.status == 429 and envelope(response)["code"] == "rate_limit_exceeded"
        assert "x-should-retry" not in response.headers  # the SDK retries it by itself
    assert scan(aws) == before
    # the other functions keep their concurrency
    assert gateway.handle("GET", "/v1/agents", "", headers(keys["a"]), b"").status == 200
    slots.give()  # one stream ended: the next one runs, and its slot is given back when it ends
    response = gateway.handle("GET", "/v1/agents/sessions/sess_x/events", "", headers(keys["a"]), b"")
    assert response.status == 404 and slots.used == held - 1


def test_without_the_gateway_response_a_throttled_invoke_is_api_gateways_500(aws, handlers):
    gateway = apigw.Gateway(handlers, responses={})
    assert gateway.lambda_refused().status == 500
    assert json.loads(gateway.lambda_refused().body) == {"message": "Internal server error"}
