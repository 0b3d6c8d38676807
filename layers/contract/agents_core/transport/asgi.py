"""The streaming function's HTTP plumbing (Starlette behind the AWS Lambda Web Adapter, or the local
stack's gateway): the same admission and error response as the buffered routes (transport.http), and
every response naming its request.

The Lambda Web Adapter turns each REST API proxy event into an HTTP request, passing the request context
(the authorizer's tenant) in `x-amzn-request-context`.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from agents_contract.errors import AgentsError, NotFound

from .errors import error_answer
from .request import admission_error, request_id


def error(err: AgentsError) -> Response:
    status, body, headers = error_answer(err)
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def request_context(request: Request) -> dict[str, Any]:
    """The API Gateway request context the Lambda Web Adapter (or the local gateway) passes along."""
    try:
        return json.loads(request.headers.get("x-amzn-request-context") or "{}")
    except ValueError:
        return {}


def caller(request: Request, beta_required: bool = True) -> str:
    """The caller's tenant, after the same checks as every buffered route (key, then beta header)."""
    tenant = ((request_context(request).get("authorizer") or {}).get("tenant")) or ""
    rejected = admission_error(tenant, request.headers.get("openai-beta"), beta_required)
    if rejected is not None:
        raise rejected
    return tenant


async def not_found(request: Request, exc: Exception) -> Response:
    """Starlette's 404 and 405: the official envelope."""
    return error(NotFound("Invalid URL: no route matches this path.", code="invalid_url"))


def serve(app: Any) -> Any:
    """The ASGI app as API Gateway reaches it: a REST API request path may arrive with the stage in
    front (/dev/v1/...), routed on the rest; every HTTP response names its request, as officially."""
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not scope["path"].startswith(("/v1/", "/healthz")):
            head, _, rest = scope["path"].lstrip("/").partition("/")
            if head and rest.startswith("v1/"):
                scope = {**scope, "path": "/" + rest, "raw_path": ("/" + rest).encode()}
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_with_id(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"x-request-id", request_id().encode())]}
            await send(message)

        await app(scope, receive, send_with_id)
    return wrapped
