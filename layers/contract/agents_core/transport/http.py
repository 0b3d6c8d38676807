"""HTTP plumbing shared by the API handlers: the one place domain errors become responses.

- The official envelope on every non-2xx; deterministic 4xx answers carry `x-should-retry: false`
  (the official SDK otherwise retries 409s twice).
- The checks every request passes first (tenant, beta header, body parsing) are transport.request's,
  and the error response is transport.errors': both shared with the streaming function (transport.asgi).
"""

from __future__ import annotations

import base64
import re
from typing import Any, Optional

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.metrics import MetricUnit

from agents_contract import jsonutil, surface
from agents_contract.errors import AgentsError, InvalidRequest, MethodNotAllowed, NotFound, ServerError

from ..observability import logger, metrics
from ..settings import get_settings
from .errors import error_answer
from .headers import header
from .request import admission_error, event_tenant, parse_body, request_id

JSON = "application/json"


def json_response(status: int, body: Any, headers: Optional[dict[str, str]] = None) -> Response:
    return _json(status, jsonutil.dumps(body), headers or {})


def error_response(error: AgentsError) -> Response:
    return _json(*error_answer(error))


def _json(status: int, text: str, headers: dict[str, str]) -> Response:
    # Every response names its request (`req_` + 32 hex), which the SDK exposes as `_request_id`.
    return Response(status_code=status, content_type=JSON, body=text, headers={"x-request-id": request_id(), **headers})


def _proxy(response: Response) -> dict[str, Any]:
    return {"statusCode": response.status_code, "headers": {"Content-Type": JSON, **response.headers},
            "body": response.body, "isBase64Encoded": False}


def new_app() -> APIGatewayRestResolver:
    app = APIGatewayRestResolver()

    @app.exception_handler(AgentsError)
    def _domain(error: AgentsError) -> Response:
        if error.status >= 500 or error.status == 429:
            logger.warning("dependency unavailable", extra={"code": error.code})
        return error_response(error)

    @app.exception_handler(Exception)
    def _unexpected(error: Exception) -> Response:
        logger.exception("unexpected failure")
        return error_response(ServerError())

    @app.not_found
    def _not_found(_: Exception) -> Response:
        # Only a known path reaches a function without a route for its method (the API's `ANY` methods):
        # an unknown path is the gateway's own 404 (MISSING_AUTHENTICATION_TOKEN).
        event = app.current_event
        if _any_id_matches(app, event.http_method, event.path):
            return error_response(NotFound())  # an id the resolver's pattern refuses (NUL, emoji) names nothing
        return error_response(MethodNotAllowed(f"Invalid method for URL ({event.http_method} {event.path}).",
                                               param=None))

    return app


def _any_id_matches(app: APIGatewayRestResolver, method: str, path: str) -> bool:
    """Whether a route of this method matches the path when each `<id>` may be any segment: API
    Gateway routes `{id}` for every segment, while the resolver's own pattern refuses some characters."""
    for route in app._static_routes + app._dynamic_routes:  # noqa: SLF001 - Powertools keeps no public list
        if route.method != method.upper():
            continue
        pattern = "^" + re.sub(r"<[^>]+>", "[^/]+", re.escape(route.path)) + "$"  # escape keeps < >
        if re.match(pattern, path):
            return True
    return False


def tenant(app: APIGatewayRestResolver) -> str:
    return event_tenant(app.current_event.raw_event)


def body(app: APIGatewayRestResolver) -> Any:
    event = app.current_event.raw_event
    raw = event.get("body") or ""
    # surrogatepass: a str body holding a lone surrogate reaches the parser as invalid UTF-8 (a 400).
    try:
        data = base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode("utf-8", "surrogatepass")
    except ValueError:
        raise InvalidRequest(jsonutil.UNPARSABLE, param=None) from None
    return parse_body(data)


def query(app: APIGatewayRestResolver) -> dict[str, str]:
    return dict(app.current_event.raw_event.get("queryStringParameters") or {})


def entrypoint(app: APIGatewayRestResolver, event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Authentication, then the beta header, then the route."""
    if not get_settings().powertools_metrics_disabled:
        metrics.add_metric(name="Requests", unit=MetricUnit.Count, value=1)
    path = event.get("path") or ""
    # client.files and client.uploads are not beta (the reads function answers their paths' other methods: 405)
    rejected = admission_error(event_tenant(event), header(event, "openai-beta"),
                               beta_required=not path.startswith(("/v1/files", "/v1/uploads")))
    if rejected is not None:
        return _proxy(error_response(rejected))
    logger.append_keys(request_id=event.get("requestContext", {}).get("requestId"))
    not_built = surface.not_built(event.get("httpMethod") or "", event.get("path") or "")
    if not_built is not None:  # answered before routing: `/v1/agents/environments` is no Agent id
        return _proxy(error_response(not_built))
    return app.resolve(event, context)

