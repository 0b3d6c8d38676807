"""Agent create/update/delete and Session update/delete (REST API, Lambda proxy v1).

Validation order: beta header, body shape (official messages), execution parser (protocol errors),
saved reference resolution, Harness declaration check -> 400 before anything is written.
"""

from aws_lambda_powertools.logging import correlation_paths

from agents_core import agents, sessions, vaults
from agents_core.environments import enrollment, hosted_preparation
from agents_core.observability import logger, metrics
from agents_core.store import default_store
from agents_core.transport.http import body, entrypoint, json_response, new_app, tenant

app = new_app()


# Session create (`POST /v1/agents/sessions`, streamed or not) is the streaming function's
# (functions/session_stream): API Gateway cannot route on the body's `stream` member.
# Literal routes before parameterised ones (`/v1/agents/sessions` is not an agent id).
@app.post("/v1/agents/sessions/<session_id>/stream_tickets")
def create_stream_ticket(session_id: str):
    """Extension: a single-use WebSocket ticket for browsers (they cannot set headers)."""
    from agents_core import live  # this route's alone (with the Runtime protocol it imports): not every cold start's

    return json_response(200, live.create_ticket(default_store(), tenant(app), session_id))


@app.post("/v1/agents/environments")
def create_environment():
    """An openai_hosted Environment apart from any Session (Sessions name it with environment_id)."""
    return json_response(201, hosted_preparation.create(default_store(), tenant(app), body(app)))


@app.post("/v1/agents/environments/<environment_id>/files")
def create_environment_file(environment_id: str):
    """Bytes (inline or a File) copied into the connected Environment's workspace by the Runtime holding it."""
    from agents_core.aws import default_messenger
    from agents_core.files import environment_files
    from agents_core.files.objects import default_objects

    return json_response(200, environment_files.create(default_store(), default_objects(), default_messenger(),
                                                       tenant(app), environment_id, body(app)))


@app.post("/v1/agents/environments/<environment_id>/enrollments")
def create_enrollment(environment_id: str):
    """Extension: an enrollment connects a machine as this self_hosted Environment's Runtime."""
    raw = app.current_event.raw_event.get("body")
    return json_response(201, enrollment.enroll(default_store(), tenant(app), environment_id,
                                                  body(app) if raw else None))


@app.post("/v1/agents/sessions/<session_id>")
def update_session(session_id: str):
    logger.append_keys(session_id=session_id)
    return json_response(200, sessions.update(default_store(), tenant(app), session_id, body(app)))


@app.delete("/v1/agents/sessions/<session_id>")
def delete_session(session_id: str):
    logger.append_keys(session_id=session_id)
    return json_response(200, sessions.delete(default_store(), tenant(app), session_id))


@app.post("/v1/agents")
def create_agent():
    return json_response(201, agents.create(default_store(), tenant(app), body(app)))  # created, as officially


@app.post("/v1/agents/<agent_id>")
def update_agent(agent_id: str):
    return json_response(200, agents.update(default_store(), tenant(app), agent_id, body(app)))


@app.delete("/v1/agents/<agent_id>")
def delete_agent(agent_id: str):
    return json_response(200, agents.delete(default_store(), tenant(app), agent_id))


@app.post("/v1/vaults")
def create_vault():
    return json_response(201, vaults.create_vault(default_store(), tenant(app), body(app)))


@app.post("/v1/vaults/<vault_id>")
def update_vault(vault_id: str):
    return json_response(200, vaults.update_vault(default_store(), tenant(app), vault_id, body(app)))


@app.delete("/v1/vaults/<vault_id>")
def delete_vault(vault_id: str):
    return json_response(200, vaults.delete_vault(default_store(), tenant(app), vault_id))


@app.post("/v1/vaults/<vault_id>/credentials")
def create_credential(vault_id: str):
    return json_response(201, vaults.create_credential(default_store(), tenant(app), vault_id, body(app)))


@app.post("/v1/vaults/<vault_id>/credentials/<credential_id>")
def update_credential(vault_id: str, credential_id: str):
    return json_response(200, vaults.update_credential(default_store(), tenant(app), vault_id, credential_id,
                                                       body(app)))


@app.delete("/v1/vaults/<vault_id>/credentials/<credential_id>")
def delete_credential(vault_id: str, credential_id: str):
    return json_response(200, vaults.delete_credential(default_store(), tenant(app), vault_id, credential_id))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, log_event=False)
@metrics.log_metrics
def handler(event, context):
    return entrypoint(app, event, context)
