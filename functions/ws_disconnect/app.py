"""WebSocket `$disconnect`: forget the connection. A Runtime's claimed Turns fail now (their
executions catch the task failure and settle them as failed, without replay)."""

from agents_core.aws import default_workflow
from agents_core.observability import logger
from agents_core.runtimes import connections, settlement
from agents_core.store import default_store


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    connection_id = event["requestContext"]["connectionId"]
    store = default_store()
    conn = connections.connection(store, connection_id)
    if conn is not None and conn.get("role") == "runtime":
        failed = settlement.fail_claimed_turns(store, default_workflow(), connection_id)
        if failed:
            logger.info("runtime lost", extra={"failed_turns": failed})
    connections.forget_connection(store, connection_id)
    return {"statusCode": 200}
