"""WebSocket `$connect`: a Runtime (Runtime token) or a client (API key). Rejected -> 401."""

from agents_core import runtimes
from agents_core.observability import logger
from agents_core.store import default_store


def _bearer(event) -> str:
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    connection_id = event["requestContext"]["connectionId"]
    token = _bearer(event)
    store = default_store()
    if token.startswith("rt-"):
        runtime = runtimes.runtime_for_token(store, token)
        if runtime is not None:
            runtimes.register_connection(store, connection_id, "runtime", runtime_id=runtime["runtime_id"])
            return {"statusCode": 200}
    elif token:
        tenant = store.tenant_for_api_key(token)
        if tenant is not None:
            runtimes.register_connection(store, connection_id, "client", tenant=tenant)
            return {"statusCode": 200}
    logger.info("rejected WebSocket connection")
    return {"statusCode": 401, "body": "Unauthorized"}
