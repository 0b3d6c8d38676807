"""The Files API, Uploads and Session artifacts (`client.files`, `client.uploads`,
`client.beta.agents.sessions.artifacts`): an ASGI app.

In AWS the AWS Lambda Web Adapter runs it (run.sh) and API Gateway invokes the function with
InvokeWithResponseStream, so a file's content streams from S3 to the caller without Lambda's 6 MB buffered
response limit; the local stack serves this same app behind its gateway. Files and Uploads are not beta: the SDK
sends no `OpenAI-Beta` header on them (artifacts need it). Logic: agents_core.files.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agents_contract import jsonutil
from agents_contract.errors import AgentsError, ServerError
from agents_core.files import artifacts, records, uploads
from agents_core.files.objects import default_objects
from agents_core.observability import logger
from agents_core.pagination import list_params
from agents_core.store import default_store
from agents_core.transport import asgi
from agents_core.transport.request import parse_body

Handler = Callable[[Request, str], Awaitable[Any]]


def _json(status: int, body: Any) -> Response:
    return Response(jsonutil.dumps(body), status_code=status, media_type="application/json")


def route(handler: Handler, beta: bool = False) -> Callable[[Request], Awaitable[Response]]:
    """The caller's tenant (the beta header only on `client.beta` routes), then the handler; domain errors become
    the official envelope."""
    async def endpoint(request: Request) -> Response:
        try:
            tenant = asgi.caller(request, beta_required=beta)
            result = await handler(request, tenant)
        except AgentsError as err:
            return asgi.error(err)
        except Exception:  # noqa: BLE001
            logger.exception("files request failed")
            return asgi.error(ServerError())
        return result if isinstance(result, Response) else _json(200, result)
    return endpoint


async def create_file(request: Request, tenant: str) -> Any:
    body = await request.body()
    return await run_in_threadpool(records.create, default_store(), default_objects(), tenant,
                                   request.headers.get("content-type"), body)


async def list_files(request: Request, tenant: str) -> Any:
    return await run_in_threadpool(records.list_page, default_store(), tenant, dict(request.query_params))


async def retrieve_file(request: Request, tenant: str) -> Any:
    return await run_in_threadpool(records.retrieve, default_store(), tenant, request.path_params["file_id"])


async def delete_file(request: Request, tenant: str) -> Any:
    return await run_in_threadpool(records.delete, default_store(), default_objects(), tenant,
                                   request.path_params["file_id"])


async def file_content(request: Request, tenant: str) -> Any:
    record, size, chunks = await run_in_threadpool(records.content, default_store(), default_objects(), tenant,
                                                   request.path_params["file_id"])
    return StreamingResponse(chunks, media_type="application/octet-stream",
                             headers={"content-length": str(size)})


async def create_upload(request: Request, tenant: str) -> Any:
    body = parse_body(await request.body())
    return await run_in_threadpool(uploads.create, default_store(), tenant, body)


async def add_part(request: Request, tenant: str) -> Any:
    body = await request.body()
    return await run_in_threadpool(uploads.add_part, default_store(), default_objects(), tenant,
                                   request.path_params["upload_id"], request.headers.get("content-type"), body)


async def complete_upload(request: Request, tenant: str) -> Any:
    body = parse_body(await request.body())
    return await run_in_threadpool(uploads.complete, default_store(), default_objects(), tenant,
                                   request.path_params["upload_id"], body)


async def cancel_upload(request: Request, tenant: str) -> Any:
    return await run_in_threadpool(uploads.cancel, default_store(), default_objects(), tenant,
                                   request.path_params["upload_id"])


async def list_artifacts(request: Request, tenant: str) -> Any:
    query = dict(request.query_params)
    return await run_in_threadpool(artifacts.list_page, default_store(), tenant, request.path_params["session_id"],
                                   list_params(query), query)


async def retrieve_artifact(request: Request, tenant: str) -> Any:
    return await run_in_threadpool(artifacts.retrieve, default_store(), tenant, request.path_params["session_id"],
                                   request.path_params["artifact_id"])


async def artifact_content(request: Request, tenant: str) -> Any:
    size, chunks = await run_in_threadpool(artifacts.content, default_store(), default_objects(), tenant,
                                           request.path_params["session_id"], request.path_params["artifact_id"])
    return StreamingResponse(chunks, media_type="application/octet-stream", headers={"content-length": str(size)})


async def delete_artifact(request: Request, tenant: str) -> Any:
    return await run_in_threadpool(artifacts.delete, default_store(), default_objects(), tenant,
                                   request.path_params["session_id"], request.path_params["artifact_id"])


async def healthz(request: Request) -> Response:
    return Response("ok")  # the Lambda Web Adapter's readiness check


app = asgi.serve(Starlette(routes=[
    Route("/v1/files", route(create_file), methods=["POST"]),
    Route("/v1/files", route(list_files), methods=["GET"]),
    Route("/v1/files/{file_id}", route(retrieve_file), methods=["GET"]),
    Route("/v1/files/{file_id}", route(delete_file), methods=["DELETE"]),
    Route("/v1/files/{file_id}/content", route(file_content), methods=["GET"]),
    Route("/v1/uploads", route(create_upload), methods=["POST"]),
    Route("/v1/uploads/{upload_id}/parts", route(add_part), methods=["POST"]),
    Route("/v1/uploads/{upload_id}/complete", route(complete_upload), methods=["POST"]),
    Route("/v1/uploads/{upload_id}/cancel", route(cancel_upload), methods=["POST"]),
    Route("/v1/agents/sessions/{session_id}/artifacts", route(list_artifacts, beta=True), methods=["GET"]),
    Route("/v1/agents/sessions/{session_id}/artifacts/{artifact_id}", route(retrieve_artifact, beta=True),
          methods=["GET"]),
    Route("/v1/agents/sessions/{session_id}/artifacts/{artifact_id}", route(delete_artifact, beta=True),
          methods=["DELETE"]),
    Route("/v1/agents/sessions/{session_id}/artifacts/{artifact_id}/content", route(artifact_content, beta=True),
          methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
], exception_handlers={404: asgi.not_found, 405: asgi.not_found}))
