"""HTTP API Lambda authorizer (payload 2.0, simple responses): bearer API key -> tenant.

Keys are looked up by SHA-256; API Gateway caches the answer per Authorization header. An unknown
key is passed on with an empty tenant, so the API answers with the official 401 envelope rather
than API Gateway's bare 403; the handlers refuse every request without a tenant.
"""

from agents_core.observability import logger
from agents_core.store import default_store


def _bearer(event) -> str:
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    token = _bearer(event)
    tenant = default_store().tenant_for_api_key(token) if token else None
    if tenant is None:
        logger.info("rejected API key")  # never the key itself
        return {"isAuthorized": True, "context": {"tenant": "", "auth_error": "invalid_api_key"}}
    return {"isAuthorized": True, "context": {"tenant": tenant}}
