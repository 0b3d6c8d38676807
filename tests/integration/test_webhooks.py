"""Webhooks through the official SDK (client.webhooks), in process: endpoint management with KMS-sealed secrets,
and deliveries of a Session's agent.session.* events from the outbox stream through the delivery queue (moto's
SQS, the local event source poller) to a real loopback HTTP receiver, each verified by `client.webhooks.unwrap`
with the endpoint's secret."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest

from agents_core import settings as settings_module
from local.inprocess import wait_for
from tests.integration.conftest import sdk
from tests.integration.stack_fixtures import client, runtime, stack  # noqa: F401 - fixtures

WEATHER = {"type": "function", "name": "get_weather", "description": "Weather",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
SESSION_EVENTS = ["agent.session.created", "agent.session.in_progress", "agent.session.action_required",
                  "agent.session.idle"]


class Receiver:
    """A loopback webhook receiver: records every request; answers the queued statuses, then 200."""

    def __init__(self):
        self.requests, self.statuses = [], []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["content-length"])).decode()
                owner.requests.append((dict(self.headers.items()), body))
                status = owner.statuses.pop(0) if owner.statuses else 200
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self, client, secret):
        return [client.webhooks.unwrap(body, headers, secret=secret) for headers, body in self.requests]


@pytest.fixture
def hooks(stack, monkeypatch):
    """Loopback http endpoints allowed (make dev's setting), retries at once, the delivery queue polled."""
    monkeypatch.setenv("WEBHOOK_ALLOW_LOOPBACK_HTTP", "true")
    monkeypatch.setenv("WEBHOOK_RETRY_SECONDS", "0,0,0")
    settings_module.get_settings.cache_clear()
    for poller in stack.queue_pollers:
        poller.start(interval=0.02)
    receiver = Receiver()
    yield receiver
    receiver.server.shutdown()
    settings_module.get_settings.cache_clear()


def items_of(stack):
    out = stack.dynamodb.scan(TableName=stack.table, ConsistentRead=True)["Items"]
    return [i for i in out if "#WEBHOOK" in i["PK"]["S"] or "#WEBHOOKS" in i.get("GSI1PK", {}).get("S", "")]


def test_endpoint_management_and_the_secret_shown_once(stack, client):
    created = client.webhooks.create(name="ops", url="https://hooks.example.com/agents",
                                     event_types=["agent.session.idle", "agent.session.failed"])
    assert created.object == "webhook_endpoint" and created.signing_secret.startswith("whsec_")
    assert created.signing_secret_hint == "whsec_..." + created.signing_secret[-4:]
    retrieved = client.webhooks.retrieve(created.id)
    assert not hasattr(retrieved, "signing_secret") or "signing_secret" not in retrieved.model_fields_set
    assert (retrieved.url, retrieved.event_types) == (created.url, created.event_types)
    assert created.signing_secret not in json.dumps(items_of(stack), default=str)  # sealed, never stored plain
    updated = client.webhooks.update(created.id, name="ops-2", event_types=["agent.session.created"])
    assert (updated.name, updated.event_types) == ("ops-2", ["agent.session.created"])
    second = client.webhooks.create(name="b", url="https://b.example.com/", event_types=["agent.session.idle"])
    assert [e.id for e in client.webhooks.list()] == [second.id, created.id]  # newest first
    rotated = client.webhooks.rotate_secret(created.id)
    assert rotated.signing_secret != created.signing_secret and rotated.signing_secret.startswith("whsec_")
    assert "agent.session.action_required" in client.webhooks.event_types.list().data
    deleted = client.webhooks.delete(created.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (created.id, True, "webhook_endpoint.deleted")
    with pytest.raises(openai.NotFoundError):
        client.webhooks.retrieve(created.id)


def test_bad_endpoint_urls_are_400s_that_write_nothing(stack, client):
    for url in ("http://hooks.example.com/x", "ftp://hooks.example.com/x", "https://user:pw@hooks.example.com/x",
                "https://hooks.example.com/x#frag", "hooks.example.com/x",
                "http://127.0.0.1:9/x"):  # loopback http too: not allowed by default
        with pytest.raises(openai.BadRequestError) as caught:
            client.webhooks.create(name="x", url=url, event_types=["agent.session.idle"])
        assert caught.value.body["param"] == "url", url
        with pytest.raises(openai.BadRequestError):
            client.webhooks.update("whep_missing", url=url)  # checked before the endpoint is looked up
    with pytest.raises(openai.BadRequestError):
        client.webhooks.create(name="x", url="https://ok.example.com", event_types=["agent.session.nope"])
    assert items_of(stack) == []


def test_a_session_with_a_function_call_is_delivered_signed(stack, client, runtime, hooks):
    endpoint = client.webhooks.create(name="local", url=hooks.url, event_types=SESSION_EVENTS)
    session = client.beta.agents.sessions.create(
        environment={"type": "none"}, agent={"model": "gpt-5", "tools": [WEATHER]},
        input='call get_weather {"city": "Paris"}\nsay Sunny.')
    actions = wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).required_actions)
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.tool_result", "turn_id": actions[0].turn_id, "call_id": actions[0].call_id,
        "success": True, "output": "sunny"}])
    wait_for(lambda: "agent.session.idle" in [e.type for e in hooks.events(client, endpoint.signing_secret)])
    events = hooks.events(client, endpoint.signing_secret)
    types = [e.type for e in events]
    for kind in SESSION_EVENTS:
        assert kind in types, types
    assert all(e.data.id == session.id for e in events)
    required = next(e for e in events if e.type == "agent.session.action_required")
    assert required.data.required_action.type == "function_call"
    assert len({e.id for e in events}) == len(events)  # one webhook-id per event
    with pytest.raises(openai.InvalidWebhookSignatureError):  # another secret does not verify them
        client.webhooks.unwrap(hooks.requests[0][1], hooks.requests[0][0], secret="whsec_" + "QUFB" * 8)
    # each record is written once its 200 is back, a moment after the server has the request
    wait_for(lambda: {d["status"] for d in client.get(f"/webhook_endpoints/{endpoint.id}/deliveries",
                                                       cast_to=object)["data"]} == {"delivered"})


