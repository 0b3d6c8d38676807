"""WebSocket `$connect`: a Runtime (a shared Runtime token, an Environment enrollment or the durable
credential it was exchanged for), or a client (API key, or `?ticket=` for
browsers). Rejected -> 401. A client connecting with an API key takes one request from its tenant's WebSocket
bucket (agents_core/quotas.py); over it -> 429 and nothing written (a ticket was one metered REST request)."""

import json

from agents_core import keys, live, quotas
from agents_core.environments.enrollment import (
    CREDENTIAL_PREFIX,
    ENROLLMENT_PREFIX,
    credential_for_token,
    enrollment_for_token,
)
from agents_core.observability import logger
from agents_core.runtimes import connections
from agents_core.store import default_store
from agents_core.transport.headers import bearer


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    connection_id = event["requestContext"]["connectionId"]
    token = bearer(event)
    store = default_store()
    ticket = (event.get("queryStringParameters") or {}).get("ticket")
    if ticket and not token:
        # Browsers cannot set headers on a WebSocket: a single-use ticket names tenant and Session.
        redeemed = live.redeem_ticket(store, ticket)
        if redeemed is not None:
            tenant, session_id = redeemed
            connections.register_connection(store, connection_id, "client", tenant=tenant)
            live.subscribe(store, connection_id, session_id)
            return {"statusCode": 200}
        logger.info("rejected WebSocket ticket")
        return {"statusCode": 401, "body": "Unauthorized"}
    if token.startswith("rt-"):
        runtime = connections.runtime_for_token(store, token)
        if runtime is not None:  # an operator's shared Runtime: environment none only
            connections.register_connection(store, connection_id, "runtime", runtime_id=runtime["runtime_id"],
                                         runtime_kind="shared")
            return {"statusCode": 200}
    elif token.startswith(ENROLLMENT_PREFIX):
        enrollment = enrollment_for_token(store, token)
        if enrollment is not None:  # spent at runtime.hello, which answers with the durable credential
            connections.register_connection(store, connection_id, "runtime", runtime_kind="enrolling",
                                         tenant=enrollment["tenant"], environment_id=enrollment["environment_id"],
                                         enrollment_hash=keys.enrollment_hash(enrollment))
            return {"statusCode": 200}
    elif token.startswith(CREDENTIAL_PREFIX):
        credential = credential_for_token(store, token)
        if credential is not None:  # an enrolled machine reconnecting: exactly its Environment
            connections.register_connection(store, connection_id, "runtime", runtime_id=credential["runtime_id"],
                                         runtime_kind="enrolled", tenant=credential["tenant"],
                                         environment_id=credential["environment_id"])
            return {"statusCode": 200}
    elif token:
        tenant = store.tenant_for_api_key(token)
        if tenant is not None and not quotas.take_request(store, tenant):
            logger.info("WebSocket connection over the tenant's request rate")
            return {"statusCode": 429, "body": json.dumps(quotas.RequestRateExceeded().envelope())}
        if tenant is not None:
            connections.register_connection(store, connection_id, "client", tenant=tenant)
            return {"statusCode": 200}
    logger.info("rejected WebSocket connection")
    return {"statusCode": 401, "body": "Unauthorized"}
