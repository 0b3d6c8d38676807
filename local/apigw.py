"""HTTP request <-> API Gateway REST API (Lambda proxy v1) event, in one module.

Used by the in-process SDK transport in tests and by the local HTTP gateway: routes, the REQUEST
authorizer, throttling and the Gateway Responses come from template.yaml, and the real handlers answer.
Behaviour follows API Gateway: a missing identity header is UNAUTHORIZED, an unknown route or method
MISSING_AUTHENTICATION_TOKEN, an authorizer's Deny ACCESS_DENIED (each answered with the template's
Gateway Response), and authorizer answers are cached per identity value for `ReauthorizeEvery` seconds.
Streaming routes (responseTransferMode STREAM) go to the function's ASGI app, as the Lambda Web Adapter
does in AWS.
"""

from __future__ import annotations

import asyncio
import base64
import fnmatch
import importlib.util
import json
import logging
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import parse_qsl, quote

from . import iam, template

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
    """Import each function's app.py under a unique module name; key by logical id. IAM is enforced from
    here on (local/iam.py): every AWS call a handler makes is checked against its function's policies."""
    iam.install()
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
        # a Lambda Web Adapter function (Handler: run.sh) is an ASGI app, the others Lambda handlers;
        # each runs with its own role from the template (local/iam.py)
        asgi = not hasattr(module, "handler")
        handlers[logical_id] = iam.wrap(logical_id, module.app if asgi else module.handler, asgi=asgi)
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
class Admitted:
    """A request the gateway lets through: its route, path parameters and proxy event (v1)."""
    route: template.Route
    params: dict[str, str]
    event: dict[str, Any]


class _Bucket:
    """API Gateway's token bucket (stage throttling: rate per second, burst)."""

    def __init__(self, rate: float, burst: int):
        self.rate, self.burst = rate, burst
        self.tokens, self.at = float(burst), time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


class Slots:
    """A function's reserved concurrency (ReservedConcurrentExecutions): at most `limit` invocations at once
    (an open stream holds one until it ends); one more is throttled, as Lambda throttles it."""

    def __init__(self, limit: int):
        self.limit, self.used = limit, 0
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            if self.used >= self.limit:
                return False
            self.used += 1
            return True

    def give(self) -> None:
        with self.lock:
            self.used -= 1


def usage_plan_limits() -> Optional[tuple[float, int]]:
    """The usage plan's per-tenant (rate, burst): the template's (TenantRateLimit, TenantBurstLimit at their
    defaults), or TENANT_RATE_LIMIT / TENANT_BURST_LIMIT: the functions' names for the same parameters, which
    meter the tenant's WebSocket requests (agents_core/quotas.py), so one setting shrinks both locally."""
    plan = template.usage_plan()
    if plan is None:
        return None
    rate = os.environ.get("TENANT_RATE_LIMIT")
    burst = os.environ.get("TENANT_BURST_LIMIT")
    return float(rate) if rate else plan[0], int(burst) if burst else plan[1]


MAX_PAYLOAD_BYTES = 10 * 1024 * 1024  # a REST API's request payload quota (REQUEST_TOO_LARGE beyond it)
CONTEXT_HEADER = "x-amzn-request-context"  # how the Lambda Web Adapter hands the request context to the app