def test_a_failed_delivery_is_retried_with_the_same_webhook_id(stack, client, runtime, hooks):
    endpoint = client.webhooks.create(name="flaky", url=hooks.url, event_types=["agent.session.created"])
    hooks.statuses = [500, 500]
    session = client.beta.agents.sessions.create(environment={"type": "none"}, agent={"model": "gpt-5"},
                                                 input="say Hi.")
    wait_for(lambda: len(hooks.requests) >= 3)
    ids = [headers["webhook-id"] for headers, _ in hooks.requests]
    assert len(ids) == 3 and len(set(ids)) == 1
    assert hooks.events(client, endpoint.signing_secret)[2].data.id == session.id
    # the third attempt's record is written once its 200 is back, a moment after the server has the request
    [record] = wait_for(lambda: [d for d in client.get(f"/webhook_endpoints/{endpoint.id}/deliveries",
                                                       cast_to=object)["data"] if d["status"] != "retrying"])
    assert (record["status"], record["attempts"], record["status_code"]) == ("delivered", 3, 200)


def test_rotate_secret_takes_effect_and_test_sends_a_signed_sample(stack, client, hooks):
    endpoint = client.webhooks.create(name="r", url=hooks.url, event_types=["agent.session.idle"])
    result = client.webhooks.test(endpoint.id, event_type="agent.session.idle")
    assert (result.object, result.status_code, result.webhook_endpoint_id) == ("webhook_endpoint.test", 200,
                                                                               endpoint.id)
    assert hooks.events(client, endpoint.signing_secret)[0].type == "agent.session.idle"
    rotated = client.webhooks.rotate_secret(endpoint.id)
    client.webhooks.test(endpoint.id, event_type="agent.session.idle")
    headers, body = hooks.requests[1]
    client.webhooks.verify_signature(body, headers, secret=rotated.signing_secret)
    with pytest.raises(openai.InvalidWebhookSignatureError):
        client.webhooks.verify_signature(body, headers, secret=endpoint.signing_secret)


def test_tenants_are_isolated(stack, client):
    from agents_core.apikeys import create_key

    other = sdk(stack.http, create_key(stack.store, "tenant-b"))
    endpoint = client.webhooks.create(name="a", url="https://a.example.com/", event_types=["agent.session.idle"])
    for call in (lambda: other.webhooks.retrieve(endpoint.id), lambda: other.webhooks.delete(endpoint.id),
                 lambda: other.webhooks.update(endpoint.id, name="b"),
                 lambda: other.webhooks.rotate_secret(endpoint.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    assert other.webhooks.list().data == []


def test_a_delivery_that_fails_every_attempt_is_recorded_failed(stack, client, runtime, hooks):
    """After the last retry (WEBHOOK_RETRY_SECONDS: three here, so four attempts) the delivery record says failed,
    for the operator, and the queue's redrive policy moves the message to the dead-letter queue."""
    endpoint = client.webhooks.create(name="down", url=hooks.url, event_types=["agent.session.created"])
    hooks.statuses = [503] * 10
    client.beta.agents.sessions.create(environment={"type": "none"}, agent={"model": "gpt-5"}, input="say Hi.")

    def recorded():
        data = client.get(f"/webhook_endpoints/{endpoint.id}/deliveries", cast_to=object)["data"]
        return data and data[0]["status"] == "failed" and data[0]

    record = wait_for(recorded)
    assert (record["attempts"], record["status_code"], record["event_type"]) == (4, 503, "agent.session.created")
    assert "answered 503" in record["error"] and len(hooks.requests) == 4
    assert len({headers["webhook-id"] for headers, _ in hooks.requests}) == 1
