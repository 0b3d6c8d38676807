"""The public REST API's own answers, from template.yaml through the local gateway: every answer API
Gateway gives itself (no key, an unknown key, an unknown route or method, throttling, a body over the
quota, a failing authorizer) is the official error envelope (Gateway Responses)."""

import json

import pytest

from agents_contract.errors import error_type
from local import apigw, template


def envelope(response):
    body = json.loads(response.body)
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    # `type` is derived from status and code as everywhere else (contract notes)
    assert body["error"]["type"] == error_type(response.status, body["error"]["code"])
    return body["error"]


def headers(key=None, **extra):
    out = {"openai-beta": "agents=v1", **extra}
    if key:
        out["Authorization"] = f"Bearer {key}"
    return out


def test_every_gateway_response_is_the_official_envelope():
    for kind, (status, response_headers, body) in template.gateway_responses().items():
        error = json.loads(body)["error"]
        assert set(error) == {"message", "type", "param", "code"}, kind
        assert error["type"] == error_type(status or (500 if kind == "DEFAULT_5XX" else 400), error["code"]), kind
        assert response_headers["Content-Type"] == "application/json", kind
        retry = "x-should-retry" in response_headers
        assert retry == (status is None and kind == "DEFAULT_4XX" or (status is not None and 400 <= status < 500
                                                                       and status != 429)), kind


@pytest.mark.parametrize("method,path", [
    ("GET", "/v1/nothing"), ("GET", "/v2/agents"), ("GET", "/v1/agents/agent_1/versions"),
    ("POST", "/v1/agents/sessions/sess_1/turns/turn_1/items/x"), ("GET", "/"), ("DELETE", "/v1"),
])
def test_an_unknown_route_is_404_invalid_url(gateway, keys, method, path):
    response = gateway.handle(method, path, "", headers(keys["a"]), b"")
    assert response.status == 404 and response.headers["x-should-retry"] == "false"
    assert envelope(response) == {"message": "Invalid URL: no route matches this path.", "type": "not_found_error",
                                  "param": None, "code": "invalid_url"}


@pytest.mark.parametrize("method,path", [
    ("PUT", "/v1/agents"), ("PATCH", "/v1/agents/agent_1"), ("PUT", "/v1/agents/sessions"),
    ("DELETE", "/v1/agents/sessions"),  # the literal resource, not DELETE /v1/agents/{agent_id}
    ("DELETE", "/v1/agents/sessions/sess_1/events"), ("POST", "/v1/agents/sessions/sess_1/turns"),
    ("GET", "/v1/agents/sessions/sess_1/stream_tickets"), ("HEAD", "/v1/agents/sessions/sess_1/items"),
    ("PUT", "/v1/agents/sessions/sess_1/turns/turn_1/items"),
])
def test_a_known_route_with_another_method_is_405(gateway, keys, aws, method, path):
    from tests.integration.conftest import scan
    before = scan(aws)
    response = gateway.handle(method, path, "", headers(keys["a"]), b"{}")
    assert response.status == 405 and response.headers["x-should-retry"] == "false"
    assert envelope(response) == {"message": f"Invalid method for URL ({method} {path}).",
                                  "type": "invalid_request_error", "param": None, "code": "method_not_allowed"}
    assert scan(aws) == before


def test_every_known_path_answers_405_for_other_methods():
    routes = template.http_routes()
    for path in {r.path for r in routes}:
        assert any(r.path == path and r.method == "ANY" for r in routes), path


@pytest.mark.parametrize("method,path", [
    ("GET", "/v1/agents"), ("POST", "/v1/agents"), ("GET", "/v1/agents/sessions"), ("POST", "/v1/agents/sessions"),
    ("GET", "/v1/agents/sessions/sess_1/events"), ("POST", "/v1/agents/sessions/sess_1/events"),
    ("GET", "/v1/agents/sessions/sess_1/turns"), ("GET", "/v1/agents/sessions/sess_1/items"),
])
def test_no_key_and_an_unknown_key_are_401_invalid_api_key_on_every_route_family(gateway, keys, method, path):
    for response in (gateway.handle(method, path, "", headers(), b"{}"),
                     gateway.handle(method, path, "", headers("sk-unknown"), b"{}")):
        assert response.status == 401 and response.headers["x-should-retry"] == "false"
        assert envelope(response)["code"] == "invalid_api_key"