@dataclass
class Gateway:
    """The public REST API: routes, the REQUEST authorizer (cached per identity value), stage throttling, the
    usage plan (per-tenant throttling by the authorizer's usageIdentifierKey), the payload quota and the Gateway
    Responses, all read from the template."""
    handlers: dict[str, Handler]
    routes: list[template.Route] = field(default_factory=lambda: template.http_routes() + template.http_api_routes())
    authorizer: Optional[template.Authorizer] = field(default_factory=template.http_authorizer)
    responses: dict[str, tuple[Optional[int], dict[str, str], str]] = field(default_factory=template.gateway_responses)
    api_id: str = "local"
    stage: str = "local"
    _cache: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Literal routes win over parameterised ones, as in API Gateway.
        self._compiled = sorted(
            ((r, _compile(r.path)) for r in self.routes),
            key=lambda rc: ("+}" in rc[0].path, rc[0].path.count("{"), -len(rc[0].path)),
        )
        self._bucket = _Bucket(*template.throttling())
        self.usage_plan = usage_plan_limits()
        self._usage_buckets: dict[str, _Bucket] = {}  # one per API key (a tenant's usage identifier)
        self._usage_lock = threading.Lock()
        self.reserved = {function: Slots(limit) for function, limit in template.reserved_concurrency().items()}

    def reserve(self, function: str) -> Optional[Callable[[], None]]:
        """A concurrency slot of `function` (its release), or None: Lambda throttles the invocation, and API
        Gateway answers `lambda_refused()`. A function without reserved concurrency is not counted here."""
        slots = self.reserved.get(function)
        if slots is None:
            return lambda: None
        return slots.give if slots.take() else None

    def lambda_refused(self) -> HttpResponse:
        """API Gateway's answer when Lambda refuses the invocation (throttled): a 500 `Internal server error`
        (docs: services-apigateway-errors), the INTEGRATION_FAILURE gateway response, which the template maps
        to 429 rate_limit_exceeded."""
        return self.gateway_response("INTEGRATION_FAILURE", 500, "Internal server error")

    def match(self, method: str, path: str) -> Optional[tuple[template.Route, dict[str, str]]]:
        """As a REST API resolves a request: the most specific resource whose path matches, then its
        method (an explicit one before ANY); a resource without the method is no route."""
        for route, regex in self._compiled:
            found = regex.match(path)
            if found:
                resource = [r for r, _ in self._compiled if r.path == route.path]
                chosen = next((r for r in resource if r.method == method), None) or \
                    next((r for r in resource if r.method == "ANY"), None)
                return (chosen, found.groupdict()) if chosen else None
        return None

    def gateway_response(self, kind: str, default_status: int, message: str) -> HttpResponse:
        """What API Gateway answers itself: the template's Gateway Response for `kind` (else DEFAULT_4XX /
        DEFAULT_5XX, else API Gateway's bare `{"message": ...}`)."""
        fallback = "DEFAULT_5XX" if default_status >= 500 else "DEFAULT_4XX"
        spec = self.responses.get(kind) or self.responses.get(fallback)
        if spec is None:
            return _bare(default_status, message)
        status, headers, body = spec
        return HttpResponse(status or default_status, {"content-type": "application/json",
                                                       **{k.lower(): v for k, v in headers.items()}}, body.encode())

    def event(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes,
              route: template.Route, params: dict[str, str], authorizer: Optional[dict[str, Any]]) -> dict[str, Any]:
        """A REST API Lambda proxy (v1) event."""
        single: dict[str, str] = {}
        multi: dict[str, list[str]] = {}
        for k, v in headers.items():
            single[k] = v
            multi.setdefault(k, []).append(v)
        qs: dict[str, str] = {}
        mqs: dict[str, list[str]] = {}
        for k, v in parse_qsl(query, keep_blank_values=True):
            qs[k] = v  # the last value, as API Gateway does
            mqs.setdefault(k, []).append(v)
        now = time.time()
        try:
            text, b64 = body.decode(), False
        except UnicodeDecodeError:
            text, b64 = base64.b64encode(body).decode(), True
        lowered = {k.lower(): v for k, v in headers.items()}
        event: dict[str, Any] = {
            "resource": route.path,
            "path": path,
            "httpMethod": method,
            "headers": single or None,
            "multiValueHeaders": multi or None,
            "queryStringParameters": qs or None,
            "multiValueQueryStringParameters": mqs or None,
            "pathParameters": params or None,
            "stageVariables": None,
            "requestContext": {
                "accountId": "123456789012",
                "apiId": self.api_id,
                "domainName": lowered.get("host", "localhost"),
                "domainPrefix": self.api_id,
                "extendedRequestId": uuid.uuid4().hex,
                "httpMethod": method,
                "identity": {"sourceIp": "127.0.0.1", "userAgent": lowered.get("user-agent", "")},
                "path": f"/{self.stage}{path}",
                "protocol": "HTTP/1.1",
                "requestId": str(uuid.uuid4()),
                "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
                "requestTimeEpoch": int(now * 1000),
                "resourceId": uuid.uuid4().hex[:6],
                "resourcePath": route.path,
                "stage": self.stage,
            },
            "body": text if body else None,
            "isBase64Encoded": b64,
        }
        if authorizer is not None:
            event["requestContext"]["authorizer"] = authorizer
        return event

    def _method_arn(self, event: dict[str, Any]) -> str:
        return (f"arn:aws:execute-api:{template.REGION}:{template.ACCOUNT}:{self.api_id}/{self.stage}/"
                f"{event['httpMethod']}{event['path']}")

    def meter(self, usage: Optional[str]) -> Optional[HttpResponse]:
        """The usage plan, after the authorizer (ApiKeySourceType AUTHORIZER, every method ApiKeyRequired): no
        usageIdentifierKey -> INVALID_API_KEY (403); over the key's rate and burst -> THROTTLED (429), before the
        integration, so nothing is written. Every key is taken as registered in the plan (in AWS,
        `agents_core.apikeys` creates the tenant's API key; one missing is INVALID_API_KEY there)."""
        if self.usage_plan is None:
            return None
        if not usage:
            return self.gateway_response("INVALID_API_KEY", 403, "Forbidden")
        with self._usage_lock:
            bucket = self._usage_buckets.get(usage)
            if bucket is None:
                bucket = self._usage_buckets[usage] = _Bucket(*self.usage_plan)
        if not bucket.take():
            return self.gateway_response("THROTTLED", 429, "Too Many Requests")
        return None

    def _authorize(self, event: dict[str, Any]) -> tuple[Optional[dict[str, Any]], Optional[HttpResponse]]:
        """The REQUEST authorizer: no identity header -> UNAUTHORIZED without a call; a Deny (or a policy
        that does not cover this method) -> ACCESS_DENIED; a failure -> AUTHORIZER_FAILURE. An Allow's
        `usageIdentifierKey` becomes the request's API key (`identity.apiKey`) for the usage plan."""
        assert self.authorizer is not None
        header = self.authorizer.header.lower()
        identity = next((v for k, v in (event["headers"] or {}).items() if k.lower() == header), "")
        if not identity:
            return None, self.gateway_response("UNAUTHORIZED", 401, "Unauthorized")
        cached = self._cache.get(identity)
        if cached and cached[0] > time.time():
            answer = cached[1]
        else:
            auth_event = {
                "type": "REQUEST", "methodArn": self._method_arn(event), "resource": event["resource"],
                "path": event["path"], "httpMethod": event["httpMethod"], "headers": event["headers"],
                "multiValueHeaders": event["multiValueHeaders"],
                "queryStringParameters": event["queryStringParameters"],
                "multiValueQueryStringParameters": event["multiValueQueryStringParameters"],
                "pathParameters": event["pathParameters"], "stageVariables": None,
                "requestContext": event["requestContext"],
            }
            try:
                answer = invoke(self.handlers, self.authorizer.function, auth_event)
            except Exception:  # noqa: BLE001 - API Gateway answers AUTHORIZER_FAILURE (500)
                log.exception("authorizer failed")
                return None, self.gateway_response("AUTHORIZER_FAILURE", 500, "Internal Server Error")
            if not isinstance(answer, dict) or "policyDocument" not in answer or "principalId" not in answer:
                return None, self.gateway_response("AUTHORIZER_CONFIGURATION_ERROR", 500, "Internal Server Error")
            if self.authorizer.ttl_seconds:
                self._cache[identity] = (time.time() + self.authorizer.ttl_seconds, answer)
        if not _allows(answer["policyDocument"], self._method_arn(event)):
            return None, self.gateway_response("ACCESS_DENIED", 403, "User is not authorized to access this resource")
        context = {k: str(v) for k, v in (answer.get("context") or {}).items()}
        if answer.get("usageIdentifierKey"):
            event["requestContext"]["identity"]["apiKey"] = str(answer["usageIdentifierKey"])
        return {"principalId": answer["principalId"], **context, "integrationLatency": 0}, None

    def admit(self, method: str, path: str, query: str, headers: dict[str, str],
              body: bytes | int) -> tuple[Optional[Admitted], Optional[HttpResponse]]:
        """Everything API Gateway does before the integration: throttling, the payload quota, routing
        (an unknown route or method is MISSING_AUTHENTICATION_TOKEN), the authorizer, the usage plan. `body` may be the
        body's length (a streamed request)."""
        method = method.upper()
        if not self._bucket.take():
            return None, self.gateway_response("THROTTLED", 429, "Too Many Requests")
        if (body if isinstance(body, int) else len(body)) > MAX_PAYLOAD_BYTES:
            return None, self.gateway_response("REQUEST_TOO_LARGE", 413, "Request Too Long")
        found = self.match(method, path)
        if found is None:
            return None, self.gateway_response("MISSING_AUTHENTICATION_TOKEN", 403, "Missing Authentication Token")
        route, params = found
        headers = {k: v for k, v in headers.items() if k.lower() != CONTEXT_HEADER}
        event = self.event(method, path, query, headers, body if isinstance(body, bytes) else b"", route, params,
                           None)
        if self.authorizer is not None and route.authorize:
            context, denied = self._authorize(event)
            if denied:
                return None, denied
            throttled = self.meter(event["requestContext"]["identity"].get("apiKey"))
            if throttled:
                return None, throttled
            event["requestContext"]["authorizer"] = context
        return Admitted(route, params, event), None

    def handle(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> HttpResponse:
        admitted, answer = self.admit(method, path, query, headers, body)
        if admitted is None:
            assert answer is not None
            return answer
        release = self.reserve(admitted.route.function)
        if release is None:
            return self.lambda_refused()
        try:
            if admitted.route.streaming:  # the ASGI app, buffered here (the local server streams it)
                return call_asgi(self.handlers[admitted.route.function], admitted.event, body)
            result = invoke(self.handlers, admitted.route.function, admitted.event)
        except Exception:  # noqa: BLE001 - an unhandled Lambda error is API Gateway's 502
            log.exception("unhandled error in %s", admitted.route.function)
            return self.gateway_response("DEFAULT_5XX", 502, "Internal server error")
        finally:
            release()
        return from_proxy(result)


def _allows(policy: dict[str, Any], method_arn: str) -> bool:
    """An IAM policy's verdict on execute-api:Invoke of this method (explicit Deny wins)."""
    allowed = False
    for statement in policy.get("Statement") or []:
        resources = statement.get("Resource")
        resources = resources if isinstance(resources, list) else [resources]
        if not any(fnmatch.fnmatchcase(method_arn, r) for r in resources if isinstance(r, str)):
            continue
        if statement.get("Effect") == "Deny":
            return False
        allowed = allowed or statement.get("Effect") == "Allow"
    return allowed


def asgi_scope(event: dict[str, Any]) -> dict[str, Any]:
    """The HTTP request the Lambda Web Adapter makes from a proxy event (the request context in a header)."""
    headers = [(k.lower().encode(), v.encode()) for k, v in (event.get("headers") or {}).items()
               if k.lower() != CONTEXT_HEADER]
    headers.append((CONTEXT_HEADER.encode(), json.dumps(event["requestContext"]).encode()))
    query = "&".join(f"{quote(k)}={quote(v)}" for k, values in
                     (event.get("multiValueQueryStringParameters") or {}).items() for v in values)
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": event["httpMethod"],
            "scheme": "http", "path": event["path"], "raw_path": event["path"].encode(),
            "query_string": query.encode(), "root_path": "", "headers": headers,
            "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 8080)}


def call_asgi(app: Any, event: dict[str, Any], body: bytes) -> HttpResponse:
    """Run the ASGI app on one request to completion (an SSE response is read until it ends)."""
    out: dict[str, Any] = {"status": 500, "headers": {}, "chunks": []}

    async def run() -> None:
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # the client never goes away here
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                out["status"] = message["status"]
                out["headers"] = {k.decode(): v.decode() for k, v in message.get("headers", [])}
            elif message["type"] == "http.response.body":
                out["chunks"].append(message.get("body", b""))

        await app(asgi_scope(event), receive, send)

    asyncio.run(run())
    return HttpResponse(out["status"], out["headers"], b"".join(out["chunks"]))


def from_proxy(result: Any) -> HttpResponse:
    """Lambda proxy response -> HTTP response (API Gateway's interpretation)."""
    if not isinstance(result, dict) or "statusCode" not in result:
        return HttpResponse(502, {"content-type": "application/json"},
                            json.dumps({"message": "Internal server error"}).encode())
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
