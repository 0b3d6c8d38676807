"""The stream poller delivers each committed outbox record to the stream handler exactly as the
Lambda event source mapping would: FilterCriteria applied, NEW_IMAGE records, commit order, and a
partial batch failure retried from the first failed record."""

import boto3
import pytest
from moto import mock_aws

from local import streams, template
from tests.integration.conftest import KEEP_BOTO3_SESSION

TABLE = "agents-core-poller"


@pytest.fixture
def table():
    with mock_aws(config=KEEP_BOTO3_SESSION):
        client = boto3.client("dynamodb", region_name="us-east-1")
        template.create_table(client, TABLE)
        yield client, boto3.client("dynamodbstreams", region_name="us-east-1")


def put(client, sk, **extra):
    item = {"PK": {"S": "T#t#SESSION#s"}, "SK": {"S": sk}, **{k: {"S": v} for k, v in extra.items()}}
    client.put_item(TableName=TABLE, Item=item)


def test_records_are_shaped_and_filtered_like_the_event_source_mapping(table):
    client, streams_client = table
    seen = []
    source = template.stream_sources()[0]
    poller = streams.StreamPoller(streams_client, streams.stream_arn(client, TABLE),
                                  lambda event, ctx: seen.extend(event["Records"]) or {"batchItemFailures": []}, source)
    put(client, "OUT#000000000001", events="[1]")
    put(client, "TURN#x")  # not an outbox record: filtered out as FilterCriteria does
    put(client, "OUT#000000000002", events="[2]")
    client.update_item(TableName=TABLE, Key={"PK": {"S": "T#t#SESSION#s"}, "SK": {"S": "OUT#000000000001"}},
                       UpdateExpression="SET x = :x", ExpressionAttributeValues={":x": {"S": "1"}})  # MODIFY
    assert poller.pump() == 2
    assert [r["dynamodb"]["Keys"]["SK"]["S"] for r in seen] == ["OUT#000000000001", "OUT#000000000002"]
    record = seen[0]
    assert record["eventName"] == "INSERT" and record["eventSource"] == "aws:dynamodb"
    assert record["dynamodb"]["StreamViewType"] == "NEW_IMAGE" and record["dynamodb"]["NewImage"]["events"]
    assert record["eventSourceARN"].startswith("arn:aws:dynamodb:")
    assert poller.pump() == 0  # delivered once


def test_partial_batch_failure_retries_from_the_first_failed_record(table):
    client, streams_client = table
    deliveries = []
    fail_once = {"OUT#000000000002"}

    def handler(event, ctx):
        deliveries.append([r["dynamodb"]["Keys"]["SK"]["S"] for r in event["Records"]])
        failed = [r["dynamodb"]["SequenceNumber"] for r in event["Records"]
                  if r["dynamodb"]["Keys"]["SK"]["S"] in fail_once]
        fail_once.clear()
        return {"batchItemFailures": [{"itemIdentifier": s} for s in failed]}

    source = template.stream_sources()[0]
    poller = streams.StreamPoller(streams_client, streams.stream_arn(client, TABLE), handler, source)
    for i in (1, 2, 3):
        put(client, f"OUT#00000000000{i}")
    assert poller.pump() == 1  # checkpoint after record 1
    assert poller.pump() == 2  # records 2 and 3 redelivered
    assert deliveries == [["OUT#000000000001", "OUT#000000000002", "OUT#000000000003"],
                          ["OUT#000000000002", "OUT#000000000003"]]


def test_a_record_that_exhausts_its_retries_goes_to_the_failure_destination(table):
    client, streams_client = table
    source = template.stream_sources()[0]
    limited = template.StreamSource(source.function, source.batch_size, 2, source.patterns, True)
    poller = streams.StreamPoller(streams_client, streams.stream_arn(client, TABLE),
                                  lambda event, ctx: {"batchItemFailures": [
                                      {"itemIdentifier": event["Records"][0]["dynamodb"]["SequenceNumber"]}]},
                                  limited)
    put(client, "OUT#000000000001")
    for _ in range(4):
        poller.pump()
    assert len(poller.failures) == 1


def test_template_declares_what_the_poller_honours():
    source = template.stream_sources()[0]
    assert source.function == "StreamFunction" and source.report_failures
    assert source.patterns == ({"eventName": ["INSERT"], "dynamodb": {"Keys": {"SK": {"S": [{"prefix": "OUT#"}]}}}},)


def test_binary_attributes_arrive_base64_as_in_a_lambda_event(table):
    import base64

    from agents_core.store import pack, unpack

    client, streams_client = table
    seen = []
    source = template.stream_sources()[0]
    poller = streams.StreamPoller(streams_client, streams.stream_arn(client, TABLE),
                                  lambda event, ctx: seen.extend(event["Records"]) or {"batchItemFailures": []}, source)
    client.put_item(TableName=TABLE, Item={"PK": {"S": "T#t#SESSION#s"}, "SK": {"S": "OUT#000000000001"},
                                           "events": {"B": pack('[{"type": "x"}]')}})
    assert poller.pump() == 1
    value = seen[0]["dynamodb"]["NewImage"]["events"]["B"]
    assert isinstance(value, str) and unpack(base64.b64decode(value)) == '[{"type": "x"}]'


def test_an_idle_poller_sleeps_and_a_new_record_wakes_it(table):
    """While nothing is written the poller backs off (to `asleep_max`) instead of asking moto every
    50 ms; moto appending a stream record wakes it at once (local/motofix.py)."""
    import threading
    import time

    from local import motofix
    from local.inprocess import wait_for

    motofix.install()
    client, streams_client = table
    seen, pumps = [], [0]
    source = template.stream_sources()[0]
    poller = streams.StreamPoller(streams_client, streams.stream_arn(client, TABLE),
                                  lambda event, ctx: seen.extend(event["Records"]) or {"batchItemFailures": []}, source)
    pump = poller.pump

    def counted():
        pumps[0] += 1
        return pump()

    poller.pump = counted
    thread = threading.Thread(target=poller.run, kwargs={"asleep_max": 60.0}, daemon=True)
    thread.start()
    try:
        time.sleep(3)
        assert pumps[0] <= 15  # polling every 50 ms would be 60
        put(client, "OUT#000000000001", events="[1]")  # the next wait would be many seconds long
        wait_for(lambda: seen, timeout=10)
    finally:
        poller.stop()
        thread.join(timeout=5)
    assert not thread.is_alive()  # stop wakes it too
