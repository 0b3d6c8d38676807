"""DynamoDB Streams poller: reads the table's stream from moto and invokes the stream handler with
events shaped like the Lambda event source mapping's, honouring FilterCriteria, partial batch
failures (the batch is retried from the first failed record; a function error fails the whole batch) and
MaximumRetryAttempts."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from agents_core.outbox_redrive import event_value

from . import iam, template
from .apigw import Handler


def matches(pattern: Any, value: Any) -> bool:
    """The subset of EventBridge-style filter patterns the template uses (lists, prefix, nesting)."""
    if isinstance(pattern, dict):
        if not isinstance(value, dict):
            return False
        return all(matches(p, value.get(k)) for k, p in pattern.items())
    if isinstance(pattern, list):
        for option in pattern:
            if isinstance(option, dict) and "prefix" in option:
                if isinstance(value, str) and value.startswith(option["prefix"]):
                    return True
            elif option == value:
                return True
        return False
    return pattern == value


SHARD_REFRESH_SECONDS = 10.0


@dataclass
class StreamPoller:
    client: Any  # dynamodbstreams client
    stream_arn: str
    handler: Handler
    source: template.StreamSource
    context_factory: Callable[[], Any] = lambda: None
    failures: list[dict[str, Any]] = field(default_factory=list)  # records that exhausted retries
    # the on-failure destination (`dead_letter_sender`: the template's queue), told as Lambda tells it
    on_failure: Optional[Callable[[dict[str, Any]], None]] = None
    _iterators: dict[str, str] = field(default_factory=dict)
    _pending: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _attempts: dict[str, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _wake: threading.Event = field(default_factory=threading.Event)  # a stream record was appended
    _shard_ids: tuple[float, list[str]] = (float("-inf"), [])  # when the shards were listed, and them
    delivered: int = 0
    # one pump at a time (Lambda's poller processes a shard's batches in order, one after the other): a test that
    # pumps by hand beside the poller's thread raced it over the same pending records (IndexError, a fresh make test)
    _pumping: threading.Lock = field(default_factory=threading.Lock)

    def _shards(self) -> list[str]:
        """The stream's shards, listed again every SHARD_REFRESH_SECONDS (as Lambda's poller discovers new
        shards now and then, not before every read: DescribeStream at every pump was a tenth of the stack's
        CPU)."""
        listed, shards = self._shard_ids
        if time.monotonic() - listed >= SHARD_REFRESH_SECONDS:
            desc = self.client.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
            shards = [s["ShardId"] for s in desc["Shards"]]
            self._shard_ids = (time.monotonic(), shards)
        return shards

    def _fetch(self, shard: str) -> list[dict[str, Any]]:
        if shard not in self._iterators:
            self._iterators[shard] = self.client.get_shard_iterator(
                StreamArn=self.stream_arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        out = self.client.get_records(ShardIterator=self._iterators[shard], Limit=1000)
        self._iterators[shard] = out.get("NextShardIterator") or self._iterators[shard]
        return out.get("Records", [])

    def _event_record(self, record: dict[str, Any]) -> dict[str, Any]:
        dynamodb = dict(record["dynamodb"])
        for image in ("Keys", "NewImage", "OldImage"):  # binary values travel base64 in a Lambda event
            if image in dynamodb:
                dynamodb[image] = {k: event_value(v) for k, v in dynamodb[image].items()}
        created = dynamodb.get("ApproximateCreationDateTime")
        if hasattr(created, "timestamp"):
            dynamodb["ApproximateCreationDateTime"] = created.timestamp()
        return {"eventID": record.get("eventID"), "eventName": record["eventName"],
                "eventVersion": record.get("eventVersion", "1.1"), "eventSource": "aws:dynamodb",
                "awsRegion": record.get("awsRegion", template.REGION), "dynamodb": dynamodb,
                "eventSourceARN": self.stream_arn}

    def pump(self) -> int:
        """Deliver everything available now; returns how many records were delivered."""
        with self._pumping:
            return self._pump()

    def _pump(self) -> int:
        delivered = 0
        for shard in self._shards():
            queue = self._pending.setdefault(shard, [])
            queue += [r for r in (self._event_record(x) for x in self._fetch(shard))
                      if not self.source.patterns or any(matches(p, r) for p in self.source.patterns)]
            while queue:
                batch = queue[: self.source.batch_size]
                try:
                    response = self.handler({"Records": batch}, self.context_factory())
                except Exception:  # noqa: BLE001 - a function error (Powertools raises when every record failed):
                    # Lambda retries the whole batch and counts the attempt, so the record still reaches the DLQ
                    response = {"batchItemFailures": [{"itemIdentifier": r["dynamodb"]["SequenceNumber"]}
                                                      for r in batch]}
                failed = [f["itemIdentifier"] for f in ((response or {}).get("batchItemFailures") or [])]
                if not failed:
                    del queue[: len(batch)]
                    delivered += len(batch)
                    continue
                sequence = [r["dynamodb"]["SequenceNumber"] for r in batch]
                first = min(sequence.index(f) for f in failed if f in sequence) if any(
                    f in sequence for f in failed) else 0
                delivered += first
                del queue[:first]  # checkpoint before the first failure; retry from it
                head = queue[0]["dynamodb"]["SequenceNumber"]
                self._attempts[head] = self._attempts.get(head, 0) + 1
                limit = self.source.max_retries
                if limit >= 0 and self._attempts[head] > limit:
                    self.failures.append(queue.pop(0))  # the on-failure destination
                    if self.on_failure is not None:
                        self.on_failure(failure_record(self.failures[-1], self.stream_arn, shard, self._attempts[head]))
                    continue
                break  # retried on the next pump
        self.delivered += delivered
        return delivered

    def run(self, interval: float = 0.01, idle_max: float = 0.05, asleep_max: float = 1.0) -> None:
        """Poll fast after activity and back off while idle (as the event source mapping's poller).
        With moto in this process, a new stream record wakes the poller at once (`motofix`), so
        while nothing is written it asks moto once a second instead of every 50 ms; a batch that
        failed is retried within `idle_max` either way."""
        from .motofix import wake_on_stream_records

        wake_on_stream_records(self._wake)
        with iam.acting_as(self.source.function):  # the event source mapping reads with the function's role
            self._run(interval, idle_max, asleep_max)

    def _run(self, interval: float, idle_max: float, asleep_max: float) -> None:
        wait = interval
        while not self._stop.is_set():
            self._wake.clear()  # before the fetch: a record appended meanwhile wakes the next wait
            try:
                delivered = self.pump()
                pending = any(self._pending.values())
                if delivered:
                    wait = interval
                elif pending:
                    wait = min(idle_max, wait * 1.5)
                else:
                    wait = min(asleep_max, max(wait, interval) * 2)
            except Exception:  # noqa: BLE001 - keep polling; the handler's failure is retried
                wait = idle_max
            self._wake.wait(wait)

    def start(self, interval: float = 0.02) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(interval,), name="stream-poller", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()


def failure_record(record: dict[str, Any], arn: str, shard: str, attempts: int) -> dict[str, Any]:
    """What Lambda sends a DynamoDB stream's on-failure destination: where the failed batch was, not the record."""
    sequence = record["dynamodb"]["SequenceNumber"]
    return {"requestContext": {"condition": "RetryAttemptsExhausted", "approximateInvokeCount": attempts},
            "responseContext": {"statusCode": 200, "functionError": "Unhandled"}, "version": "1.0",
            "DDBStreamBatchInfo": {"shardId": shard, "startSequenceNumber": sequence, "endSequenceNumber": sequence,
                                   "batchSize": 1, "streamArn": arn}}


def dead_letter_sender(sqs: Any, queue_urls: dict[str, str], function: str) -> Optional[Callable[[dict[str, Any]], None]]:
    """The function's DynamoDB event's OnFailure SQS destination (template.yaml), as a sender of failure records."""
    for event in (template.resources("AWS::Serverless::Function")[function]["Properties"].get("Events") or {}).values():
        destination = ((event["Properties"].get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        if event["Type"] == "DynamoDB" and isinstance(destination, dict) and "Fn::GetAtt" in destination:
            url = queue_urls[destination["Fn::GetAtt"][0]]
            return lambda body: sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))
    return None


def stream_arn(dynamodb: Any, table: str) -> Optional[str]:
    return dynamodb.describe_table(TableName=table)["Table"].get("LatestStreamArn")
