"""The webhook delivery queue's consumer: one signed POST per message (agents_core.webhooks.deliveries).

A failed attempt hides its message for the next retry delay and is reported as a batch item failure, so the
queue hands it back then; after the last attempt the queue's redrive policy moves it to the dead-letter queue.
"""

import json

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from agents_core.observability import logger
from agents_core.settings import get_settings
from agents_core.store import default_store
from agents_core.webhooks import deliveries

processor = BatchProcessor(event_type=EventType.SQS)


def record_handler(record: SQSRecord) -> None:
    attempt = int(record.attributes.approximate_receive_count or 1)
    try:
        deliveries.deliver(default_store(), json.loads(record.body), attempt)
    except deliveries.DeliveryFailed:
        delays = deliveries.retry_delays()
        if attempt <= len(delays):  # hidden until its next attempt; after the last one the queue dead-letters it
            deliveries._queue().change_message_visibility(  # noqa: SLF001 - the module's one queue client
                QueueUrl=get_settings().webhook_queue_url, ReceiptHandle=record.receipt_handle,
                VisibilityTimeout=delays[attempt - 1])
        raise


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    return process_partial_response(event=event, record_handler=record_handler, processor=processor,
                                    context=context)
