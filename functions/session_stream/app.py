"""Session create and the Session's live events as server-sent events: an ASGI app.

In AWS the AWS Lambda Web Adapter runs it (run.sh) and turns each REST API proxy event into an HTTP
request, passing the request context (the authorizer's tenant) in `x-amzn-request-context`; API Gateway
invokes the function with InvokeWithResponseStream, so bytes reach the caller as they are written. The
local stack serves this same app behind its gateway (local/server.py).

- `POST /v1/agents/sessions`: one route for both forms, since API Gateway cannot route on the body.
  Without `stream` it answers the created Session as JSON; with `stream: true` it answers SSE that opens
  with `agent.session.created` (the created Session) and then the first Turn's events. A rejected create
  is the same 400 either way, and writes nothing.
- `GET /v1/agents/sessions/{id}/events`: live only, from the moment of the request
  (agents_core.session_events). A foreign Session is 404 before any byte. Comment pings keep an idle
  stream open; the stream ends cleanly after STREAM_MAX_SECONDS (callers recover by reading the Session);
  a failure while streaming sends the official `error` event and ends the stream (agents_core.transport.sse).
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agents_contract import jsonutil
from agents_contract.errors import AgentsError, InvalidRequest, ServerError
from agents_core import session_events
from agents_core.observability import logger
from agents_core.settings import get_settings
from agents_core.store import default_store
from agents_core.transport import asgi, sse
from agents_core.transport.request import parse_body as parse_request_body


async def stream_events(request: Request) -> Response:
    session_id = request.path_params["session_id"]
    try:
        tenant = asgi.caller(request)
        after = await run_in_threadpool(session_events.subscribe, default_store(), tenant, session_id)
    except AgentsError as err:
        return asgi.error(err)
    except Exception:  # noqa: BLE001
        logger.exception("subscription failed")
        return asgi.error(ServerError())
    return sse.response(sse.stream(default_store(), get_settings(), tenant, session_id, after))


def _create(tenant: str, body: dict[str, Any]) -> dict[str, Any]:
    # Only this route parses and admits a Session (pydantic, the execution parser): an instance that only
    # streams events never imports them. Imported on a worker thread, so the event loop never waits for it.
    from agents_core import sessions

    return sessions.create(default_store(), tenant, body)


async def create_session(request: Request) -> Response:
    try:
        tenant = asgi.caller(request)
        body = parse_request_body(await request.body())
        if not isinstance(body, dict):
            from agents_contract.validation import json_type_name  # the create path imports it anyway

            raise InvalidRequest(f"Invalid type for 'body': expected an object, but got {json_type_name(body)} "
                                 "instead.", param=None)
        session = await run_in_threadpool(_create, tenant, body)
    except AgentsError as err:
        return asgi.error(err)
    except Exception:  # noqa: BLE001
        logger.exception("session create failed")
        return asgi.error(ServerError())
    if body.get("stream") is not True:
        return Response(jsonutil.dumps(session), status_code=201, media_type="application/json")
    # The create's own commit (OUT#1: agent.session.created, then the first Turn's events) and every later
    # one until the Session settles; a creation that started no Turn ends right after `created`.
    until = session_events.creation_ends_after(session)
    return sse.response(sse.stream(default_store(), get_settings(), tenant, session["id"], 0, until=until),
                        status_code=201)  # 201 for a streamed create too


async def healthz(request: Request) -> Response:
    return Response("ok")  # the Lambda Web Adapter's readiness check


app = asgi.serve(Starlette(routes=[
    Route("/v1/agents/sessions", create_session, methods=["POST"]),
    Route("/v1/agents/sessions/{session_id}/events", stream_events, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
], exception_handlers={404: asgi.not_found, 405: asgi.not_found}))
