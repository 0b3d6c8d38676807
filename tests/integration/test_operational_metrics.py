"""Issue 36, item 1: the operational metrics are EMF lines the functions print (CloudWatch Logs turns them into
metrics). Each fact an alarm watches produces its line in the in-process stack: a failed Turn (TurnsFailed with
its reason), a throttled request (RejectedRequests by code), an outbox record the stream consumer keeps failing
until it goes to the DLQ (OutboxRecordsFailed, once per attempt); and no line names a tenant, Session or Turn."""

import json
import types

import pytest
from botocore.exceptions import ClientError

from agents_core import metrics
from agents_core.keys import call as call_key
from local.apigw import LambdaContext
from local.inprocess import wait_for
from tests.integration.stack_fixtures import client, runtime, stack  # noqa: F401 - fixtures
from tests.integration.test_faults import flaky
from tests.integration.test_turns import pending, result, session_with, turn_status


@pytest.fixture
def emf(monkeypatch, capsys):
    """The EMF lines printed from now on (the functions' stdout: their log stream in AWS)."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "AgentsCore/test")

    def lines():
        out = []
        for line in capsys.readouterr().out.splitlines():
            if line.startswith("{") and '"_aws"' in line:
                out.append(json.loads(line))
        seen.extend(out)
        return list(seen)

    seen: list[dict] = []
    return lines


def named(lines, name):
    return [line for line in lines if any(m["Name"] == name for d in line["_aws"]["CloudWatchMetrics"]
                                          for m in d["Metrics"])]


def value(line, name):
    """A metric's value on its line (Powertools writes a list of the values it buffered)."""
    raw = line[name]
    return sum(raw) if isinstance(raw, list) else raw


def no_identifier_in(lines, *identifiers):
    for line in lines:
        directive = line["_aws"]["CloudWatchMetrics"][0]
        assert directive["Namespace"] == "AgentsCore/test"
        for dimension_set in directive["Dimensions"]:
            assert set(dimension_set) <= set(metrics.DIMENSIONS), dimension_set
            for name in dimension_set:
                assert not any(i in str(line[name]) for i in identifiers), (name, line[name])


def test_a_failed_turn_produces_turns_failed_with_its_reason(stack, client, runtime, emf):
    session = session_with(client, "fail")
    turn_id = wait_for(lambda: client.beta.agents.sessions.turns.list(session.id).data)[0].id
    wait_for(lambda: turn_status(client, session.id, turn_id) == "failed")
    lines = wait_for(lambda: named(emf(), metrics.TURNS_FAILED) and emf())
    [failed] = named(lines, metrics.TURNS_FAILED)
    assert value(failed, metrics.TURNS_FAILED) == 1 and failed["reason"] == "harness_error"
    assert ["reason"] in failed["_aws"]["CloudWatchMetrics"][0]["Dimensions"]  # the alarm's dimension set
    assert (failed["harness"], failed["placement"], failed["service"]) == ("scripted", "none", "agents-core")
    [started] = named(lines, metrics.TURNS_STARTED)
    [wait] = named(lines, metrics.TURN_QUEUE_WAIT)
    assert started["harness"] == "scripted" and 0 <= value(wait, metrics.TURN_QUEUE_WAIT) < 60_000
    assert not named(lines, metrics.TURNS_COMPLETED)
    no_identifier_in(lines, "tenant-a", session.id, turn_id)


def test_a_completed_turn_with_a_call_produces_its_round_trip(stack, client, runtime, emf):
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="sunny")])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed")
    lines = wait_for(lambda: named(emf(), metrics.TURNS_COMPLETED) and named(emf(), metrics.FUNCTION_ROUND_TRIP)
                     and emf())
    assert len(named(lines, metrics.TURNS_COMPLETED)) == 1 and len(named(lines, metrics.TURNS_STARTED)) == 1
    [trip] = named(lines, metrics.FUNCTION_ROUND_TRIP)
    assert 0 <= value(trip, metrics.FUNCTION_ROUND_TRIP) < 60_000
    call = stack.store.get(call_key("tenant-a", session.id, action.call_id))
    assert call["created_ms"] // 1000 in (call["created_at"], call["created_at"] - 1)  # measured in ms from the start
    kinds = [line["kind"] for line in named(lines, metrics.RUNTIME_CONNECTIONS)]
    assert not named(lines, metrics.TURNS_FAILED) and kinds == []  # the Runtime connected before the capture
    no_identifier_in(lines, "tenant-a", session.id, action.turn_id, action.call_id)


