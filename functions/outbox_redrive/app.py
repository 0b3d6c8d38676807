"""The outbox DLQ's redrive, invoked by an operator (`aws lambda invoke --function-name <OutboxRedriveFunctionName>
out.json`, README "Operating it"): the failed outbox records are read back from the stream and handed to the stream
consumer again. The event may set `limit` (messages this run takes, 100 by default)."""

import os

from agents_core import outbox_redrive
from agents_core.observability import logger


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    # read per invocation (as cheap as at import): a process that imported this app before its stack set the
    # variables (the local stack's in-process tests) must not keep an empty queue URL
    queue_url = os.environ.get("OUTBOX_DLQ_URL", "")
    stream_function = os.environ.get("STREAM_FUNCTION_NAME", "StreamFunction")  # the local stack names it so
    limit = (event or {}).get("limit", 100)
    counts = outbox_redrive.redrive(queue_url, stream_function, limit=limit if isinstance(limit, int) and limit > 0 else 100)
    logger.info("outbox DLQ redrive", extra=counts)
    return counts
