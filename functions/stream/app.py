"""DynamoDB Streams consumer of the outbox (OUT# records): dispatch new Turns, start executions,
deliver admitted results and cancellations to the owning Runtime. Partial batch failures are
reported so only the failed records are retried."""

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from agents_core import keys, metrics, outbox
from agents_core.aws import default_messenger, default_workflow
from agents_core.observability import logger
from agents_core.store import default_store

processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


def record_handler(record: DynamoDBRecord) -> None:
    image = record.dynamodb.new_image if record.dynamodb else None
    if not image or not keys.is_outbox_record(str(image.get(keys.SK, ""))):
        return  # not an outbox record (the event source mapping filters these out in AWS)
    try:
        outbox.process(image, default_store(), default_messenger(), default_workflow())
    except Exception:
        # retried from this record; after MaximumRetryAttempts it goes to the outbox DLQ (the DLQ alarm), whose
        # message names only the shard and sequence numbers: this line names the record
        logger.exception("outbox record failed",
                         extra={"record": [str(image.get(keys.PK, "")), str(image.get(keys.SK, ""))]})
        metrics.outbox_record_failed("outbox")
        raise


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    return process_partial_response(event=event, record_handler=record_handler, processor=processor,
                                    context=context)
