"""SQS queues and their Lambda event sources, run locally: the template's queues are created in moto (their
visibility timeout and redrive policy as written), and a poller hands each function with an `SQS` event its
messages as Lambda's event source mapping does - batches of `aws:sqs` records with their attributes
(ApproximateReceiveCount included), deleting the ones the function did not report in `batchItemFailures`; a
failed message comes back when its visibility timeout ends, and moto moves it to the dead-letter queue after
`maxReceiveCount` receives.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any, Optional

from . import apigw, template

log = logging.getLogger("local.queues")


@dataclass(frozen=True)
class QueueSource:
    function: str
    queue: str
    batch_size: int


def sources() -> list[QueueSource]:
    out = []
    for logical_id, res in template.resources("AWS::Serverless::Function").items():
        for event in (res["Properties"].get("Events") or {}).values():
            if event["Type"] == "SQS":
                props = event["Properties"]
                out.append(QueueSource(logical_id, props["Queue"]["Fn::GetAtt"][0], int(props.get("BatchSize", 10))))
    return out


def create_queues(client: Any) -> dict[str, str]:
    """Every AWS::SQS::Queue of the template, named by its logical id (dead-letter queues first); the URLs."""
    queues = template.resources("AWS::SQS::Queue")
    urls: dict[str, str] = {}
    ordered = sorted(queues, key=lambda name: "RedrivePolicy" in (queues[name].get("Properties") or {}))
    for name in ordered:
        props = queues[name].get("Properties") or {}
        attributes = {k: str(props[k]) for k in ("VisibilityTimeout", "MessageRetentionPeriod") if k in props}
        if "RedrivePolicy" in props:
            target = props["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
            arn = client.get_queue_attributes(QueueUrl=urls[target], AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            attributes["RedrivePolicy"] = json.dumps({"deadLetterTargetArn": arn,
                                                      "maxReceiveCount": int(props["RedrivePolicy"]["maxReceiveCount"])})
        urls[name] = client.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    os.environ["WEBHOOK_QUEUE_URL"] = urls.get("WebhookDeliveryQueue", "")
    return urls


LONG_POLL_SECONDS = 1  # short enough that stop() (it joins for 5 s) never waits on a receive for long


class QueuePoller:
    """Lambda's SQS event source mapping for one function."""

    def __init__(self, client: Any, url: str, handler: apigw.Handler, source: QueueSource):
        self.client, self.url, self.handler, self.source = client, url, handler, source
        self.arn = client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def poll_once(self, wait_seconds: int = 0) -> int:
        """One receive (`wait_seconds`: a long poll, as Lambda's SQS poller makes) and its batch handled."""
        messages = self.client.receive_message(QueueUrl=self.url, MaxNumberOfMessages=self.source.batch_size,
                                               AttributeNames=["All"], WaitTimeSeconds=wait_seconds
                                               ).get("Messages", [])
        if not messages:
            return 0
        records = [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                    "attributes": m.get("Attributes", {}), "messageAttributes": {}, "md5OfBody": m.get("MD5OfBody"),
                    "eventSource": "aws:sqs", "eventSourceARN": self.arn, "awsRegion": template.REGION}
                   for m in messages]
        try:
            result = self.handler({"Records": records}, apigw.LambdaContext(self.source.function)) or {}
            failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
        except Exception:  # noqa: BLE001 - the whole batch failed: every message comes back
            log.warning("%s failed its batch", self.source.function, exc_info=True)
            return len(messages)
        done = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
                if m["MessageId"] not in failed]
        if done:
            self.client.delete_message_batch(QueueUrl=self.url, Entries=done)
        return len(messages)

    def start(self, interval: float = 0.05) -> threading.Thread:
        """Long polls of LONG_POLL_SECONDS, as Lambda's event source mapping polls SQS: a message sent wakes the
        receive at once (moto's queue notifies its waiters), a message whose visibility timeout ran out is received
        by the next poll, and an idle queue costs one receive a second instead of one every `interval` (a local
        stack's pollers were a tenth of its CPU while nothing was queued). `interval`: the pause after a failed
        poll."""
        def loop() -> None:
            while not self._stop.is_set():
                try:
                    self.poll_once(wait_seconds=LONG_POLL_SECONDS)
                except Exception:  # noqa: BLE001 - the poller keeps running
                    log.exception("queue poll failed")
                    self._stop.wait(interval)

        self._thread = threading.Thread(target=loop, name=f"queue-{self.source.function}", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def pollers(client: Any, urls: dict[str, str], handlers: dict[str, apigw.Handler]) -> list[QueuePoller]:
    return [QueuePoller(client, urls[s.queue], handlers[s.function], s) for s in sources()]
