"""Webhook endpoints (`client.webhooks`): `/v1/webhook_endpoints` and `/v1/webhook_event_types`.

Not beta routes: the SDK sends `client.webhooks` no `OpenAI-Beta` header, so only the caller's key is checked
before routing. Extension: `GET /v1/webhook_endpoints/{id}/deliveries`, an endpoint's last deliveries.
"""

from aws_lambda_powertools.logging import correlation_paths

from agents_core.observability import logger, metrics
from agents_core.pagination import list_params
from agents_core.store import default_store
from agents_core.transport.http import _proxy, body, error_response, json_response, new_app, query, tenant
from agents_core.transport.request import admission_error, event_tenant
from agents_core.webhooks import deliveries, endpoints

app = new_app()


def _body_or_empty():
    return body(app) if app.current_event.raw_event.get("body") else {}


@app.get("/v1/webhook_event_types")
def list_event_types():
    return json_response(200, endpoints.event_types())


@app.post("/v1/webhook_endpoints")
def create_endpoint():
    return json_response(200, endpoints.create(default_store(), tenant(app), body(app)))


@app.get("/v1/webhook_endpoints")
def list_endpoints():
    return json_response(200, endpoints.list_page(default_store(), tenant(app), list_params(query(app))))


@app.get("/v1/webhook_endpoints/<endpoint_id>")
def retrieve_endpoint(endpoint_id: str):
    return json_response(200, endpoints.retrieve(default_store(), tenant(app), endpoint_id))


@app.post("/v1/webhook_endpoints/<endpoint_id>")
def update_endpoint(endpoint_id: str):
    return json_response(200, endpoints.update(default_store(), tenant(app), endpoint_id, body(app)))


@app.delete("/v1/webhook_endpoints/<endpoint_id>")
def delete_endpoint(endpoint_id: str):
    return json_response(200, endpoints.delete(default_store(), tenant(app), endpoint_id))


@app.post("/v1/webhook_endpoints/<endpoint_id>/rotate_secret")
def rotate_secret(endpoint_id: str):
    return json_response(200, endpoints.rotate_secret(default_store(), tenant(app), endpoint_id, _body_or_empty()))


@app.post("/v1/webhook_endpoints/<endpoint_id>/test")
def test_endpoint(endpoint_id: str):
    return json_response(200, endpoints.test(default_store(), tenant(app), endpoint_id, body(app)))


@app.get("/v1/webhook_endpoints/<endpoint_id>/deliveries")
def list_deliveries(endpoint_id: str):
    endpoints.load(default_store(), tenant(app), endpoint_id)
    return json_response(200, {"object": "list", "data": deliveries.deliveries_of(default_store(), tenant(app),
                                                                                 endpoint_id)})


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, log_event=False)
@metrics.log_metrics
def handler(event, context):
    rejected = admission_error(event_tenant(event), None, beta_required=False)  # the key only: not a beta route
    if rejected is not None:
        return _proxy(error_response(rejected))
    return app.resolve(event, context)
