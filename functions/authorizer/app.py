"""REST API Lambda authorizer (REQUEST type, cached per Authorization header): bearer API key -> tenant.

Keys are looked up by SHA-256. A known key gets an Allow for the whole API (the answer is cached per
Authorization header for every route, so the policy must not name only the first method) with the
tenant in the context (`requestContext.authorizer.tenant`); an unknown key gets a Deny, which API
Gateway answers with the ACCESS_DENIED gateway response: the official 401 `invalid_api_key` envelope
(template.yaml). A request without the header never reaches here (UNAUTHORIZED, the same envelope).

An Allow names the tenant's usage identifier (`usageIdentifierKey`, agents_core.quotas.usage_key): the REST API's
`ApiKeySourceType` is AUTHORIZER, so API Gateway meters the request against the tenant's API key in the usage
plan (the per-tenant request rate; over it, the THROTTLED gateway response: 429 `rate_limit_exceeded`).
"""

from agents_core.observability import logger
from agents_core.quotas import usage_key
from agents_core.store import default_store
from agents_core.transport.headers import bearer


def _api_arn(method_arn: str) -> str:
    """arn:aws:execute-api:region:account:api/stage/METHOD/path -> arn:...:api/stage/* (every route)."""
    arn, _, rest = method_arn.partition(":execute-api:")
    parts = rest.split("/")
    return f"{arn}:execute-api:{'/'.join(parts[:2])}/*"


def policy(principal: str, effect: str, method_arn: str, context: dict, usage: str | None = None) -> dict:
    answer = {"principalId": principal, "context": context, "policyDocument": {
        "Version": "2012-10-17",
        "Statement": [{"Action": "execute-api:Invoke", "Effect": effect, "Resource": _api_arn(method_arn)}]}}
    if usage is not None:
        answer["usageIdentifierKey"] = usage
    return answer


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    token = bearer(event)
    tenant = default_store().tenant_for_api_key(token) if token else None
    if tenant is None:
        logger.info("rejected API key")  # never the key itself
        return policy("anonymous", "Deny", event["methodArn"], {})
    return policy(tenant, "Allow", event["methodArn"], {"tenant": tenant}, usage_key(tenant))
