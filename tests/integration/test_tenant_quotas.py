"""Per-tenant quotas (issue 36, item 4), in one process: the running-Turn limit (agents_core/quotas.py) and the
request rate of API Gateway's usage plan as the local gateway enforces it (local/apigw.py). Over a limit: the
official 429 `rate_limit_exceeded` envelope, nothing written, while another tenant is served."""

import json

import openai
import pytest

from agents_core import quotas
from agents_core.apikeys import create_key
from agents_core.runtimes import settlement
from agents_core.store import default_store
from local import apigw
from local.inprocess import wait_for
from tests.integration.conftest import TABLE, scan, sdk
from tests.integration.stack_fixtures import runtime, stop_executions  # noqa: F401 - fixtures

LIMIT = 2
TOOL = {"type": "function", "name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {}}}


@pytest.fixture
def stack(monkeypatch):
    """The in-process stack with a running-Turn limit of 2 per tenant (MAX_RUNNING_TURNS, the template's
    TenantMaxRunningTurns)."""
    from moto import mock_aws

    from local.inprocess import InProcessStack
    from local.lambdas import MOTO_CONFIG
    from tests.integration.conftest import KEEP_BOTO3_SESSION
    from tests.integration.stack_fixtures import HEARTBEAT_SECONDS

    monkeypatch.setenv("HEARTBEAT_SECONDS", str(HEARTBEAT_SECONDS))
    monkeypatch.setenv("MAX_RUNNING_TURNS", str(LIMIT))
    with mock_aws(config={**MOTO_CONFIG, **KEEP_BOTO3_SESSION}):
        s = InProcessStack(TABLE).start()
        yield s
        s.stop()
        stop_executions(s)


@pytest.fixture
def tenants(stack):
    return sdk(stack.http, create_key(stack.store, "tenant-a")), sdk(stack.http, create_key(stack.store, "tenant-b"))


def create(client, script):
    return client.beta.agents.sessions.create(environment={"type": "none"}, input=script,
                                              agent={"model": "gpt-5", "tools": [TOOL]},
                                              extra_body={"x_agents_core": {"harness": "scripted"}})


def message(text):
    return {"type": "agent.session.input.message",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}


def pending(client, session_id):
    return wait_for(lambda: client.beta.agents.sessions.retrieve(session_id).required_actions)[0]


def idle(client, session_id):
    return wait_for(lambda: client.beta.agents.sessions.retrieve(session_id).status in ("idle", "failed"))


def refused(call):
    """The official 429 envelope; the SDK may retry it (no `x-should-retry: false`)."""
    with pytest.raises(openai.RateLimitError) as err:
        call()
    assert err.value.status_code == 429
    assert err.value.body["code"] == "rate_limit_exceeded" and err.value.body["type"] == "invalid_request_error"
    assert err.value.body["message"].startswith(f"This tenant already runs {LIMIT} Turns at once")
    assert "x-should-retry" not in err.value.response.headers
    return err.value


def test_over_the_running_turn_limit_input_that_starts_a_turn_is_a_429_that_writes_nothing(stack, tenants, runtime):
    a, b = tenants
    calm = create(a, "say hello")  # completes: goes idle, holds no slot
    idle(a, calm.id)
    first, second = create(a, "call get_weather {}\nsay one"), create(a, "call get_weather {}\nsay two")
    action = pending(a, first.id)
    pending(a, second.id)
    assert quotas.running(stack.store, "tenant-a") == LIMIT
    before = scan(stack.dynamodb)
    refused(lambda: create(a, "say three"))  # a Session create with input
    refused(lambda: a.beta.agents.sessions.events.create(calm.id, events=[message("say again")]))  # to an idle Session
    assert scan(stack.dynamodb) == before
    # another tenant is served meanwhile, and steering the running Turn starts none, so it is accepted
    assert create(b, "say hi from b").status == "in_progress"
    a.beta.agents.sessions.events.create(first.id, events=[message("steer")])
    # completion gives the slot back
    a.beta.agents.sessions.events.create(first.id, events=[{
        "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
        "success": True, "output": "sunny"}])
    wait_for(lambda: quotas.running(stack.store, "tenant-a") == 1)
    third = create(a, "call get_weather {}\nsay three")  # the freed slot (held: its Turn waits on its call)
    pending(a, third.id)
    assert quotas.running(stack.store, "tenant-a") == LIMIT


def test_failure_cancel_and_delete_give_the_slot_back(stack, tenants, runtime):
    a, _ = tenants
    failing = create(a, "fail")
    idle(a, failing.id)
    assert a.beta.agents.sessions.retrieve(failing.id).status == "failed"
    assert quotas.running(stack.store, "tenant-a") == 0
    waiting = create(a, "call get_weather {}\nsay later")
    pending(a, waiting.id)
    a.beta.agents.sessions.events.create(waiting.id, events=[{"type": "agent.session.input.cancel"}])
    wait_for(lambda: quotas.running(stack.store, "tenant-a") == 0)
    assert a.beta.agents.sessions.retrieve(waiting.id).status == "idle"
    # a batch that starts a Turn and cancels it nets no slot (one write of the count per commit)
    a.beta.agents.sessions.events.create(waiting.id, events=[
        message("call get_weather {}"), {"type": "agent.session.input.cancel"}])
    assert quotas.running(stack.store, "tenant-a") == 0


def test_a_queued_turn_holds_its_slot_until_cancelled_or_its_session_is_deleted(stack, tenants):
    a, _ = tenants  # no Runtime: the Turns stay queued
    one, two = create(a, "say one"), create(a, "say two")
    assert quotas.running(stack.store, "tenant-a") == LIMIT
    before = scan(stack.dynamodb)
    refused(lambda: create(a, "say three"))
    refused(lambda: a.beta.agents.sessions.create(environment={"type": "none"}, input="say three", stream=True,
                                                  agent={"model": "gpt-5"}))  # a streamed create: 429 before any byte
    assert scan(stack.dynamodb) == before
    a.beta.agents.sessions.events.create(one.id, events=[{"type": "agent.session.input.cancel"}])
    assert quotas.running(stack.store, "tenant-a") == 1
    a.beta.agents.sessions.delete(two.id)
    assert quotas.running(stack.store, "tenant-a") == 0


def test_settling_a_lost_turn_again_releases_nothing_twice(stack, tenants, runtime):
    a, _ = tenants
    session = create(a, "call get_weather {}\nsay later")
    action = pending(a, session.id)
    other = create(a, "call get_weather {}\nsay other")
    pending(a, other.id)
    for _ in range(3):  # Settle(lost) and its retries, as the workflow's SettleLost and its retriers run it
        assert settlement.settle(stack.store, "tenant-a", session.id, action.turn_id, None, lost=True) == "failed"
    assert quotas.running(stack.store, "tenant-a") == 1
    assert settlement.settle(stack.store, "tenant-a", session.id, action.turn_id, None, lost=False,
                             last_resort=True) == "failed"
    assert quotas.running(stack.store, "tenant-a") == 1


# ---- the request rate: API Gateway's usage plan, one bucket per tenant -------------------------------------

def test_over_its_request_rate_a_tenant_gets_429s_that_write_nothing_while_another_is_served(aws, handlers, monkeypatch):
    monkeypatch.setenv("TENANT_RATE_LIMIT", "0.001")  # no refill within the test
    monkeypatch.setenv("TENANT_BURST_LIMIT", "3")
    gateway = apigw.Gateway(handlers)
    store = default_store()
    key_a, key_a2, key_b = create_key(store, "tenant-a"), create_key(store, "tenant-a"), create_key(store, "tenant-b")

    def post(key):
        return gateway.handle("POST", "/v1/agents", "", {"openai-beta": "agents=v1", "authorization": f"Bearer {key}",
                                                        "content-type": "application/json"},
                              b'{"model": "gpt-5", "name": "quota"}')

    assert [post(k).status for k in (key_a, key_a2, key_a)] == [201, 201, 201]  # both keys draw on one bucket
    before = scan(aws)
    for key in (key_a, key_a2):
        answer = post(key)
        assert answer.status == 429 and "x-should-retry" not in answer.headers
        error = json.loads(answer.body)["error"]
        assert (error["code"], error["type"], error["param"]) == ("rate_limit_exceeded", "invalid_request_error", None)
    assert scan(aws) == before
    assert post(key_b).status == 201  # another tenant's bucket is its own
    assert gateway.handle("GET", "/v1/agents/sessions/sess_x/events", "", {  # streaming routes are metered too
        "openai-beta": "agents=v1", "authorization": f"Bearer {key_a}"}, b"").status == 429


def test_the_sdk_sees_the_usage_plans_429_as_its_rate_limit_error(aws, handlers, monkeypatch):
    monkeypatch.setenv("TENANT_RATE_LIMIT", "0.001")
    monkeypatch.setenv("TENANT_BURST_LIMIT", "1")
    gateway = apigw.Gateway(handlers)
    store = default_store()
    client = sdk(gateway, create_key(store, "tenant-a"))
    client.beta.agents.sessions.list()
    with pytest.raises(openai.RateLimitError) as err:
        client.beta.agents.sessions.list()
    assert err.value.body["code"] == "rate_limit_exceeded"


def test_registering_a_tenant_puts_its_one_api_key_in_the_usage_plan_once(aws, capsys):
    """In AWS API Gateway meters a tenant only through an API key in the usage plan whose value is the authorizer's
    usageIdentifierKey: `python -m agents_core.apikeys --usage-plan-id` creates it, idempotently."""
    import boto3

    from agents_core import apikeys

    apigateway = boto3.client("apigateway", region_name="us-east-1")
    plan = apigateway.create_usage_plan(name="tenants", throttle={"rateLimit": 100, "burstLimit": 200})["id"]
    first = quotas.register_tenant(apigateway, plan, "tenant-a")
    assert quotas.register_tenant(apigateway, plan, "tenant-a") == first  # again: the same key, still once in the plan
    assert apikeys.main(["--tenant", "tenant-b", "--usage-plan-id", plan, "--no-key", "--table", TABLE]) == 0
    in_plan = apigateway.get_usage_plan_keys(usagePlanId=plan)["items"]
    assert sorted(k["value"] for k in in_plan) == sorted([quotas.usage_key("tenant-a"), quotas.usage_key("tenant-b")])
    assert capsys.readouterr().out == ""  # --no-key prints no secret


# ---- the request rate of WebSocket requests (no usage plans there): a bucket per tenant in the table ---------

def test_a_tenants_websocket_requests_over_its_rate_are_refused_and_write_nothing(stack, tenants, monkeypatch):
    from agents_core import settings as settings_module

    monkeypatch.setenv("TENANT_RATE_LIMIT", "0.001")
    monkeypatch.setenv("TENANT_BURST_LIMIT", "3")
    settings_module.get_settings.cache_clear()
    a, b = tenants
    mine = a.beta.agents.sessions.create(environment={"type": "self_hosted", "workspace_directory": "/w"},
                                         agent={"model": "gpt-5"})
    theirs = b.beta.agents.sessions.create(environment={"type": "self_hosted", "workspace_directory": "/w"},
                                           agent={"model": "gpt-5"})
    received = []

    def connect(client):
        return stack.ws.connect(lambda text: received.append(json.loads(text)),
                                {"Authorization": f"Bearer {client.api_key}"})

    def subscribe(connection_id, session_id):
        stack.ws.message(connection_id, json.dumps({"action": "subscribe", "session_id": session_id}))
        return received[-1]

    connection = connect(a)  # 1 of 3
    assert subscribe(connection, mine.id)["type"] == "subscribed"  # 2
    assert subscribe(connection, mine.id)["type"] == "subscribed"  # 3
    before = scan(stack.dynamodb)
    refused = subscribe(connection, mine.id)
    assert refused["type"] == "error" and refused["error"]["code"] == "rate_limit_exceeded"
    assert refused["error"]["type"] == "invalid_request_error"
    assert connect(a) is None  # $connect answered 429: the handshake is refused
    assert scan(stack.dynamodb) == before
    other = connect(b)  # another tenant's bucket is its own
    assert other is not None and subscribe(other, theirs.id)["type"] == "subscribed"


def test_the_websocket_bucket_takes_its_burst_then_one_request_per_interval(store, monkeypatch):
    from agents_core import settings as settings_module

    monkeypatch.setenv("TENANT_RATE_LIMIT", "10")  # one request per 100 ms
    monkeypatch.setenv("TENANT_BURST_LIMIT", "3")
    settings_module.get_settings.cache_clear()
    t = 1_000_000.0
    assert [quotas.take_request(store, "tenant-a", t) for _ in range(4)] == [True, True, True, False]
    assert quotas.take_request(store, "tenant-b", t)  # per tenant
    assert not quotas.take_request(store, "tenant-a", t + 50)
    assert quotas.take_request(store, "tenant-a", t + 100) and not quotas.take_request(store, "tenant-a", t + 100)
    assert [quotas.take_request(store, "tenant-a", t + 10_000) for _ in range(4)] == [True, True, True, False]


def test_concurrent_creates_never_run_more_turns_than_the_limit(stack, tenants):
    from concurrent.futures import ThreadPoolExecutor

    a, _ = tenants  # no Runtime: every admitted Turn stays queued, holding its slot

    def attempt(i):
        try:
            create(a, f"say {i}")
            return "created"
        except openai.RateLimitError:
            return "refused"

    with ThreadPoolExecutor(6) as pool:
        outcomes = list(pool.map(attempt, range(6)))
    assert sorted(outcomes) == ["created"] * LIMIT + ["refused"] * (6 - LIMIT)
    assert quotas.running(stack.store, "tenant-a") == LIMIT
    assert len(a.beta.agents.sessions.list().data) == LIMIT  # a refused create left no Session behind
