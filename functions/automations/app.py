"""Automations (`client.beta.agents.automations` and its `invocations`), and the target of their
EventBridge Scheduler schedules.

An API Gateway proxy event is a request of the REST API; any other event is an occurrence of a schedule
(`{tenant, automation_id, scheduled_time}`, the scheduler's role may invoke only this function), which
records and delivers that occurrence's invocation (agents_core.automations.invocations).
"""

import time

from aws_lambda_powertools.logging import correlation_paths

from agents_core.automations import invocations, manage
from agents_core.automations.schedules import scheduled_at
from agents_core.observability import logger, metrics
from agents_core.pagination import list_params
from agents_core.store import default_store
from agents_core.transport.http import body, entrypoint, json_response, new_app, query, tenant

app = new_app()


@app.post("/v1/agents/automations")
def create_automation():
    return json_response(200, manage.create(default_store(), tenant(app), body(app)))


@app.get("/v1/agents/automations")
def list_automations():
    q = query(app)
    return json_response(200, manage.list_page(default_store(), tenant(app), list_params(q), q))


@app.get("/v1/agents/automations/<automation_id>")
def retrieve_automation(automation_id: str):
    return json_response(200, manage.retrieve(default_store(), tenant(app), automation_id))


@app.post("/v1/agents/automations/<automation_id>")
def update_automation(automation_id: str):
    return json_response(200, manage.update(default_store(), tenant(app), automation_id, body(app)))


@app.delete("/v1/agents/automations/<automation_id>")
def delete_automation(automation_id: str):
    return json_response(200, manage.delete(default_store(), tenant(app), automation_id))


@app.post("/v1/agents/automations/<automation_id>/pause")
def pause_automation(automation_id: str):
    return json_response(200, manage.pause(default_store(), tenant(app), automation_id))


@app.post("/v1/agents/automations/<automation_id>/resume")
def resume_automation(automation_id: str):
    return json_response(200, manage.resume(default_store(), tenant(app), automation_id))


@app.post("/v1/agents/automations/<automation_id>/invocations")
def create_invocation(automation_id: str):
    """No body: a manual delivery now, without changing the schedule."""
    return json_response(200, invocations.invoke(default_store(), tenant(app), automation_id))


@app.get("/v1/agents/automations/<automation_id>/invocations")
def list_invocations(automation_id: str):
    params = list_params(query(app))
    return json_response(200, invocations.list_page(default_store(), tenant(app), automation_id, params))


@app.get("/v1/agents/automations/<automation_id>/invocations/<invocation_id>")
def retrieve_invocation(automation_id: str, invocation_id: str):
    return json_response(200, invocations.retrieve(default_store(), tenant(app), automation_id, invocation_id))


def occurrence(event: dict) -> dict:
    """A schedule's occurrence. Raising makes EventBridge Scheduler retry it (the same occurrence)."""
    logger.append_keys(automation_id=event["automation_id"])
    from agents_contract.errors import NotFound

    try:
        # EventBridge Scheduler always fills the occurrence in; a hand-made event without it is "now"
        occurred = scheduled_at(event.get("scheduled_time")) or int(time.time())
        result = invocations.invoke(default_store(), event["tenant"], event["automation_id"], occurred)
    except NotFound:
        logger.info("occurrence of a deleted automation ignored")
        return {"status": "ignored"}
    return {"status": result.get("status", "ignored"), "invocation_id": result.get("id")}


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, log_event=False)
@metrics.log_metrics
def handler(event, context):
    if "httpMethod" not in event and "automation_id" in event:
        return occurrence(event)
    if "httpMethod" not in event and "automations_tool" in event:  # a call of the Agent tool (outbox consumer)
        from agents_core.automations import tool

        call = event["automations_tool"]
        logger.append_keys(session_id=call["session_id"])
        tool.run(default_store(), call["tenant"], call["session_id"], call["turn_id"], call["call_id"],
                 call.get("arguments"))
        return {"status": "answered"}
    return entrypoint(app, event, context)