def test_a_throttled_request_produces_rejected_requests_by_code(stack, client, runtime, emf, monkeypatch):
    import openai

    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    emf()
    flaky(monkeypatch, stack.store, [ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}},
                                                 "TransactWriteItems")] * 100)
    monkeypatch.setattr("agents_core.engine.random", types.SimpleNamespace(random=lambda: 0.0))
    with pytest.raises(openai.RateLimitError):
        client.beta.agents.sessions.events.create(session.id, events=[result(action, output="x")])
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.sessions.retrieve("sess_unknown")
    lines = emf()
    codes = sorted(line["code"] for line in named(lines, metrics.REJECTED_REQUESTS))
    assert codes == ["not_found_error", "rate_limit_exceeded"]
    no_identifier_in(lines, "tenant-a", session.id, "sess_unknown")


def test_an_outbox_record_that_keeps_failing_is_counted_at_each_attempt_until_the_dlq(stack, emf, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the outbox record cannot be processed")

    monkeypatch.setattr("agents_core.outbox.process", broken)
    stack.dynamodb.put_item(TableName=stack.table, Item={
        "PK": {"S": "T#tenant-a#SESSION#sess_x"}, "SK": {"S": "OUT#000000000001"}, "events": {"S": "[]"}})
    wait_for(lambda: stack.poller.failures, timeout=30)  # the local on-failure destination (the DLQ in AWS)
    attempts = stack.poller.source.max_retries + 1
    lines = named(emf(), metrics.OUTBOX_RECORDS_FAILED)
    assert len(lines) == attempts and all(line["kind"] == "outbox" for line in lines)
    no_identifier_in(lines, "tenant-a", "sess_x")


def test_the_redrive_hands_a_dead_lettered_record_to_the_stream_consumer_again(stack, emf, monkeypatch):
    """The local poller sends an exhausted record to the outbox DLQ as Lambda does (where the batch was, not the
    record); the redrive function reads it back from the stream and the consumer handles it, and the message goes
    (tests/unit/test_outbox_redrive.py: the failed and expired outcomes)."""
    from agents_core import outbox

    real, handled = outbox.process, []
    monkeypatch.setattr("agents_core.outbox.process", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("down")))
    stack.dynamodb.put_item(TableName=stack.table, Item={
        "PK": {"S": "T#tenant-a#SESSION#sess_r"}, "SK": {"S": "OUT#000000000001"}, "tenant": {"S": "tenant-a"},
        "session_id": {"S": "sess_r"}, "seq": {"N": "1"}, "events": {"S": "[]"}})
    queue = stack.queue_urls["OutboxDeadLetterQueue"]

    def waiting():
        return int(stack.sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"])[
            "Attributes"]["ApproximateNumberOfMessages"])

    wait_for(lambda: waiting() == 1, timeout=30)
    body = json.loads(stack.sqs.receive_message(QueueUrl=queue, VisibilityTimeout=0)["Messages"][0]["Body"])
    assert body["DDBStreamBatchInfo"]["startSequenceNumber"] and body["requestContext"]["condition"] == \
        "RetryAttemptsExhausted"
    monkeypatch.setattr("agents_core.outbox.process", lambda image, *a: handled.append(image) or real(image, *a))
    emf()
    counts = stack.handlers["OutboxRedriveFunction"]({}, LambdaContext("OutboxRedriveFunction"))
    assert counts == {"redriven": 1, "failed": 0, "expired": 0} and waiting() == 0
    assert [(i["session_id"], i["seq"]) for i in handled] == [("sess_r", 1)]
    assert [line["outcome"] for line in named(emf(), metrics.DLQ_REDRIVES)] == ["redriven"]
