"""Redrive of the outbox DLQ: outbox records that failed every retry of the stream consumer, handed to it again.

Lambda's on-failure destination for a DynamoDB stream gets no record, only where the failed batch was
(`DDBStreamBatchInfo`: the stream, the shard, the first and last sequence numbers). A redrive reads those
records back from the stream (kept 24 hours) and invokes the stream consumer with them as its event source
mapping would; the consumer's commands are idempotent, so a record it had half handled repeats nothing. A message
whose records are handled is deleted; one whose records failed again stays for a later redrive; one whose
records left the stream (older than 24 hours) stays too, reported `expired` (its OUT# record is still in the table
until its TTL). Every message counts one `DlqRedrives` by outcome.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterator
from typing import Any, Optional

from botocore.exceptions import ClientError

from . import keys, metrics
from .aws import botocore_session
from .settings import get_settings

GONE = ("TrimmedDataAccessException", "ExpiredIteratorException", "ResourceNotFoundException")
EMPTY_PAGES = 5  # an open shard answers empty pages past its last record: stop after this many in a row


def event_value(value: dict[str, Any]) -> dict[str, Any]:
    """A stream AttributeValue as a Lambda event carries it (binary base64); the local stack's stream poller
    builds its events with it too."""
    kind, inner = next(iter(value.items()))
    if kind == "B":
        return {"B": base64.b64encode(bytes(inner)).decode()}
    if kind == "BS":
        return {"BS": [base64.b64encode(bytes(v)).decode() for v in inner]}
    if kind == "M":
        return {"M": {k: event_value(v) for k, v in inner.items()}}
    if kind == "L":
        return {"L": [event_value(v) for v in inner]}
    return value


def _event_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    data = dict(record["dynamodb"])
    for image in ("Keys", "NewImage", "OldImage"):
        if image in data:
            data[image] = {k: event_value(v) for k, v in data[image].items()}
    created = data.get("ApproximateCreationDateTime")
    if isinstance(created, dt.datetime):
        data["ApproximateCreationDateTime"] = created.timestamp()
    return {"eventID": record.get("eventID"), "eventName": record["eventName"],
            "eventVersion": record.get("eventVersion", "1.1"), "eventSource": "aws:dynamodb",
            "awsRegion": record.get("awsRegion"), "dynamodb": data, "eventSourceARN": stream_arn}


def _records(streams: Any, batch: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The batch's records, first to last sequence number (raises ClientError when they left the stream)."""
    arn, first, last = batch["streamArn"], batch["startSequenceNumber"], int(batch["endSequenceNumber"])
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=batch["shardId"],
                                          ShardIteratorType="AT_SEQUENCE_NUMBER", SequenceNumber=first)["ShardIterator"]
    empty = 0
    while iterator and empty < EMPTY_PAGES:
        page = streams.get_records(ShardIterator=iterator, Limit=1000)
        empty = 0 if page.get("Records") else empty + 1
        for record in page.get("Records", []):
            if int(record["dynamodb"]["SequenceNumber"]) > last:
                return
            yield _event_record(record, arn)
        iterator = page.get("NextShardIterator")


def _is_outbox(record: dict[str, Any]) -> bool:
    """The consumer's FilterCriteria: inserted OUT# records only."""
    sk = ((record["dynamodb"].get("Keys") or {}).get(keys.SK) or {}).get("S", "")
    return record["eventName"] == "INSERT" and keys.is_outbox_record(sk)


def redrive_message(body: dict[str, Any], streams: Any, lambda_client: Any, stream_function: str) -> str:
    """One DLQ message: 'redriven', 'failed' (the consumer failed again) or 'expired' (the records are gone)."""
    batch = body.get("DDBStreamBatchInfo")
    if not isinstance(batch, dict):
        return "failed"  # not a stream batch's failure record: left for an operator
    try:
        records = [r for r in _records(streams, batch) if _is_outbox(r)]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in GONE:
            return "expired"
        raise
    if not records:
        return "redriven"
    answer = lambda_client.invoke(FunctionName=stream_function, Payload=json.dumps({"Records": records}).encode())
    payload = json.loads(answer["Payload"].read() or b"null")
    if answer.get("FunctionError") or (payload or {}).get("batchItemFailures"):
        return "failed"
    return "redriven"


def _client(service: str) -> Any:
    """A client from botocore directly (no cold start imports boto3: tests/unit/test_cold_start_imports.py)."""
    return botocore_session().create_client(service, region_name=get_settings().aws_region)


def redrive(queue_url: str, stream_function: str, sqs: Any = None, streams: Any = None, lambda_client: Any = None,
            limit: int = 100) -> dict[str, int]:
    """Redrive up to `limit` messages of the outbox DLQ; how many ended each way."""
    sqs = sqs or _client("sqs")
    streams = streams or _client("dynamodbstreams")
    lambda_client = lambda_client or _client("lambda")
    counts = {"redriven": 0, "failed": 0, "expired": 0}
    seen = 0
    while seen < limit:
        # a message stays invisible for the rest of this run, so one run never takes it twice
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=min(10, limit - seen),
                                       WaitTimeSeconds=0, VisibilityTimeout=900).get("Messages", [])
        if not messages:
            break
        for message in messages:
            seen += 1
            outcome = redrive_message(_body(message), streams, lambda_client, stream_function)
            counts[outcome] += 1
            metrics.dlq_redrive(outcome)
            if outcome == "redriven":
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return counts


def _body(message: dict[str, Any]) -> dict[str, Any]:
    try:
        body: Optional[Any] = json.loads(message.get("Body") or "null")
    except ValueError:
        body = None
    return body if isinstance(body, dict) else {}
