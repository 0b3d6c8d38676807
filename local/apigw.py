"""HTTP request <-> API Gateway HTTP API v2 proxy event, in one module.

Used by the in-process SDK transport in tests and by the local HTTP gateway: routes and the
authorizer come from template.yaml, and the real handlers answer. Behaviour follows API Gateway:
a missing identity header is a bare 401, an unknown route a bare 404, and authorizer answers are
cached per identity value for `ReauthorizeEvery` seconds.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import logging
import re
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import parse_qsl

from . import template

Handler = Callable[[dict[str, Any], Any], Any]
log = logging.getLogger("local.apigw")


class LambdaContext:
    """Enough of the Lambda context object for Powertools."""

    def __init__(self, function_name: str, timeout_s: int = 10):
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 512
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._deadline = time.time() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.time()) * 1000))


def load_handlers() -> dict[str, Handler]:
    """Import each function's app.py under a unique module name; key by logical id."""
    handlers: dict[str, Handler] = {}
    for logical_id, directory in template.function_dirs().items():
        path = directory / "app.py"
        if not path.exists():
            continue
        name = f"functions_{directory.name}_app"
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        handlers[logical_id] = module.handler
    return handlers


def invoke(handlers: dict[str, Handler], logical_id: str, event: dict[str, Any]) -> Any:
    return handlers[logical_id](event, LambdaContext(logical_id))


@dataclass
class HttpResponse:
    status: int
    headers: dict[str, str]
    body: bytes


def _compile(path: str) -> re.Pattern[str]:
    pattern = re.sub(r"\{([A-Za-z0-9_]+)\+\}", r"(?P<\1>.+)", path)  # greedy: the rest of the path
    pattern = re.sub(r"\{([A-Za-z0-9_]+)\}", r"(?P<\1>[^/]+)", pattern)
    return re.compile(f"^{pattern}$")


@dataclass
class Gateway:
    handlers: dict[str, Handler]
    routes: list[template.Route] = field(default_factory=template.http_routes)
    authorizer: Optional[template.Authorizer] = field(default_factory=template.http_authorizer)
    api_id: str = "local"
    _cache: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Literal routes win over parameterised ones, as in API Gateway.
        self._compiled = sorted(
            ((r, _compile(r.path)) for r in self.routes),
            key=lambda rc: ("+}" in rc[0].path, rc[0].path.count("{"), -len(rc[0].path)),
        )

    def match(self, method: str, path: str) -> Optional[tuple[template.Route, dict[str, str]]]:
        for route, regex in self._compiled:
            if route.method != method:
                continue
            found = regex.match(path)
            if found:
                return route, found.groupdict()
        return None

    def event(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes,
              route: template.Route, params: dict[str, str], authorizer: Optional[dict[str, Any]]) -> dict[str, Any]:
        lowered: dict[str, str] = {}
        for k, v in headers.items():
            k = k.lower()
            lowered[k] = f"{lowered[k]},{v}" if k in lowered else v
        qs: dict[str, str] = {}
        for k, v in parse_qsl(query, keep_blank_values=True):
            qs[k] = f"{qs[k]},{v}" if k in qs else v
        now = time.time()
        try:
            text, b64 = body.decode(), False
        except UnicodeDecodeError:
            text, b64 = base64.b64encode(body).decode(), True
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": route.key,
            "rawPath": path,
            "rawQueryString": query,
            "headers": lowered,
            "requestContext": {
                "accountId": "123456789012",
                "apiId": self.api_id,
                "domainName": lowered.get("host", "localhost"),
                "domainPrefix": self.api_id,
                "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1",
                         "userAgent": lowered.get("user-agent", "")},
                "requestId": uuid.uuid4().hex,
                "routeKey": route.key,
                "stage": "$default",
                "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
                "timeEpoch": int(now * 1000),
            },
            "isBase64Encoded": b64,
        }
        if qs:
            event["queryStringParameters"] = qs
        if params:
            event["pathParameters"] = params
        if body:
            event["body"] = text
        if authorizer is not None:
            event["requestContext"]["authorizer"] = {"lambda": authorizer}
        return event

    def _authorize(self, event: dict[str, Any]) -> tuple[Optional[dict[str, Any]], Optional[HttpResponse]]:
        assert self.authorizer is not None
        identity = event["headers"].get(self.authorizer.header.lower())
        if not identity:
            return None, _bare(401, "Unauthorized")
        cached = self._cache.get(identity)
        if cached and cached[0] > time.time():
            answer = cached[1]
        else:
            auth_event = {
                "version": "2.0", "type": "REQUEST",
                "routeArn": f"arn:aws:execute-api:us-east-1:123456789012:{self.api_id}/$default/"
                            f"{event['requestContext']['http']['method']}{event['rawPath']}",
                "identitySource": [identity], "routeKey": event["routeKey"], "rawPath": event["rawPath"],
                "rawQueryString": event["rawQueryString"], "headers": event["headers"],
                "requestContext": event["requestContext"], "pathParameters": event.get("pathParameters", {}),
            }
            try:
                answer = invoke(self.handlers, self.authorizer.function, auth_event)
            except Exception:  # noqa: BLE001 - API Gateway answers 500 when the authorizer fails
                return None, _bare(500, "Internal Server Error")
            if self.authorizer.ttl_seconds:
                self._cache[identity] = (time.time() + self.authorizer.ttl_seconds, answer)
        if not answer.get("isAuthorized"):
            return None, _bare(403, "Forbidden")
        return dict(answer.get("context") or {}), None

    def handle(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> HttpResponse:
        method = method.upper()
        found = self.match(method, path)
        if found is None:
            return _bare(404, "Not Found")
        route, params = found
        event = self.event(method, path, query, headers, body, route, params, None)
        if self.authorizer is not None:
            context, denied = self._authorize(event)
            if denied:
                return denied
            event["requestContext"]["authorizer"] = {"lambda": context}
        try:
            result = invoke(self.handlers, route.function, event)
        except Exception:  # noqa: BLE001 - an unhandled Lambda error is API Gateway's 500
            log.exception("unhandled error in %s", route.function)
            return _bare(500, "Internal Server Error")
        return from_proxy(result)


def from_proxy(result: Any) -> HttpResponse:
    """Lambda proxy v2 response -> HTTP response (API Gateway's interpretation)."""
    if not isinstance(result, dict) or "statusCode" not in result:
        return HttpResponse(200, {"content-type": "application/json"}, json.dumps(result).encode())
    raw = result.get("body") or ""
    body = base64.b64decode(raw) if result.get("isBase64Encoded") else raw.encode()
    headers = {k.lower(): str(v) for k, v in (result.get("headers") or {}).items()}
    for k, values in (result.get("multiValueHeaders") or {}).items():
        headers[k.lower()] = ",".join(str(v) for v in values)
    return HttpResponse(int(result["statusCode"]), headers, body)


def _bare(status: int, message: str) -> HttpResponse:
    return HttpResponse(status, {"content-type": "application/json"}, json.dumps({"message": message}).encode())


def sdk_transport(gateway: Gateway) -> Any:
    """An httpx2 transport for the official SDK (`http_client=httpx2.Client(transport=...)`)."""
    import httpx2

    class _Transport(httpx2.BaseTransport):
        def handle_request(self, request: httpx2.Request) -> httpx2.Response:
            url = request.url
            path = url.path
            response = gateway.handle(request.method, path, url.query.decode() if isinstance(url.query, bytes)
                                      else str(url.query), dict(request.headers), request.read())
            return httpx2.Response(response.status, headers=response.headers, content=response.body, request=request)

    return _Transport()
