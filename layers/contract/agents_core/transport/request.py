"""What every API request is checked for first, whichever server answers it: the buffered routes
(Powertools' resolver, transport.http) and the streaming function's ASGI app (transport.asgi), which
therefore does not import the resolver.

- The caller's tenant comes from the Lambda authorizer (REST API proxy events:
  `requestContext.authorizer.tenant`); `OpenAI-Beta: agents=v1` is required.
- Bodies are parsed with exact numbers (saved Agents keep every pinned value).
"""

from __future__ import annotations

import secrets
from typing import Any, Optional

from agents_contract import jsonutil
from agents_contract.errors import AgentsError, InvalidBeta, InvalidRequest, PayloadTooLarge, Unauthorized

from ..settings import get_settings

BETA = "agents=v1"


def event_tenant(event: dict[str, Any]) -> str:
    """The tenant the REST API's Lambda authorizer put in the request context (empty: none)."""
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    return authorizer.get("tenant") or ""


def request_id() -> str:
    """A fresh request id in the official form: `req_` and 32 lowercase hex characters."""
    return "req_" + secrets.token_hex(16)


def admission_error(tenant_id: str, beta: Optional[str], beta_required: bool = True) -> Optional[AgentsError]:
    """Authentication, then the beta header: what every route checks first (buffered or streaming). The Files
    and Uploads routes (`client.files`, `client.uploads`) are not beta: the SDK sends them no header."""
    if not tenant_id:
        return Unauthorized("Incorrect API key provided. Send 'Authorization: Bearer <your API key>'.")
    if beta_required and BETA not in [part.strip() for part in (beta or "").split(",")]:
        return InvalidBeta()
    return None


def parse_body(data: bytes) -> Any:
    """A request body as bytes -> the parsed JSON object (exact numbers), or the official 4xx."""
    if len(data) > get_settings().max_body_bytes:
        raise PayloadTooLarge(f"The request body is larger than {get_settings().max_body_bytes} bytes.")
    if not data.strip():
        raise InvalidRequest("The request body must be a JSON object.", param=None)
    return jsonutil.loads_request(data)
