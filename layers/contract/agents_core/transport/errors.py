"""The one error response, for both servers (Powertools' resolver in transport.http, Starlette in
transport.asgi): the official envelope; deterministic 4xx answers carry `x-should-retry: false`
(the official SDK otherwise retries 409s twice), while a 429 (busy, nothing written) may be retried."""

from __future__ import annotations

from agents_contract import jsonutil
from agents_contract.errors import AgentsError

from .. import metrics


def error_answer(error: AgentsError) -> tuple[int, str, dict[str, str]]:
    """A domain error -> (status, JSON body, headers)."""
    headers = {"x-should-retry": "false"} if 400 <= error.status < 500 and error.status != 429 else {}
    metrics.rejected_request(error.status, error.code or error.type)
    return error.status, jsonutil.dumps(error.envelope()), headers
