"""Session input: `POST /v1/agents/sessions/{id}/events` (message, cancel, tool_result batches)."""

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths

from agents_core import results
from agents_core.observability import logger, metrics
from agents_core.store import default_store
from agents_core.transport.http import body, entrypoint, new_app, tenant

app = new_app()


@app.post("/v1/agents/sessions/<session_id>/events")
def submit_events(session_id: str):
    logger.append_keys(session_id=session_id)
    key = app.current_event.get_header_value("idempotency-key", case_sensitive=False)
    results.submit(default_store(), tenant(app), session_id, body(app), key)
    return Response(status_code=202, content_type="application/json", body="")


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, log_event=False)
@metrics.log_metrics
def handler(event, context):
    return entrypoint(app, event, context)
