"""The per-tenant limiters as data (issue 36, item 4): the running-Turn count's conditional write, how a refused
commit is told from a lost race, the usage identifier, and the local gateway's usage-plan token bucket."""

import re

import pytest

from agents_core import keys, quotas
from agents_core.settings import Settings
from agents_core.store import Transaction, TransactionConflict, marshal
from local import apigw, template


@pytest.fixture
def limit(monkeypatch):
    def set_limit(value):
        monkeypatch.setattr(quotas, "limit", lambda: value)
    return set_limit


def test_starting_a_turn_increments_the_count_only_while_it_stays_within_the_limit(limit):
    limit(5)
    tx = Transaction("t")
    quotas.add(tx, "tenant-a", 1)
    (entry,) = tx.entries
    update = entry["Update"]
    assert update["Key"] == marshal({"PK": "T#tenant-a#QUOTA", "SK": "Q"})
    assert update["UpdateExpression"] == "ADD running :d"
    assert update["ConditionExpression"] == "attribute_not_exists(running) OR running <= :max"
    assert update["ExpressionAttributeValues"] == {":d": {"N": "1"}, ":max": {"N": "4"}}  # 4 running + 1 = 5


@pytest.mark.parametrize("delta,ceiling", [(-1, 5), (1, 0), (-1, 0)])
def test_ending_a_turn_or_no_limit_is_unconditional(limit, delta, ceiling):
    limit(ceiling)
    tx = Transaction("t")
    quotas.add(tx, "tenant-a", delta)
    assert "ConditionExpression" not in tx.entries[0]["Update"]
    assert tx.entries[0]["Update"]["ExpressionAttributeValues"] == {":d": {"N": str(delta)}}


def test_a_commit_that_neither_starts_nor_ends_a_turn_leaves_the_count_alone(limit):
    limit(5)
    tx = Transaction("t")
    quotas.add(tx, "tenant-a", 0)
    assert tx.entries == []


def commit(*first):
    """A Session commit (its update first) that also starts a Turn."""
    tx = Transaction("t")
    tx.update(keys.session("tenant-a", "sess_1"), "SET out_seq = :n", "out_seq = :cur", values={":n": 2, ":cur": 1})
    tx.put({**keys.turn("tenant-a", "sess_1", "turn_1"), "status": "queued"}, "attribute_not_exists(PK)")
    quotas.add(tx, "tenant-a", 1)
    return tx


@pytest.mark.parametrize("codes,refused", [
    (["None", "None", "ConditionalCheckFailed"], True),  # only the count's condition: over the limit
    (["ConditionalCheckFailed", "None", "ConditionalCheckFailed"], False),  # a lost race too: decide again
    (["ConditionalCheckFailed", "None", "None"], False),  # a lost race
    (["None", "None", "None"], False),
])
def test_only_the_counts_condition_alone_is_the_limit(limit, codes, refused):
    limit(2)
    tx = commit()
    conflict = TransactionConflict([None] * 3, codes)
    assert quotas.refused(tx, conflict, "tenant-a") is refused
    assert quotas.refused(tx, conflict, "tenant-b") is False  # another tenant's count is not this one
    if refused:
        with pytest.raises(quotas.RunningTurnsExceeded) as err:
            quotas.check(tx, conflict, "tenant-a")
        assert (err.value.status, err.value.code, err.value.type) == (429, "rate_limit_exceeded",
                                                                      "invalid_request_error")
        assert err.value.message.startswith("This tenant already runs 2 Turns at once")
    else:
        quotas.check(tx, conflict, "tenant-a")  # nothing raised: the engine decides again


def test_the_usage_identifier_is_the_tenants_alone_and_a_valid_api_key_value():
    a, b = quotas.usage_key("tenant-a"), quotas.usage_key("tenant-b")
    assert a == quotas.usage_key("tenant-a") and a != b
    assert re.fullmatch(r"[A-Za-z0-9]{20,128}", a)  # API Gateway: an alphanumeric value of 20 to 128 characters
    assert "tenant-a" not in a


def test_the_settings_and_the_local_gateway_default_to_the_templates_parameters():
    parameters = template.load()["Parameters"]
    assert Settings().max_running_turns == parameters["TenantMaxRunningTurns"]["Default"]
    assert Settings.from_environment({"MAX_RUNNING_TURNS": "3"}).max_running_turns == 3
    assert template.usage_plan() == (float(parameters["TenantRateLimit"]["Default"]),
                                     int(parameters["TenantBurstLimit"]["Default"]))


def test_the_usage_plans_bucket_takes_its_burst_then_refills_at_its_rate(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(apigw.time, "monotonic", lambda: clock[0])
    bucket = apigw._Bucket(rate=2.0, burst=3)
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    clock[0] += 0.25  # half a token
    assert bucket.take() is False
    clock[0] += 0.25
    assert bucket.take() is True and bucket.take() is False
    clock[0] += 60  # refills up to the burst, no more
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]


def test_the_local_gateway_meters_each_usage_key_apart_and_refuses_a_request_without_one(monkeypatch):
    monkeypatch.setenv("TENANT_RATE_LIMIT", "0.001")
    monkeypatch.setenv("TENANT_BURST_LIMIT", "2")
    gateway = apigw.Gateway({}, routes=[], authorizer=None)
    assert gateway.usage_plan == (0.001, 2)
    assert [gateway.meter("key-a") for _ in range(2)] == [None, None]
    throttled = gateway.meter("key-a")
    assert throttled is not None and throttled.status == 429
    assert b'"rate_limit_exceeded"' in throttled.body
    assert gateway.meter("key-b") is None
    missing = gateway.meter(None)
    assert missing is not None and missing.status == 403 and b'"invalid_api_key"' in missing.body


def test_the_template_wires_the_quotas_to_their_parameters():
    import json

    api = template.public_api()
    assert api["ApiKeySourceType"] == "AUTHORIZER" and api["Auth"]["ApiKeyRequired"] is True
    assert api["Auth"]["UsagePlan"]["Throttle"] == {"RateLimit": {"Ref": "TenantRateLimit"},
                                                    "BurstLimit": {"Ref": "TenantBurstLimit"}}
    variables = template.load()["Globals"]["Function"]["Environment"]["Variables"]
    assert (variables["MAX_RUNNING_TURNS"], variables["TENANT_RATE_LIMIT"], variables["TENANT_BURST_LIMIT"]) == (
        {"Ref": "TenantMaxRunningTurns"}, {"Ref": "TenantRateLimit"}, {"Ref": "TenantBurstLimit"})
    responses = template.gateway_responses()
    for kind in ("THROTTLED", "QUOTA_EXCEEDED"):  # the usage plan's answers: retryable 429s
        status, headers, body = responses[kind]
        assert status == 429 and json.loads(body)["error"]["code"] == "rate_limit_exceeded"
        assert "x-should-retry" not in headers
    status, headers, body = responses["INVALID_API_KEY"]  # a tenant missing from the usage plan
    assert status == 403 and json.loads(body)["error"]["code"] == "invalid_api_key" and headers["x-should-retry"] == "false"
