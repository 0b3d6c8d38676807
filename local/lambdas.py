"""Lambda invocations from moto (the ASL interpreter's tasks) dispatched in-process to our handlers.

Replaces moto's Lambda backend `invoke` with a dispatcher keyed by the template's function logical
ids (the function name, or the 7th `:` field of an ARN). A handler exception is reported the way
Lambda reports an unhandled error, so the state machine's Catch sees States.TaskFailed.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from . import apigw

_lock = threading.Lock()
_handlers: dict[str, apigw.Handler] = {}
_installed = False


def _name(function_name: str) -> str:
    return function_name.split(":")[6] if function_name.startswith("arn:") else function_name


def _invoke(self: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any) -> bytes:
    name = _name(function_name)
    handler = _handlers.get(name)
    if handler is None:
        response_headers["x-amz-function-error"] = "Unhandled"
        return json.dumps({"errorType": "ResourceNotFoundException", "errorMessage": f"no function {name}"}).encode()
    payload = json.loads(body) if body else {}
    try:
        result = handler(payload, apigw.LambdaContext(name))
    except Exception as exc:  # noqa: BLE001 - reported as Lambda reports an unhandled error
        response_headers["x-amz-function-error"] = "Unhandled"
        return json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)[:500]}).encode()
    return json.dumps(result).encode()


def install(handlers: dict[str, apigw.Handler]) -> None:
    global _installed
    with _lock:
        _handlers.clear()
        _handlers.update(handlers)
        if not _installed:
            import moto.awslambda.models as full
            import moto.awslambda_simple.models as simple

            full.LambdaBackend.invoke = _invoke  # type: ignore[method-assign]
            simple.LambdaSimpleBackend.invoke = _invoke  # type: ignore[method-assign]
            _installed = True


MOTO_CONFIG = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
