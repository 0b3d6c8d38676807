"""The outbox DLQ's redrive (agents_core/outbox_redrive.py) on fakes of SQS, DynamoDB Streams and Lambda: a batch
whose records the consumer handles is deleted from the queue; one the consumer fails again, or whose records left
the stream (24 hours), stays, each counted by outcome; only inserted OUT# records are handed over, binary values
base64 as in a Lambda event."""

import datetime as dt
import io
import json

import pytest
from botocore.exceptions import ClientError

from agents_core import outbox_redrive

ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2026-01-01T00:00:00.000"


def record(seq, sk="OUT#000000000001", name="INSERT", **image):
    keys = {"PK": {"S": "T#a#SESSION#s"}, "SK": {"S": sk}}
    return {"eventID": str(seq), "eventName": name, "dynamodb": {
        "SequenceNumber": str(seq), "Keys": keys, "NewImage": {**keys, **image},
        "ApproximateCreationDateTime": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)}}


class Streams:
    def __init__(self, records, error=None):
        self.records, self.error = records, error

    def get_shard_iterator(self, **kw):
        if self.error:
            raise ClientError({"Error": {"Code": self.error, "Message": "gone"}}, "GetShardIterator")
        assert kw["ShardIteratorType"] == "AT_SEQUENCE_NUMBER"
        return {"ShardIterator": f"{kw['StreamArn']}|1|{kw['SequenceNumber']}"}

    def get_records(self, ShardIterator, Limit):
        first = int(ShardIterator.rsplit("|", 1)[1])
        return {"Records": [r for r in self.records if int(r["dynamodb"]["SequenceNumber"]) >= first],
                "NextShardIterator": None}


class Lambda:
    def __init__(self, answer=None, error=False):
        self.events, self.answer, self.error = [], answer or {"batchItemFailures": []}, error

    def invoke(self, FunctionName, Payload):
        self.events.append(json.loads(Payload))
        return {"Payload": io.BytesIO(json.dumps(self.answer).encode()), **({"FunctionError": "Unhandled"}
                                                                           if self.error else {})}


class Queue:
    def __init__(self, *bodies):
        self.messages = [{"Body": json.dumps(b), "ReceiptHandle": str(i)} for i, b in enumerate(bodies)]
        self.deleted, self.taken = [], 0

    def receive_message(self, **kw):
        out = self.messages[self.taken:self.taken + kw["MaxNumberOfMessages"]]
        self.taken += len(out)
        return {"Messages": out}

    def delete_message(self, QueueUrl, ReceiptHandle):
        self.deleted.append(ReceiptHandle)


def batch(first, last):
    return {"DDBStreamBatchInfo": {"shardId": "shardId-1", "startSequenceNumber": str(first),
                                   "endSequenceNumber": str(last), "streamArn": ARN, "batchSize": 1}}


def test_a_handled_batch_is_deleted_and_only_its_outbox_inserts_are_handed_over():
    streams = Streams([record(10, blob={"B": b"\x00\x01"}), record(11, sk="TURN#x"), record(12, name="MODIFY"),
                       record(13, sk="OUT#000000000002"), record(14, sk="OUT#000000000003")])
    consumer, queue = Lambda(), Queue(batch(10, 13))
    assert outbox_redrive.redrive("q", "StreamFunction", queue, streams, consumer) == \
        {"redriven": 1, "failed": 0, "expired": 0}
    assert queue.deleted == ["0"]
    [event] = consumer.events
    assert [r["dynamodb"]["SequenceNumber"] for r in event["Records"]] == ["10", "13"]  # 14 is past the batch
    first = event["Records"][0]
    assert first["dynamodb"]["NewImage"]["blob"] == {"B": "AAE="} and first["eventSourceARN"] == ARN
    assert first["eventSource"] == "aws:dynamodb" and isinstance(first["dynamodb"]["ApproximateCreationDateTime"], float)


@pytest.mark.parametrize(("streams", "consumer", "outcome"), [
    (Streams([record(10)]), Lambda(error=True), "failed"),
    (Streams([record(10)]), Lambda({"batchItemFailures": [{"itemIdentifier": "10"}]}), "failed"),
    (Streams([], error="TrimmedDataAccessException"), Lambda(), "expired"),
    (Streams([], error="ResourceNotFoundException"), Lambda(), "expired"),
])
def test_a_batch_that_fails_again_or_left_the_stream_stays_in_the_queue(streams, consumer, outcome):
    queue = Queue(batch(10, 10))
    counts = outbox_redrive.redrive("q", "StreamFunction", queue, streams, consumer)
    assert counts[outcome] == 1 and sum(counts.values()) == 1 and queue.deleted == []


def test_a_message_that_names_no_stream_batch_is_left_for_an_operator():
    queue = Queue({"something": "else"})
    assert outbox_redrive.redrive("q", "StreamFunction", queue, Streams([]), Lambda())["failed"] == 1
    assert queue.deleted == []


def test_one_run_takes_at_most_its_limit():
    queue = Queue(*[batch(10, 10)] * 5)
    counts = outbox_redrive.redrive("q", "StreamFunction", queue, Streams([record(10)]), Lambda(), limit=3)
    assert counts["redriven"] == 3 and len(queue.deleted) == 3
