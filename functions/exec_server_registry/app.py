"""The exec-server registry (an HTTP API of its own: a self_hosted Environment's `remote_url`).

`POST /cloud/environment/{environment_id}/direct/register`: the stock `codex exec-server --remote
<remote_url> --remote-transport direct --aws-sigv4 --environment-id <id>` registers here, signed with the
exec-server key its Environment's enrollment issued (agents_core/environments/exec_server.py). `GET /cloud/runtime` names
the WebSocket URL, so the reference Runtime takes the same `remote_url` (`python -m runtime --url`).
Answers are what the exec-server understands: 200 with its registration, 403 for a refused signature,
404 for an Environment this key does not connect (which ends it). Nothing of a request is logged.
"""

import base64
import json

from agents_contract.errors import AgentsError
from agents_core.environments import exec_server
from agents_core.observability import logger
from agents_core.settings import get_settings
from agents_core.store import default_store


def _json(status, payload):
    return {"statusCode": status, "headers": {"content-type": "application/json", "cache-control": "no-store"},
            "body": json.dumps(payload)}


def _register(event, env_id):
    raw = event.get("body") or ""
    body = base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode()
    context = event.get("requestContext") or {}
    # The path the client signed: API Gateway's event path, or with the stage (REST) / base path (custom domain).
    paths = list(dict.fromkeys(p for p in (event.get("path"), context.get("path")) if p))
    query = "&".join(f"{k}={v}" for k, vs in (event.get("multiValueQueryStringParameters") or {}).items() for v in vs)
    return exec_server.register(default_store(), env_id, method=event.get("httpMethod") or "POST", paths=paths,
                                query=query, headers=event.get("headers") or {}, body=body)


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    params = event.get("pathParameters") or {}
    try:
        if event.get("httpMethod") == "GET":
            return _json(200, {"websocket_url": get_settings().websocket_url or ""})
        return _json(200, _register(event, params.get("environment_id") or ""))
    except AgentsError as error:
        logger.info("exec-server registration refused", extra={"status": error.status, "code": error.code})
        return _json(error.status, error.envelope())
