"""WebSocket `$disconnect`: forget the connection. A Runtime that said hello as an instance keeps its
claimed Turns: it may come back on another connection (a rotation before API Gateway's 2-hour limit took
them already), and only the heartbeat bound passing with no connection of it fails them (without replay).
A Runtime that named no instance cannot come back: its claimed Turns fail now. `$disconnect` is best
effort in AWS: nothing depends on it but the speed of that failure."""

from agents_core.aws import default_workflow
from agents_core.observability import logger
from agents_core.runtimes import connections, instances, settlement
from agents_core.store import default_store


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    connection_id = event["requestContext"]["connectionId"]
    store = default_store()
    conn = connections.connection(store, connection_id)
    if conn is not None and conn.get("role") == "runtime":
        instance = instances.outlives(store, connection_id)
        if instance:  # the instance takes its claims back at its next hello (or the heartbeat bound fails them)
            instances.forget(store, connection_id, instance)
            return {"statusCode": 200}
        failed = settlement.fail_claimed_turns(store, default_workflow(), connection_id)
        if failed:
            logger.info("runtime lost", extra={"failed_turns": failed})
    connections.forget_connection(store, connection_id)
    return {"statusCode": 200}