def test_an_unknown_key_is_denied_from_the_cache_without_calling_the_authorizer_again(gateway, keys, monkeypatch):
    assert gateway.handle("GET", "/v1/agents", "", headers("sk-unknown"), b"").status == 401
    monkeypatch.setitem(gateway.handlers, "AuthorizerFunction", lambda event, context: 1 / 0)
    assert gateway.handle("GET", "/v1/agents/sessions", "", headers("sk-unknown"), b"").status == 401
    # a key not seen before does call it (and its failure is AUTHORIZER_FAILURE)
    assert gateway.handle("GET", "/v1/agents", "", headers(keys["a"]), b"").status == 500


def test_a_failing_authorizer_is_a_500_server_error(gateway, keys, monkeypatch):
    monkeypatch.setitem(gateway.handlers, "AuthorizerFunction", lambda event, context: 1 / 0)
    response = gateway.handle("GET", "/v1/agents", "", headers(keys["a"]), b"")
    assert response.status == 500 and envelope(response)["code"] == "server_error"
    monkeypatch.setitem(gateway.handlers, "AuthorizerFunction", lambda event, context: {"isAuthorized": True})
    response = gateway.handle("GET", "/v1/agents", "", headers("sk-other"), b"")
    assert response.status == 500 and envelope(response)["type"] == "server_error"


def test_a_body_over_the_rest_api_quota_is_413_and_writes_nothing(gateway, keys, aws):
    from tests.integration.conftest import scan
    before = scan(aws)
    response = gateway.handle("POST", "/v1/agents", "", headers(keys["a"]), b" " * (apigw.MAX_PAYLOAD_BYTES + 1))
    assert response.status == 413 and envelope(response)["code"] == "payload_too_large"
    assert scan(aws) == before


def test_throttling_is_429_rate_limit_exceeded_and_retryable(aws, handlers, keys):
    gateway = apigw.Gateway(handlers)
    gateway._bucket = apigw._Bucket(rate=0.001, burst=2)
    statuses = [gateway.handle("GET", "/v1/agents", "", headers(keys["a"]), b"") for _ in range(3)]
    assert [r.status for r in statuses] == [200, 200, 429]
    assert envelope(statuses[2])["code"] == "rate_limit_exceeded"
    assert "x-should-retry" not in statuses[2].headers  # the SDK retries a 429 by itself


def test_the_handlers_get_rest_api_proxy_events_with_the_authorizers_tenant(gateway, keys, monkeypatch):
    seen = []
    real = gateway.handlers["ReadsFunction"]
    monkeypatch.setitem(gateway.handlers, "ReadsFunction", lambda event, context: seen.append(event) or real(event, context))
    assert gateway.handle("GET", "/v1/agents", "limit=2&order=asc", headers(keys["a"]), b"").status == 200
    event = seen[0]
    assert (event["httpMethod"], event["resource"], event["path"]) == ("GET", "/v1/agents", "/v1/agents")
    assert event["queryStringParameters"] == {"limit": "2", "order": "asc"}
    assert event["requestContext"]["authorizer"]["tenant"] == "tenant-a"


def test_a_client_cannot_forge_the_request_context_of_the_streaming_app(gateway, keys):
    forged = json.dumps({"authorizer": {"tenant": "tenant-b"}})
    response = gateway.handle("GET", "/v1/agents/sessions/sess_x/events", "",
                              headers("sk-unknown", **{"x-amzn-request-context": forged}), b"")
    assert response.status == 401


def test_the_streaming_routes_are_rest_api_stream_integrations_of_one_function():
    streaming = {(r.method, r.path): r.function for r in template.http_routes() if r.streaming}
    files = {k for k, v in streaming.items() if v == "FilesFunction"}  # content downloads stream (issue 38)
    assert {p for _, p in files} == {"/v1/files", "/v1/files/{file_id}", "/v1/files/{file_id}/content", "/v1/uploads",
                                     "/v1/uploads/{upload_id}/parts", "/v1/uploads/{upload_id}/complete",
                                     "/v1/uploads/{upload_id}/cancel", "/v1/agents/sessions/{session_id}/artifacts",
                                     "/v1/agents/sessions/{session_id}/artifacts/{artifact_id}",
                                     "/v1/agents/sessions/{session_id}/artifacts/{artifact_id}/content"}
    streaming = {k: v for k, v in streaming.items() if k not in files}
    assert streaming == {("POST", "/v1/agents/sessions"): "SessionStreamFunction",
                         ("GET", "/v1/agents/sessions/{session_id}/events"): "SessionStreamFunction"}
    props = template.resources("AWS::Serverless::Function")["SessionStreamFunction"]["Properties"]
    assert props["Environment"]["Variables"]["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert props["Handler"] == "run.sh" and props["Timeout"] == 900
    keys = {(r.method, r.path) for r in template.http_routes()}
    assert len(keys) == len(template.http_routes())  # no route twice
