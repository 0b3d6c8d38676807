"""WebSocket `$disconnect`: forget the connection (its claimed Turns fail by heartbeat, no replay)."""

from agents_core import runtimes
from agents_core.observability import logger
from agents_core.store import default_store


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    runtimes.forget_connection(default_store(), event["requestContext"]["connectionId"])
    return {"statusCode": 200}
