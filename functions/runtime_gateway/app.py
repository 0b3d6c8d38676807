"""WebSocket `$default`: the Runtime protocol (runtime.hello and turn.* observations).

Errors go back to the sending connection as {"type": "error", "error": {...}} (the official
envelope's fields); nothing is written for a rejected message.
"""

import json

from agents_contract.errors import AgentsError
from agents_core import runtimes
from agents_core.aws import default_messenger, default_workflow
from agents_core.observability import logger
from agents_core.store import default_store


def _reply(connection_id, message):
    runtimes.post_safely(default_messenger(), default_store(), connection_id, message)


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    connection_id = event["requestContext"]["connectionId"]
    store = default_store()
    try:
        message = json.loads(event.get("body") or "{}")
        if not isinstance(message, dict):
            raise ValueError
    except ValueError:
        _reply(connection_id, {"type": "error", "error": {"message": "Messages are JSON objects.",
                                                          "type": "invalid_request_error"}})
        return {"statusCode": 200}
    conn = runtimes.connection(store, connection_id)
    try:
        if conn is None or conn.get("role") != "runtime":
            raise AgentsError("This connection is not a Runtime connection.", param="action")
        action = message.get("action")
        if action == "runtime.hello":
            served = runtimes.hello(store, connection_id, message)
            _reply(connection_id, {"type": "runtime.welcome", "harnesses": served})
            for harness in served:
                for turn in runtimes.queued_turns(store, harness):
                    runtimes.dispatch(store, default_workflow(), turn["tenant"], turn["session_id"], turn["id"],
                                      only=connection_id)
        else:
            runtimes.observe(store, default_workflow(), connection_id, message)
    except AgentsError as error:
        logger.info("rejected runtime message", extra={"action": message.get("action"), "code": error.code})
        _reply(connection_id, {"type": "error", "ref": message.get("seq"), "error": error.envelope()["error"]})
    return {"statusCode": 200}
