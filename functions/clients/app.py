"""WebSocket `subscribe` / `unsubscribe` routes for live clients (dashboards, apps).

Any id the caller's tenant does not own gets an error message on the socket and nothing is
delivered for it. Each message takes one request from its tenant's WebSocket bucket (agents_core/quotas.py:
WebSocket APIs have no usage plans); over it, the 429 `rate_limit_exceeded` envelope and nothing written.
"""

import json

from agents_contract.errors import AgentsError
from agents_core import live, quotas
from agents_core.aws import default_messenger
from agents_core.observability import logger
from agents_core.runtimes import connections
from agents_core.store import default_store


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    connection_id = event["requestContext"]["connectionId"]
    store = default_store()
    try:
        message = json.loads(event.get("body") or "{}")
        session_id = message.get("session_id")
        if not isinstance(session_id, str) or not session_id:
            raise AgentsError("Missing required parameter: 'session_id'.", param="session_id")
        conn = connections.connection(store, connection_id)
        if conn is not None and conn.get("tenant") and not quotas.take_request(store, conn["tenant"]):
            raise quotas.RequestRateExceeded()
        if message.get("action") == "subscribe":
            reply = live.subscribe(store, connection_id, session_id)
        else:
            reply = live.unsubscribe(store, connection_id, session_id)
    except (AgentsError, ValueError) as error:
        envelope = error.envelope()["error"] if isinstance(error, AgentsError) else {
            "message": "Messages are JSON objects.", "type": "invalid_request_error", "param": None, "code": None}
        reply = {"type": "error", "error": envelope}
    connections.post_safely(default_messenger(), store, connection_id, reply)
    return {"statusCode": 200}
