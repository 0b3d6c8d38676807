"""Every buffered GET: retrieve and list Agents, Sessions, Turns and Items (a Session read is one GetItem).
The SSE stream (`GET .../events`) is the streaming function's (functions/session_stream)."""

from aws_lambda_powertools.logging import correlation_paths

from agents_core import agents, sessions, subagents, vaults
from agents_core.environments import resource as environments
from agents_core.observability import logger, metrics
from agents_core.pagination import list_params
from agents_core.store import default_store
from agents_core.transport.http import entrypoint, json_response, new_app, query, tenant

app = new_app()


@app.get("/v1/agents/sessions")
def list_sessions():
    q = query(app)
    return json_response(200, sessions.list_page(default_store(), tenant(app), list_params(q), q))


@app.get("/v1/agents/sessions/<session_id>")
def retrieve_session(session_id: str):
    logger.append_keys(session_id=session_id)
    return json_response(200, sessions.retrieve(default_store(), tenant(app), session_id))


@app.get("/v1/agents/sessions/<session_id>/turns")
def list_turns(session_id: str):
    return json_response(200, sessions.list_turns(default_store(), tenant(app), session_id, list_params(query(app))))


@app.get("/v1/agents/sessions/<session_id>/turns/<turn_id>")
def retrieve_turn(session_id: str, turn_id: str):
    return json_response(200, sessions.retrieve_turn(default_store(), tenant(app), session_id, turn_id))


@app.get("/v1/agents/sessions/<session_id>/turns/<turn_id>/items")
def list_turn_items(session_id: str, turn_id: str):
    params = list_params(query(app))
    return json_response(200, sessions.list_items(default_store(), tenant(app), session_id, params, turn_id))


@app.get("/v1/agents/sessions/<session_id>/items")
def list_items(session_id: str):
    return json_response(200, sessions.list_items(default_store(), tenant(app), session_id, list_params(query(app))))


@app.get("/v1/agents/sessions/<session_id>/subagents")
def list_subagents(session_id: str):
    return json_response(200, subagents.list_page(default_store(), tenant(app), session_id, list_params(query(app))))


@app.get("/v1/agents/sessions/<session_id>/subagents/<subagent_id>")
def retrieve_subagent(session_id: str, subagent_id: str):
    return json_response(200, subagents.retrieve(default_store(), tenant(app), session_id, subagent_id))


@app.get("/v1/agents/sessions/<session_id>/subagents/<subagent_id>/items")
def list_subagent_items(session_id: str, subagent_id: str):
    params = list_params(query(app))
    return json_response(200, subagents.list_items(default_store(), tenant(app), session_id, subagent_id, params))


@app.get("/v1/agents/sessions/<session_id>/subagents/<subagent_id>/turns")
def list_subagent_turns(session_id: str, subagent_id: str):
    params = list_params(query(app))
    return json_response(200, subagents.list_turns(default_store(), tenant(app), session_id, subagent_id, params))


@app.get("/v1/agents/sessions/<session_id>/subagents/<subagent_id>/turns/<turn_id>")
def retrieve_subagent_turn(session_id: str, subagent_id: str, turn_id: str):
    return json_response(200, subagents.retrieve_turn(default_store(), tenant(app), session_id, subagent_id, turn_id))


@app.get("/v1/agents/sessions/<session_id>/subagents/<subagent_id>/turns/<turn_id>/items")
def list_subagent_turn_items(session_id: str, subagent_id: str, turn_id: str):
    params = list_params(query(app))
    return json_response(200, subagents.list_items(default_store(), tenant(app), session_id, subagent_id, params,
                                                   turn_id))


@app.get("/v1/agents/environments")
def list_environments():
    q = query(app)
    return json_response(200, environments.list_page(default_store(), tenant(app), list_params(q), q))


@app.get("/v1/agents/environments/<environment_id>/files")
def list_environment_files(environment_id: str):
    """The live files of the connected Environment, as the Runtime holding its workspace lists them."""
    from agents_core.aws import default_messenger
    from agents_core.files import environment_files

    return json_response(200, environment_files.list_page(default_store(), default_messenger(), tenant(app),
                                                          environment_id, query(app)))


@app.get("/v1/agents/environments/<environment_id>")
def retrieve_environment(environment_id: str):
    return json_response(200, environments.retrieve(default_store(), tenant(app), environment_id))


@app.get("/v1/agents")
def list_agents():
    return json_response(200, agents.list_page(default_store(), tenant(app), list_params(query(app))))


@app.get("/v1/agents/<agent_id>")
def retrieve_agent(agent_id: str):
    return json_response(200, agents.retrieve(default_store(), tenant(app), agent_id))


@app.get("/v1/vaults")
def list_vaults():
    q = query(app)
    return json_response(200, vaults.list_vaults(default_store(), tenant(app), list_params(q), q, _statuses()))


@app.get("/v1/vaults/<vault_id>")
def retrieve_vault(vault_id: str):
    return json_response(200, vaults.retrieve_vault(default_store(), tenant(app), vault_id))


@app.get("/v1/vaults/<vault_id>/credentials")
def list_credentials(vault_id: str):
    q = query(app)
    return json_response(200, vaults.list_credentials(default_store(), tenant(app), vault_id, list_params(q), q,
                                                      _statuses()))


@app.get("/v1/vaults/<vault_id>/credentials/<credential_id>")
def retrieve_credential(vault_id: str, credential_id: str):
    return json_response(200, vaults.retrieve_credential(default_store(), tenant(app), vault_id, credential_id))


def _statuses() -> list[str]:
    """`status=active` or `status[]=active&status[]=archived` (the SDK's array format), every value."""
    event = app.current_event.raw_event
    multi = event.get("multiValueQueryStringParameters") or {}
    single = event.get("queryStringParameters") or {}
    return [v for name in ("status", "status[]") for v in (multi.get(name) or ([single[name]] if name in single else []))]


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, log_event=False)
@metrics.log_metrics
def handler(event, context):
    return entrypoint(app, event, context)
