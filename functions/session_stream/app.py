"""Session create and the Session's live events as server-sent events: an ASGI app.

In AWS the AWS Lambda Web Adapter runs it (run.sh) and turns each REST API proxy event into an HTTP
request, passing the request context (the authorizer's tenant) in `x-amzn-request-context`; API Gateway
invokes the function with InvokeWithResponseStream, so bytes reach the caller as they are written. The
local stack serves this same app behind its gateway (local/server.py).

- `POST /v1/agents/sessions`: one route for both forms, since API Gateway cannot route on the body.
  Without `stream` it answers the created Session as JSON; with `stream: true` it answers SSE that opens
  with `agent.session.created` (the created Session) and then the first Turn's events. A rejected create
  is the same 400 either way, and writes nothing.
- `GET /v1/agents/sessions/{id}/events`: live only, from the moment of the request (agents_core.sse).
  A foreign Session is 404 before any byte. Comment pings keep an idle stream open; the stream ends
  cleanly after STREAM_MAX_SECONDS (callers recover by reading the Session); a failure while streaming
  sends the official `error` event and ends the stream.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agents_contract import jsonutil
from agents_contract.errors import AgentsError, InvalidRequest, NotFound, ServerError
from agents_core import sse
from agents_core.observability import logger
from agents_core.request import admission_error, request_id
from agents_core.request import parse_body as parse_request_body
from agents_core.settings import get_settings
from agents_core.store import default_store

SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def error(err: AgentsError) -> Response:
    headers = {"x-should-retry": "false"} if 400 <= err.status < 500 and err.status != 429 else {}
    return Response(jsonutil.dumps(err.envelope()), status_code=err.status, media_type="application/json",
                    headers=headers)


def request_context(request: Request) -> dict[str, Any]:
    """The API Gateway request context the Lambda Web Adapter (or the local gateway) passes along."""
    try:
        return json.loads(request.headers.get("x-amzn-request-context") or "{}")
    except ValueError:
        return {}


def caller(request: Request) -> str:
    """The caller's tenant, after the same checks as every buffered route (key, then beta header)."""
    tenant = ((request_context(request).get("authorizer") or {}).get("tenant")) or ""
    rejected = admission_error(tenant, request.headers.get("openai-beta"))
    if rejected is not None:
        raise rejected
    return tenant


CLOSING = ("agent.session.idle", "agent.session.failed")


async def stream(tenant: str, session_id: str, after: int, first: list[dict[str, Any]] | None = None,
                 until: tuple[str, ...] = ()) -> Any:
    """The SSE body: committed events after `after`, in order, once each; pings; a clean end.
    `until` (a `stream: true` creation): the stream ends right after the first event of one of these
    types (the first `agent.session.idle` or `agent.session.failed`; `agent.session.created` when the
    creation started no Turn), as the official service closes it, so iterating the SDK's stream ends."""
    settings = get_settings()
    store = default_store()
    deadline = time.monotonic() + settings.stream_max_seconds
    poll_min, poll_max = settings.stream_poll_min_ms / 1000, settings.stream_poll_max_ms / 1000
    wait, quiet_since = poll_min, time.monotonic()
    yield ": stream open\n\n"  # the status line and headers go out now: the caller is subscribed
    try:
        while time.monotonic() < deadline:
            events, last = await run_in_threadpool(sse.committed_since, store, tenant, session_id, after)
            if last != after:
                after = last
                for event in events:
                    yield sse.frame(event)
                    if event.get("type") in until:
                        return
                wait, quiet_since = poll_min, time.monotonic()
                continue  # another page may follow
            if time.monotonic() - quiet_since >= settings.stream_ping_seconds:
                if not await run_in_threadpool(sse.session_exists, store, tenant, session_id):
                    return  # the Session was deleted: nothing more can come
                yield ": ping\n\n"
                quiet_since = time.monotonic()
            await asyncio.sleep(min(wait, max(0.0, deadline - time.monotonic())))
            wait = min(poll_max, wait * 2)
        # the maximum duration: end cleanly between events; the caller reads the Session to catch up
    except asyncio.CancelledError:
        raise  # the caller went away
    except Exception:  # noqa: BLE001 - the stream's failure is told in the official `error` event
        logger.exception("event stream failed", extra={"session_id": session_id})
        yield sse.frame(sse.error_event(session_id))


async def stream_events(request: Request) -> Response:
    session_id = request.path_params["session_id"]
    try:
        tenant = caller(request)
        after = await run_in_threadpool(sse.subscribe, default_store(), tenant, session_id)
    except AgentsError as err:
        return error(err)
    except Exception:  # noqa: BLE001
        logger.exception("subscription failed")
        return error(ServerError())
    return StreamingResponse(stream(tenant, session_id, after), media_type="text/event-stream", headers=SSE_HEADERS)


def _create(tenant: str, body: dict[str, Any]) -> dict[str, Any]:
    # Only this route parses and admits a Session (pydantic, the execution parser): an instance that only
    # streams events never imports them. Imported on a worker thread, so the event loop never waits for it.
    from agents_core import sessions

    return sessions.create(default_store(), tenant, body)


async def create_session(request: Request) -> Response:
    try:
        tenant = caller(request)
        body = parse_request_body(await request.body())
        if not isinstance(body, dict):
            from agents_contract.validation import json_type_name  # the create path imports it anyway

            raise InvalidRequest(f"Invalid type for 'body': expected an object, but got {json_type_name(body)} "
                                 "instead.", param=None)
        session = await run_in_threadpool(_create, tenant, body)
    except AgentsError as err:
        return error(err)
    except Exception:  # noqa: BLE001
        logger.exception("session create failed")
        return error(ServerError())
    if body.get("stream") is not True:
        return Response(jsonutil.dumps(session), status_code=201, media_type="application/json")
    # The create's own commit (OUT#1: agent.session.created, then the first Turn's events) and every later
    # one until the Session settles; a creation that started no Turn ends right after `created`.
    until = ("agent.session.created",) if session.get("status") == "idle" else CLOSING
    return StreamingResponse(stream(tenant, session["id"], 0, until=until), status_code=201,
                             media_type="text/event-stream", headers=SSE_HEADERS)  # 201 for a streamed create too


async def healthz(request: Request) -> Response:
    return Response("ok")  # the Lambda Web Adapter's readiness check


async def not_found(request: Request, exc: Exception) -> Response:
    return error(NotFound("Invalid URL: no route matches this path.", code="invalid_url"))


def _strip_stage(app: Any) -> Any:
    """A REST API request path may arrive with the stage in front (/dev/v1/...): route on the rest."""
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not scope["path"].startswith(("/v1/", "/healthz")):
            head, _, rest = scope["path"].lstrip("/").partition("/")
            if head and rest.startswith("v1/"):
                scope = {**scope, "path": "/" + rest, "raw_path": ("/" + rest).encode()}
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_with_id(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":  # every response names its request, as officially
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"x-request-id", request_id().encode())]}
            await send(message)

        await app(scope, receive, send_with_id)
    return wrapped


app = _strip_stage(Starlette(routes=[
    Route("/v1/agents/sessions", create_session, methods=["POST"]),
    Route("/v1/agents/sessions/{session_id}/events", stream_events, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
], exception_handlers={404: not_found, 405: not_found}))
